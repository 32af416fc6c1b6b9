//! MariaDB: a thread per connection (from a thread cache), InnoDB's
//! background threads (purge, page cleaner, its I/O through io_uring or
//! libaio, whichever the build and kernel allow), row locks that make
//! transactions wait for each other on condition variables, timed waits
//! everywhere, and rwlocks and mutexes on every page access. The server
//! runs under greenhook; unpatched clients load it:
//! - `mariadb-slap`'s generated mixed load (16 connections, its own
//!   schema);
//! - 16 `mariadb` clients at once, each committing 500 transactions that
//!   bump one of 4 hot counters and log the bump, so that they wait on
//!   each other's row locks. Then the counters must sum to 8,000 and the
//!   log hold 8,000 distinct rows;
//! - `mariadb-admin shutdown`, after which the server must exit 0 with no
//!   `[ERROR]` line in its log.
//!
//! The data directory is made by `mariadb-install-db`, unpatched; as root
//! the server runs with `--user=root` (it refuses root otherwise).

use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::{arg, brief_of, log_of, status_of, Case, Ctx, Mode, Side};
use crate::apt::Need;
use crate::proc::{self, Ran, Server};

const SERVER: &str = "/usr/sbin/mariadbd";

const NEEDS: &[Need] = &[
    Need::file("mariadb-server", SERVER),
    Need::command("mariadb-server", "mariadb-install-db"),
    Need::command("mariadb-client", "mariadb"),
    Need::command("mariadb-client", "mariadb-admin"),
    Need::command("mariadb-client", "mariadb-slap"),
];

/// Clients committing at once, and transactions each.
const CLIENTS: u32 = 16;
const TRANSACTIONS: u32 = 500;
/// The hot rows they all update.
const COUNTERS: u32 = 4;

pub const CASE: Case = Case {
    name: "mariadb",
    program: "MariaDB 10.11 (a thread per connection, InnoDB) + mariadb-slap, 16 clients; 16 x 500 transactions on 4 hot rows, sums checked; shutdown",
    quick: true,
    needs: NEEDS,
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let dir = match ctx.dir("mariadb", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    // The socket's path must fit in sockaddr_un.sun_path (108 bytes).
    let socket = dir.join("sock");
    if socket.as_os_str().len() >= 108 {
        return Side::broken(format!(
            "{} is too long for a Unix socket (set TMPDIR)",
            socket.display()
        ));
    }
    let db = Db {
        ctx,
        data: dir.join("data"),
        socket,
        dir,
    };
    db.exercise(mode)
}

/// One run's MariaDB: its directory, data and socket.
struct Db<'a> {
    ctx: &'a Ctx,
    dir: PathBuf,
    data: PathBuf,
    socket: PathBuf,
}

