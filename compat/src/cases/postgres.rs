//! PostgreSQL: the postmaster forks a process per connection (and its
//! auxiliary ones); they share memory and synchronize through unnamed POSIX
//! semaphores in it (`sem_init(pshared=1)`), spinlocks and latches (signals
//! plus a self-pipe or epoll), and fsync their WAL. The server runs under
//! greenhook; unpatched clients load it: `pgbench -i`, then pgbench's
//! TPC-B-like transactions (8 clients, a fixed number each, so that the
//! counts are deterministic), then `psql` checks that the balances of
//! accounts, tellers, branches and history agree, and `pg_ctl stop -m fast`
//! must end the server cleanly.
//!
//! PostgreSQL refuses to run as root: when the suite does, every PostgreSQL
//! program runs as the `postgres` user (which Debian's package creates),
//! and the launcher and library are copied where that user can read them.

use std::ffi::CString;
use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{arg, brief_of, log_of, status_of, Case, Ctx, Mode, Side};
use crate::apt::{find_versioned, Need};
use crate::proc::{Ran, Server};

/// Debian's versioned installation directories: `<major>/bin/postgres`.
const PARENT: &str = "/usr/lib/postgresql";

const NEEDS: &[Need] = &[
    Need::versioned("postgresql", PARENT, "bin/postgres"),
    Need::versioned("postgresql", PARENT, "bin/pgbench"),
    Need::versioned("postgresql", PARENT, "bin/psql"),
];

const CLIENTS: u32 = 8;
const TRANSACTIONS_PER_CLIENT: u32 = 1000;
/// pgbench's scale: 2 branches, 20 tellers, 200,000 accounts. Few branches
/// for 8 clients: their row locks are contended, so backends sleep on
/// their semaphores and wake each other.
const SCALE: &str = "2";
/// Only names the socket file, in the run's own directory (no TCP).
const PORT: &str = "5432";

pub const CASE: Case = Case {
    name: "postgres",
    program: "PostgreSQL 15 (processes sharing memory and semaphores) + pgbench TPC-B, 8 clients x 1,000 transactions, balances checked, fast shutdown",
    quick: true,
    needs: NEEDS,
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    match Pg::new(ctx, mode) {
        Ok(pg) => pg.exercise(mode),
        Err(side) => side,
    }
}

/// One run's PostgreSQL: its programs, its directory, its user.
struct Pg<'a> {
    ctx: &'a Ctx,
    /// `/usr/lib/postgresql/<major>/bin`.
    bin: PathBuf,
    /// The run's directory: the socket's too, owned by the user.
    dir: PathBuf,
    data: PathBuf,
    /// The `postgres` user's ids when the suite runs as root, else `None`
    /// (the suite's own user).
    ids: Option<(u32, u32)>,
}

impl<'a> Pg<'a> {
    fn new(ctx: &'a Ctx, mode: Mode) -> Result<Pg<'a>, Side> {
        let Some(bin) = find_versioned(Path::new(PARENT), "bin/postgres").and_then(|p| Some(p.parent()?.to_path_buf()))
        else {
            return Err(Side::broken(format!(
                "PostgreSQL is not installed ({PARENT}/*/bin/postgres)"
            )));
        };
        // SAFETY: getuid has no preconditions.
        let ids = if unsafe { libc::getuid() } == 0 {
            Some(
                user_ids("postgres")
                    .ok_or_else(|| Side::broken("running as root, and there is no postgres user".into()))?,
            )
        } else {
            None
        };
        let dir = ctx.dir("postgres", mode)?;
        let broken = |what: &str, e: io::Error| Side::broken(format!("{what}: {e}"));
        // The socket's path must fit in sockaddr_un.sun_path (108 bytes).
        let socket = dir.join(format!(".s.PGSQL.{PORT}"));
        if socket.as_os_str().len() >= 108 {
            return Err(Side::broken(format!(
                "{} is too long for a Unix socket (set TMPDIR)",
                socket.display()
            )));
        }
        if let Some((uid, gid)) = ids {
            // The user walks down from the suite's scratch directory.
            std::fs::set_permissions(ctx.scratch.path(), std::fs::Permissions::from_mode(0o755))
                .map_err(|e| broken("cannot open the scratch directory to postgres", e))?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| broken("cannot give the run's directory to postgres", e))?;
        }
        Ok(Pg {
            ctx,
            data: dir.join("data"),
            bin,
            dir,
            ids,
        })
    }

