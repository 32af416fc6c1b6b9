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

/// The allocators: (name, soname).
const ALLOCATORS: [(&str, &str); 3] = [
    ("jemalloc", "libjemalloc.so.2"),
    ("tcmalloc", "libtcmalloc.so.4"),
    ("mimalloc", "libmimalloc.so.2"),
];

/// The 100 µs timer.
const TIMER_US: &str = "100";
/// No timer (the handler runs once, from `pthread_kill`): tells the
/// allocator's own trouble under greenhook from its handler's.
const NO_TIMER: &str = "0";

/// What each allocator needs, in [`ALLOCATORS`]' order.
const NEEDS: [&[Need]; 3] = [
    &[Need::library("libjemalloc2", "libjemalloc.so.2")],
    &[Need::library("libgoogle-perftools4", "libtcmalloc.so.4")],
    &[Need::library("libmimalloc2.0", "libmimalloc.so.2")],
];

/// Each allocator with the timer (the case), then each alone (to
/// tell the allocator's own trouble from its handler's); all in the quick
/// part.
pub const CASES: [Case; 6] = [
    Case {
        name: "jemalloc",
        program:
            "C alloc_storm: 10,000 threads malloc/free + mutexes, allocating SIGALRM handler every 100 µs; jemalloc",
        quick: true,
        needs: NEEDS[0],
        run: |ctx, mode| storm(ctx, mode, 0, TIMER_US),
    },
    Case {
        name: "tcmalloc",
        program: "C alloc_storm, the same; tcmalloc (gperftools)",
        quick: true,
        needs: NEEDS[1],
        run: |ctx, mode| storm(ctx, mode, 1, TIMER_US),
    },
    Case {
        name: "mimalloc",
        program: "C alloc_storm, the same; mimalloc",
        quick: true,
        needs: NEEDS[2],
        run: |ctx, mode| storm(ctx, mode, 2, TIMER_US),
    },
    Case {
        name: "jemalloc-no-timer",
        program: "C alloc_storm without the timer (the allocator alone); jemalloc",
        quick: true,
        needs: NEEDS[0],
        run: |ctx, mode| storm(ctx, mode, 0, NO_TIMER),
    },
    Case {
        name: "tcmalloc-no-timer",
        program: "C alloc_storm without the timer; tcmalloc",
        quick: true,
        needs: NEEDS[1],
        run: |ctx, mode| storm(ctx, mode, 1, NO_TIMER),
    },
    Case {
        name: "mimalloc-no-timer",
        program: "C alloc_storm without the timer; mimalloc",
        quick: true,
        needs: NEEDS[2],
        run: |ctx, mode| storm(ctx, mode, 2, NO_TIMER),
    },
];

fn storm(ctx: &Ctx, mode: Mode, allocator: usize, timer_us: &str) -> Side {
    let (name, soname) = ALLOCATORS[allocator];
    let exe = match ctx.compile("alloc_storm") {
        Ok(exe) => exe,
        Err(side) => return side,
    };
    let Some(library) = find_library(soname) else {
        return Side::broken(format!("{soname} is not installed"));
    };
    let dir = match ctx.dir(name, mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    // The launcher puts libgreenhook.so first and keeps this after it.
    let mut cmd = ctx.command(mode, &[], &exe);
    cmd.args([THREADS, ITERATIONS, timer_us])
        .env("LD_PRELOAD", arg(&library));
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            // "alloc_storm: 2855 ms of work, 5626 signals (5626 bytes read), …"
            let signals = ran
                .stderr
                .split(", ")
                .find(|part| part.ends_with("bytes read)"))
                .and_then(|part| part.split(' ').next())
                .unwrap_or("?");
            let seconds = ran.elapsed.as_secs_f64();
            let brief = if timer_us == NO_TIMER {
                format!("exit 0; {seconds:.1} s")
            } else {
                format!("exit 0; {signals} signals handled, {seconds:.1} s")
            };
            Side::from_ran(&ran, brief)
        }
        Err(e) => Side::broken(e.to_string()),
    }
}
