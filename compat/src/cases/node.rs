//! node running `compat/programs/node_tour.js`: timers, fs on libuv's
//! thread pool, child processes, a loopback HTTP exchange, zlib and crypto,
//! and worker threads (an isolate each; per-fiber TLS is what keeps them
//! apart) passing messages and an `Atomics.wait` ping-pong; then the main
//! thread spins on `Atomics.load` until a worker stores (compiled code
//! without unwind tables: it hung before the main thread's was preempted,
//! and now and then while greenhook's own signal frames left libc's
//! `__restore_rt` on the stack for the preemption's scan to find).

use std::time::Duration;

use super::{arg, Case, Ctx, Mode, Side};
use crate::apt::{find_command, Need};
use crate::proc;

const TIMEOUT: Duration = Duration::from_secs(60);

pub const CASE: Case = Case {
    name: "node",
    program: "node: timers, fs, child processes, loopback http, zlib/crypto, 6 worker_threads (isolates), Atomics.wait, a spin on the main thread",
    quick: true,
    needs: &[Need::command("nodejs", "node")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(node) = find_command("node") else {
        return Side::broken("node is not installed".into());
    };
    let dir = match ctx.dir("node", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let mut cmd = ctx.command(mode, &[], &node);
    cmd.arg(arg(&ctx.file("programs/node_tour.js"))).current_dir(&dir);
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            let brief = format!("exit 0; {}", ran.stdout.lines().last().unwrap_or_default());
            Side::from_ran(&ran, brief)
        }
        Err(e) => Side::broken(e.to_string()),
    }
}
