//! python3 running `compat/programs/python_sync.py`: `ThreadPoolExecutor`,
//! `queue.Queue`, `Barrier`, `BoundedSemaphore`, `Condition`, timed waits
//! on `Lock`, `Event` and `join`, and `threading.local`, each checked by
//! what it guarantees. CPython's locks are POSIX semaphores (a timed
//! acquire is `sem_clockwait`), so every wait here is a semaphore wait: a
//! park on the hub under greenhook.

use std::time::Duration;

use super::{arg, Case, Ctx, Mode, Side};
use crate::apt::{self, Need};
use crate::proc;

const TIMEOUT: Duration = Duration::from_secs(60);

pub const CASE: Case = Case {
    name: "python-sync",
    program: "python3 threading: pool, queue, barrier, semaphore, condition, timed waits, locals",
    quick: true,
    needs: &[Need::command("python3", "python3")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let dir = match ctx.dir("python-sync", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let mut cmd = ctx.command(mode, &[], apt::python3());
    cmd.arg(arg(&ctx.file("programs/python_sync.py"))).current_dir(&dir);
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            let brief = format!(
                "exit 0; {}; {:.1} s",
                ran.stdout.lines().last().unwrap_or_default(),
                ran.elapsed.as_secs_f64()
            );
            Side::from_ran(&ran, brief)
        }
        Err(e) => Side::broken(e.to_string()),
    }
}
