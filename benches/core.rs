//! # greenhook core benchmark
//!
//! Measures greenhook's core costs **side by side** with a baseline in one
//! process run, and prints one table (our number, the baseline's number, the
//! ratio, the target and whether it is met), preceded by the machine it ran on:
//!
//! 1. **Yield round trip** between two fibers (A yields, B runs, B yields, A
//!    runs again) against a raw `corosensei::Coroutine` resume + suspend round
//!    trip on a 1 MiB mmap'd stack with a guard page (the layout of
//!    corosensei's `DefaultStack`; that type itself is behind corosensei's
//!    `default-stack` feature, which this workspace leaves off). Two rows:
//!    fibers sharing their thread's TLS (target ≤ 4×) and fibers with TLS of
//!    their own, the default (a thread-pointer write each way; target ≤ 6×).
//!    A note gives the same round trip once thread CPU clocks are counted.
//! 2. **Spawn + join** of one fiber on a pooled stack (the pool is warmed up
//!    first), with TLS of its own (the default), against `std::thread::spawn`
//!    and `join`. Target: fibers ≥ 300× faster. Notes under the table give the
//!    same with shared TLS, and the fiber crate's part alone: `Fiber::new` on
//!    a pooled stack plus its drop, never run.
//! 3. **Blocking handoff**: a 4-byte ping-pong over a Unix socketpair between
//!    two fibers (non-blocking fds, `greenhook::io::wait_readable` on
//!    `EAGAIN`) against two OS threads on blocking fds. No target.
//! 4. **RSS per idle fiber** (fibers asleep in `greenhook::sleep`, `VmRSS`
//!    delta / N) against RSS per idle OS thread (parked on a barrier, default
//!    std stack), for fibers sharing their thread's TLS (target ≤ 4.5 KiB)
//!    and with TLS of their own (target ≤ 8 KiB). `VmRSS` counts user pages
//!    only: a thread's kernel stack and task struct are not in it.
//! 5. **Max live fibers**: a million sleeping fibers with TLS of their own
//!    alive at once, with the mapping count and RSS, against the OS-thread
//!    ceiling that `vm.max_map_count` implies (two mappings per thread
//!    stack). Threads are not actually exhausted here.
//! 6. **Thread churn**: `tests/c/thread_churn.c` under the preload creates
//!    and ends 1,000,000 pthreads (fibers with TLS of their own), 300 alive
//!    at a time, each using what a thread's exit must clean up; its RSS
//!    after 100k and after 1M threads must be the same (no leak per ended
//!    fiber).
//!
//! Timing rows are medians of several repetitions, ours and the baseline's
//! interleaved so that machine noise hits both alike; the spread is printed
//! under the table.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench core                          # full sizes, ~1 minute
//! GREENHOOK_BENCH_QUICK=1 cargo bench --bench core  # smoke run, a few seconds
//! cargo bench --bench core -- yield                 # only the rows whose name has "yield"
//! ```

use std::cell::Cell;
use std::hint::black_box;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, CoroutineResult, Yielder};

#[path = "../tests/util/mod.rs"]
mod util;

/// Spawns a fiber with TLS of its own, or sharing its thread's.
fn spawn_tls<T: 'static>(shared: bool, f: impl FnOnce() -> T + 'static) -> greenhook::JoinHandle<T> {
    greenhook::Builder::new()
        .shared_tls(shared)
        .spawn(f)
        .expect("spawn a fiber")
}

/// How big each measurement is; `GREENHOOK_BENCH_QUICK=1` shrinks everything.
struct Sizes {
    /// Repetitions of each timing row (the median is reported).
    reps: usize,
    /// Fiber yield round trips per repetition.
    yields: u64,
    /// Raw coroutine resume + suspend round trips per repetition.
    coro_trips: u64,
    /// Fiber spawn + join pairs per repetition.
    fiber_spawns: u64,
    /// Thread spawn + join pairs per repetition.
    thread_spawns: u64,
    /// Socketpair round trips between fibers per repetition.
    fiber_pings: u32,
    /// Socketpair round trips between threads per repetition.
    thread_pings: u32,
    /// Idle fibers for the RSS row.
    idle_fibers: usize,
    /// Idle threads for the RSS row.
    idle_threads: usize,
    /// Fibers kept alive at once for the max-live row.
    max_fibers: usize,
    /// Threads created and ended by the churn row.
    churn: usize,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                reps: 3,
                yields: 100_000,
                coro_trips: 1_000_000,
                fiber_spawns: 20_000,
                thread_spawns: 50,
                fiber_pings: 5_000,
                thread_pings: 2_000,
                idle_fibers: 10_000,
                idle_threads: 200,
                max_fibers: 100_000,
                churn: 100_000,
            }
        } else {
            Sizes {
                reps: 7,
                yields: 1_000_000,
                coro_trips: 10_000_000,
                fiber_spawns: 200_000,
                thread_spawns: 500,
                fiber_pings: 50_000,
                thread_pings: 10_000,
                idle_fibers: 100_000,
                idle_threads: 2_000,
                max_fibers: 1_000_000,
                churn: 1_000_000,
            }
        }
    }
}

