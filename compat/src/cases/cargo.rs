//! Rust's own toolchain: `cargo build` and `cargo test` of a two-crate
//! workspace (`compat/programs/cargo_build/`: a proc macro and a program
//! that derives with it and calls the `libc` crate, taken offline from
//! cargo's cache, where building greenhook put it). cargo runs rustc processes through its
//! jobserver with threads of its own; rustc links jemalloc into itself as
//! its `malloc`, runs the compiler on a thread of its own, `dlopen`s the
//! proc macro and generates code on LLVM's threads (C++ thread-locals);
//! the tests run on the test harness's threads. The program is then run
//! unpatched: its output, and the tests' results, must be the same as a
//! build made without greenhook. (The previous library hung here,
//! compiling `libc`: see `tests/c/program_malloc.c`.)

use std::path::Path;
use std::time::Duration;

use super::{Case, Ctx, Mode, Side};
use crate::apt::find_command;
use crate::proc;

/// Each cargo command (the whole case takes ~5 s here).
const TIMEOUT: Duration = Duration::from_secs(120);

pub const CASE: Case = Case {
    name: "cargo",
    program: "cargo build -j4 + cargo test of a proc macro and a program using it and libc (rustc: its own jemalloc, LLVM threads)",
    quick: true,
    needs: &[],
    run,
};

const WORKSPACE: &str = "[workspace]\nmembers = [\"derive\", \"app\"]\nresolver = \"2\"\n\n\
                         [profile.release]\ncodegen-units = 16\n";
const DERIVE: &str = "[package]\nname = \"derive\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                      [lib]\nproc-macro = true\n";
const APP: &str = "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                   [dependencies]\nderive = { path = \"../derive\" }\nlibc = \"0.2\"\n";

/// Writes the workspace into `ws`.
fn write_workspace(ctx: &Ctx, ws: &Path) -> std::io::Result<()> {
    let source = |name: &str| std::fs::read_to_string(ctx.file(&format!("programs/cargo_build/{name}")));
    std::fs::create_dir_all(ws.join("derive/src"))?;
    std::fs::create_dir_all(ws.join("app/src"))?;
    std::fs::write(ws.join("Cargo.toml"), WORKSPACE)?;
    std::fs::write(ws.join("derive/Cargo.toml"), DERIVE)?;
    std::fs::write(ws.join("derive/src/lib.rs"), source("derive_lib.rs")?)?;
    std::fs::write(ws.join("app/Cargo.toml"), APP)?;
    std::fs::write(ws.join("app/src/main.rs"), source("app_main.rs")?)
}

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(cargo) = find_command("cargo") else {
        return Side::broken("cargo is not installed".into());
    };
    let dir = match ctx.dir("cargo", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let ws = dir.join("ws");
    if let Err(e) = write_workspace(ctx, &ws) {
        return Side::broken(format!("cannot write the workspace: {e}"));
    }
    let target = ws.join("target");
    let cargo_cmd = |args: &[&str]| {
        let mut cmd = ctx.command(mode, &[], &cargo);
        cmd.args(args)
            .args(["--release", "--offline", "-j4", "--quiet"])
            .current_dir(&ws)
            .env("CARGO_TARGET_DIR", &target)
            .env("CARGO_TERM_COLOR", "never");
        // The caller's flags (CI's) would change what is built.
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "RUSTC_WRAPPER",
        ] {
            cmd.env_remove(var);
        }
        cmd
    };
    let built = match proc::run(&mut cargo_cmd(&["build"]), &dir, TIMEOUT) {
        Ok(ran) if ran.succeeded() => ran,
        Ok(ran) => return Side::from_ran(&ran, String::new()),
        Err(e) => return Side::broken(e.to_string()),
    };
    let app = match proc::run(&mut ctx.plain(target.join("release/app")), &dir, TIMEOUT) {
        Ok(ran) => ran,
        Err(e) => return Side::broken(format!("the program built did not run: {e}")),
    };
    let tested = match proc::run(&mut cargo_cmd(&["test"]), &dir, TIMEOUT) {
        Ok(ran) => ran,
        Err(e) => return Side::broken(e.to_string()),
    };
    // "test result: ok. 5 passed; 0 failed; …; finished in 0.05s": all
    // but the time, for each test binary.
    let results: Vec<&str> = tested
        .stdout
        .lines()
        .filter(|l| l.starts_with("test result:"))
        .map(|l| l.split("; finished in").next().unwrap_or(l))
        .collect();
    let passed: u32 = results
        .iter()
        .filter_map(|r| r.split(". ").nth(1)?.split(' ').next()?.parse::<u32>().ok())
        .sum();
    let ok = app.succeeded() && tested.succeeded() && app.stdout.contains("fields: [\"name\", \"threads\", \"table\"]");
    let secs = (built.elapsed + tested.elapsed).as_secs_f64();
    Side {
        ok,
        brief: if !app.succeeded() {
            format!("the program built: {}", app.brief())
        } else if !tested.succeeded() {
            format!("cargo test: {}", tested.brief())
        } else {
            format!("built; the program's output checked; {passed} tests passed; {secs:.1} s")
        },
        output: format!(
            "{}\n{}{}\n{}",
            app.status,
            app.stdout,
            tested.status,
            results.join("\n")
        ),
        log: format!(
            "build: {}program: {}test: {}",
            super::log_of(&built),
            super::log_of(&app),
            super::log_of(&tested)
        ),
    }
}
