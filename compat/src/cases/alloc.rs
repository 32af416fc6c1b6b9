//! `compat/c/alloc_storm.c` with a malloc replacement preloaded: jemalloc,
//! tcmalloc and mimalloc, each alone and each together with greenhook.
//! 10,000 threads allocate, free and lock while a 100 µs interval timer's
//! SIGALRM handler allocates and writes to a self-pipe.

use std::time::Duration;

use super::{arg, Case, Ctx, Mode, Side};
use crate::apt::{find_library, Need};
use crate::proc;

const THREADS: &str = "10000";
const ITERATIONS: &str = "50";
const TIMEOUT: Duration = Duration::from_secs(120);

pub const CASES: [Case; 3] = [
    Case {
        name: "jemalloc",
        program: "C: 10,000 threads malloc/free + mutexes + SIGALRM handler, jemalloc preloaded",
        quick: false,
        needs: &[Need::library("libjemalloc2", "libjemalloc.so.2")],
        run: |ctx, mode| storm(ctx, mode, "libjemalloc.so.2"),
    },
    Case {
        name: "tcmalloc",
        program: "… the same, tcmalloc (gperftools) preloaded",
        quick: false,
        needs: &[Need::library("libgoogle-perftools4", "libtcmalloc.so.4")],
        run: |ctx, mode| storm(ctx, mode, "libtcmalloc.so.4"),
    },
    Case {
        name: "mimalloc",
        program: "… the same, mimalloc preloaded",
        quick: false,
        needs: &[Need::library("libmimalloc2.0", "libmimalloc.so.2")],
        run: |ctx, mode| storm(ctx, mode, "libmimalloc.so.2"),
    },
];

fn storm(ctx: &Ctx, mode: Mode, soname: &str) -> Side {
    let exe = match ctx.compile("alloc_storm") {
        Ok(exe) => exe,
        Err(side) => return side,
    };
    let Some(allocator) = find_library(soname) else {
        return Side::broken(format!("{soname} is not installed"));
    };
    let dir = match ctx.dir(soname, mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    // The launcher puts libgreenhook.so first and keeps this after it.
    let mut cmd = ctx.command(mode, &[], &exe);
    cmd.args([THREADS, ITERATIONS]).env("LD_PRELOAD", arg(&allocator));
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            // "alloc_storm: 2855 ms of work, 5626 signals (5626 bytes read), …"
            let signals = ran
                .stderr
                .split(", ")
                .find(|part| part.ends_with("bytes read)"))
                .and_then(|part| part.split(' ').next())
                .unwrap_or("?");
            let brief = format!("exit 0; {signals} signals handled, {:.1} s", ran.elapsed.as_secs_f64());
            Side::from_ran(&ran, brief)
        }
        Err(e) => Side::broken(e.to_string()),
    }
}