/// Whether a row met its target.
#[derive(Clone, Copy)]
enum Verdict {
    Met,
    Missed,
    /// Reported without a target.
    Info,
}

impl Verdict {
    fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Met
        } else {
            Verdict::Missed
        }
    }

    fn label(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::Info => "-",
        }
    }
}

/// One line of the result table.
struct Row {
    what: String,
    ours: String,
    baseline: String,
    ratio: String,
    target: String,
    verdict: Verdict,
}

/// Medians (and spread) of interleaved samples, per operation.
struct Samples {
    ours: Vec<f64>,
    base: Vec<f64>,
}

impl Samples {
    /// Runs `ours` and `base` `reps` times each, alternating, after one
    /// untimed warm-up of each. Both closures return a cost per operation.
    fn interleaved(reps: usize, mut ours: impl FnMut() -> f64, mut base: impl FnMut() -> f64) -> Samples {
        ours();
        base();
        let mut s = Samples {
            ours: Vec::with_capacity(reps),
            base: Vec::with_capacity(reps),
        };
        for _ in 0..reps {
            s.ours.push(ours());
            s.base.push(base());
        }
        s
    }

    fn medians(&self) -> (f64, f64) {
        (median(&self.ours), median(&self.base))
    }

    /// "min / median / max" of both sides, scaled and labelled with `unit`.
    fn spread(&self, scale: f64, unit: &str) -> String {
        let one = |v: &[f64]| {
            let min = v.iter().copied().fold(f64::INFINITY, f64::min) * scale;
            let max = v.iter().copied().fold(0.0, f64::max) * scale;
            format!("{min:.2} / {:.2} / {max:.2} {unit}", median(v) * scale)
        };
        format!("ours {}, baseline {}", one(&self.ours), one(&self.base))
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Nanoseconds per operation.
fn per_op(elapsed: Duration, ops: u64) -> f64 {
    elapsed.as_secs_f64() * 1e9 / ops as f64
}

/// "3.9× slower" / "412× faster": how our cost compares with the baseline's.
fn speed_ratio(ours: f64, base: f64) -> String {
    if ours >= base {
        format!("{:.2}× slower", ours / base)
    } else {
        format!("{:.1}× faster", base / ours)
    }
}

/// One benchmark: measures, adds its detail lines to `notes`, returns its row.
type Bench = fn(&Sizes, &mut Vec<String>) -> Row;

fn main() {
    let quick = std::env::var("GREENHOOK_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let sz = Sizes::new(quick);
    print_machine(quick);

    let benches: [(&str, Bench); 8] = [
        ("yield round trip", bench_yield),
        ("yield round trip, own TLS", bench_yield_tls),
        ("spawn + join", bench_spawn),
        ("socketpair ping-pong", bench_pingpong),
        ("idle RSS", bench_idle_rss),
        ("idle RSS, own TLS", bench_idle_rss_tls),
        ("max live fibers", bench_max_live),
        ("thread churn", bench_churn),
    ];
    // `cargo bench` passes `--bench`; any other argument filters by name.
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let benches: Vec<_> = benches
        .into_iter()
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
        .collect();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (i, (name, bench)) in benches.iter().enumerate() {
        eprintln!("[{}/{}] {name} ...", i + 1, benches.len());
        let t0 = Instant::now();
        rows.push(bench(&sz, &mut notes));
        eprintln!("      done in {:.1} s", t0.elapsed().as_secs_f64());
    }

    println!();
    print_table(&rows);
    println!();
    for n in &notes {
        println!("  {n}");
    }
}

// ---------------------------------------------------------------------------
// The machine

fn print_machine(quick: bool) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown", |(_, v)| v.trim());
    let processors = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
    let online = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    println!(
        "greenhook core benchmark{}",
        if quick { " (QUICK: reduced sizes)" } else { "" }
    );
    println!("  cpu:    {model}");
    println!("  cores:  {processors} in /proc/cpuinfo, {online} available to this process");
    println!("  kernel: {}", uname());
    println!(
        "  fiber stacks: {} KiB each, guards by {}",
        fiber::default_stack_size() / 1024,
        fiber_guard_mode()
    );
}

/// The guard mechanism, decided when the first stack is carved.
fn fiber_guard_mode() -> &'static str {
    drop(fiber::StackPool::leak().take(fiber::default_stack_size()));
    fiber::stack::guard_mode()
}

/// `uname -srvm`.
fn uname() -> String {
    // SAFETY: utsname is plain old data; all-zero bytes are a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

fn print_table(rows: &[Row]) {
    let head = ["measurement", "greenhook", "baseline", "ratio", "target", "verdict"];
    let cells: Vec<[&str; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.what.as_str(),
                r.ours.as_str(),
                r.baseline.as_str(),
                r.ratio.as_str(),
                r.target.as_str(),
                r.verdict.label(),
            ]
        })
        .collect();
    let mut w = head.map(|h| h.chars().count());
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let line = |c: &[&str; 6]| {
        let cols: Vec<String> = c.iter().zip(w).map(|(s, w)| format!("{s:<w$}")).collect();
        println!("| {} |", cols.join(" | "));
    };
    line(&head);
    let rule: Vec<String> = w.iter().map(|&w| "-".repeat(w)).collect();
    println!("|-{}-|", rule.join("-|-"));
    for c in &cells {
        line(c);
    }
}

