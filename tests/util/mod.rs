//! Helpers for greenhook's differential tests.
//!
//! A differential test compiles one C program from `tests/c/<name>.c`, runs
//! it once plainly and once with `LD_PRELOAD=<target>/<profile>/libgreenhook.so`,
//! and requires the same stdout and a successful exit from both runs. The C
//! programs print only deterministic facts on stdout; timings go to stderr as
//! `time_ms=<n>` (whole run) and `<label>.time_ms=<n>` (one wait) lines, which
//! [`time_ms`] and [`named_time_ms`] parse, and the report of their ticker
//! thread (`tests/c/ticker.h`), which [`ticker`] parses.
//!
//! [`within`] gives an in-process test the same guarantee: a hard timeout.
//!
//! Use from an integration test with `mod util;` (from a member crate's
//! tests: `#[path = "../../tests/util/mod.rs"] mod util;`). Only `std` is used.
//!
//! Environment knobs:
//! - `CC`: the C compiler (default `cc`); may contain arguments (`"ccache gcc"`).
//! - `GREENHOOK_TEST_CFLAGS`: extra compiler flags, split on whitespace.
//! - `GREENHOOK_LIB`: use this `libgreenhook.so` instead of the one cargo built.
//! - `GREENHOOK_TEST_TIMEOUT_SECS`: the per-run hard timeout of [`run`] (default 60).

#![allow(dead_code)]

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// The default hard timeout of one run of a C program.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Flags every C test program is compiled with (before `GREENHOOK_TEST_CFLAGS`).
pub const CFLAGS: &[&str] = &["-O1", "-Wall", "-Wextra", "-pthread"];

/// The workspace's root directory, from the package under test: the root
/// package itself, or a member crate below it (`launcher/`), whose tests
/// share these helpers and the C programs.
pub fn workspace_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|dir| dir.join("tests").join("c").is_dir())
        .unwrap_or_else(|| panic!("no tests/c at or above {}", manifest.display()))
        .to_path_buf()
}

/// The directory that holds the C test programs: `<workspace>/tests/c`.
pub fn c_source_dir() -> PathBuf {
    workspace_dir().join("tests").join("c")
}

/// Cargo's target directory (e.g. `<workspace>/target`).
///
/// Taken from `CARGO_TARGET_TMPDIR` (which cargo sets to `<target>/tmp` when it
/// compiles integration tests and benches) when available, otherwise derived
/// from the running test executable (`<target>/<profile>/deps/<exe>`).
pub fn target_dir() -> PathBuf {
    if let Some(tmp) = option_env!("CARGO_TARGET_TMPDIR") {
        if let Some(parent) = Path::new(tmp).parent() {
            return parent.to_path_buf();
        }
    }
    let profile = profile_dir();
    profile.parent().map(Path::to_path_buf).unwrap_or(profile)
}

/// The profile directory of the running test executable (`<target>/debug`,
/// `<target>/release`, `<target>/<triple>/debug`, ...): the parent of the
/// `deps/` directory that holds the executable.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("test executable has a parent directory");
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().expect("deps/ has a parent").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Serialises compilations within one test process (different processes are
/// kept apart by compiling to a unique temporary name and renaming).
static COMPILE_LOCK: Mutex<()> = Mutex::new(());
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Compiles `tests/c/<name>.c` (or the C++ `tests/c/<name>.cc`) into
/// `<target>/ctests/<name>` and returns the binary's path.
///
/// The compiler runs only if the binary is missing or older than the source
/// (or than any `.h` file in `tests/c`); libraries and extra compiler
/// flags come from the source's `// link:` and `// cflags:` lines
/// ([`marked_flags`]). The output is written to a temporary name and
/// renamed into place, so concurrent compilations (test threads or
/// separate test processes) never see a half-written binary. Compiler
/// warnings are echoed to stderr; a failed compilation panics with the
/// compiler's output.
pub fn compile(name: &str) -> PathBuf {
    build(name, &[], name)
}

/// Compiles `tests/c/<name>.c` into a shared library (`-shared -fPIC`),
/// `lib<name>.so` beside the test binaries, as [`compile`] does programs.
pub fn compile_shared(name: &str) -> PathBuf {
    build(name, &["-shared", "-fPIC"], &format!("lib{name}.so"))
}

/// The files `src` names in `#include "…"` lines (a test may include
/// another test's `.c`), as written.
fn quoted_includes(src: &Path) -> Vec<String> {
    std::fs::read_to_string(src)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let name = l.trim().strip_prefix("#include \"")?;
            name.split('"').next().map(str::to_owned)
        })
        .collect()
}

