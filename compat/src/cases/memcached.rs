//! memcached (4 worker threads) checked by `compat/clients/memcached_check.py`,
//! an unpatched client: every value read back equals what was written.

use super::{arg, Case, Ctx, Exchange, Mode, Side};
use crate::apt::{self, find_command, Need};

pub const CASE: Case = Case {
    name: "memcached",
    program: "memcached 1.6 + a correctness client (16 connections, set/add/append/cas/incr/delete/get)",
    quick: true,
    needs: &[Need::command("memcached", "memcached")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(memcached) = find_command("memcached") else {
        return Side::broken("memcached is not installed".into());
    };
    let server = |port: u16| {
        let mut cmd = ctx.command(mode, &[], &memcached);
        cmd.args([
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-t",
            "4",
            "-m",
            "256",
        ]);
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } == 0 {
            cmd.args(["-u", "root"]); // memcached refuses to run as root without it
        }
        cmd
    };
    let client = |port: u16| {
        let mut cmd = ctx.plain(apt::python3());
        cmd.arg(arg(&ctx.file("clients/memcached_check.py")))
            .args([&port.to_string(), "16", "5"]);
        cmd
    };
    match Exchange::run(ctx, mode, "memcached", server, client, Some(libc::SIGTERM)) {
        Ok(ex) => ex.side(ex.client.stdout.trim().to_string()),
        Err(side) => side,
    }
}