// ---------------------------------------------------------------------------
// 1. Yield round trip

/// A stack laid out like corosensei's `DefaultStack`: one `mmap` with a
/// `PROT_NONE` guard page at the low end, unmapped on drop.
struct MmapStack {
    top: usize,
    len: usize,
}

impl MmapStack {
    fn new(size: usize) -> std::io::Result<MmapStack> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let size = size.div_ceil(page) * page;
        let len = size + page;
        // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = MmapStack {
            top: p as usize + len,
            len,
        };
        // SAFETY: everything above the guard page lies inside the mapping made above.
        if unsafe {
            libc::mprotect(
                (p as usize + page) as *mut libc::c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }
}

impl Drop for MmapStack {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` and nothing uses it any more
        // (the coroutine that owned this stack has finished).
        unsafe { libc::munmap((self.top - self.len) as *mut libc::c_void, self.len) };
    }
}

// SAFETY: `[limit, base)` is a mapping owned by this value, both ends page
// aligned (so aligned as corosensei requires); its lowest page is a PROT_NONE
// guard and the rest is readable and writable, exactly as in corosensei's
// DefaultStack, so an overflow faults instead of corrupting memory.
unsafe impl Stack for MmapStack {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.top).expect("stack top is non-null")
    }
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.top - self.len).expect("stack limit is non-null")
    }
}

/// Nanoseconds per A→B→A round trip: two fibers yield to each other `n` times.
fn fiber_yield_round_trip(n: u64, shared: bool) -> f64 {
    let body = move || {
        for _ in 0..n {
            greenhook::yield_now();
        }
    };
    let a = spawn_tls(shared, body);
    let b = spawn_tls(shared, body);
    let t0 = Instant::now();
    a.join().unwrap();
    let el = t0.elapsed();
    b.join().unwrap();
    per_op(el, n)
}

type RawCo = Coroutine<(), (), (), MmapStack>;

/// Nanoseconds per corosensei resume + suspend round trip, each resume
/// made by `resume` (which the compiler inlines into the timed loop unless
/// it says otherwise).
fn coro_trips(n: u64, mut resume: impl FnMut(&mut RawCo)) -> f64 {
    let stack = MmapStack::new(1024 * 1024).expect("mmap a coroutine stack");
    let mut co = Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
        for _ in 0..n {
            y.suspend(());
        }
    });
    // The first resume starts the coroutine: keep it out of the timing.
    assert!(matches!(co.resume(()), CoroutineResult::Yield(())));
    let t0 = Instant::now();
    for _ in 1..n {
        resume(&mut co);
    }
    let el = t0.elapsed();
    assert!(matches!(co.resume(()), CoroutineResult::Return(())));
    per_op(el, n - 1)
}

/// Nanoseconds per raw corosensei resume + suspend round trip.
fn coro_round_trip(n: u64) -> f64 {
    coro_trips(n, |co| {
        black_box(co.resume(()));
    })
}

/// Nanoseconds per round trip of the same corosensei pair, but with the
/// resume in an out-of-line function and no scheduler at all: what the
/// call structure alone would cost, and why greenhook inlines the whole
/// two-fiber hand-over into `yield_now`'s caller.
fn coro_out_of_line_round_trip(n: u64) -> f64 {
    #[inline(never)]
    fn resume_once(co: &mut RawCo) {
        black_box(co.resume(()));
    }
    coro_trips(n, resume_once)
}

fn bench_yield(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    let n = sz.yields;
    let s = Samples::interleaved(
        sz.reps,
        || fiber_yield_round_trip(sz.yields, true),
        || coro_round_trip(sz.coro_trips),
    );
    let (ours, base) = s.medians();
    notes.push(format!(
        "1. yield round trip (min / median / max): {}",
        s.spread(1.0, "ns")
    ));
    let f = Samples::interleaved(
        sz.reps,
        || coro_out_of_line_round_trip(sz.coro_trips),
        || coro_round_trip(sz.coro_trips),
    );
    let (floor, base2) = f.medians();
    notes.push(format!(
        "1. for scale, the same corosensei round trip resumed from an out-of-line function, no \
         scheduler: {floor:.1} ns vs {base2:.1} ns inlined ({:.2}×); greenhook's hand-over is inlined",
        floor / base2
    ));
    // Thread CPU clocks, once a program asks for one, read the clock at
    // every switch; on a thread of its own, since that lasts.
    let c = Samples::interleaved(
        sz.reps,
        || {
            std::thread::spawn(move || {
                hub::cpu_time(&hub::current());
                fiber_yield_round_trip(n, true)
            })
            .join()
            .unwrap()
        },
        || fiber_yield_round_trip(n, true),
    );
    let (on, off) = c.medians();
    notes.push(format!(
        "1. with thread CPU clocks counted (after a program's first clock_gettime(CLOCK_THREAD_CPUTIME_ID)): \
         {on:.1} ns vs {off:.1} ns ({:.2}×)",
        on / off
    ));
    let ratio = ours / base;
    Row {
        what: "1. yield round trip A→B→A, shared TLS (vs corosensei resume+suspend)".into(),
        ours: format!("{ours:.1} ns"),
        baseline: format!("{base:.1} ns"),
        ratio: format!("{ratio:.2}×"),
        target: "≤ 4×".into(),
        verdict: Verdict::of(ratio <= 4.0),
    }
}

/// Nanoseconds per pair of thread-pointer writes (what a round trip
/// between fibers with TLS of their own adds).
fn thread_pointer_pair(n: u64) -> f64 {
    let (tp, _) = tls_probe();
    let t0 = Instant::now();
    for _ in 0..n {
        // SAFETY: reinstalls the calling thread's own thread pointer.
        unsafe { set_thread_pointer(black_box(tp)) };
        // SAFETY: as above.
        unsafe { set_thread_pointer(black_box(tp)) };
    }
    per_op(t0.elapsed(), n)
}

/// Nanoseconds per pair of `arch_prctl(ARCH_SET_FS)` calls, what a switch
/// costs on a machine without FSGSBASE (the fallback).
fn arch_prctl_pair(n: u64) -> f64 {
    let (tp, _) = tls_probe();
    let t0 = Instant::now();
    for _ in 0..n {
        for _ in 0..2 {
            // SAFETY: reinstalls the calling thread's own thread pointer.
            unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1002, black_box(tp)) };
        }
    }
    per_op(t0.elapsed(), n)
}

/// The calling thread's thread pointer, and whether `wrfsbase` is usable.
fn tls_probe() -> (usize, bool) {
    let tp: usize;
    // SAFETY: fs:0 is the TCB's self pointer in every glibc thread.
    unsafe { std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly)) };
    // SAFETY: getauxval has no preconditions.
    (tp, unsafe { libc::getauxval(libc::AT_HWCAP2) } & 2 != 0)
}

/// Installs `tp` as the thread pointer the way the fiber crate does.
///
/// # Safety
/// `tp` is the calling thread's own thread pointer.
unsafe fn set_thread_pointer(tp: usize) {
    if tls_probe().1 {
        // SAFETY: the caller's contract; FSGSBASE is enabled.
        unsafe { std::arch::asm!("wrfsbase {}", in(reg) tp, options(nostack)) };
    } else {
        // SAFETY: as above.
        unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1002, tp) };
    }
}

fn bench_yield_tls(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    let s = Samples::interleaved(
        sz.reps,
        || fiber_yield_round_trip(sz.yields, false),
        || coro_round_trip(sz.coro_trips),
    );
    let (ours, base) = s.medians();
    let t = Samples::interleaved(
        sz.reps,
        || fiber_yield_round_trip(sz.yields, false),
        || fiber_yield_round_trip(sz.yields, true),
    );
    let (own, shared) = t.medians();
    let mut pairs: Vec<f64> = (0..sz.reps).map(|_| thread_pointer_pair(sz.yields)).collect();
    pairs.sort_by(f64::total_cmp);
    let mut syscalls: Vec<f64> = (0..sz.reps).map(|_| arch_prctl_pair(sz.yields / 20)).collect();
    syscalls.sort_by(f64::total_cmp);
    notes.push(format!(
        "1t. yield round trip with TLS of its own (min / median / max): {}; vs shared TLS          {own:.1} ns vs {shared:.1} ns (+{:.1} ns); thread pointer set by {}, a pair of writes          alone {:.1} ns",
        s.spread(1.0, "ns"),
        own - shared,
        fiber::tls::switch_mechanism(),
        pairs[pairs.len() / 2]
    ));
    notes.push(format!(
        "1t. without FSGSBASE a switch would set it with arch_prctl(ARCH_SET_FS): a pair of those system calls alone {:.1} ns",
        syscalls[syscalls.len() / 2]
    ));
    let ratio = ours / base;
    Row {
        what: "1t. yield round trip A→B→A, own TLS (vs corosensei resume+suspend)".into(),
        ours: format!("{ours:.1} ns"),
        baseline: format!("{base:.1} ns"),
        ratio: format!("{ratio:.2}×"),
        target: "≤ 6×".into(),
        verdict: Verdict::of(ratio <= 6.0),
    }
}

// ---------------------------------------------------------------------------
// 2. Spawn + join

/// Nanoseconds per spawn + join of one fiber, one after the other.
fn fiber_spawn_join(n: u64, shared: bool) -> f64 {
    let t0 = Instant::now();
    for i in 0..n {
        let h = spawn_tls(shared, move || black_box(i));
        black_box(h.join().unwrap());
    }
    per_op(t0.elapsed(), n)
}

/// Nanoseconds per `fiber::Fiber::new` on a pooled stack plus its drop
/// (never run; the drop returns the stack to the pool): the part of a
/// spawn that the fiber crate owns.
fn fiber_create_drop(n: u64) -> f64 {
    thread_local! {
        static POOL: &'static fiber::StackPool = fiber::StackPool::leak();
    }
    let pool = POOL.with(|p| *p);
    let t0 = Instant::now();
    for i in 0..n {
        let f = fiber::Fiber::new(pool, None, None, fiber::Tls::Shared, move |_| {
            black_box(i);
        })
        .expect("a fiber on a pooled stack");
        drop(black_box(f));
    }
    per_op(t0.elapsed(), n)
}

/// Nanoseconds per `std::thread::spawn` + join.
fn thread_spawn_join(n: u64) -> f64 {
    let t0 = Instant::now();
    for i in 0..n {
        let h = std::thread::spawn(move || black_box(i));
        black_box(h.join().unwrap());
    }
    per_op(t0.elapsed(), n)
}

fn bench_spawn(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    // Warm the stack pool (and the hub, and the allocator): the claim is
    // about spawning on a pooled stack, not about carving a fresh one.
    let warm: Vec<_> = (0..64).map(|_| greenhook::spawn(|| ())).collect();
    for h in warm {
        h.join().unwrap();
    }
    let s = Samples::interleaved(
        sz.reps,
        || fiber_spawn_join(sz.fiber_spawns, false),
        || thread_spawn_join(sz.thread_spawns),
    );
    let (ours, base) = s.medians();
    notes.push(format!(
        "2. spawn + join (min / median / max): {}",
        s.spread(1e-3, "µs")
    ));
    let t = Samples::interleaved(
        sz.reps,
        || fiber_spawn_join(sz.fiber_spawns, true),
        || fiber_spawn_join(sz.fiber_spawns, false),
    );
    let (shared, own) = t.medians();
    notes.push(format!(
        "2. spawn + join sharing the thread's TLS: {shared:.0} ns (vs {own:.0} ns with TLS of its own)"
    ));
    let mut create: Vec<f64> = (0..sz.reps).map(|_| fiber_create_drop(sz.fiber_spawns)).collect();
    create.sort_by(f64::total_cmp);
    notes.push(format!(
        "2. of which fiber::Fiber::new on a pooled stack, plus its drop, never run: {:.0} ns (median)",
        create[create.len() / 2]
    ));
    let speedup = base / ours;
    Row {
        what: "2. spawn + join, pooled stack, own TLS (vs std::thread)".into(),
        ours: format!("{ours:.0} ns"),
        baseline: format!("{:.1} µs", base / 1e3),
        ratio: format!("{speedup:.0}× faster"),
        target: "≥ 300× faster".into(),
        verdict: Verdict::of(speedup >= 300.0),
    }
}

// ---------------------------------------------------------------------------
// 3. Blocking handoff over a socketpair

/// Reads one 4-byte counter from a non-blocking socket, waiting through the
/// hub on `EAGAIN`.
fn fiber_recv(s: &mut UnixStream) -> u32 {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match s.read(&mut buf[got..]) {
            Ok(0) => panic!("peer closed the socketpair"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                greenhook::io::wait_readable(s.as_raw_fd(), None).expect("wait_readable");
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    u32::from_le_bytes(buf)
}

/// Writes one 4-byte counter to a non-blocking socket (a socketpair with
/// one message in flight never fills up, but wait anyway to be correct).
fn fiber_send(s: &mut UnixStream, v: u32) {
    let buf = v.to_le_bytes();
    let mut put = 0;
    while put < 4 {
        match s.write(&buf[put..]) {
            Ok(n) => put += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                greenhook::io::wait_writable(s.as_raw_fd(), None).expect("wait_writable");
            }
            Err(e) => panic!("write: {e}"),
        }
    }
}

/// Microseconds per round trip between two fibers.
fn fiber_pingpong(rounds: u32) -> f64 {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let pong = greenhook::spawn(move || {
        for i in 0..rounds {
            let v = fiber_recv(&mut b);
            assert_eq!(v, i);
            fiber_send(&mut b, v + 1);
        }
        close_waited_fd(b);
    });
    let ping = greenhook::spawn(move || {
        let t0 = Instant::now();
        for i in 0..rounds {
            fiber_send(&mut a, i);
            assert_eq!(fiber_recv(&mut a), i + 1);
        }
        let el = t0.elapsed();
        close_waited_fd(a);
        el
    });
    let el = ping.join().unwrap();
    pong.join().unwrap();
    per_op(el, rounds.into()) / 1e3
}

/// Closes a socket the hub has waited on. The hub registers an fd with epoll
/// once and remembers it by number; the kernel drops a closed fd from the
/// epoll set, so a later socket that reuses the number would never be
/// reported ready unless the hub is told first. (`libgreenhook.so` does this
/// in its `close` hook; the Rust facade has no call for it yet.)
fn close_waited_fd(s: UnixStream) {
    hub::forget_fd(s.as_raw_fd());
    drop(s);
}

/// Microseconds per round trip between two OS threads on blocking fds.
fn thread_pingpong(rounds: u32) -> f64 {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let pong = std::thread::spawn(move || {
        let mut buf = [0u8; 4];
        for i in 0..rounds {
            b.read_exact(&mut buf).unwrap();
            let v = u32::from_le_bytes(buf);
            assert_eq!(v, i);
            b.write_all(&(v + 1).to_le_bytes()).unwrap();
        }
    });
    let ping = std::thread::spawn(move || {
        let mut buf = [0u8; 4];
        let t0 = Instant::now();
        for i in 0..rounds {
            a.write_all(&i.to_le_bytes()).unwrap();
            a.read_exact(&mut buf).unwrap();
            assert_eq!(u32::from_le_bytes(buf), i + 1);
        }
        t0.elapsed()
    });
    let el = ping.join().unwrap();
    pong.join().unwrap();
    per_op(el, rounds.into()) / 1e3
}

fn bench_pingpong(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    let polls0 = greenhook::stats().polls;
    let s = Samples::interleaved(
        sz.reps,
        || fiber_pingpong(sz.fiber_pings),
        || thread_pingpong(sz.thread_pings),
    );
    let polls = greenhook::stats().polls - polls0;
    let trips = u64::from(sz.fiber_pings) * (sz.reps as u64 + 1);
    let (ours, base) = s.medians();
    notes.push(format!(
        "3. socketpair ping-pong (min / median / max): {}; {:.2} hub polls per fiber round trip",
        s.spread(1.0, "µs"),
        polls as f64 / trips as f64
    ));
    Row {
        what: "3. 4-byte socketpair ping-pong (vs 2 threads, blocking fds)".into(),
        ours: format!("{ours:.2} µs"),
        baseline: format!("{base:.2} µs"),
        ratio: speed_ratio(ours, base),
        target: "(report)".into(),
        verdict: Verdict::Info,
    }
}

// ---------------------------------------------------------------------------
// 4 and 5. Idle memory and the number of live fibers

/// `VmRSS` of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Lines of `/proc/self/maps`: the mappings this process holds.
fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |s| s.lines().count())
}

/// What `n` sleeping fibers cost, measured while all of them were alive.
struct Sleepers {
    n: usize,
    /// Fibers alive at the measurement (`stats().live`).
    live: u64,
    /// `stats().peak_live` at the measurement.
    peak_live: u64,
    rss_before_kib: u64,
    rss_during_kib: u64,
    /// Bytes of `malloc`ed memory in use (all arenas, `mallinfo2`).
    heap_before: usize,
    heap_during: usize,
    maps_before: usize,
    maps_during: usize,
    /// Spawning all of them and letting each run into its sleep.
    start_time: Duration,
}

impl Sleepers {
    fn bytes_each(&self) -> f64 {
        self.rss_during_kib.saturating_sub(self.rss_before_kib) as f64 * 1024.0 / self.n as f64
    }

    /// Of [`Sleepers::bytes_each`], what each fiber holds on the heap (its
    /// task, handle, timer entry, DTV...; the rest is its stack slot's
    /// pages and the heap's own slack).
    fn heap_each(&self) -> f64 {
        self.heap_during.saturating_sub(self.heap_before) as f64 / self.n as f64
    }
}

/// Bytes `malloc` has handed out and not had back, over all arenas.
fn heap_in_use() -> usize {
    // SAFETY: mallinfo2 has no preconditions.
    let m = unsafe { libc::mallinfo2() };
    m.uordblks + m.hblkhd
}

/// Spawns `n` fibers that sleep (in naps of `NAP`, until released), lets each
/// one run into its sleep, measures, then releases and joins them all.
fn sleeping_fibers(n: usize, shared: bool) -> Sleepers {
    const NAP: Duration = Duration::from_millis(500);
    let release = Rc::new(Cell::new(false));
    let rss_before_kib = rss_kib();
    let heap_before = heap_in_use();
    let maps_before = map_count();
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        let r = release.clone();
        handles.push(spawn_tls(shared, move || {
            while !r.get() {
                greenhook::sleep(NAP);
            }
        }));
    }
    // The root runs every runnable fiber once: each starts and parks in its
    // sleep (none can finish: only the release below ends their loop).
    greenhook::yield_now();
    let start_time = t0.elapsed();
    let st = greenhook::stats();
    let out = Sleepers {
        n,
        live: st.live,
        peak_live: st.peak_live,
        rss_before_kib,
        rss_during_kib: rss_kib(),
        heap_before,
        heap_during: heap_in_use(),
        maps_before,
        maps_during: map_count(),
        start_time,
    };
    release.set(true);
    for h in handles {
        h.join().unwrap();
    }
    out
}

/// Bytes of `VmRSS` per OS thread parked on a barrier (default std stack).
fn parked_threads_bytes(n: usize) -> f64 {
    let ready = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Barrier::new(n + 1));
    let before = rss_kib();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let ready = ready.clone();
            let gate = gate.clone();
            std::thread::spawn(move || {
                ready.fetch_add(1, Ordering::SeqCst);
                gate.wait();
            })
        })
        .collect();
    while ready.load(Ordering::SeqCst) < n {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Let the last arrivals reach their futex wait.
    std::thread::sleep(Duration::from_millis(20));
    let during = rss_kib();
    gate.wait();
    for h in handles {
        h.join().unwrap();
    }
    during.saturating_sub(before) as f64 * 1024.0 / n as f64
}

fn bench_idle_rss(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    idle_rss(sz, notes, true)
}

fn bench_idle_rss_tls(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    idle_rss(sz, notes, false)
}

/// [`sleeping_fibers`] on a fresh OS thread: its own hub and stack pool,
/// so no stack pages left resident by an earlier row are reused.
fn sleeping_fibers_fresh(n: usize, shared: bool) -> Sleepers {
    std::thread::spawn(move || sleeping_fibers(n, shared))
        .join()
        .expect("the measuring thread")
}

fn idle_rss(sz: &Sizes, notes: &mut Vec<String>, shared: bool) -> Row {
    let (label, target) = if shared { ("4", 4.5) } else { ("4t", 8.0) };
    let f = sleeping_fibers_fresh(sz.idle_fibers, shared);
    assert_eq!(f.live as usize, f.n, "every fiber should be alive at the measurement");
    let thread_bytes = parked_threads_bytes(sz.idle_threads);
    let fiber_bytes = f.bytes_each();
    notes.push(format!(
        "{label}. {} sleeping fibers ({}): RSS {} → {} KiB ({:.0} B each, incl. JoinHandle, hub task and timer entry, \
         of which {:.0} B malloc'ed{}); {} parked threads: {:.0} B each (user pages only)",
        f.n,
        if shared { "shared TLS" } else { "TLS of their own" },
        f.rss_before_kib,
        f.rss_during_kib,
        fiber_bytes,
        f.heap_each(),
        if shared { "" } else { ", glibc's DTV included" },
        sz.idle_threads,
        thread_bytes
    ));
    Row {
        what: format!(
            "{label}. RSS per idle fiber, {}, {}k asleep (vs {} parked threads)",
            if shared { "shared TLS" } else { "own TLS" },
            f.n / 1000,
            sz.idle_threads
        ),
        ours: format!("{:.2} KiB", fiber_bytes / 1024.0),
        baseline: format!("{:.2} KiB", thread_bytes / 1024.0),
        ratio: format!("{:.1}× smaller", thread_bytes / fiber_bytes),
        target: format!("≤ {target} KiB"),
        verdict: Verdict::of(fiber_bytes <= target * 1024.0),
    }
}

fn bench_max_live(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    let f = sleeping_fibers_fresh(sz.max_fibers, false);
    let max_map_count: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65530);
    let thread_ceiling = max_map_count / 2;
    notes.push(format!(
        "5. {} sleeping fibers with TLS of their own started in {:.2} s; live {} (peak_live {}); mappings {} → {}; \
         RSS {} → {} MiB; OS-thread ceiling: vm.max_map_count {} / 2 = {} (not exercised)",
        f.n,
        f.start_time.as_secs_f64(),
        f.live,
        f.peak_live,
        f.maps_before,
        f.maps_during,
        f.rss_before_kib / 1024,
        f.rss_during_kib / 1024,
        max_map_count,
        thread_ceiling
    ));
    Row {
        what: "5. max live fibers, own TLS, all asleep at once (vs OS-thread ceiling)".into(),
        ours: format!(
            "{} live, {} maps, RSS {} MiB",
            f.live,
            f.maps_during,
            f.rss_during_kib / 1024
        ),
        baseline: format!("≤ {thread_ceiling} (max_map_count/2)"),
        ratio: format!("{:.1}× more", f.live as f64 / thread_ceiling as f64),
        target: format!("{} alive", f.n),
        verdict: Verdict::of(f.live as usize == f.n && f.peak_live as usize >= f.n),
    }
}

// ---------------------------------------------------------------------------
// 6. Thread churn

fn bench_churn(sz: &Sizes, notes: &mut Vec<String>) -> Row {
    let bin = util::compile("thread_churn");
    let lib = util::compile_shared("tls_dlopen_lib");
    let n = sz.churn.to_string();
    let args = [n.as_str(), "300", lib.to_str().expect("a UTF-8 path")];
    let r = util::run_with_timeout(&bin, &args, true, &[], Duration::from_secs(600));
    assert_eq!(r.code(), Some(0), "{}", r.describe());
    // "rss_kib.<threads ended>=<KiB>" after a tenth, half and all of them.
    let points: Vec<(u64, u64)> = r
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("rss_kib.")?.split_once('='))
        .filter_map(|(k, v)| Some((k.parse().ok()?, v.trim().parse().ok()?)))
        .collect();
    let ((tenth, early), (_, last)) = (points[0], points[points.len() - 1]);
    let ms = util::time_ms(&r.stderr).unwrap_or(0);
    notes.push(format!(
        "6. thread_churn {n} 300 under the preload: {}; RSS {early} KiB after {tenth} threads, \
         {last} KiB after {n}; {:.2} µs per pthread_create + join",
        r.stdout.trim(),
        ms as f64 * 1e3 / sz.churn as f64
    ));
    Row {
        what: format!(
            "6. RSS creating and ending {}k pthreads, 300 alive, own TLS",
            sz.churn / 1000
        ),
        ours: format!("{early} → {last} KiB"),
        baseline: "(flat)".into(),
        ratio: format!("+{} KiB", last.saturating_sub(early)),
        target: "flat (+≤ 1 MiB)".into(),
        verdict: Verdict::of(last <= early + 1024 && r.stdout.contains("every destructor ran")),
    }
}
