//! python3's `http.server.ThreadingHTTPServer` (`compat/programs/http_server.py`)
//! under load from an unpatched client (`compat/clients/http_load.py`).

use super::{arg, Case, Ctx, Exchange, Mode, Side};
use crate::apt::{self, Need};

pub const CASE: Case = Case {
    name: "python-http",
    program: "python3 ThreadingHTTPServer, 32 unpatched keep-alive clients x 100 requests",
    quick: true,
    needs: &[Need::command("python3", "python3")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let server = |port: u16| {
        let mut cmd = ctx.command(mode, &[], apt::python3());
        cmd.arg(arg(&ctx.file("programs/http_server.py"))).arg(port.to_string());
        cmd
    };
    let client = |port: u16| {
        let mut cmd = ctx.plain(apt::python3());
        cmd.arg(arg(&ctx.file("clients/http_load.py")))
            .args([&port.to_string(), "32", "100"]);
        cmd
    };
    // The client's last request (/quit) shuts the server down.
    match Exchange::run(ctx, mode, "python-http", server, client, None) {
        Ok(ex) => ex.side(format!("{}, {}", ex.served.stdout.trim(), ex.served.status)),
        Err(side) => side,
    }
}
