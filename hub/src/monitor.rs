//! The stall monitor (`GREENHOOK_STALL_MS`), off by default like gevent's.
//!
//! N:1 has no preemption: a fiber that computes, or blocks in a call the
//! hub does not know, stalls every other fiber. The hub publishes a
//! heartbeat (its switch count, whether it is idle in the poller, how many
//! fibers are alive); a watchdog thread checks it every quarter threshold.
//! When the count has not moved for longer than the threshold while the hub
//! was busy and fibers were waiting for their turn, it reports once:
//!
//! ```text
//! greenhook: stall: fiber 3 'spin' has run 212 ms without yielding (threshold 50 ms); its stack:
//!     0: busy_loop at demo.c:17
//!     1: thread_main at demo.c:30
//! greenhook: stall over: fiber 3 'spin' held the hub for 1003 ms
//! ```
//!
//! The backtrace is taken on the hub thread by a signal (`SIGRTMAX-2`),
//! whose handler only calls `backtrace(3)` (warmed up beforehand) into a
//! static buffer and copies the fiber's id and name: async-signal-safe
//! means. The watchdog symbolises the addresses afterwards. If the hub
//! thread is inside a system call (per `/proc/self/task/<tid>/syscall`), it
//! is not signalled, so that an unhooked blocking call is not cut short;
//! the report names the system call instead.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::internal;

/// What a hub publishes for the watchdog.
pub(crate) struct Beat {
    pub(crate) switches: AtomicU64,
    /// The fiber running now (0: the root).
    pub(crate) current: AtomicU64,
    pub(crate) idle: AtomicBool,
    pub(crate) live: AtomicU64,
    tid: AtomicI32,
}

impl Beat {
    fn new() -> Beat {
        Beat {
            switches: AtomicU64::new(0),
            current: AtomicU64::new(0),
            idle: AtomicBool::new(false),
            live: AtomicU64::new(0),
            tid: AtomicI32::new(0),
        }
    }
}

/// Stalls reported so far (for the stats table).
pub(crate) static STALLS: AtomicU64 = AtomicU64::new(0);

struct Monitor {
    threshold: Duration,
    hubs: std::sync::Mutex<Vec<Arc<Beat>>>,
}

static MONITOR: OnceLock<Option<Monitor>> = OnceLock::new();

fn monitor() -> Option<&'static Monitor> {
    MONITOR
        .get_or_init(|| {
            let ms = std::env::var("GREENHOOK_STALL_MS")
                .ok()?
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&m| m > 0)?;
            Some(Monitor {
                threshold: Duration::from_millis(ms),
                hubs: std::sync::Mutex::new(Vec::new()),
            })
        })
        .as_ref()
}

/// Reads `GREENHOOK_STALL_MS` now (see [`crate::internal::read_settings`]).
pub(crate) fn configured() {
    monitor();
}

/// Called when a hub is created: returns its heartbeat if monitoring is on.
pub(crate) fn register() -> Option<Arc<Beat>> {
    let m = monitor()?;
    let beat = Arc::new(Beat::new());
    beat.tid.store(crate::internal::os_tid(), Ordering::Relaxed);
    let first = {
        let mut hubs = m.hubs.lock().unwrap_or_else(|p| p.into_inner());
        hubs.push(beat.clone());
        hubs.len() == 1
    };
    if first {
        install_handler();
        let t = m.threshold;
        let _ = internal::spawn_thread(
            std::thread::Builder::new().name("greenhook-stall-monitor".into()),
            move || watch(t),
        );
    }
    Some(beat)
}

const MAX_FRAMES: usize = 48;

/// Filled by the signal handler on the hub thread.
static CAPTURE_FRAMES: [AtomicUsize; MAX_FRAMES] = [const { AtomicUsize::new(0) }; MAX_FRAMES];
static CAPTURE_LEN: AtomicUsize = AtomicUsize::new(0);
static CAPTURE_ID: AtomicU64 = AtomicU64::new(0);
static CAPTURE_NAME: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
static CAPTURE_DONE: AtomicBool = AtomicBool::new(false);

fn capture_signal() -> libc::c_int {
    libc::SIGRTMAX() - 2
}

fn install_handler() {
    // Warm up backtrace(3): its first call loads libgcc_s, which is not
    // async-signal-safe; after this, calls from the handler are.
    let mut buf = [std::ptr::null_mut(); 4];
    // SAFETY: a valid buffer of 4 entries.
    unsafe { libc::backtrace(buf.as_mut_ptr(), 4) };
    // SAFETY: a zeroed sigaction filled in with a valid handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_capture as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(capture_signal(), &sa, std::ptr::null_mut());
    }
}

extern "C" fn on_capture(_sig: libc::c_int, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let saved = fiber::errno::get();
    let mut frames = [std::ptr::null_mut(); MAX_FRAMES];
    // SAFETY: backtrace(3) was warmed up; the buffer holds MAX_FRAMES entries.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), MAX_FRAMES as libc::c_int) }.max(0) as usize;
    for (slot, f) in CAPTURE_FRAMES.iter().zip(&frames[..n]) {
        slot.store(*f as usize, Ordering::Relaxed);
    }
    CAPTURE_LEN.store(n, Ordering::Relaxed);
    crate::with_current_fiber(|f| {
        CAPTURE_ID.store(f.map_or(0, |f| f.id()), Ordering::Relaxed);
        let mut packed = [0u8; 64];
        if internal::provided_name(&mut packed) == 0 {
            let b = f.and_then(|f| f.name()).unwrap_or("").as_bytes();
            packed[..b.len().min(63)].copy_from_slice(&b[..b.len().min(63)]);
        }
        for (i, w) in CAPTURE_NAME.iter().enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(&packed[i * 8..i * 8 + 8]);
            w.store(u64::from_ne_bytes(word), Ordering::Relaxed);
        }
    });
    CAPTURE_DONE.store(true, Ordering::Release);
    fiber::errno::set(saved);
}

