//! The interposer's costs, measured side by side in one run: each C program
//! runs unpatched and under `libgreenhook.so`, and the table shows both and
//! their ratio.
//!
//! Run with: `cargo bench --bench interpose` (`GREENHOOK_BENCH_QUICK=1` for
//! smaller sizes). Needs `strace` for the syscall row (skipped without it).
//!
//! 1. hooked `read`/`write` on a ready fd vs the raw calls (target ≤ 1.05×);
//!    `open`+`close` and `fopen`+`fclose` of a small file in a thread
//!    (`tests/c/bench_open.c`; no target: the price of opening a FIFO
//!    without holding the hub, one `fcntl` an open);
//! 2. system calls per blocking socketpair round trip between two threads
//!    (target ≤ 8 patched vs 4 unpatched);
//! 3. 10,000 threads × `usleep(10 ms)`: unpatched / patched wall time
//!    (target ≥ 10×);
//! 4. threads created and ended, 300 alive at a time (`thread_churn`), per
//!    thread;
//! 5. pthread synchronisation (`tests/c/bench_sync.c`): condvar ping-pong
//!    main↔thread and thread↔thread, semaphore ping-pong, barrier rounds
//!    (target ≥ 50× faster each; each also beside the unpatched program
//!    pinned to one CPU, where its wake-ups cost least, and patched again
//!    with fibers sharing their thread's TLS, to show what the two
//!    thread-pointer writes of a round trip cost), uncontended mutex and rwlock read
//!    lock+unlock (target ≤ glibc's own cost), and the system calls per
//!    round trip of each (target 0); the condvar and semaphore ping-pongs
//!    again with timed waits (a deadline in the caller's frame; the condvar
//!    also on a `CLOCK_MONOTONIC` condvar), and their system calls; a
//!    spin wait (`tests/c/spin_waits.c`: a turn handed back and forth by
//!    threads that wait reading it in a loop), CPU time per wait against
//!    the same program on one CPU without greenhook; a pipe round trip
//!    beside 4 threads that wait by spinning and yielding
//!    (`tests/c/yield_spinners.c`: `sched_yield`, then `poll` with a zero
//!    timeout), whose waits must not hold back the woken;
//! 6. process-shared objects (`tests/c/pshared_pingpong.c`): a parent and
//!    its forked child take turns through a process-shared mutex and
//!    condvar, and through two semaphores, each process with a second
//!    thread (so a patched wait must let its hub run): the round trip, and
//!    how much slower it is patched (the price of waiting on a waiter
//!    thread, docs/DESIGN.md).
#[path = "../tests/util/mod.rs"]
mod util;

use std::process::Command;

fn quick() -> bool {
    std::env::var_os("GREENHOOK_BENCH_QUICK").is_some()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn stderr_value(stderr: &str, key: &str) -> Option<f64> {
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('=')?.trim().parse().ok())
}

fn rw_ready() -> (f64, f64) {
    let bin = util::compile("bench_rw_ready");
    let n = if quick() { "200000" } else { "2000000" };
    let (mut plain, mut patched) = (Vec::new(), Vec::new());
    // Interleave the two sides so drift on a noisy machine hits both alike.
    for _ in 0..if quick() { 3 } else { 7 } {
        let r = util::run(&bin, &[n], false, &[]);
        plain.push(stderr_value(&r.stderr, "ns_per_pair").expect("unpatched run"));
        let r = util::run(&bin, &[n], true, &[]);
        patched.push(stderr_value(&r.stderr, "ns_per_pair").expect("patched run"));
    }
    (median(plain), median(patched))
}

/// System calls per round trip of the C program `name` in `mode`: the
/// difference between two run lengths under `strace -c -f`, so start-up and
/// teardown cancel out. None without strace.
fn syscalls_per_round(name: &str, mode: &str, preload: bool, (a, b): (u32, u32)) -> Option<f64> {
    let bin = util::compile(name);
    let lib = util::preload_lib();
    let count = |rounds: u32| -> Option<f64> {
        let out = std::env::temp_dir().join(format!(
            "greenhook-strace-{}-{name}-{mode}-{preload}-{rounds}",
            std::process::id()
        ));
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-c", "-o"])
            .arg(&out)
            .arg(&bin)
            .args([mode, &rounds.to_string()]);
        if preload {
            cmd.env("LD_PRELOAD", &lib);
        }
        let status = cmd.output().ok()?.status;
        if !status.success() {
            return None;
        }
        let text = std::fs::read_to_string(&out).ok()?;
        let _ = std::fs::remove_file(&out);
        let total = text.lines().find(|l| l.trim_end().ends_with("total"))?;
        total.split_whitespace().nth(3)?.parse().ok()
    };
    Some((count(b)? - count(a)?) / f64::from(b - a))
}

