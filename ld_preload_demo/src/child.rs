//! Running child processes with a hard timeout and collecting their peak RSS
//! through `wait4(2)`'s `rusage`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How a reaped child ended, with what it printed.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Exit status, if it exited normally.
    pub code: Option<i32>,
    /// Terminating signal, if a signal ended it.
    pub signal: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// Peak resident set size of the child, in KiB (`ru_maxrss`).
    pub maxrss_kib: i64,
    /// User plus system CPU time of the child.
    pub cpu: Duration,
    /// True when we killed it because it overran its timeout.
    pub timed_out: bool,
}

impl Outcome {
    /// The value of the last `key=<number>` line on stderr.
    pub fn stderr_value(&self, key: &str) -> Option<i64> {
        let prefix = format!("{key}=");
        self.stderr
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
    }

    /// A short description of an abnormal end, for error cells.
    pub fn failure(&self) -> String {
        if self.timed_out {
            "timed out".into()
        } else if let Some(s) = self.signal {
            format!("killed by signal {s}")
        } else {
            let last = self.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            format!("exit {}: {}", self.code.unwrap_or(-1), last.trim())
        }
    }
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Reaps `pid`, blocking if `block`; `None` if it has not exited yet.
fn reap(pid: libc::pid_t, block: bool) -> Option<(libc::c_int, libc::rusage)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes; `pid` is our own
        // child, spawned by us and not reaped by anyone else.
        let r = unsafe { libc::wait4(pid, &mut status, if block { 0 } else { libc::WNOHANG }, &mut usage) };
        if r == pid {
            return Some((status, usage));
        }
        if r == 0 {
            return None;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // ECHILD: nothing left to reap (should not happen); report as gone.
            return Some((status, usage));
        }
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

fn fill(out: &mut Outcome, status: libc::c_int, usage: &libc::rusage) {
    if libc::WIFEXITED(status) {
        out.code = Some(libc::WEXITSTATUS(status));
    } else if libc::WIFSIGNALED(status) {
        out.signal = Some(libc::WTERMSIG(status));
    }
    out.maxrss_kib = usage.ru_maxrss;
    out.cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
}

fn kill(pid: libc::pid_t) {
    // SAFETY: plain system call on our own, not yet reaped, child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Runs `cmd` to completion (stdin closed, stdout and stderr captured),
/// killing it after `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> std::io::Result<Outcome> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let out_t = drain(child.stdout.take().expect("piped stdout"));
    let err_t = drain(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + timeout;
    let mut out = Outcome::default();
    let (status, usage) = loop {
        if let Some(r) = reap(pid, false) {
            break r;
        }
        if Instant::now() >= deadline {
            out.timed_out = true;
            kill(pid);
            break reap(pid, true).expect("blocking wait4");
        }
        thread::sleep(Duration::from_millis(2));
    };
    fill(&mut out, status, &usage);
    out.stdout = out_t.join().unwrap_or_default();
    out.stderr = err_t.join().unwrap_or_default();
    Ok(out)
}

/// A server child: running until [`Server::stop`].
pub struct Server {
    child: Child,
    port: u16,
    err_t: Option<JoinHandle<String>>,
    reaped: bool,
}

impl Server {
    /// Starts `cmd` and waits (at most `timeout`) for its `port=<n>` line on stdout.
    pub fn start(cmd: &mut Command, timeout: Duration) -> Result<Server, String> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start server: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let err_t = Some(drain(child.stderr.take().expect("piped stderr")));
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            for _ in lines {} // keep draining until the server exits
        });
        let mut server = Server {
            child,
            port: 0,
            err_t,
            reaped: false,
        };
        match rx.recv_timeout(timeout) {
            Ok(line) => match line.strip_prefix("port=").and_then(|p| p.trim().parse().ok()) {
                Some(port) => {
                    server.port = port;
                    Ok(server)
                }
                None => Err(format!("server said '{line}' instead of port=<n>")),
            },
            Err(_) => {
                let out = server.stop();
                Err(format!("server did not start: {}", out.failure()))
            }
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server and reaps it: its peak RSS and CPU time are in the result.
    pub fn stop(&mut self) -> Outcome {
        let mut out = Outcome::default();
        if self.reaped {
            return out;
        }
        let pid = self.child.id() as libc::pid_t;
        if let Some((status, usage)) = reap(pid, false) {
            fill(&mut out, status, &usage); // it died by itself
        } else {
            kill(pid);
            let (status, usage) = reap(pid, true).expect("blocking wait4");
            fill(&mut out, status, &usage);
            out.signal = None; // our own SIGKILL is not a failure
        }
        self.reaped = true;
        out.stderr = self.err_t.take().and_then(|t| t.join().ok()).unwrap_or_default();
        out
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