/// [`compile`] and [`compile_shared`]: `tests/c/<name>.c` with `$CC` (or
/// `<name>.cc` with `$CXX`, default `c++`), with `extra` flags, into
/// `<target>/ctests/<out>`.
fn build(name: &str, extra_flags: &[&str], out: &str) -> PathBuf {
    let src_dir = c_source_dir();
    let c = src_dir.join(format!("{name}.c"));
    let cxx = src_dir.join(format!("{name}.cc"));
    let (src, compiler_var, default_compiler) = if c.exists() || !cxx.exists() {
        (c, "CC", "cc")
    } else {
        (cxx, "CXX", "c++")
    };
    let src_time = mtime(&src).unwrap_or_else(|| panic!("C test source {} not found", src.display()));
    let newest_input = std::fs::read_dir(&src_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "h"))
        .chain(quoted_includes(&src).into_iter().map(|f| src_dir.join(f)))
        .filter_map(|p| mtime(&p))
        .fold(src_time, |a, b| a.max(b));

    let out_dir = target_dir().join("ctests");
    std::fs::create_dir_all(&out_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", out_dir.display()));
    let bin = out_dir.join(out);

    let _guard = COMPILE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if mtime(&bin).is_some_and(|t| t >= newest_input) {
        return bin;
    }

    let tmp = out_dir.join(format!(
        ".{out}.tmp.{}.{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let cc = std::env::var(compiler_var)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default_compiler.into());
    let mut cc_words = cc.split_whitespace();
    let program = cc_words.next().expect("CC is not empty");
    let extra = std::env::var("GREENHOOK_TEST_CFLAGS").unwrap_or_default();
    let mut cmd = Command::new(program);
    cmd.args(cc_words)
        .args(CFLAGS)
        .args(extra.split_whitespace())
        .args(extra_flags)
        .args(marked_flags(&src, "// cflags:"))
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .args(marked_flags(&src, "// link:"))
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        panic!(
            "compiling {} failed ({}):\n{cmd:?}\n{stderr}",
            src.display(),
            out.status
        );
    }
    if !stderr.trim().is_empty() {
        eprintln!("warnings compiling {}:\n{stderr}", src.display());
    }
    std::fs::rename(&tmp, &bin).unwrap_or_else(|e| panic!("cannot rename {} to {}: {e}", tmp.display(), bin.display()));
    bin
}

/// The flags a C source asks for on lines of its own that start with
/// `marker`: `// link: -luring` (libraries, given after the source file, as
/// linkers want them) or `// cflags: -mtls-dialect=gnu2` (given before it).
fn marked_flags(src: &Path, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(src).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(marker))
        .flat_map(|flags| flags.split_whitespace().map(String::from))
        .collect()
}