/// System calls per blocking socketpair round trip.
fn syscalls_per_round_trip(preload: bool) -> Option<f64> {
    let rounds = if quick() { (1000, 3000) } else { (5000, 15000) };
    syscalls_per_round("socketpair_pingpong", "rw", preload, rounds)
}

fn many_sleepers() -> (f64, f64) {
    let bin = util::compile("sleep_threads");
    let args = ["10000", "usleep", "10"];
    let plain = util::run(&bin, &args, false, &[]);
    let patched = util::run(&bin, &args, true, &[]);
    (
        util::time_ms(&plain.stderr).expect("unpatched run") as f64,
        util::time_ms(&patched.stderr).expect("patched run") as f64,
    )
}

/// Threads created and ended, 300 alive at a time (`thread_churn`: each
/// uses TLS, malloc, a key and a `thread_local` destructor): medians of
/// interleaved runs, in µs per thread, unpatched and patched.
fn thread_churn() -> (f64, f64) {
    let bin = util::compile("thread_churn");
    let (nu, np): (u32, u32) = if quick() { (2_000, 20_000) } else { (20_000, 200_000) };
    let (u, p) = interleaved(&bin, &[&nu.to_string(), "300"], &[&np.to_string(), "300"], "time_ms");
    (u * 1000.0 / f64::from(nu), p * 1000.0 / f64::from(np))
}

/// Runs `f` with the calling thread (and so the children it starts) on
/// CPU 0 only, then puts its CPU set back.
fn on_one_cpu<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: cpu_set_t is plain data; the calls read or write the calling
    // thread's own affinity through valid pointers of the right size.
    unsafe {
        let n = std::mem::size_of::<libc::cpu_set_t>();
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, n, &mut old);
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut one);
        libc::sched_setaffinity(0, n, &one);
        let r = f();
        libc::sched_setaffinity(0, n, &old);
        r
    }
}

/// One `bench_sync` ping-pong mode, unpatched on any CPU, unpatched with
/// both threads on one CPU (where a wake-up is cheapest: the fair
/// baseline), patched, and patched with fibers sharing their thread's TLS
/// (`GREENHOOK_TLS=shared`: no thread-pointer write at a switch, which
/// shows what those cost): medians of interleaved runs, in ns per round
/// trip.
fn sync_pingpong(mode: &str) -> [f64; 4] {
    let bin = util::compile("bench_sync");
    let (np, nu) = if quick() {
        ("200000", "20000")
    } else {
        ("2000000", "100000")
    };
    let mut runs: [Vec<f64>; 4] = Default::default();
    for _ in 0..if quick() { 3 } else { 5 } {
        let r = util::run(&bin, &[mode, nu], false, &[]);
        runs[0].push(stderr_value(&r.stderr, "ns").expect("unpatched run"));
        let r = on_one_cpu(|| util::run(&bin, &[mode, nu], false, &[]));
        runs[1].push(stderr_value(&r.stderr, "ns").expect("unpatched run on one CPU"));
        let r = util::run(&bin, &[mode, np], true, &[]);
        runs[2].push(stderr_value(&r.stderr, "ns").expect("patched run"));
        let r = util::run(&bin, &[mode, np], true, &[("GREENHOOK_TLS", "shared")]);
        runs[3].push(stderr_value(&r.stderr, "ns").expect("patched run, shared TLS"));
    }
    runs.map(median)
}

