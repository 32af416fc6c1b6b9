//! python3's `http.server.ThreadingHTTPServer` (`compat/programs/http_server.py`)
//! under load from an unpatched client (`compat/clients/http_load.py`).

use std::time::Duration;

use super::{arg, log_of, Case, Ctx, Mode, Side};
use crate::apt::{self, Need};
use crate::proc::{self, Server};

pub const CASE: Case = Case {
    name: "python-http",
    program: "python3 ThreadingHTTPServer, 32 unpatched keep-alive clients x 100 requests",
    quick: true,
    needs: &[Need::command("python3", "python3")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let (dir, port) = match (ctx.dir("python-http", mode), proc::free_port()) {
        (Ok(dir), Ok(port)) => (dir, port),
        (Err(side), _) => return side,
        (_, Err(e)) => return Side::broken(format!("no free port: {e}")),
    };
    let mut cmd = ctx.command(mode, &[], apt::python3());
    cmd.arg(arg(&ctx.file("programs/http_server.py"))).arg(port.to_string());
    let server = match Server::start("the python3 server", &mut cmd, &dir, port, Duration::from_secs(20)) {
        Ok(server) => server,
        Err(ran) => return Side::from_ran(&ran, String::new()),
    };
    let client_dir = dir.join("client");
    let client = std::fs::create_dir_all(&client_dir).and_then(|()| {
        let mut cmd = ctx.plain(apt::python3());
        cmd.arg(arg(&ctx.file("clients/http_load.py")))
            .args([&port.to_string(), "32", "100"]);
        proc::run(&mut cmd, &client_dir, Duration::from_secs(120))
    });
    // The client's last request (/quit) shuts the server down.
    let served = server.stop(None, Duration::from_secs(20));
    let client = match client {
        Ok(ran) => ran,
        Err(e) => return Side::broken(format!("the client did not run: {e}")),
    };
    let ok = client.succeeded() && served.succeeded();
    Side {
        ok,
        brief: if ok {
            format!("{}, {}", served.stdout.trim(), served.status)
        } else if !served.succeeded() {
            format!("server {}", served.brief())
        } else {
            format!("client {}", client.brief())
        },
        output: format!(
            "client: {}{}\nserver: {}{}\n",
            client.stdout, client.status, served.stdout, served.status
        ),
        log: format!("server: {}client: {}", log_of(&served), log_of(&client)),
    }
}