    /// `initdb`, the server, the load, the check and the shutdown; the
    /// server is never left running.
    fn exercise(&self, mode: Mode) -> Side {
        let mut output = String::new();
        let mut initdb = self.tool("initdb");
        initdb.arg("-D").arg(&self.data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-locale",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        let initdb = match self.run("initdb", &mut initdb, Duration::from_secs(120)) {
            Ok(ran) if ran.succeeded() => ran,
            Ok(ran) => return Side::from_ran(&ran, String::new()),
            Err(e) => return Side::broken(format!("initdb did not run: {e}")),
        };
        let _ = writeln!(output, "initdb: {}", initdb.status);

        let postmaster = match self.start(mode) {
            Ok(postmaster) => postmaster,
            Err(side) => return side,
        };
        let mut failed = None;
        let mut init = self.client("pgbench");
        init.args(["-i", "-q", "-s", SCALE]);
        let init = self.run("pgbench-init", &mut init, Duration::from_secs(120));
        let init_ok = matches!(&init, Ok(ran) if ran.succeeded());
        let _ = writeln!(output, "pgbench -i: {}", status_of(&init));
        if !init_ok {
            failed = Some(format!("pgbench -i {}", brief_of(&init)));
        }

        let mut bench = self.client("pgbench");
        bench.args([
            "-c",
            &CLIENTS.to_string(),
            "-j",
            "2",
            "-t",
            &TRANSACTIONS_PER_CLIENT.to_string(),
        ]);
        let bench = if init_ok {
            Some(self.run("pgbench", &mut bench, Duration::from_secs(300)))
        } else {
            None
        };
        let mut processed = None;
        if let Some(bench) = &bench {
            let stdout = bench.as_ref().map(|ran| ran.stdout.as_str()).unwrap_or_default();
            let done = field(stdout, "number of transactions actually processed:");
            let fails = field(stdout, "number of failed transactions:");
            let _ = writeln!(
                output,
                "pgbench: {}, processed {}, failed {}",
                status_of(bench),
                done.unwrap_or("?"),
                fails.unwrap_or("?")
            );
            let expected = format!("{0}/{0}", CLIENTS * TRANSACTIONS_PER_CLIENT);
            let failed_none = fails.is_some_and(|f| f.split_whitespace().next() == Some("0"));
            if !matches!(bench, Ok(ran) if ran.succeeded()) || done != Some(expected.as_str()) || !failed_none {
                failed.get_or_insert(format!(
                    "pgbench {}: processed {}, failed {}",
                    brief_of(bench),
                    done.unwrap_or("?"),
                    fails.unwrap_or("?")
                ));
            } else {
                processed = Some(CLIENTS * TRANSACTIONS_PER_CLIENT);
            }
        }

        if let Some(processed) = processed {
            match self.balances() {
                Ok((consistent, rows)) => {
                    let _ = writeln!(
                        output,
                        "balances: {}, history rows {rows}",
                        if consistent { "consistent" } else { "INCONSISTENT" }
                    );
                    if !consistent || rows != u64::from(processed) {
                        failed.get_or_insert(format!(
                            "balances {}, {rows} history rows for {processed} transactions",
                            if consistent { "consistent" } else { "differ" }
                        ));
                    }
                }
                Err(e) => {
                    let _ = writeln!(output, "balances: not read");
                    failed.get_or_insert(format!("balance check: {e}"));
                }
            }
        }

        let (stop, served) = postmaster.shutdown();
        let _ = writeln!(output, "pg_ctl stop -m fast: {}", status_of(&stop));
        let _ = writeln!(output, "postgres: {}", served.status);
        if !matches!(&stop, Ok(ran) if ran.succeeded()) {
            failed.get_or_insert(format!("pg_ctl stop -m fast {}", brief_of(&stop)));
        }
        if !served.succeeded() {
            failed.get_or_insert(format!("postgres {}", served.brief()));
        }

        let mut log = format!("postgres (its log is its stderr): {}", log_of(&served));
        for (label, ran) in [
            ("pgbench -i", Some(&init)),
            ("pgbench", bench.as_ref()),
            ("pg_ctl stop", Some(&stop)),
        ] {
            match ran {
                Some(Ok(ran)) => log.push_str(&format!("{label}: {}", log_of(ran))),
                Some(Err(e)) => log.push_str(&format!("{label}: did not run: {e}\n")),
                None => {}
            }
        }
        let seconds = match &bench {
            Some(Ok(ran)) => ran.elapsed.as_secs_f64(),
            _ => 0.0,
        };
        Side {
            ok: failed.is_none(),
            brief: failed.unwrap_or_else(|| {
                format!(
                    "{} transactions, 0 failed, balances consistent, clean shutdown; pgbench {seconds:.1} s",
                    CLIENTS * TRANSACTIONS_PER_CLIENT
                )
            }),
            output,
            log,
        }
    }