/// A spin wait's cost (`spin_waits turns`: two threads hand a turn back
/// and forth, each waiting in a loop that only reads it): CPU time per
/// wait, unpatched with both threads on one CPU (each wait ends when the
/// kernel's tick preempts the spinner) and patched (when greenhook's
/// preemption tick does): medians of interleaved runs, in ms.
fn spin_wait() -> (f64, f64) {
    let bin = util::compile("spin_waits");
    let per_wait = |r: &util::Run| {
        let cpu = stderr_value(&r.stderr, "cpu_ms").expect("cpu_ms");
        let waits = stderr_value(&r.stderr, "waits").expect("waits");
        cpu / waits.max(1.0)
    };
    let rounds = if quick() { "50" } else { "200" };
    let (mut u, mut p) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        u.push(per_wait(&on_one_cpu(|| {
            util::run(&bin, &["turns", rounds], false, &[])
        })));
        p.push(per_wait(&util::run(&bin, &["turns", rounds], true, &[])));
    }
    (median(u), median(p))
}

/// One `bench_open` mode (`open`, `fopen`): medians of interleaved
/// unpatched and patched runs, in ns per open and close in a thread.
fn open_mode(mode: &str) -> (f64, f64) {
    let bin = util::compile("bench_open");
    let n = if quick() { "20000" } else { "200000" };
    interleaved(&bin, &[mode, n], &[mode, n], "ns")
}

/// One uncontended `bench_sync` mode (`mutex`, `rwlock`): medians of
/// interleaved unpatched and patched runs, in ns per lock+unlock pair.
fn sync_mode(mode: &str) -> (f64, f64) {
    let bin = util::compile("bench_sync");
    let n = if quick() { "2000000" } else { "20000000" };
    interleaved(&bin, &[mode, n], &[mode, n], "ns")
}

/// Medians of interleaved unpatched and patched runs of `bin` (so drift
/// on a noisy machine hits both sides alike) of the value `key` on stderr;
/// each side has its own arguments.
fn interleaved(bin: &std::path::Path, plain_args: &[&str], patched_args: &[&str], key: &str) -> (f64, f64) {
    let (mut plain, mut patched) = (Vec::new(), Vec::new());
    for _ in 0..if quick() { 3 } else { 5 } {
        let r = util::run(bin, plain_args, false, &[]);
        plain.push(stderr_value(&r.stderr, key).expect("unpatched run"));
        let r = util::run(bin, patched_args, true, &[]);
        patched.push(stderr_value(&r.stderr, key).expect("patched run"));
    }
    (median(plain), median(patched))
}

/// System calls per round trip (or lock+unlock) of a `bench_sync` mode
/// under the preload.
fn sync_syscalls(mode: &str) -> Option<f64> {
    syscalls_per_round("bench_sync", mode, true, (100_000, 200_000))
}

/// A pipe round trip beside 4 threads that wait in a loop of `backoff`
/// (`tests/c/yield_spinners.c`): medians of interleaved unpatched and
/// patched runs, in µs.
fn beside_spinners(backoff: &str) -> (f64, f64) {
    let bin = util::compile("yield_spinners");
    let trips = if quick() { "300" } else { "2000" };
    let args = ["4", trips, backoff];
    let (u, p) = interleaved(&bin, &args, &args, "trip_ns");
    (u / 1000.0, p / 1000.0)
}

