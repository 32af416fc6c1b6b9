//! The programs of the suite, one file each. A case runs its program once
//! unpatched and once under greenhook, and reduces each run to a [`Side`]:
//! did it work, and its deterministic output (what must be equal).

mod alloc;
mod bind;
mod cancel;
mod cargo;
mod erlang;
mod gc;
mod go;
mod java;
mod mariadb;
mod memcached;
mod nginx;
mod node;
mod postgres;
mod python_http;
mod python_scripts;
mod redis;
mod workers;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use crate::apt::Need;
use crate::proc::{self, Ran, Scratch, Server};

/// With or without greenhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Unpatched,
    Patched,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Unpatched => "unpatched",
            Mode::Patched => "patched",
        }
    }
}

/// One run, reduced.
#[derive(Debug, Clone)]
pub struct Side {
    /// The program did its job (status and its own checks).
    pub ok: bool,
    /// For the table: what happened, in a few words.
    pub brief: String,
    /// What must be equal between the two runs (deterministic facts only).
    pub output: String,
    /// For the report under the table when something failed: stderr and such.
    pub log: String,
}

impl Side {
    /// A run whose status and stdout are the whole story: ok when it exited
    /// 0, and then `brief` is what the table says.
    pub fn from_ran(ran: &Ran, brief: String) -> Side {
        let ok = ran.succeeded();
        Side {
            ok,
            brief: if ok { brief } else { ran.brief() },
            output: format!("{}\n{}", ran.status, ran.stdout),
            log: log_of(ran),
        }
    }

    /// The suite itself could not run the program (not installed, cannot
    /// compile, cannot start).
    pub fn broken(why: String) -> Side {
        Side {
            ok: false,
            brief: why.clone(),
            output: String::new(),
            log: why,
        }
    }
}

/// The output and the tail of stderr of `ran`, for the report.
pub fn log_of(ran: &Ran) -> String {
    let tail: Vec<&str> = ran.stderr.lines().rev().take(25).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!(
        "{} after {:.1} s\n--- stdout\n{}--- stderr (last {} lines)\n{}\n",
        ran.status,
        ran.elapsed.as_secs_f64(),
        ran.stdout,
        tail.len(),
        tail.join("\n")
    )
}

/// `dir/label`, made if missing: where one step of a case keeps its output.
pub fn step_dir(dir: &Path, label: &str) -> std::io::Result<PathBuf> {
    let dir = dir.join(label);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Runs `cmd` with its output in `dir/label` ([`step_dir`]).
pub fn run_step(dir: &Path, label: &str, cmd: &mut Command, timeout: Duration) -> std::io::Result<Ran> {
    proc::run(cmd, &step_dir(dir, label)?, timeout)
}

/// A client's status, or that it did not run.
pub fn status_of(ran: &std::io::Result<Ran>) -> String {
    match ran {
        Ok(ran) => ran.status.to_string(),
        Err(_) => "did not run".into(),
    }
}

/// A client's outcome in a few words, or why it did not run.
pub fn brief_of(ran: &std::io::Result<Ran>) -> String {
    match ran {
        Ok(ran) => ran.brief(),
        Err(e) => format!("did not run: {e}"),
    }
}

/// One program of the suite.
pub struct Case {
    /// The name to select it by.
    pub name: &'static str,
    /// The table's "program" column.
    pub program: &'static str,
    /// In the quick part (run by CI): only programs that pass today.
    pub quick: bool,
    /// The Debian packages it needs.
    pub needs: &'static [Need],
    /// Runs it in one mode.
    pub run: fn(&Ctx, Mode) -> Side,
}

/// Every case, in the table's order.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::from(redis::CASES);
    cases.push(memcached::CASE);
    cases.push(postgres::CASE);
    cases.push(mariadb::CASE);
    cases.push(nginx::CASE);
    cases.push(bind::CASE);
    cases.extend(alloc::CASES);
    cases.extend([node::CASE, java::CASE, erlang::CASE, go::CASE, python_http::CASE]);
    cases.extend(python_scripts::CASES);
    cases.extend(workers::CASES);
    cases.extend(cancel::CASES);
    cases.push(gc::CASE);
    cases.push(cargo::CASE);
    cases
}