    /// The server, in `mode`, ready for connections on its socket.
    fn start(&self, mode: Mode) -> Result<Postmaster<'_>, Side> {
        let postgres = self.bin.join("postgres");
        let mut cmd = match mode {
            Mode::Unpatched => self.ctx.plain(&postgres),
            Mode::Patched => {
                let (launcher, library) = self.launcher()?;
                self.ctx
                    .command_with(&launcher, mode, &["--lib", &arg(&library)], &postgres)
            }
        };
        self.as_user(&mut cmd);
        cmd.arg("-D")
            .arg(&self.data)
            .args(["-p", PORT, "-k"])
            .arg(&self.dir)
            .args(["-c", "listen_addresses="]);
        let dir = self
            .subdir("server")
            .map_err(|e| Side::broken(format!("no directory for the server: {e}")))?;
        let pidfile = self.data.join("postmaster.pid");
        // The postmaster's status, the 8th line of its pid file, says
        // `ready` once it accepts connections (after recovery).
        let ready =
            || std::fs::read_to_string(&pidfile).is_ok_and(|pid| pid.lines().nth(7).map(str::trim) == Some("ready"));
        match Server::start_when(
            "postgres",
            &mut cmd,
            &dir,
            ready,
            "become ready",
            Duration::from_secs(60),
        ) {
            Ok(server) => Ok(Postmaster {
                pg: self,
                server: Some(server),
            }),
            Err(ran) => Err(Side::from_ran(&ran, String::new())),
        }
    }

    /// The launcher and the library, copied into the run's directory: the
    /// user may not be able to read the build's.
    fn launcher(&self) -> Result<(PathBuf, PathBuf), Side> {
        let Some(library) = self.ctx.library() else {
            return Err(Side::broken("libgreenhook.so not found next to the launcher".into()));
        };
        let copy = || -> io::Result<(PathBuf, PathBuf)> {
            let bin = self.subdir("greenhook")?;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
            let copies = (bin.join("greenhook"), bin.join("libgreenhook.so"));
            for (from, to) in [(&self.ctx.greenhook, &copies.0), (&library, &copies.1)] {
                std::fs::copy(from, to)?;
                std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(copies)
        };
        copy().map_err(|e| Side::broken(format!("cannot copy the launcher and library: {e}")))
    }

    /// `psql`: the sums of the balances and deltas, and the history's rows.
    fn balances(&self) -> io::Result<(bool, u64)> {
        const QUERY: &str = "select (select sum(abalance) from pgbench_accounts), \
            (select sum(bbalance) from pgbench_branches), (select sum(tbalance) from pgbench_tellers), \
            (select sum(delta) from pgbench_history), (select count(*) from pgbench_history)";
        let mut cmd = self.client("psql");
        cmd.args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", QUERY]);
        let ran = self.run("psql", &mut cmd, Duration::from_secs(60))?;
        if !ran.succeeded() {
            return Err(io::Error::other(format!("psql {}", ran.brief())));
        }
        let fields: Vec<&str> = ran.stdout.trim().split('|').collect();
        let [accounts, branches, tellers, deltas, rows] = fields[..] else {
            return Err(io::Error::other(format!("psql printed {:?}", ran.stdout.trim())));
        };
        let rows = rows
            .parse()
            .map_err(|_| io::Error::other(format!("psql printed {:?}", ran.stdout.trim())))?;
        Ok((accounts == branches && branches == tellers && tellers == deltas, rows))
    }

    /// A PostgreSQL program (unpatched), as the user, in the run's directory.
    fn tool(&self, name: &str) -> Command {
        let mut cmd = self.ctx.plain(self.bin.join(name));
        self.as_user(&mut cmd);
        cmd
    }

    /// A client of the server on its socket, as the `postgres` role (and so
    /// to the `postgres` database: pgbench's `-d` is `--debug`).
    fn client(&self, name: &str) -> Command {
        let mut cmd = self.tool(name);
        cmd.arg("-h").arg(&self.dir).args(["-p", PORT, "-U", "postgres"]);
        cmd
    }

    /// `cmd` runs as the user, at home in the run's directory, with no
    /// `PG*` variable of ours steering it elsewhere. The ids are set in the
    /// child before exec rather than by `runuser`: the postmaster stays our
    /// child, in our process group, and its exit status is its own.
    fn as_user(&self, cmd: &mut Command) {
        if let Some((uid, gid)) = self.ids {
            cmd.uid(uid).gid(gid).env("USER", "postgres").env("LOGNAME", "postgres");
        }
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PG") {
                cmd.env_remove(name);
            }
        }
        cmd.env("HOME", &self.dir).current_dir(&self.dir);
    }

    /// Runs `cmd` (its output in a subdirectory named `label`).
    fn run(&self, label: &str, cmd: &mut Command, timeout: Duration) -> io::Result<Ran> {
        super::run_step(&self.dir, label, cmd, timeout)
    }

    fn subdir(&self, label: &str) -> io::Result<PathBuf> {
        super::step_dir(&self.dir, label)
    }
}

