//! BIND 9's `named` (Debian's: linked with jemalloc, OpenSSL set up by its
//! libraries' constructors, 4 worker threads on libuv) serving a small
//! zone to `compat/clients/dns_check.py`, an unpatched client: UDP
//! questions from 8 threads, then one over TCP; stopped by `SIGTERM`, after
//! which it must exit 0. (A reload by `SIGHUP` after the questions failed
//! now and then here unpatched too, `reloading configuration failed`, with
//! no reason logged: not in the row.) Under greenhook it hung at start
//! twice over: an rwlock OpenSSL's set-up left in glibc's write phase
//! before greenhook's constructor ran, then (fibers with TLS of their own)
//! a time slice ended inside jemalloc, holding its lock.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::{arg, Case, Ctx, Exchange, Mode, Side};
use crate::apt::{self, find_command, Need};

/// Names in the zone: host0..host49.test, each 10.0.0.N (as the client
/// asks).
const NAMES: usize = 50;

pub const CASE: Case = Case {
    name: "bind",
    program:
        "BIND 9.18 `named` (jemalloc, 4 workers) + a DNS client (8 threads x 300 UDP questions, then TCP), SIGTERM",
    quick: true,
    needs: &[Need::file("bind9", "/usr/sbin/named")],
    run,
};

fn named() -> Option<PathBuf> {
    find_command("named").or_else(|| Some(PathBuf::from("/usr/sbin/named")).filter(|p| p.is_file()))
}

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(named) = named() else {
        return Side::broken("named is not installed".into());
    };
    let dir = match ctx.dir("bind-files", mode) {
        Ok(d) => d,
        Err(side) => return side,
    };
    let mut zone = String::from(
        "$TTL 300\n@ IN SOA ns.test. admin.test. 1 3600 600 86400 300\n@ IN NS ns.test.\nns IN A 127.0.0.1\n",
    );
    for i in 0..NAMES {
        let _ = writeln!(zone, "host{i} IN A 10.0.0.{i}");
    }
    let (zone_file, conf, pid) = (dir.join("test.zone"), dir.join("named.conf"), dir.join("named.pid"));
    // named writes its pid there (by default in /run/named, maybe not ours).
    if let Err(e) = std::fs::write(&zone_file, zone) {
        return Side::broken(format!("cannot write the zone: {e}"));
    }
    let server = |port: u16| {
        let config = format!(
            "options {{ directory \"{d}\"; pid-file \"{p}\"; session-keyfile \"{d}/session.key\"; \
             listen-on port {port} {{ 127.0.0.1; }}; listen-on-v6 {{ none; }}; recursion no; \
             dnssec-validation no; }};\ncontrols {{ }};\nzone \"test\" {{ type primary; file \"{z}\"; }};\n",
            d = arg(&dir),
            p = arg(&pid),
            z = arg(&zone_file),
        );
        let _ = std::fs::write(&conf, config);
        let mut cmd = ctx.command(mode, &[], &named);
        cmd.args(["-g", "-n", "4", "-c"]).arg(&conf);
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } == 0 {
            cmd.args(["-u", "root"]); // else named gives up root for user "bind"
        }
        cmd
    };
    let client = |port: u16| {
        let mut cmd = ctx.plain(apt::python3());
        cmd.arg(arg(&ctx.file("clients/dns_check.py")))
            .args([&port.to_string(), "8", "300"]);
        cmd
    };
    match Exchange::run(ctx, mode, "bind", server, client, Some(libc::SIGTERM)) {
        Ok(ex) => {
            let brief = ex.client.stdout.lines().collect::<Vec<_>>().join("; ");
            ex.side(brief)
        }
        Err(side) => side,
    }
}
