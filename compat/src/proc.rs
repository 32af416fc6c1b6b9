//! Running programs with a hard timeout: each in its own process group, so
//! that a hang, a daemonized child or a grandchild holding a pipe is killed
//! with it and never keeps the suite (or CI) waiting.

use std::fmt;
use std::fs::File;
use std::io::{self, Write as _};
use std::net::TcpStream;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// It was still running at its deadline and was killed.
    TimedOut(Duration),
}

impl Status {
    fn from_exit(status: ExitStatus) -> Status {
        match (status.code(), status.signal()) {
            (Some(code), _) => Status::Exited(code),
            (None, Some(sig)) => Status::Signaled(sig),
            (None, None) => Status::Exited(-1),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Exited(code) => write!(f, "exit {code}"),
            Status::Signaled(sig) => write!(f, "killed by {}", signal_name(*sig)),
            Status::TimedOut(after) => write!(f, "HUNG: killed after {} s", after.as_secs()),
        }
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// One finished run.
#[derive(Debug)]
pub struct Ran {
    pub status: Status,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Ran {
    /// `exit 0`, nothing else.
    pub fn succeeded(&self) -> bool {
        self.status == Status::Exited(0)
    }

    /// The status, and for a failure the line of stderr that says why
    /// (a Rust panic, a FATAL message, an error), for the table.
    pub fn brief(&self) -> String {
        match why(&self.stderr) {
            Some(line) if !self.succeeded() => format!("{}: {line}", self.status),
            _ => self.status.to_string(),
        }
    }
}

/// The line of `stderr` that best says why a program failed: a Rust panic's
/// location and message, or the first line that looks like an error.
pub fn why(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    if let Some(i) = lines.iter().position(|l| l.contains("panicked at")) {
        let at = &lines[i][lines[i].find("panicked at").unwrap_or(0)..];
        // std's own files: "/rustc/<commit>/library/std/…" says no more than "std/…".
        let at = match (at.find("/rustc/"), at.find("/library/")) {
            (Some(start), Some(lib)) if start < lib => format!("{}{}", &at[..start], &at[lib + "/library/".len()..]),
            _ => at.to_string(),
        };
        let message = lines.get(i + 1).filter(|m| !m.is_empty() && !m.contains("panicked"));
        return Some(match message {
            Some(m) => format!("{}: {m}", at.trim_end_matches(':')),
            None => at.trim_end_matches(':').to_string(),
        });
    }
    const MARKS: &[&str] = &[
        "FATAL",
        "fatal",
        "Assertion",
        "error",
        "Error",
        "ERROR",
        "Aborted",
        "failed",
        "FAILED",
    ];
    lines
        .iter()
        .find(|l| MARKS.iter().any(|m| l.contains(m)))
        .map(|l| l.chars().take(160).collect())
}

/// A directory for one suite run's files, removed when dropped.
pub struct Scratch {
    dir: PathBuf,
    next: AtomicU32,
}

impl Scratch {
    pub fn new() -> io::Result<Scratch> {
        static SEQUENCE: AtomicU32 = AtomicU32::new(0);
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("greenhook-compat-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch {
            dir,
            next: AtomicU32::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A new, empty subdirectory named after `label`.
    pub fn subdir(&self, label: &str) -> io::Result<PathBuf> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("{n:03}-{label}"));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A child running in its own process group, its output going to files.
struct Group {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

impl Group {
    fn spawn(cmd: &mut Command, dir: &Path, input: Option<&[u8]>) -> io::Result<Group> {
        let out = dir.join("stdout");
        let err = dir.join("stderr");
        cmd.stdout(File::create(&out)?)
            .stderr(File::create(&err)?)
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .process_group(0);
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {:?}: {e}", cmd.get_program())))?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            // A child that exits without reading its input is its own business.
            let _ = stdin.write_all(data);
        }
        Ok(Group {
            child,
            out,
            err,
            started,
        })
    }

    /// Signals the whole group (the child's pid is its group id).
    fn kill(&self, sig: i32) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: killpg takes plain integers; the group is ours (made by
        // process_group(0) at spawn), and ESRCH when it is gone is harmless.
        unsafe { libc::killpg(pgid, sig) };
    }

    /// Waits until the child exits or `deadline`; then kills what is left of
    /// its group and collects the output.
    fn finish(mut self, deadline: Instant) -> io::Result<Ran> {
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break Status::from_exit(status);
            }
            if Instant::now() >= deadline {
                self.kill(libc::SIGKILL);
                self.child.wait()?;
                break Status::TimedOut(self.started.elapsed());
            }
            thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        // Leftovers (a daemonized child, a grandchild) go with the program.
        self.kill(libc::SIGKILL);
        Ok(Ran {
            status,
            stdout: read_lossy(&self.out),
            stderr: read_lossy(&self.err),
            elapsed,
        })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

fn read_lossy(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// Runs `cmd` to completion (its files in `dir`), killed with its whole
/// process group if it runs longer than `timeout`.
pub fn run(cmd: &mut Command, dir: &Path, timeout: Duration) -> io::Result<Ran> {
    run_with_input(cmd, dir, None, timeout)
}

/// [`run`], with `input` written to its stdin.
pub fn run_with_input(cmd: &mut Command, dir: &Path, input: Option<&[u8]>, timeout: Duration) -> io::Result<Ran> {
    Group::spawn(cmd, dir, input)?.finish(Instant::now() + timeout)
}

/// A server program under test, killed with its group if dropped unstopped.
pub struct Server {
    group: Group,
    name: String,
}

impl Server {
    /// Starts `cmd` and waits (at most `timeout`) until it accepts TCP
    /// connections on 127.0.0.1:`port`. A server that exits first is an
    /// error carrying its status and stderr.
    pub fn start(name: &str, cmd: &mut Command, dir: &Path, port: u16, timeout: Duration) -> Result<Server, Ran> {
        let ready = || TcpStream::connect(("127.0.0.1", port)).is_ok();
        Server::start_when(
            name,
            cmd,
            dir,
            ready,
            &format!("accept connections on port {port}"),
            timeout,
        )
    }

    /// Starts `cmd` and waits (at most `timeout`) until `ready()` says it
    /// is ready (`readiness` names the condition for the error message).
    pub fn start_when(
        name: &str,
        cmd: &mut Command,
        dir: &Path,
        mut ready: impl FnMut() -> bool,
        readiness: &str,
        timeout: Duration,
    ) -> Result<Server, Ran> {
        let group = match Group::spawn(cmd, dir, None) {
            Ok(g) => g,
            Err(e) => return Err(not_started(e)),
        };
        let mut server = Server {
            group,
            name: name.to_string(),
        };
        let deadline = Instant::now() + timeout;
        loop {
            match server.group.child.try_wait() {
                Ok(Some(_)) | Err(_) => {
                    let Server { group, .. } = server;
                    return Err(group.finish(Instant::now()).unwrap_or_else(not_started));
                }
                Ok(None) => {}
            }
            if ready() {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                let Server { group, name } = server;
                let mut ran = group.finish(Instant::now()).unwrap_or_else(not_started);
                ran.status = Status::TimedOut(timeout);
                ran.stderr = format!("{name} did not {readiness} within {timeout:?}\n{}", ran.stderr);
                return Err(ran);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `sig` (if any) to the server alone and waits at most `timeout`
    /// for it to exit.
    pub fn stop(self, sig: Option<i32>, timeout: Duration) -> Ran {
        if let Some(sig) = sig {
            // SAFETY: kill takes plain integers; the pid is our unreaped child.
            unsafe { libc::kill(self.group.child.id() as libc::pid_t, sig) };
        }
        let name = self.name;
        self.group
            .finish(Instant::now() + timeout)
            .unwrap_or_else(|e| not_started(io::Error::new(e.kind(), format!("waiting for {name}: {e}"))))
    }
    /// The server's pid: its process group's id too.
    pub fn pid(&self) -> u32 {
        self.group.child.id()
    }

    /// [`Server::stop`], and the processes of the server's group still
    /// alive once the server itself had exited, before they are killed
    /// with it: a server whose children end before it leaves none.
    pub fn stop_alone(self, sig: Option<i32>, timeout: Duration) -> (Ran, Vec<i32>) {
        let pid = self.group.child.id() as libc::pid_t;
        if let Some(sig) = sig {
            // SAFETY: kill takes plain integers; the pid is our unreaped child.
            unsafe { libc::kill(pid, sig) };
        }
        let deadline = Instant::now() + timeout;
        while !exited(pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        let survivors = group_members(pid);
        let left = deadline.saturating_duration_since(Instant::now());
        (self.stop(None, left), survivors)
    }
}

/// Our child `pid` has exited (it is left unreaped: its pid, and so its
/// group's id, is not reused yet).
fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writing; WNOWAIT leaves the child to be
    // reaped by its `Child`.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled `info` (si_pid stays 0 when nothing exited).
    rc != 0 || unsafe { info.si_pid() } != 0
}

/// The live processes (not zombies) of process group `pgid`, its leader
/// excepted, from /proc.
pub fn group_members(pgid: libc::pid_t) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != pgid)
        .filter(|pid| {
            // The fields after the command's closing parenthesis: state, ppid, pgrp.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or("", |(_, f)| f)
                .split_whitespace()
                .collect();
            matches!(fields[..], [state, _, pgrp, ..] if state != "Z" && state != "X" && pgrp.parse() == Ok(pgid))
        })
        .collect();
    members.sort_unstable();
    members
}

fn not_started(e: io::Error) -> Ran {
    Ran {
        status: Status::Exited(-1),
        stdout: String::new(),
        stderr: format!("error: {e}\n"),
        elapsed: Duration::ZERO,
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_is_killed_with_its_children() {
        let scratch = Scratch::new().unwrap();
        let dir = scratch.subdir("hang").unwrap();
        let pidfile = dir.join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let ran = run(
            Command::new("sh").args(["-c", &script]),
            &dir,
            Duration::from_millis(300),
        )
        .unwrap();
        assert!(matches!(ran.status, Status::TimedOut(_)), "{ran:?}");
        assert!(ran.brief().starts_with("HUNG"), "{}", ran.brief());
        let grandchild: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        thread::sleep(Duration::from_millis(50));
        // Killed: gone, or a zombie nobody reaped yet (state Z).
        let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or_default().split_whitespace().next();
        let alive = !matches!(state, None | Some("Z" | "X"));
        assert!(!alive, "the grandchild {grandchild} survived its group's kill");
    }

    #[test]
    fn a_server_that_exits_before_its_child_leaves_a_survivor() {
        let scratch = Scratch::new().unwrap();
        let dir = scratch.subdir("survivor").unwrap();
        let pidfile = dir.join("pid");
        // Exits on SIGTERM; its child does not. The trap comes before the
        // pid file, which the test waits for before it sends SIGTERM.
        let script = format!(
            "trap 'exit 0' TERM; sleep 30 & echo $! > {}; while :; do sleep 0.05; done",
            pidfile.display()
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        let server = Server::start_when("sh", &mut cmd, &dir, || true, "start", Duration::from_secs(5)).unwrap();
        while !std::fs::read_to_string(&pidfile).is_ok_and(|pid| pid.ends_with('\n')) {
            thread::sleep(Duration::from_millis(5));
        }
        let (ran, survivors) = server.stop_alone(Some(libc::SIGTERM), Duration::from_secs(5));
        assert!(ran.succeeded(), "{ran:?}");
        let sleeper: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert_eq!(survivors, [sleeper]);
        // Killed with the group once counted.
        thread::sleep(Duration::from_millis(50));
        assert!(!survivor_alive(sleeper));
    }

    fn survivor_alive(pid: i32) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or_default().split_whitespace().next();
        !matches!(state, None | Some("Z" | "X"))
    }

    #[test]
    fn status_and_output_are_collected() {
        let scratch = Scratch::new().unwrap();
        let dir = scratch.subdir("exit").unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "read x; echo out $x; echo 'oops: FATAL thing' >&2; exit 3"]);
        let ran = run_with_input(&mut cmd, &dir, Some(b"in\n"), Duration::from_secs(10)).unwrap();
        assert_eq!(ran.status, Status::Exited(3));
        assert_eq!(ran.stdout, "out in\n");
        assert_eq!(ran.brief(), "exit 3: oops: FATAL thing");
    }

    #[test]
    fn a_panic_is_named_by_location_and_message() {
        let stderr = "noise\nthread '<unnamed>' (3289) panicked at hub/src/park.rs:70:27:\nRefCell already borrowed\nstack backtrace:\n";
        assert_eq!(
            why(stderr).as_deref(),
            Some("panicked at hub/src/park.rs:70:27: RefCell already borrowed")
        );
        let no_message = "panicked at hub/src/park.rs:70:27:\n\nthread panicked while processing panic. aborting.\n";
        assert_eq!(why(no_message).as_deref(), Some("panicked at hub/src/park.rs:70:27"));
        let in_std = "thread 'x' panicked at /rustc/5980761/library/std/src/thread/local.rs:479:25:\ncannot access\n";
        assert_eq!(
            why(in_std).as_deref(),
            Some("panicked at std/src/thread/local.rs:479:25: cannot access")
        );
    }
}