/// The `libgreenhook.so` cargo built for the current profile.
///
/// `cargo build` leaves it at `<target>/<profile>/libgreenhook.so`; `cargo
/// test` builds it only into `<target>/<profile>/deps/`. The newer of the two
/// is returned. `GREENHOOK_LIB` overrides both. Panics with a hint to run
/// `cargo build` if there is none.
pub fn preload_lib() -> PathBuf {
    if let Some(path) = std::env::var_os("GREENHOOK_LIB") {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "GREENHOOK_LIB={} is not a file", path.display());
        return path;
    }
    let profile = profile_dir();
    let candidates = [
        profile.join("libgreenhook.so"),
        profile.join("deps").join("libgreenhook.so"),
    ];
    candidates
        .iter()
        .filter_map(|p| mtime(p).map(|t| (t, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| {
            panic!(
                "libgreenhook.so not found (looked at {} and {}); run `cargo build` with the same \
                 profile (and target) as the tests first, or set GREENHOOK_LIB",
                candidates[0].display(),
                candidates[1].display()
            )
        })
}

/// What one run of a program did.
#[derive(Debug, Clone)]
pub struct Run {
    /// How the process ended.
    pub status: ExitStatus,
    /// Everything it wrote to stdout (lossily decoded as UTF-8).
    pub stdout: String,
    /// Everything it wrote to stderr (lossily decoded as UTF-8).
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl Run {
    /// The exit code, or `None` if a signal ended the process.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The whole-run `time_ms=` value the program printed on stderr.
    pub fn time_ms(&self) -> Option<u64> {
        time_ms(&self.stderr)
    }

    /// A readable report of this run, for panic messages.
    pub fn describe(&self) -> String {
        format!(
            "status: {}\nelapsed: {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            describe_status(&self.status),
            self.elapsed,
            with_newline(&self.stdout),
            with_newline(&self.stderr)
        )
    }
}

fn with_newline(s: &str) -> String {
    if s.is_empty() || s.ends_with('\n') {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

/// "exit code 3" or "killed by signal 11 (SIGSEGV)".
pub fn describe_status(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    match status.signal() {
        Some(sig) => {
            let name = match sig {
                1 => "SIGHUP",
                2 => "SIGINT",
                3 => "SIGQUIT",
                4 => "SIGILL",
                5 => "SIGTRAP",
                6 => "SIGABRT",
                7 => "SIGBUS",
                8 => "SIGFPE",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                13 => "SIGPIPE",
                14 => "SIGALRM (the program's own alarm(): it hung)",
                15 => "SIGTERM",
                _ => "?",
            };
            format!(
                "killed by signal {sig} ({name}){}",
                if status.core_dumped() { ", core dumped" } else { "" }
            )
        }
        None => format!("{status:?}"),
    }
}

/// The hard timeout of [`run`]: `GREENHOOK_TEST_TIMEOUT_SECS` or 60 s.
pub fn default_timeout() -> Duration {
    std::env::var("GREENHOOK_TEST_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// Runs `bin args...` with stdin from /dev/null, collecting stdout and stderr.
///
/// With `preload`, `LD_PRELOAD` is set to [`preload_lib`]; without it,
/// `LD_PRELOAD` is removed from the environment. `env` is applied last (so it
/// can override either). The child is killed after [`default_timeout`], and
/// the call then panics with what the child printed so far: a hang never
/// hangs the test suite.
pub fn run(bin: &Path, args: &[&str], preload: bool, env: &[(&str, &str)]) -> Run {
    run_with_timeout(bin, args, preload, env, default_timeout())
}

/// [`run`] with an explicit hard timeout.
pub fn run_with_timeout(bin: &Path, args: &[&str], preload: bool, env: &[(&str, &str)], timeout: Duration) -> Run {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if preload {
        cmd.env("LD_PRELOAD", preload_lib());
    } else {
        cmd.env_remove("LD_PRELOAD");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = format!(
        "{}{} {}",
        if preload { "LD_PRELOAD=libgreenhook.so " } else { "" },
        bin.display(),
        args.join(" ")
    );

    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot spawn {what}: {e}"));
    let out_buf = Arc::new(Mutex::new(Vec::new()));
    let err_buf = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let readers = [
        spawn_reader(
            child.stdout.take().expect("piped stdout"),
            out_buf.clone(),
            done_tx.clone(),
        ),
        spawn_reader(child.stderr.take().expect("piped stderr"), err_buf.clone(), done_tx),
    ];

    let deadline = start + timeout;
    let mut nap = Duration::from_micros(200);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => panic!("waiting for {what}: {e}"),
        }
        let now = Instant::now();
        if now >= deadline {
            break None;
        }
        thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();

    let Some(status) = status else {
        let _ = child.kill();
        let killed = child.wait();
        collect_readers(readers, &done_rx, Duration::from_secs(2));
        panic!(
            "{what} did not finish within {timeout:?}; killed it ({}).\n--- stdout so far ---\n{}--- stderr so far ---\n{}",
            killed.map(|s| describe_status(&s)).unwrap_or_else(|e| e.to_string()),
            with_newline(&lossy(&out_buf)),
            with_newline(&lossy(&err_buf)),
        );
    };
    // The pipes close when the process (and anything it forked) has exited;
    // a leftover grandchild holding them must not hang us either.
    collect_readers(readers, &done_rx, Duration::from_secs(5));
    Run {
        status,
        stdout: lossy(&out_buf),
        stderr: lossy(&err_buf),
        elapsed,
    }
}

fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    buf: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Sender<()>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => buf
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = done.send(());
    })
}

/// Waits up to `grace` for both readers to reach EOF; detaches them otherwise.
fn collect_readers(readers: [thread::JoinHandle<()>; 2], done: &mpsc::Receiver<()>, grace: Duration) {
    let deadline = Instant::now() + grace;
    let mut finished = 0;
    while finished < readers.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(left) {
            Ok(()) => finished += 1,
            Err(_) => return, // leave the stragglers detached; use what they read so far
        }
    }
    for r in readers {
        let _ = r.join();
    }
}

fn lossy(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

/// Compiles `tests/c/<name>.c`, runs it unpatched and then under
/// `libgreenhook.so`, asserts that both exited with status 0 and printed the
/// same stdout, and returns (unpatched, patched).
pub fn differential(name: &str, args: &[&str]) -> (Run, Run) {
    differential_expect(name, args, 0)
}

/// [`differential`] for programs that are meant to exit with `expected_code`
/// (e.g. `exit_paths exit_from_thread` exits with 3).
pub fn differential_expect(name: &str, args: &[&str], expected_code: i32) -> (Run, Run) {
    differential_with(name, args, expected_code, &[])
}

/// [`differential`] with `env` set for the patched run (a setting of the
/// preload's).
pub fn differential_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Run, Run) {
    differential_with(name, args, 0, env)
}

fn differential_with(name: &str, args: &[&str], expected_code: i32, env: &[(&str, &str)]) -> (Run, Run) {
    let bin = compile(name);
    let cmdline = format!("{name} {}", args.join(" "));
    let plain = run(&bin, args, false, &[]);
    assert_eq!(
        plain.code(),
        Some(expected_code),
        "unpatched run of `{cmdline}` did not exit with {expected_code} (the oracle itself is broken):\n{}",
        plain.describe()
    );
    let patched = run(&bin, args, true, env);
    if patched.code() != Some(expected_code) {
        panic!(
            "run of `{cmdline}` under libgreenhook.so did not exit with {expected_code}:\n{}\n\
             === stdout diff (- unpatched, + patched) ===\n{}",
            patched.describe(),
            line_diff(&plain.stdout, &patched.stdout)
        );
    }
    if plain.stdout != patched.stdout {
        panic!(
            "stdout of `{cmdline}` differs under libgreenhook.so (- unpatched, + patched):\n{}\
             === unpatched stderr ===\n{}=== patched stderr ===\n{}",
            line_diff(&plain.stdout, &patched.stdout),
            with_newline(&plain.stderr),
            with_newline(&patched.stderr)
        );
    }
    (plain, patched)
}

/// The value of the first stderr line that is exactly `time_ms=<n>`.
pub fn time_ms(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("time_ms="))
        .and_then(|v| v.trim().parse().ok())
}

/// What a program's ticker thread (`tests/c/ticker.h`) reported on stderr.
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    /// Its worst lateness: how much longer than asked one sleep took.
    pub late_ms: u64,
    /// How many times it ticked.
    pub ticks: u64,
}