/// The system call the thread is blocked in, if any.
fn in_syscall(tid: i32) -> Option<i64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let first = s.split_whitespace().next()?;
    first.parse::<i64>().ok().filter(|&n| n >= 0)
}

/// Per hub: the last switch count, when it last changed, and the stall
/// being reported (when it started, who caused it).
type Watched = (u64, Instant, Option<(Instant, String)>);

fn watch(threshold: Duration) {
    internal::mark_thread();
    internal::block_signals();
    let tick = (threshold / 4).max(Duration::from_millis(1));
    // Per hub: (last switch count, when it last changed, the reported stall:
    // when it started and who caused it).
    let mut seen: Vec<Watched> = Vec::new();
    loop {
        std::thread::sleep(tick);
        let Some(m) = monitor() else { return };
        let hubs: Vec<Arc<Beat>> = m.hubs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        seen.resize(hubs.len(), (u64::MAX, Instant::now(), None));
        for (beat, state) in hubs.iter().zip(seen.iter_mut()) {
            let now = Instant::now();
            let sw = beat.switches.load(Ordering::Relaxed);
            let quiet = beat.idle.load(Ordering::Relaxed) || beat.live.load(Ordering::Relaxed) == 0;
            if sw != state.0 || quiet {
                if let Some((start, culprit)) = state.2.take() {
                    let _g = internal::Guard::new();
                    eprintln!(
                        "greenhook: stall over: {culprit} held the hub for {} ms",
                        (now - start).as_millis().saturating_sub(tick.as_millis() / 2)
                    );
                }
                *state = (sw, now, None);
                continue;
            }
            let stalled = now - state.1;
            if stalled < threshold || state.2.is_some() {
                continue;
            }
            STALLS.fetch_add(1, Ordering::Relaxed);
            let culprit = report(beat, stalled, threshold);
            state.2 = Some((state.1, culprit));
        }
    }
}

fn captured_name() -> String {
    let mut bytes = Vec::with_capacity(64);
    for w in &CAPTURE_NAME {
        bytes.extend_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn who(id: u64, name: &str) -> String {
    match (id, name.is_empty()) {
        (0, _) => "main (root)".to_string(),
        (id, true) => format!("fiber {id}"),
        (id, false) => format!("fiber {id} '{name}'"),
    }
}

/// Prints the stall report; returns who stalled the hub.
fn report(beat: &Beat, stalled: Duration, threshold: Duration) -> String {
    let _g = internal::Guard::new();
    let tid = beat.tid.load(Ordering::Relaxed);
    if let Some(nr) = in_syscall(tid) {
        // Don't interrupt it: the program would see EINTR or a short sleep.
        for w in &CAPTURE_NAME {
            w.store(0, Ordering::Relaxed);
        }
        eprintln!(
            "greenhook: stall: {} has blocked the hub for {} ms (threshold {} ms) in system call {nr}, \
             which greenhook does not hook",
            who(beat.current.load(Ordering::Relaxed), ""),
            stalled.as_millis(),
            threshold.as_millis()
        );
        return who(beat.current.load(Ordering::Relaxed), "");
    }
    CAPTURE_DONE.store(false, Ordering::Release);
    // SAFETY: tgkill to a thread of this process with a handler installed.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, capture_signal()) };
    let deadline = Instant::now() + Duration::from_millis(200);
    while !CAPTURE_DONE.load(Ordering::Acquire) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = String::new();
    let mut culprit = who(beat.current.load(Ordering::Relaxed), "");
    if CAPTURE_DONE.load(Ordering::Acquire) {
        culprit = who(CAPTURE_ID.load(Ordering::Relaxed), &captured_name());
        out.push_str(&format!(
            "greenhook: stall: {culprit} has run {} ms without yielding (threshold {} ms); its stack:\n",
            stalled.as_millis(),
            threshold.as_millis()
        ));
        let n = CAPTURE_LEN.load(Ordering::Relaxed);
        // Frame 0-1 are the handler and the signal trampoline.
        for (i, f) in CAPTURE_FRAMES[..n].iter().skip(2).enumerate() {
            let addr = f.load(Ordering::Relaxed);
            out.push_str(&format!("    {i:2}: {}\n", symbolise(addr)));
        }
    } else {
        out.push_str(&format!(
            "greenhook: stall: the hub has not switched for {} ms (threshold {} ms); no backtrace could be taken\n",
            stalled.as_millis(),
            threshold.as_millis()
        ));
    }
    eprint!("{out}");
    culprit
}

fn symbolise(addr: usize) -> String {
    let mut s = None;
    // Return addresses point after the call: look up the call itself.
    backtrace::resolve((addr.saturating_sub(1)) as *mut libc::c_void, |sym| {
        if s.is_some() {
            return;
        }
        let name = sym.name().map(|n| n.to_string()).unwrap_or_else(|| "??".into());
        let loc = match (sym.filename(), sym.lineno()) {
            (Some(f), Some(l)) => format!(" at {}:{l}", f.display()),
            _ => String::new(),
        };
        s = Some(format!("{name}{loc}"));
    });
    s.unwrap_or_else(|| format!("{addr:#x}"))
}
