//! `cargo run --release -p ld_preload_demo`: runs C demo programs unpatched
//! and under `LD_PRELOAD=libgreenhook.so`, and prints one side-by-side table
//! (time, peak RSS of the child from `wait4`, a verdict per row) plus the
//! stall timeline as an SVG file.

mod child;
mod load;
mod svg;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime};

use child::Outcome;

const USAGE: &str = "\
usage: ld_preload_demo [--demo sleep|stall|cpu|echo] [--quick] [--procs N] [--help]

Runs each C demo unpatched and under LD_PRELOAD=libgreenhook.so and prints one table.
  --demo D    run only demo D (default: all four)
                sleep  N threads x usleep(10 ms), N = 1k, 10k, 100k (64 KiB stacks)
                stall  an unhooked raw syscall vs a hooked nanosleep next to a ticker
                cpu    a CPU-bound thread next to a ticker, preempted and not; the stall monitor's report
                echo   thread-per-connection echo server under 1,000 connections,
                       vs a hand-written epoll server, and N processes with SO_REUSEPORT
  --quick     smaller sizes and shorter runs (N = 1k, 10k; 500 ms stalls; 1 s echo runs)
  --procs N   patched echo server processes sharing the port for the scaling row
              (default 2; 1 skips the row)
  --help      this text

Environment: CC (C compiler, default cc), GREENHOOK_LIB (use this libgreenhook.so
instead of building it with `cargo build --release --lib`).";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Demo {
    Sleep,
    Stall,
    Cpu,
    Echo,
}

struct Config {
    demos: Vec<Demo>,
    quick: bool,
    procs: usize,
}

fn parse_args(args: &[String]) -> Result<Option<Config>, String> {
    let mut cfg = Config {
        demos: vec![Demo::Sleep, Demo::Stall, Demo::Cpu, Demo::Echo],
        quick: false,
        procs: 2,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs {what}"))
        };
        match name {
            "-h" | "--help" => return Ok(None),
            "--quick" if inline.is_none() => cfg.quick = true,
            "--demo" => {
                cfg.demos = vec![match value("a demo name")?.as_str() {
                    "sleep" => Demo::Sleep,
                    "stall" => Demo::Stall,
                    "cpu" => Demo::Cpu,
                    "echo" => Demo::Echo,
                    other => return Err(format!("unknown demo '{other}'")),
                }]
            }
            "--procs" => {
                let v = value("a number")?;
                cfg.procs = match v.parse::<usize>() {
                    Ok(n @ 1..=64) => n,
                    _ => return Err(format!("--procs wants a number from 1 to 64, not '{v}'")),
                }
            }
            _ => return Err(format!("unknown option '{arg}'")),
        }
    }
    Ok(Some(cfg))
}

/// Paths of everything the demo runs.
struct Env {
    lib: PathBuf,
    bin_dir: PathBuf,
    manifest_dir: PathBuf,
}

impl Env {
    fn bin(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// A command for a demo binary, unpatched or under the preload.
    fn cmd(&self, name: &str, args: &[&str], patched: bool) -> Command {
        let mut c = Command::new(self.bin(name));
        c.args(args);
        for var in [
            "LD_PRELOAD",
            "GREENHOOK_THREADS",
            "GREENHOOK_STALL_MS",
            "GREENHOOK_STATS",
        ] {
            c.env_remove(var);
        }
        if patched {
            c.env("LD_PRELOAD", &self.lib);
        }
        c
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ld_preload_demo lives in the workspace")
        .to_path_buf()
}

/// The cargo target directory this binary was built into (`<target>/<profile>/ld_preload_demo`).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.is_absolute() {
            dir
        } else {
            workspace_root().join(dir)
        };
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn build_library(target: &Path) -> Result<PathBuf, String> {
    if let Some(lib) = std::env::var_os("GREENHOOK_LIB") {
        return Ok(PathBuf::from(lib));
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building libgreenhook.so: cargo build --release --lib");
    let status = Command::new(cargo)
        .args(["build", "--release", "--lib"])
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", target)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --release --lib failed ({status})"));
    }
    let lib = target.join("release").join("libgreenhook.so");
    if !lib.exists() {
        return Err(format!("{} not found after the build", lib.display()));
    }
    Ok(lib)
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn compile(src: &Path, out: &Path) -> Result<(), String> {
    if let (Some(s), Some(o)) = (mtime(src), mtime(out)) {
        if o >= s {
            return Ok(());
        }
    }
    let cc = std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    let mut words = cc.split_whitespace();
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let r = Command::new(words.next().expect("CC is not empty"))
        .args(words)
        .args(["-O2", "-Wall", "-Wextra", "-pthread"])
        .arg(src)
        .arg("-o")
        .arg(&tmp)
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if !r.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "compiling {} failed:\n{}",
            src.display(),
            String::from_utf8_lossy(&r.stderr)
        ));
    }
    std::fs::rename(&tmp, out).map_err(|e| format!("rename to {}: {e}", out.display()))
}

