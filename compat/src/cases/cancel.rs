//! `compat/c/cancel_cleanup.c`: `pthread_exit` with cleanup handlers,
//! cancellation (in `read` on a pipe, `pthread_cond_wait`, `nanosleep`, at
//! `pthread_testcancel`), key destructors, and `pthread_exit` from main.
//! Run with native threads (`greenhook run --no-threads`, the case)
//! and with threads as fibers (the default).

use std::time::Duration;

use super::{Case, Ctx, Mode, Side};
use crate::proc;

const TIMEOUT: Duration = Duration::from_secs(30);

pub const CASES: [Case; 2] = [
    Case {
        name: "cancel-native",
        program: "C cancel_cleanup: pthread_exit, pthread_cancel (one blocked in read), cleanup; `--no-threads`",
        quick: true,
        needs: &[],
        run: |ctx, mode| cancel(ctx, mode, &["--no-threads"]),
    },
    Case {
        name: "cancel-fibers",
        program: "C cancel_cleanup, threads as fibers (the default)",
        quick: true,
        needs: &[],
        run: |ctx, mode| cancel(ctx, mode, &[]),
    },
];

fn cancel(ctx: &Ctx, mode: Mode, options: &[&str]) -> Side {
    let exe = match ctx.compile("cancel_cleanup") {
        Ok(exe) => exe,
        Err(side) => return side,
    };
    let dir = match ctx.dir("cancel", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    match proc::run(&mut ctx.command(mode, options, &exe), &dir, TIMEOUT) {
        Ok(ran) => {
            let cancelled = ran.stdout.matches("PTHREAD_CANCELED").count();
            let brief = format!("exit 0; {cancelled} threads cancelled, cleanups logged");
            Side::from_ran(&ran, brief)
        }
        Err(e) => Side::broken(e.to_string()),
    }
}
