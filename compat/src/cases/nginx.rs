//! nginx: a master process forking two workers, each with a pool of four
//! threads (`thread_pool`, `aio threads`) that nginx hands its file I/O to:
//! every `sendfile` (nginx 1.22 offloads all of them with `aio threads`)
//! and, for files of `directio` size and more, every read. An unpatched
//! client (`compat/clients/nginx_check.py`) makes 2,000 requests on 32
//! threads, a new connection each: GETs of four files (1 byte to 1.5 MB)
//! and PUTs of 300 KB bodies (the DAV module writes them to a temp file and
//! renames it) read back, every body checked. Halfway through, the client
//! sends SIGHUP with a new configuration: the master forks new workers and
//! the old ones finish their requests. Then SIGQUIT: a graceful stop, the
//! master's exit status checked and no process of its group left behind.

use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use super::{arg, log_of, Case, Ctx, Mode, Side};
use crate::apt::{self, find_command, Need};
use crate::proc::{self, Server};

const THREADS: u32 = 32;
const REQUESTS: u32 = 2000;

pub const CASE: Case = Case {
    name: "nginx",
    program: "nginx 1.22 (2 workers forked, 4-thread pools: sendfile, directio) + 2,000 GET/PUT, 32 clients, SIGHUP reload, SIGQUIT",
    quick: true,
    needs: &[Need::command("nginx", "nginx")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(nginx) = find_command("nginx") else {
        return Side::broken("nginx is not installed".into());
    };
    let (dir, port) = match (ctx.dir("nginx", mode), proc::free_port()) {
        (Ok(dir), Ok(port)) => (dir, port),
        (Err(side), _) => return side,
        (_, Err(e)) => return Side::broken(format!("no free port: {e}")),
    };
    let html = dir.join("html");
    let (conf, next) = (dir.join("nginx.conf"), dir.join("nginx-next.conf"));
    if let Err(e) = prepare(ctx, &dir, &html, port, &conf, &next) {
        return Side::broken(format!("cannot prepare nginx's directory: {e}"));
    }
    let error_log = dir.join("error.log");
    let mut cmd = ctx.command(mode, &[], &nginx);
    cmd.arg("-p")
        .arg(format!("{}/", dir.display()))
        .arg("-e")
        .arg(&error_log)
        .arg("-c")
        .arg(&conf);
    let server_dir = dir.join("server");
    let master = std::fs::create_dir_all(&server_dir)
        .map_err(|e| Side::broken(format!("no directory for the server: {e}")))
        .and_then(|()| {
            Server::start("nginx", &mut cmd, &server_dir, port, Duration::from_secs(20))
                .map_err(|ran| Side::from_ran(&ran, String::new()))
        });
    let master = match master {
        Ok(master) => master,
        Err(side) => return side,
    };

    let client_dir = dir.join("client");
    let client = std::fs::create_dir_all(&client_dir).and_then(|()| {
        let mut cmd = ctx.plain(apt::python3());
        cmd.arg(arg(&ctx.file("clients/nginx_check.py")))
            .args([port.to_string(), master.pid().to_string()])
            .args([&html, &conf, &next])
            .args([THREADS.to_string(), REQUESTS.to_string()]);
        proc::run(&mut cmd, &client_dir, Duration::from_secs(120))
    });
    // Even after a failed client: a graceful stop, then what it left.
    let (served, survivors) = master.stop_alone(Some(libc::SIGQUIT), Duration::from_secs(20));
    let client = match client {
        Ok(client) => client,
        Err(e) => return Side::broken(format!("the client did not run: {e}")),
    };

    let log = std::fs::read_to_string(&error_log).unwrap_or_default();
    let events = Events::of(&log);
    let mut output = format!("client: {}\n{}", client.status, client.stdout);
    let _ = writeln!(
        output,
        "error log: {} workers started, {} exited with code 0, SIGHUP {}, SIGQUIT {}, {} alerts or errors",
        events.started, events.exited_0, events.sighup, events.sigquit, events.problems
    );
    let _ = writeln!(
        output,
        "nginx: {}, processes left behind: {}",
        served.status,
        survivors.len()
    );
    let failed = if !client.succeeded() {
        Some(format!("client {}", client.brief()))
    } else if !served.succeeded() {
        Some(format!("nginx {}", served.brief()))
    } else if !survivors.is_empty() {
        Some(format!("processes left behind: {survivors:?}"))
    } else if events != Events::CLEAN {
        Some(format!("error log: {events:?}"))
    } else {
        None
    };
    let tail: Vec<&str> = log.lines().rev().take(30).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Side {
        ok: failed.is_none(),
        brief: failed.unwrap_or_else(|| {
            format!(
                "{REQUESTS} requests ok across SIGHUP, 4 workers forked, SIGQUIT: exit 0, none left; client {:.1} s",
                client.elapsed.as_secs_f64()
            )
        }),
        output,
        log: format!(
            "nginx: {}--- error.log (last {} lines)\n{}\nclient: {}",
            log_of(&served),
            tail.len(),
            tail.join("\n"),
            log_of(&client)
        ),
    }
}

/// The run's directory as nginx needs it, and its two configurations.
/// Run as root, nginx's workers are `nobody`: they must read the files and
/// write the uploads.
fn prepare(ctx: &Ctx, dir: &Path, html: &Path, port: u16, conf: &Path, next: &Path) -> io::Result<()> {
    let uploads = html.join("uploads");
    std::fs::create_dir_all(&uploads)?;
    // nginx makes the temp directories (owned by the workers' user) in it.
    std::fs::create_dir_all(dir.join("temp"))?;
    for open in [ctx.scratch.path(), dir, html] {
        std::fs::set_permissions(open, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::set_permissions(&uploads, std::fs::Permissions::from_mode(0o777))?;
    std::fs::write(conf, config(dir, port, 1))?;
    std::fs::write(next, config(dir, port, 2))
}

/// nginx.conf for generation `generation` (answers say which one they
/// come from, and which worker).
fn config(dir: &Path, port: u16, generation: u32) -> String {
    let d = dir.display();
    format!(
        "worker_processes 2;
daemon off;
master_process on;
error_log {d}/error.log notice;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
thread_pool default threads=4 max_queue=65536;
http {{
  access_log off;
  default_type application/octet-stream;
  sendfile on;
  aio threads;
  directio 1m;
  client_body_temp_path {d}/temp/body;
  proxy_temp_path {d}/temp/proxy;
  fastcgi_temp_path {d}/temp/fastcgi;
  uwsgi_temp_path {d}/temp/uwsgi;
  scgi_temp_path {d}/temp/scgi;
  server {{
    listen 127.0.0.1:{port};
    root {d}/html;
    add_header X-Worker $pid always;
    add_header X-Generation {generation} always;
    location /uploads/ {{
      dav_methods PUT;
      client_max_body_size 1m;
      client_body_buffer_size 16k;
    }}
  }}
}}
"
    )
}

/// What nginx's error log (level notice) says happened.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Events {
    /// "start worker process": the master forked a worker.
    started: usize,
    /// "worker process N exited with code 0", as the master saw it.
    exited_0: usize,
    sighup: usize,
    sigquit: usize,
    /// Lines at level error and above.
    problems: usize,
}

impl Events {
    /// Two workers, two more at the reload, all four gone with code 0.
    const CLEAN: Events = Events {
        started: 4,
        exited_0: 4,
        sighup: 1,
        sigquit: 1,
        problems: 0,
    };

    fn of(log: &str) -> Events {
        let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
        Events {
            started: count("start worker process "),
            exited_0: count("exited with code 0"),
            sighup: count("signal 1 (SIGHUP) received"),
            sigquit: count("signal 3 (SIGQUIT) received"),
            problems: ["[error]", "[crit]", "[alert]", "[emerg]"]
                .iter()
                .map(|l| count(l))
                .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_and_a_graceful_stop_are_read_from_the_log() {
        let log = "\
2026/12/01 21:30:00 [notice] 10#10: start worker process 11
2026/12/01 21:30:00 [notice] 10#10: start worker process 12
2026/12/01 21:30:01 [notice] 10#10: signal 1 (SIGHUP) received from 20, reconfiguring
2026/12/01 21:30:01 [notice] 10#10: start worker process 13
2026/12/01 21:30:01 [notice] 10#10: start worker process 14
2026/12/01 21:30:01 [notice] 10#10: worker process 11 exited with code 0
2026/12/01 21:30:01 [notice] 10#10: worker process 12 exited with code 0
2026/12/01 21:30:02 [notice] 10#10: signal 3 (SIGQUIT) received from 1, shutting down
2026/12/01 21:30:02 [notice] 10#10: worker process 13 exited with code 0
2026/12/01 21:30:02 [notice] 10#10: worker process 14 exited with code 0
2026/12/01 21:30:02 [notice] 10#10: exit
";
        assert_eq!(Events::of(log), Events::CLEAN);
        let alert = format!("{log}2026/12/01 21:30:02 [alert] 10#10: worker process 13 exited on signal 11\n");
        assert_eq!(Events::of(&alert).problems, 1);
    }
}