fn raise_nofile() -> u64 {
    // SAFETY: an all-zero rlimit is valid; getrlimit/setrlimit get valid pointers.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            if rl.rlim_cur < rl.rlim_max {
                rl.rlim_cur = rl.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
            }
            return rl.rlim_cur;
        }
    }
    0
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let glibc = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy();
    format!("{model}, {cores} cores, Linux {}, glibc {glibc}", kernel.trim())
}

fn read_sysctl(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `1234567` → `"1,234,567"`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn mib(kib: i64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// One table row.
struct Row {
    demo: &'static str,
    what: String,
    unpatched: String,
    patched: String,
    verdict: String,
}

struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    fn row(&mut self, demo: &'static str, what: String, unpatched: String, patched: String, verdict: String) {
        eprintln!("  {what}: unpatched {unpatched} | patched {patched}");
        self.rows.push(Row {
            demo,
            what,
            unpatched,
            patched,
            verdict,
        });
    }
}

fn run_or_fail(cmd: &mut Command, timeout: Duration) -> Outcome {
    child::run(cmd, timeout).unwrap_or_else(|e| Outcome {
        code: Some(-1),
        stderr: format!("cannot start: {e}"),
        ..Outcome::default()
    })
}

// ---------------------------------------------------------------- sleep

enum SleepResult {
    Ok { ms: i64, rss: i64 },
    CreateFailed { at: u64, err: String },
    Failed(String),
}

fn errno_name(msg: &str) -> String {
    match msg.trim() {
        "Resource temporarily unavailable" => "EAGAIN".into(),
        "Cannot allocate memory" => "ENOMEM".into(),
        "Invalid argument" => "EINVAL".into(),
        other => other.into(),
    }
}

fn sleep_run(env: &Env, n: u64, patched: bool) -> SleepResult {
    let ns = n.to_string();
    let out = run_or_fail(
        &mut env.cmd("sleep_threads", &[&ns, "usleep", "10", "64"], patched),
        Duration::from_secs(120),
    );
    let line = out.stdout.lines().next().unwrap_or("");
    if out.code == Some(0) && line == format!("ok {n}") {
        return SleepResult::Ok {
            ms: out.stderr_value("time_ms").unwrap_or(-1),
            rss: out.maxrss_kib,
        };
    }
    if let Some(rest) = line.strip_prefix("pthread_create failed at ") {
        if let Some((at, err)) = rest.split_once(": ") {
            return SleepResult::CreateFailed {
                at: at.parse().unwrap_or(0),
                err: errno_name(err),
            };
        }
    }
    SleepResult::Failed(out.failure())
}

fn sleep_cell(r: &SleepResult) -> String {
    match r {
        SleepResult::Ok { ms, rss } => format!("{ms} ms, {}", mib(*rss)),
        SleepResult::CreateFailed { at, err } => format!("fails at thread {}: {err}", thousands(*at)),
        SleepResult::Failed(e) => format!("failed: {e}"),
    }
}

fn demo_sleep(env: &Env, quick: bool, rep: &mut Report) {
    let sizes: &[u64] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    for &n in sizes {
        eprintln!("sleep: {} threads", thousands(n));
        let u = sleep_run(env, n, false);
        let p = sleep_run(env, n, true);
        let verdict = match (&u, &p) {
            (SleepResult::Ok { ms: um, rss: ur }, SleepResult::Ok { ms: pm, rss: pr }) => {
                let speed = *um as f64 / (*pm).max(1) as f64;
                let mem = *ur as f64 / (*pr).max(1) as f64;
                format!(
                    "greenhook {:.1}× {}, {:.1}× {} memory",
                    if speed >= 1.0 { speed } else { 1.0 / speed },
                    if speed >= 1.0 { "faster" } else { "slower" },
                    if mem >= 1.0 { mem } else { 1.0 / mem },
                    if mem >= 1.0 { "less" } else { "more" }
                )
            }
            (SleepResult::CreateFailed { .. }, SleepResult::Ok { .. }) => format!(
                "OS threads hit vm.max_map_count = {} (2 mappings per thread); fibers need no mapping each",
                read_sysctl("/proc/sys/vm/max_map_count")
            ),
            (_, SleepResult::Ok { .. }) => "unpatched run failed; greenhook ok".into(),
            _ => "greenhook FAILED".into(),
        };
        rep.row(
            "sleep",
            format!("{} threads × usleep(10 ms), 64 KiB stacks", thousands(n)),
            sleep_cell(&u),
            sleep_cell(&p),
            verdict,
        );
    }
}

// ---------------------------------------------------------------- stall / cpu

struct Ticks {
    out: Outcome,
    ticks: Vec<f64>,
    late: Option<i64>,
}

fn stall_run(env: &Env, mode: &str, ms: u64, patched: bool, extra_env: &[(&str, &str)]) -> Ticks {
    let mss = ms.to_string();
    let mut cmd = env.cmd("stall_demo", &[mode, &mss], patched);
    cmd.envs(extra_env.iter().copied());
    let out = run_or_fail(&mut cmd, Duration::from_secs(30));
    let ticks = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("tick_ms=")?.trim().parse().ok())
        .collect();
    let late = if out.code == Some(0) {
        out.stderr_value("late.time_ms")
    } else {
        None
    };
    Ticks { out, ticks, late }
}