/// One `pshared_pingpong` mode: medians of interleaved unpatched and
/// patched runs, in µs per round trip between the two processes.
fn pshared_mode(mode: &str) -> (f64, f64) {
    let bin = util::compile("pshared_pingpong");
    let n = if quick() { "2000" } else { "20000" };
    interleaved(&bin, &[mode, n], &[mode, n], "round_trip_us")
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = Command::new("uname")
        .arg("-r")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores, Linux {kernel}")
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks harness=false benches to list
    }
    println!("greenhook interposer benchmark — {}", machine());
    println!(
        "{:<52} {:>12} {:>12} {:>8}",
        "measurement", "unpatched", "patched", "ratio"
    );
    let (u, p) = rw_ready();
    println!(
        "{:<52} {:>9.1} ns {:>9.1} ns {:>7.3}×",
        "write+read on a ready pipe (per pair)",
        u,
        p,
        p / u
    );
    for (mode, label) in [
        ("open", "open+close of a small file, in a thread"),
        ("fopen", "fopen+fclose of a small file, in a thread"),
    ] {
        let (u, p) = open_mode(mode);
        println!("{label:<52} {u:>9.1} ns {p:>9.1} ns {:>7.3}×", p / u);
    }
    match (syscalls_per_round_trip(false), syscalls_per_round_trip(true)) {
        (Some(u), Some(p)) => {
            println!(
                "{:<52} {:>12.2} {:>12.2} {:>7.2}×",
                "syscalls per blocking socketpair round trip",
                u,
                p,
                p / u
            )
        }
        _ => println!(
            "{:<52} {:>12}",
            "syscalls per blocking socketpair round trip", "(no strace)"
        ),
    }
    let (u, p) = many_sleepers();
    println!(
        "{:<52} {:>9.0} ms {:>9.0} ms {:>7.1}× faster",
        "10,000 threads × usleep(10 ms), wall",
        u,
        p,
        u / p
    );
    let (u, p) = thread_churn();
    println!(
        "{:<52} {:>9.2} µs {:>9.2} µs {:>7.1}× faster",
        "pthread_create+exit+join, 300 alive (per thread)",
        u,
        p,
        u / p
    );
    for (mode, label) in [
        ("cond-main", "condvar ping-pong, main ↔ thread (round trip)"),
        ("cond-threads", "condvar ping-pong, thread ↔ thread (round trip)"),
        ("sem-main", "semaphore ping-pong, main ↔ thread (round trip)"),
        ("sem-threads", "semaphore ping-pong, thread ↔ thread"),
        ("barrier", "barrier, 2 threads (per round)"),
        ("cond-timed", "condvar ping-pong, timed waits, thread ↔ thread"),
        ("sem-timed", "semaphore ping-pong, timed waits, thread ↔ thread"),
        ("cond-mono-timed", "condvar ping-pong, CLOCK_MONOTONIC timed waits"),
    ] {
        let [u, u1, p, ps] = sync_pingpong(mode);
        println!("{label:<52} {u:>9.1} ns {p:>9.1} ns {:>7.1}× faster", u / p);
        println!(
            "{:<52} {u1:>9.1} ns {p:>9.1} ns {:>7.1}× faster",
            "  … unpatched with both threads on one CPU",
            u1 / p
        );
        println!(
            "{:<52} {u1:>9.1} ns {ps:>9.1} ns {:>7.1}× faster",
            "  … the same, fibers sharing their thread's TLS",
            u1 / ps
        );
    }
    let (u, p) = spin_wait();
    println!(
        "{:<52} {u:>9.2} ms {p:>9.2} ms {:>7.2}×",
        "spin wait ended by preemption (CPU per wait, 1 CPU)",
        p / u
    );
    for (backoff, label) in [
        ("sched_yield", "pipe round trip beside 4 threads sched_yield-ing"),
        ("poll0", "… beside 4 threads polling with a zero timeout"),
    ] {
        let (u, p) = beside_spinners(backoff);
        println!("{label:<52} {u:>9.1} µs {p:>9.1} µs {:>7.2}×", p / u);
    }
    for (mode, label) in [
        ("mutex", "uncontended mutex lock+unlock, in a thread"),
        ("rwlock", "uncontended rwlock rdlock+unlock, in a thread"),
    ] {
        let (u, p) = sync_mode(mode);
        println!("{label:<52} {u:>9.1} ns {p:>9.1} ns {:>7.3}×", p / u);
    }
    for (mode, label) in [
        ("cond", "process-shared condvar ping-pong, parent ↔ child"),
        ("sem", "process-shared semaphore ping-pong, parent ↔ child"),
    ] {
        let (u, p) = pshared_mode(mode);
        println!("{label:<52} {u:>9.1} µs {p:>9.1} µs {:>7.2}×", p / u);
    }
    for mode in [
        "cond-main",
        "cond-threads",
        "sem-main",
        "sem-threads",
        "barrier",
        "cond-timed",
        "sem-timed",
        "cond-mono-timed",
        "mutex",
        "rwlock",
    ] {
        let unit = if matches!(mode, "mutex" | "rwlock") {
            "lock+unlock"
        } else {
            "round trip"
        };
        match sync_syscalls(mode) {
            Some(n) => println!(
                "{:<52} {:>12} {n:>12.3}",
                format!("syscalls per {mode} {unit}, patched"),
                "-"
            ),
            None => println!("{:<52} {:>12}", format!("syscalls per {mode} {unit}"), "(no strace)"),
        }
    }
}
