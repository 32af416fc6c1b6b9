//! `compat/c/gc_threads.c`: the Boehm-Demers-Weiser collector (libgc) with
//! eight threads allocating while collections stop them by signal and its
//! parallel markers run.

use std::time::Duration;

use super::{Case, Ctx, Mode, Side};
use crate::apt::Need;
use crate::proc;

const TIMEOUT: Duration = Duration::from_secs(60);

pub const CASE: Case = Case {
    name: "boehm-gc",
    program: "C gc_threads: Boehm GC (libgc 8.2, parallel markers), 8 threads allocating 4.8M objects, collections stopping them by signal",
    quick: true,
    needs: &[Need::file("libgc-dev", "/usr/include/gc/gc.h")],
    run: gc,
};

fn gc(ctx: &Ctx, mode: Mode) -> Side {
    let exe = match ctx.compile_with("gc_threads", &["-lgc"]) {
        Ok(exe) => exe,
        Err(side) => return side,
    };
    let dir = match ctx.dir("gc", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    match proc::run(&mut ctx.command(mode, &[], &exe), &dir, TIMEOUT) {
        Ok(ran) => {
            let last = ran.stdout.lines().last().unwrap_or("").to_string();
            let brief = format!("exit 0; {last}; {:.1} s", ran.elapsed.as_secs_f64());
            Side::from_ran(&ran, brief)
        }
        Err(e) => Side::broken(e.to_string()),
    }
}