fn late_cell(t: &Ticks) -> String {
    match t.late {
        Some(l) => format!("ticker max {l} ms late, {}", mib(t.out.maxrss_kib)),
        None => format!("failed: {}", t.out.failure()),
    }
}

fn stalled(t: &Ticks, ms: u64) -> bool {
    t.late.is_some_and(|l| l as u64 > ms / 2)
}

fn demo_stall(env: &Env, ms: u64, rep: &mut Report) {
    for mode in ["raw", "hooked"] {
        eprintln!("stall: {mode} {ms}");
        let u = stall_run(env, mode, ms, false, &[]);
        let p = stall_run(env, mode, ms, true, &[]);
        let verdict = match (mode, stalled(&u, ms), stalled(&p, ms)) {
            ("raw", false, true) => {
                "stall: a raw syscall() is invisible to symbol hooks and blocks the whole hub (gevent's classic)"
            }
            ("hooked", false, false) => "no stall: the hooked nanosleep() yields to the hub",
            (_, false, false) => "no stall either way",
            (_, _, _) => "unexpected: see the numbers",
        };
        let what = if mode == "raw" {
            format!("syscall(SYS_nanosleep, {ms} ms) in one thread, ticker in another")
        } else {
            format!("nanosleep({ms} ms) in one thread, ticker in another")
        };
        rep.row("stall", what, late_cell(&u), late_cell(&p), verdict.into());
    }
}