/// The ticker report (`late.time_ms=<n>`, `ticks=<n>`) on `stderr`; panics
/// with the whole of `stderr` if there is none.
pub fn ticker(stderr: &str) -> Ticker {
    let ticks = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("ticks="))
        .and_then(|v| v.trim().parse().ok());
    match (named_time_ms(stderr, "late"), ticks) {
        (Some(late_ms), Some(ticks)) => Ticker { late_ms, ticks },
        _ => panic!("no ticker report on stderr:\n{stderr}"),
    }
}

/// [`differential`] for the programs with a ticker thread: also asserts
/// that the patched ticker was never held up by 100 ms or more (the hub
/// never froze in a call). Returns (unpatched, patched).
pub fn differential_ticking(name: &str, args: &[&str]) -> (Run, Run) {
    let (plain, patched) = differential(name, args);
    let late = ticker(&patched.stderr).late_ms;
    assert!(late < 100, "{name} {}: ticker {late} ms late", args.join(" "));
    (plain, patched)
}

/// The value of the first stderr line `<label>.time_ms=<n>` (one timed wait
/// inside a program, e.g. `named_time_ms(&run.stderr, "recv_so_rcvtimeo")`).
pub fn named_time_ms(stderr: &str, label: &str) -> Option<u64> {
    named_value(stderr, &format!("{label}.time_ms"))
}