/// The running server: stopped fast by [`Postmaster::shutdown`], or, when
/// dropped running (a failure midway), immediately and then killed.
struct Postmaster<'a> {
    pg: &'a Pg<'a>,
    server: Option<Server>,
}

impl Postmaster<'_> {
    /// `pg_ctl stop -m fast` and the postmaster's own exit.
    fn shutdown(mut self) -> (io::Result<Ran>, Ran) {
        let stop = self.pg_ctl_stop("fast");
        if !matches!(&stop, Ok(ran) if ran.succeeded()) {
            let _ = self.pg_ctl_stop("immediate");
        }
        let server = self
            .server
            .take()
            .expect("a Postmaster holds its server until shut down");
        (stop, server.stop(None, Duration::from_secs(20)))
    }

    /// `pg_ctl stop -m <how>`, waiting for the server to exit.
    fn pg_ctl_stop(&self, how: &str) -> io::Result<Ran> {
        let mut cmd = self.pg.tool("pg_ctl");
        cmd.arg("stop")
            .arg("-D")
            .arg(&self.pg.data)
            .args(["-m", how, "-w", "-t", "60"]);
        self.pg.run(&format!("stop-{how}"), &mut cmd, Duration::from_secs(70))
    }
}

impl Drop for Postmaster<'_> {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            // The backends are in sessions of their own (the postmaster's
            // group dies with `server`, they would linger until they notice):
            // the postmaster ends them first.
            let _ = self.pg_ctl_stop("immediate");
            drop(server.stop(None, Duration::from_secs(10)));
        }
    }
}

/// The user's uid and gid.
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: a zeroed passwd is a valid out-parameter (plain integers and
    // null pointers).
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; the strings getpwnam_r
    // stores in `buf` are not used after it.
    let rc = unsafe { libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    (rc == 0 && !found.is_null()).then_some((pw.pw_uid, pw.pw_gid))
}

/// The text after `label` on its line of `text`, trimmed.
fn field<'t>(text: &'t str, label: &str) -> Option<&'t str> {
    text.lines().find_map(|l| l.strip_prefix(label)).map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_fields_are_read_from_its_summary() {
        let summary = "transaction type: <builtin: TPC-B (sort of)>\n\
            number of transactions actually processed: 8000/8000\n\
            number of failed transactions: 0 (0.000%)\n";
        assert_eq!(
            field(summary, "number of transactions actually processed:"),
            Some("8000/8000")
        );
        assert_eq!(field(summary, "number of failed transactions:"), Some("0 (0.000%)"));
        assert_eq!(field(summary, "latency average ="), None);
    }
}