fn demo_cpu(env: &Env, ms: u64, rep: &mut Report) -> Option<PathBuf> {
    eprintln!("cpu: {ms}");
    const OFF: (&str, &str) = ("GREENHOOK_PREEMPT", "0");
    let u = stall_run(env, "cpu", ms, false, &[]);
    let p = stall_run(env, "cpu", ms, true, &[]);
    let n = stall_run(env, "cpu", ms, true, &[OFF]);
    let m = stall_run(env, "cpu", ms, true, &[("GREENHOOK_STALL_MS", "50"), OFF]);
    let verdict = match (stalled(&u, ms), stalled(&p, ms)) {
        (false, false) => "no stall: the loop calls nothing, so a CPU-time signal preempts it every 10-16 ms",
        (false, true) => "stall: the loop was not preempted (unexpected on x86-64)",
        _ => "unexpected: see the numbers",
    };
    rep.row(
        "cpu",
        format!("busy loop {ms} ms in thread 'spin', ticker in another"),
        late_cell(&u),
        late_cell(&p),
        verdict.into(),
    );
    let verdict = match stalled(&n, ms) {
        true => "stall: N:1 without preemption; as for a computation inside libc, which is never preempted",
        false => "no stall measured (unexpected without preemption)",
    };
    rep.row(
        "cpu",
        "same, GREENHOOK_PREEMPT=0".into(),
        "—".into(),
        late_cell(&n),
        verdict.into(),
    );
    let first = m.out.stderr.lines().find(|l| l.starts_with("greenhook: stall:"));
    let over = m.out.stderr.lines().find(|l| l.starts_with("greenhook: stall over:"));
    let frame = m
        .out
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("greenhook: stall:"))
        .nth(1);
    let verdict = match first {
        Some(_) => "the monitor names the CPU-bound fiber (first report line below)".to_string(),
        None => "NO stall report".to_string(),
    };
    rep.row(
        "cpu",
        "same, GREENHOOK_PREEMPT=0 GREENHOOK_STALL_MS=50".into(),
        "—".into(),
        late_cell(&m),
        verdict,
    );
    let mut note = String::from("stall monitor (cpu demo, GREENHOOK_PREEMPT=0 GREENHOOK_STALL_MS=50), first report:\n");
    for l in [first, frame, over].into_iter().flatten() {
        let _ = writeln!(note, "    {l}");
    }
    rep.notes.push(note);

    let path = env.manifest_dir.join("stall-timeline.svg");
    let lanes = [
        svg::Lane {
            label: "unpatched (OS threads)",
            ticks: &u.ticks,
            color: "#2a7",
        },
        svg::Lane {
            label: "patched (greenhook)",
            ticks: &p.ticks,
            color: "#27c",
        },
        svg::Lane {
            label: "patched, PREEMPT=0",
            ticks: &n.ticks,
            color: "#c33",
        },
    ];
    let title = format!("stall_demo cpu {ms}: ticker thread, one dot per tick");
    let text = svg::timeline(&title, &lanes, (250.0, 250.0 + ms as f64));
    match std::fs::write(&path, text) {
        Ok(()) => Some(path),
        Err(e) => {
            rep.notes.push(format!("cannot write {}: {e}", path.display()));
            None
        }
    }
}

// ---------------------------------------------------------------- echo

const CONNS: usize = 1_000;
const MSG: usize = 64;

struct EchoResult {
    load: Result<load::LoadResult, String>,
    rss_kib: i64,
    cpu: Duration,
}

/// Starts `procs` copies of `server` (sharing the port with SO_REUSEPORT when
/// more than one), runs the load client, stops the servers.
fn echo_run(env: &Env, server: &str, patched: bool, procs: usize, dur: Duration) -> EchoResult {
    let fail = |e: String| EchoResult {
        load: Err(e),
        rss_kib: 0,
        cpu: Duration::ZERO,
    };
    let mut servers = Vec::new();
    let reuse: &[&str] = if procs > 1 { &["reuseport"] } else { &[] };
    let mut port = 0u16;
    for _ in 0..procs {
        let ps = port.to_string();
        let args: Vec<&str> = std::iter::once(ps.as_str()).chain(reuse.iter().copied()).collect();
        match child::Server::start(&mut env.cmd(server, &args, patched), Duration::from_secs(10)) {
            Ok(s) => {
                port = s.port();
                servers.push(s);
            }
            Err(e) => return fail(e),
        }
    }
    let load = load::run(port, CONNS, MSG, dur, Duration::from_secs(20));
    let mut rss_kib = 0;
    let mut cpu = Duration::ZERO;
    let mut died = None;
    for s in &mut servers {
        let o = s.stop();
        rss_kib += o.maxrss_kib;
        cpu += o.cpu;
        if o.code.is_some() || o.signal.is_some() {
            died = Some(o.failure());
        }
    }
    let load = match (load, died) {
        (Ok(l), None) => Ok(l),
        (Ok(_), Some(d)) => Err(format!("server died: {d}")),
        (Err(e), Some(d)) => Err(format!("{e}; server died: {d}")),
        (Err(e), None) => Err(e),
    };
    EchoResult { load, rss_kib, cpu }
}