impl Db<'_> {
    /// The data directory, the server, the loads, the check and the
    /// shutdown; the server is never left running.
    fn exercise(&self, mode: Mode) -> Side {
        let mut output = String::new();
        let mut install = self.ctx.plain("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", arg(&self.data)))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(root_user());
        match self.run("install-db", &mut install, Duration::from_secs(120)) {
            Ok(ran) if ran.succeeded() => {}
            Ok(ran) => return Side::from_ran(&ran, String::new()),
            Err(e) => return Side::broken(format!("mariadb-install-db did not run: {e}")),
        }

        let mut server = match self.start(mode) {
            Ok(server) => Running(Some(server)),
            Err(side) => return side,
        };
        let mut failed: Option<String> = None;
        let mut log = String::new();

        let mut slap = self.client("mariadb-slap");
        slap.args([
            "--concurrency=16",
            "--iterations=3",
            "--number-of-queries=3000",
            "--auto-generate-sql",
            "--auto-generate-sql-load-type=mixed",
            "--auto-generate-sql-add-autoincrement",
            "--engine=innodb",
        ]);
        let slap = self.run("slap", &mut slap, Duration::from_secs(120));
        let _ = writeln!(output, "mariadb-slap: {}", status_of(&slap));
        note(&mut log, "mariadb-slap", &slap);
        if !matches!(&slap, Ok(ran) if ran.succeeded()) {
            failed.get_or_insert(format!("mariadb-slap {}", brief_of(&slap)));
        }

        let seconds = match self.transactions(&mut log) {
            Ok(seconds) => {
                let _ = writeln!(output, "transactions: {CLIENTS} clients ok");
                Some(seconds)
            }
            Err(e) => {
                let _ = writeln!(output, "transactions: failed");
                failed.get_or_insert(e);
                None
            }
        };
        if seconds.is_some() {
            match self.check() {
                Ok(sums) => {
                    let want = format!("{0}\t{0}\t{0}", CLIENTS * TRANSACTIONS);
                    let _ = writeln!(output, "sum, rows, distinct rows: {sums}");
                    if sums != want {
                        failed.get_or_insert(format!("sum, rows, distinct rows: {sums}, not {want}"));
                    }
                }
                Err(e) => {
                    failed.get_or_insert(format!("the check: {e}"));
                }
            }
        }

        let mut shutdown = self.client("mariadb-admin");
        shutdown.arg("shutdown");
        let shutdown = self.run("shutdown", &mut shutdown, Duration::from_secs(60));
        note(&mut log, "mariadb-admin shutdown", &shutdown);
        let served = server.stop();
        let _ = writeln!(output, "mariadb-admin shutdown: {}", status_of(&shutdown));
        let _ = writeln!(output, "mariadbd: {}", served.status);
        if !matches!(&shutdown, Ok(ran) if ran.succeeded()) {
            failed.get_or_insert(format!("mariadb-admin shutdown {}", brief_of(&shutdown)));
        }
        if !served.succeeded() {
            failed.get_or_insert(format!("mariadbd {}", served.brief()));
        }
        let error_log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
        let errors = error_log.lines().filter(|l| l.contains("[ERROR]")).count();
        let _ = writeln!(output, "[ERROR] lines in its log: {errors}");
        if errors > 0 {
            failed.get_or_insert(format!("{errors} [ERROR] lines in its log"));
        }
        let tail: Vec<&str> = error_log.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        log = format!(
            "mariadbd: {}--- its log (last {} lines)\n{}\n{log}",
            log_of(&served),
            tail.len(),
            tail.join("\n")
        );

        Side {
            ok: failed.is_none(),
            brief: failed.unwrap_or_else(|| {
                format!(
                    "slap ok; {} transactions, sums right; clean shutdown; {:.1} s",
                    CLIENTS * TRANSACTIONS,
                    seconds.unwrap_or_default()
                )
            }),
            output,
            log,
        }
    }

    /// The server, in `mode`, ready once its socket exists (it is made
    /// after InnoDB has started, when the server accepts connections).
    fn start(&self, mode: Mode) -> Result<Server, Side> {
        let mut cmd = self.ctx.command(mode, &[], SERVER);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", arg(&self.data)))
            .arg(format!("--socket={}", arg(&self.socket)))
            .arg(format!("--log-error={}", arg(&self.dir.join("error.log"))))
            .arg(format!("--pid-file={}", arg(&self.dir.join("pid"))))
            .args([
                "--skip-networking",
                "--innodb-buffer-pool-size=64M",
                // The log written at each commit, flushed once a second: the
                // commits wait for each other's locks, not for the disk.
                "--innodb-flush-log-at-trx-commit=2",
            ])
            .args(root_user())
            .current_dir(&self.dir);
        let server_dir = self
            .subdir("server")
            .map_err(|e| Side::broken(format!("no directory for the server: {e}")))?;
        let socket = self.socket.clone();
        Server::start_when(
            "mariadbd",
            &mut cmd,
            &server_dir,
            || socket.exists(),
            "make its socket",
            Duration::from_secs(60),
        )
        .map_err(|ran| Side::from_ran(&ran, String::new()))
    }

    /// The hot counters and the log, then `CLIENTS` clients at once, each
    /// committing `TRANSACTIONS` bumps. Returns how long the clients took.
    fn transactions(&self, log: &mut String) -> Result<f64, String> {
        let schema = format!(
            "create database t; use t; \
             create table c (id int primary key, n int not null) engine=innodb; \
             insert into c select seq, 0 from seq_0_to_{}; \
             create table log (client int, i int, primary key (client, i)) engine=innodb;",
            COUNTERS - 1
        );
        let mut cmd = self.client("mariadb");
        cmd.args(["-e", &schema]);
        let made = self.run("schema", &mut cmd, Duration::from_secs(60));
        note(log, "schema", &made);
        if !matches!(&made, Ok(ran) if ran.succeeded()) {
            return Err(format!("making the tables {}", brief_of(&made)));
        }
        let start = std::time::Instant::now();
        let results: Vec<(u32, io::Result<Ran>)> = std::thread::scope(|s| {
            let clients: Vec<_> = (0..CLIENTS)
                .map(|k| {
                    s.spawn(move || {
                        let mut script = String::from("use t;\n");
                        for i in 0..TRANSACTIONS {
                            let _ = writeln!(
                                script,
                                "begin; update c set n = n + 1 where id = {}; \
                                 insert into log values ({k}, {i}); commit;",
                                (i + k) % COUNTERS
                            );
                        }
                        let mut cmd = self.client("mariadb");
                        let ran = self
                            .subdir(&format!("client{k}"))
                            .and_then(|dir| proc::run_with_input(&mut cmd, &dir, Some(script.as_bytes()), TIMEOUT));
                        (k, ran)
                    })
                })
                .collect();
            clients
                .into_iter()
                .map(|c| c.join().expect("a client thread does not panic"))
                .collect()
        });
        let seconds = start.elapsed().as_secs_f64();
        let mut failed = None;
        for (k, ran) in &results {
            if !matches!(ran, Ok(ran) if ran.succeeded()) {
                note(log, &format!("client {k}"), ran);
                failed.get_or_insert(format!("client {k} {}", brief_of(ran)));
            }
        }
        failed.map_or(Ok(seconds), Err)
    }

    /// The counters' sum, the log's rows and its distinct rows, tab-separated.
    fn check(&self) -> io::Result<String> {
        let mut cmd = self.client("mariadb");
        cmd.args([
            "-N",
            "-B",
            "-e",
            "select (select sum(n) from t.c), (select count(*) from t.log), \
             (select count(distinct client, i) from t.log)",
        ]);
        let ran = self.run("check", &mut cmd, Duration::from_secs(60))?;
        if !ran.succeeded() {
            return Err(io::Error::other(format!("mariadb {}", ran.brief())));
        }
        Ok(ran.stdout.trim().to_string())
    }

    /// A client (unpatched) of the server on its socket, as root.
    fn client(&self, name: &str) -> Command {
        let mut cmd = self.ctx.plain(name);
        cmd.arg("--no-defaults")
            .arg(format!("--socket={}", arg(&self.socket)))
            .arg("--user=root")
            .current_dir(&self.dir);
        cmd
    }

    /// Runs `cmd` (its output in a subdirectory named `label`).
    fn run(&self, label: &str, cmd: &mut Command, timeout: Duration) -> io::Result<Ran> {
        super::run_step(&self.dir, label, cmd, timeout)
    }

    fn subdir(&self, label: &str) -> io::Result<PathBuf> {
        super::step_dir(&self.dir, label)
    }
}

const TIMEOUT: Duration = Duration::from_secs(120);

/// The server, stopped by [`Running::stop`] once `mariadb-admin shutdown`
/// asked it to exit, or killed when dropped running (a failure midway).
struct Running(Option<Server>);

impl Running {
    fn stop(&mut self) -> Ran {
        self.0
            .take()
            .expect("the server is stopped once")
            .stop(None, Duration::from_secs(60))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(server) = self.0.take() {
            drop(server.stop(Some(libc::SIGKILL), Duration::from_secs(10)));
        }
    }
}

/// `--user=root` when the suite runs as root (MariaDB refuses root
/// otherwise); nothing else.
fn root_user() -> Option<&'static str> {
    // SAFETY: getuid has no preconditions.
    (unsafe { libc::getuid() } == 0).then_some("--user=root")
}

fn note(log: &mut String, label: &str, ran: &io::Result<Ran>) {
    match ran {
        Ok(ran) => log.push_str(&format!("{label}: {}", log_of(ran))),
        Err(e) => log.push_str(&format!("{label}: did not run: {e}\n")),
    }
}
