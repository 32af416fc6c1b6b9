//! memcached (4 worker threads) checked by `compat/clients/memcached_check.py`,
//! an unpatched client: every value read back equals what was written.

use std::time::Duration;

use super::{arg, log_of, Case, Ctx, Mode, Side};
use crate::apt::{self, find_command, Need};
use crate::proc::{self, Server};

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
    let (dir, port) = match (ctx.dir("memcached", mode), proc::free_port()) {
        (Ok(dir), Ok(port)) => (dir, port),
        (Err(side), _) => return side,
        (_, Err(e)) => return Side::broken(format!("no free port: {e}")),
    };
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
    let server = match Server::start("memcached", &mut cmd, &dir, port, Duration::from_secs(20)) {
        Ok(server) => server,
        Err(ran) => return Side::from_ran(&ran, String::new()),
    };
    let client_dir = dir.join("client");
    let client = std::fs::create_dir_all(&client_dir).and_then(|()| {
        let mut cmd = ctx.plain(apt::python3());
        cmd.arg(arg(&ctx.file("clients/memcached_check.py")))
            .args([&port.to_string(), "16", "5"]);
        proc::run(&mut cmd, &client_dir, Duration::from_secs(120))
    });
    let served = server.stop(Some(libc::SIGTERM), Duration::from_secs(20));
    let client = match client {
        Ok(ran) => ran,
        Err(e) => return Side::broken(format!("the client did not run: {e}")),
    };
    let ok = client.succeeded() && served.succeeded();
    Side {
        ok,
        brief: if ok {
            client.stdout.trim().to_string()
        } else if !served.succeeded() {
            format!("memcached {}", served.brief())
        } else {
            format!("client {}", client.brief())
        },
        output: format!(
            "client: {}{}memcached: {}\n",
            client.stdout, client.status, served.status
        ),
        log: format!("memcached: {}client: {}", log_of(&served), log_of(&client)),
    }
}