fn echo_cell(r: &EchoResult) -> String {
    match &r.load {
        Ok(l) => {
            let errs = if l.errors > 0 {
                format!(", {} conn errors", l.errors)
            } else {
                String::new()
            };
            format!(
                "{} req/s, p99 {:.1} ms, {}{errs}",
                thousands(l.rate().round() as u64),
                l.p99.as_secs_f64() * 1e3,
                mib(r.rss_kib)
            )
        }
        Err(e) => format!("failed: {e}"),
    }
}

fn rate(r: &EchoResult) -> Option<f64> {
    r.load.as_ref().ok().map(load::LoadResult::rate)
}

fn demo_echo(env: &Env, quick: bool, procs: usize, rep: &mut Report) {
    let dur = Duration::from_secs(if quick { 1 } else { 3 });
    let label = format!(
        "{} conns × {MSG} B round trips, {} s",
        thousands(CONNS as u64),
        dur.as_secs()
    );
    eprintln!("echo: thread server unpatched / patched, epoll server");
    let u = echo_run(env, "echo_threads", false, 1, dur);
    let p = echo_run(env, "echo_threads", true, 1, dur);
    let e = echo_run(env, "echo_epoll", false, 1, dur);
    let verdict = match (rate(&u), rate(&p)) {
        (Some(ur), Some(pr)) => {
            let mem = u.rss_kib as f64 / p.rss_kib.max(1) as f64;
            format!(
                "greenhook {:.2}× the requests/s of OS threads, on 1 core instead of {}, {:.1}× {} memory",
                pr / ur,
                std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
                if mem >= 1.0 { mem } else { 1.0 / mem },
                if mem >= 1.0 { "less" } else { "more" }
            )
        }
        _ => "a run failed: see the cell".into(),
    };
    rep.row(
        "echo",
        format!("thread per connection, {label}"),
        echo_cell(&u),
        echo_cell(&p),
        verdict,
    );
    let verdict = match (rate(&e), rate(&p)) {
        (Some(er), Some(pr)) => format!(
            "unmodified thread server under greenhook reaches {:.0}% of a hand-written epoll loop",
            pr / er * 100.0
        ),
        _ => "a run failed: see the cell".into(),
    };
    rep.row(
        "echo",
        format!("hand-written epoll server (1 thread), {label}"),
        echo_cell(&e),
        "— (reference, not patched)".into(),
        verdict,
    );
    rep.notes.push(format!(
        "echo server CPU time (user+sys) over the run: threads unpatched {:.2} s, patched {:.2} s, epoll {:.2} s",
        u.cpu.as_secs_f64(),
        p.cpu.as_secs_f64(),
        e.cpu.as_secs_f64()
    ));
    if procs > 1 {
        eprintln!("echo: {procs} processes with SO_REUSEPORT");
        let u2 = echo_run(env, "echo_threads", false, procs, dur);
        let p2 = echo_run(env, "echo_threads", true, procs, dur);
        let verdict = match (rate(&p2), rate(&p)) {
            (Some(r2), Some(r1)) => {
                let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
                let why = if r2 / r1 < 1.2 && procs >= cores {
                    format!(": no gain here, {procs} servers + the load client compete for {cores} cores")
                } else {
                    String::new()
                };
                format!("{procs} patched processes = {:.2}× one patched process{why}", r2 / r1)
            }
            _ => "a run failed: see the cell".into(),
        };
        rep.row(
            "echo",
            format!("thread per connection, {procs} processes, SO_REUSEPORT, {label}"),
            echo_cell(&u2),
            echo_cell(&p2),
            verdict,
        );
        rep.notes.push(format!(
            "echo with {procs} processes: RSS is the sum over the processes; server CPU unpatched {:.2} s, patched {:.2} s",
            u2.cpu.as_secs_f64(),
            p2.cpu.as_secs_f64()
        ));
    }
}