/// The value of the first stderr line `<name>=<n>` (e.g. `rss_kib.1000`).
pub fn named_value(stderr: &str, name: &str) -> Option<u64> {
    let prefix = format!("{name}=");
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

/// A line diff of `a` (shown with `-`) against `b` (shown with `+`), with up
/// to three lines of context around each change. Long inputs fall back to
/// reporting the first differing line.
pub fn line_diff(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a == b {
        return "  (identical)\n".to_string();
    }
    const MAX: usize = 2000;
    if a.len() > MAX || b.len() > MAX {
        let i = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        return format!(
            "  (long outputs: {} vs {} lines; first difference at line {})\n- {}\n+ {}\n",
            a.len(),
            b.len(),
            i + 1,
            a.get(i).copied().unwrap_or("<end of output>"),
            b.get(i).copied().unwrap_or("<end of output>")
        );
    }
    // Longest common subsequence table, filled from the end.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if a[i] == b[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    // Walk it into (tag, line) ops: ' ' same, '-' only in a, '+' only in b.
    let mut ops: Vec<(char, &str)> = Vec::with_capacity(n + m);
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, (t, _))| *t != ' ')
        .map(|(k, _)| k)
        .collect();
    let mut out = String::new();
    let mut last_shown: Option<usize> = None;
    for (k, (tag, text)) in ops.iter().enumerate() {
        let near = changed.iter().any(|&c| c.abs_diff(k) <= CONTEXT);
        if !near {
            continue;
        }
        if last_shown.is_some_and(|l| k > l + 1) || (last_shown.is_none() && k > 0) {
            out.push_str("  ...\n");
        }
        let _ = writeln!(out, "{tag} {text}");
        last_shown = Some(k);
    }
    if last_shown.is_some_and(|l| l + 1 < ops.len()) {
        out.push_str("  ...\n");
    }
    out
}

/// Runs `f` on a fresh OS thread named `name` and returns its result,
/// re-raising its panic; fails the test if `f` has not returned after
/// `timeout` (the thread is left behind): a hang never hangs the test suite.
pub fn within<T: Send + 'static>(timeout: Duration, name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        })
        .expect("spawn a test thread");
    match rx.recv_timeout(timeout) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{name}: no result after {timeout:?}: it hangs"),
    }
}
