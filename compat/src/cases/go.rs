//! A Go program with cgo (`compat/programs/go_tour/`), built with Debian's
//! Go toolchain and run with and without greenhook: 1,000 goroutines,
//! pthreads made from Go through cgo, a channel pipeline, a TCP echo with
//! 32 clients, `net/http`, child processes and a pipe from one, a signal
//! through `os/signal`, timers, CPU work on 4 goroutines and a collection.
//!
//! Go's runtime makes its threads with `pthread_create` where cgo is
//! linked in, and waits on futexes by the `syscall` instruction: as
//! fibers, its first thread blocked the hub in the kernel and the program
//! hung at once. A Go executable now keeps its threads native (found by
//! Go's build ID note: `interpose/src/thread/native.rs`).

use std::time::Duration;

use super::{arg, run_to_exit, Case, Ctx, Mode, Side};
use crate::apt::{find_command, Need};
use crate::proc;

const TIMEOUT: Duration = Duration::from_secs(120);

pub const CASE: Case = Case {
    name: "go",
    program: "Go 1.19 with cgo: goroutines, pthreads through cgo, TCP echo, net/http, exec, os/signal, timers, GC",
    quick: true,
    needs: &[Need::command("golang-go", "go")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(go) = find_command("go") else {
        return Side::broken("go is not installed".into());
    };
    let dir = match ctx.dir("go", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let src = dir.join("src");
    let copied = std::fs::create_dir_all(&src).and_then(|()| {
        for f in ["go.mod", "main.go"] {
            std::fs::copy(ctx.file(&format!("programs/go_tour/{f}")), src.join(f))?;
        }
        Ok(())
    });
    if let Err(e) = copied {
        return Side::broken(format!("cannot copy the program: {e}"));
    }
    // Built without greenhook, in a cache of its own (`go` keeps one in
    // the home directory otherwise).
    let exe = dir.join("tour");
    let mut build = ctx.plain(&go);
    build
        .args(["build", "-o"])
        .arg(arg(&exe))
        .arg(".")
        .current_dir(&src)
        .env("GOCACHE", dir.join("cache"))
        .env("GOPATH", dir.join("gopath"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "1");
    match proc::run(&mut build, &dir, TIMEOUT) {
        Ok(ran) if ran.succeeded() => {}
        Ok(ran) => return Side::broken(format!("go build failed:\n{}", ran.stderr)),
        Err(e) => return Side::broken(format!("go build did not run: {e}")),
    }
    let mut cmd = ctx.command(mode, &[], &exe);
    cmd.current_dir(&dir);
    run_to_exit(&mut cmd, &dir, TIMEOUT)
}