// ---------------------------------------------------------------- table

fn print_table(rep: &Report) {
    let header = [
        "demo",
        "measurement",
        "unpatched (OS threads)",
        "patched (LD_PRELOAD greenhook)",
        "verdict",
    ];
    let cells: Vec<[&str; 5]> = rep
        .rows
        .iter()
        .map(|r| {
            [
                r.demo,
                r.what.as_str(),
                r.unpatched.as_str(),
                r.patched.as_str(),
                r.verdict.as_str(),
            ]
        })
        .collect();
    let mut w = header.map(|h| h.chars().count());
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let line = |c: &[&str; 5]| {
        let mut s = String::from("|");
        for (i, cell) in c.iter().enumerate() {
            let pad = w[i] - cell.chars().count();
            let _ = write!(s, " {cell}{} |", " ".repeat(pad));
        }
        s
    };
    println!("{}", line(&header));
    let mut sep = String::from("|");
    for wi in w {
        let _ = write!(sep, "{}|", "-".repeat(wi + 2));
    }
    println!("{sep}");
    for c in &cells {
        println!("{}", line(c));
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match parse_args(&args) {
        Ok(Some(c)) => c,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ld_preload_demo: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let nofile = raise_nofile();
    let target = target_dir();
    let lib = match build_library(&target) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ld_preload_demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = target.join("ld_preload_demo");
    if let Err(e) = std::fs::create_dir_all(&bin_dir) {
        eprintln!("ld_preload_demo: cannot create {}: {e}", bin_dir.display());
        return ExitCode::FAILURE;
    }
    let tests_c = workspace_root().join("tests").join("c");
    let own_c = manifest_dir.join("c");
    let sources = [
        (tests_c.join("sleep_threads.c"), "sleep_threads"),
        (tests_c.join("stall_demo.c"), "stall_demo"),
        (own_c.join("echo_threads.c"), "echo_threads"),
        (own_c.join("echo_epoll.c"), "echo_epoll"),
    ];
    for (src, name) in &sources {
        if let Err(e) = compile(src, &bin_dir.join(name)) {
            eprintln!("ld_preload_demo: {e}");
            return ExitCode::FAILURE;
        }
    }
    let env = Env {
        lib,
        bin_dir,
        manifest_dir,
    };
    let stall_ms = if cfg.quick { 500 } else { 1000 };
    let mut rep = Report {
        rows: Vec::new(),
        notes: Vec::new(),
    };
    let mut svg_path = None;
    for demo in &cfg.demos {
        match demo {
            Demo::Sleep => demo_sleep(&env, cfg.quick, &mut rep),
            Demo::Stall => demo_stall(&env, stall_ms, &mut rep),
            Demo::Cpu => svg_path = demo_cpu(&env, stall_ms, &mut rep),
            Demo::Echo => demo_echo(&env, cfg.quick, cfg.procs, &mut rep),
        }
    }
    println!();
    println!("machine: {}", machine());
    println!(
        "library: {}{}; RLIMIT_NOFILE {nofile}; memory = peak RSS of the child (wait4 ru_maxrss)",
        env.lib.display(),
        if cfg.quick { "; --quick sizes" } else { "" }
    );
    println!();
    print_table(&rep);
    println!();
    for n in &rep.notes {
        println!("{}", n.trim_end());
    }
    if let Some(p) = svg_path {
        println!("stall timeline (cpu demo): {}", p.display());
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}