/// Runs `interpreter FILE` (`file` relative to `compat/`) in a directory of
/// its own: ok when it exits 0, and the table then shows its last line of
/// output and its time (the python scripts, the java tour).
pub fn run_script(
    ctx: &Ctx,
    mode: Mode,
    label: &str,
    interpreter: impl AsRef<OsStr>,
    file: &str,
    timeout: Duration,
) -> Side {
    let dir = match ctx.dir(label, mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let mut cmd = ctx.command(mode, &[], interpreter);
    cmd.arg(arg(&ctx.file(file))).current_dir(&dir);
    run_to_exit(&mut cmd, &dir, timeout)
}

/// Runs `cmd` in `dir`: ok when it exits 0, and the table then shows its
/// last line of output and its time.
pub fn run_to_exit(cmd: &mut Command, dir: &Path, timeout: Duration) -> Side {
    match proc::run(cmd, dir, timeout) {
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

/// What the cases share: where things are, and how to run in each mode.
pub struct Ctx {
    /// The `greenhook` launcher (it finds libgreenhook.so itself).
    pub greenhook: PathBuf,
    /// `compat/` in the source tree.
    pub source: PathBuf,
    pub scratch: Scratch,
    compiled: Mutex<HashMap<String, PathBuf>>,
}

/// Variables that would change how a program runs under greenhook, cleared
/// for every run (`GREENHOOK_LIB` is kept: it chooses the library).
const CLEARED: &[&str] = &[
    "LD_PRELOAD",
    "GREENHOOK_STACK_SIZE",
    "GREENHOOK_STALL_MS",
    "GREENHOOK_STATS",
    "GREENHOOK_THREADS",
    "GREENHOOK_POOL_SIZE",
];

impl Ctx {
    pub fn new(greenhook: PathBuf, source: PathBuf, scratch: Scratch) -> Ctx {
        Ctx {
            greenhook,
            source,
            scratch,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    /// `program` as is (unpatched) or as `greenhook run OPTIONS -- program`,
    /// with a clean environment as far as greenhook is concerned.
    pub fn command(&self, mode: Mode, options: &[&str], program: impl AsRef<OsStr>) -> Command {
        self.command_with(&self.greenhook, mode, options, program)
    }

    /// [`Ctx::command`] through the launcher at `launcher` (a copy another
    /// user can run).
    pub fn command_with(&self, launcher: &Path, mode: Mode, options: &[&str], program: impl AsRef<OsStr>) -> Command {
        let mut cmd = match mode {
            Mode::Unpatched => Command::new(program),
            Mode::Patched => {
                let mut cmd = Command::new(launcher);
                cmd.arg("run").args(options).arg("--").arg(program);
                cmd
            }
        };
        for var in CLEARED {
            cmd.env_remove(var);
        }
        cmd
    }

    /// The `libgreenhook.so` the launcher preloads, found as it finds it
    /// (`GREENHOOK_LIB`, else next to the launcher, else in `../lib/`).
    pub fn library(&self) -> Option<PathBuf> {
        if let Some(lib) = std::env::var_os("GREENHOOK_LIB").filter(|l| !l.is_empty()) {
            return Some(lib.into());
        }
        let dir = self.greenhook.parent()?;
        [dir.join("libgreenhook.so"), dir.join("../lib/libgreenhook.so")]
            .into_iter()
            .find(|p| p.is_file())
    }

    /// A client or helper program: always unpatched.
    pub fn plain(&self, program: impl AsRef<OsStr>) -> Command {
        self.command(Mode::Unpatched, &[], program)
    }

    /// A file of the suite: `compat/<rel>`.
    pub fn file(&self, rel: &str) -> PathBuf {
        self.source.join(rel)
    }

    /// A fresh directory for one run.
    pub fn dir(&self, label: &str, mode: Mode) -> Result<PathBuf, Side> {
        self.scratch
            .subdir(&format!("{label}-{}", mode.label()))
            .map_err(|e| Side::broken(format!("cannot make a scratch directory: {e}")))
    }

    /// `compat/c/<name>.c`, compiled once per suite run.
    pub fn compile(&self, name: &str) -> Result<PathBuf, Side> {
        self.compile_with(name, &[])
    }

    /// [`Ctx::compile`], linked with `libs` (`-lgc`).
    pub fn compile_with(&self, name: &str, libs: &[&str]) -> Result<PathBuf, Side> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(exe) = compiled.get(name) {
            return Ok(exe.clone());
        }
        let source = self.file(&format!("c/{name}.c"));
        let exe = self.scratch.path().join(name);
        let dir = self.dir(&format!("cc-{name}"), Mode::Unpatched)?;
        let mut cmd = Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()));
        cmd.args(["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"])
            .arg(&source)
            .arg("-o")
            .arg(&exe)
            .args(libs);
        let ran = proc::run(&mut cmd, &dir, Duration::from_secs(120))
            .map_err(|e| Side::broken(format!("cannot compile {}: {e}", source.display())))?;
        if !ran.succeeded() {
            return Err(Side::broken(format!(
                "cannot compile {}:\n{}",
                source.display(),
                ran.stderr
            )));
        }
        compiled.insert(name.to_string(), exe.clone());
        Ok(exe)
    }
}

/// A server under test and the unpatched client that exercised it.
pub struct Exchange {
    pub served: Ran,
    pub client: Ran,
}

impl Exchange {
    /// Starts `server(port)` in `mode` on a free port, runs the unpatched
    /// `client(port)` against it, then stops the server: with `stop`, or
    /// (`None`) by waiting for it to exit when the client told it to.
    pub fn run(
        ctx: &Ctx,
        mode: Mode,
        label: &str,
        server: impl FnOnce(u16) -> Command,
        client: impl FnOnce(u16) -> Command,
        stop: Option<i32>,
    ) -> Result<Exchange, Side> {
        let dir = ctx.dir(label, mode)?;
        let port = proc::free_port().map_err(|e| Side::broken(format!("no free port: {e}")))?;
        let started = Server::start(label, &mut server(port), &dir, port, Duration::from_secs(20));
        let running = started.map_err(|ran| Side::from_ran(&ran, String::new()))?;
        let client_dir = dir.join("client");
        let client = std::fs::create_dir_all(&client_dir)
            .and_then(|()| proc::run(&mut client(port), &client_dir, Duration::from_secs(120)));
        let served = running.stop(stop, Duration::from_secs(20));
        let client = client.map_err(|e| Side::broken(format!("the client did not run: {e}")))?;
        Ok(Exchange { served, client })
    }

    /// Ok when both exited 0 (then `brief` is what the table says); the
    /// output compared is both statuses and stdouts.
    pub fn side(&self, brief: String) -> Side {
        let (served, client) = (&self.served, &self.client);
        let ok = client.succeeded() && served.succeeded();
        Side {
            ok,
            brief: if ok {
                brief
            } else if !served.succeeded() {
                format!("server {}", served.brief())
            } else {
                format!("client {}", client.brief())
            },
            output: format!(
                "client: {}{}\nserver: {}{}\n",
                client.stdout, client.status, served.stdout, served.status
            ),
            log: format!("server: {}client: {}", log_of(served), log_of(client)),
        }
    }
}

/// `path` as a string argument (paths here are ours and UTF-8).
pub fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
