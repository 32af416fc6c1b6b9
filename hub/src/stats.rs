//! Counters: what each hub did (spawns, switches, waits by kind, poller
//! calls), read through [`stats`] and printed at exit as one table when
//! `GREENHOOK_STATS` is set.
//!
//! The counters are plain cells of the hub's own thread; bumping one is an
//! add, cheap enough for the yield path.

use std::cell::Cell;

use crate::{internal, monitor, Hub};

/// Counters, per hub (per OS thread).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Fibers spawned.
    pub spawned: u64,
    /// Fibers finished.
    pub finished: u64,
    /// Fibers alive now (spawned and not finished).
    pub live: u64,
    /// Most fibers alive at once.
    pub peak_live: u64,
    /// Switches into a fiber.
    pub switches: u64,
    /// Waits on a timer (sleeps and timed waits).
    pub timer_waits: u64,
    /// Waits on fd readiness.
    pub fd_waits: u64,
    /// Waits on a wait queue.
    pub parks: u64,
    /// Closures run on the offload pool.
    pub offloads: u64,
    /// Calls to the reactor's wait.
    pub polls: u64,
}

/// The hub's live counters ([`Stats`] without `live`, which is counted by
/// the registry of live fibers itself).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) spawned: Cell<u64>,
    pub(crate) finished: Cell<u64>,
    pub(crate) peak_live: Cell<u64>,
    pub(crate) switches: Cell<u64>,
    pub(crate) timer_waits: Cell<u64>,
    pub(crate) fd_waits: Cell<u64>,
    pub(crate) parks: Cell<u64>,
    pub(crate) offloads: Cell<u64>,
    pub(crate) polls: Cell<u64>,
}

#[inline(always)]
pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// How many switches this thread's hub has made (0 without a hub): one
/// counter load, for callers that only ask whether anything switched.
#[inline]
pub fn switch_count() -> u64 {
    Hub::existing().map_or(0, |h| h.counters.switches.get())
}

/// This thread's counters (all 0 on a thread that never made a hub).
pub fn stats() -> Stats {
    let Some(hub) = Hub::existing() else {
        return Stats::default();
    };
    let c = &hub.counters;
    Stats {
        spawned: c.spawned.get(),
        finished: c.finished.get(),
        live: hub.tasks.borrow().len() as u64,
        peak_live: c.peak_live.get(),
        switches: c.switches.get(),
        timer_waits: c.timer_waits.get(),
        fd_waits: c.fd_waits.get(),
        parks: c.parks.get(),
        offloads: c.offloads.get(),
        polls: c.polls.get(),
    }
}

/// Stalls the monitor has reported, process-wide.
pub fn stalls() -> u64 {
    monitor::STALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether `GREENHOOK_STATS` asks for the exit table, read once (see
/// [`internal::read_settings`]).
pub(crate) fn wanted() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("GREENHOOK_STATS").is_some_and(|v| !v.is_empty() && v != "0"))
}

/// With `GREENHOOK_STATS=1`, registers (once per process) an `atexit`
/// handler that prints one compact table of the exiting thread's hub.
///
/// Called when the first hub is made, and by the preload as it loads
/// ([`internal::read_settings`]); the handler prints once, in whichever
/// registration runs first. `exit` runs handlers in the reverse order of
/// registration: the one made at load runs last, after the program's own,
/// which may have closed stderr by then (coreutils' `close_stdout` does);
/// the one made with the first hub runs before every handler the program
/// registered earlier. A program that never makes a thread has only the
/// first, and still gets its table of hooked calls.
pub(crate) fn stats_at_exit() {
    static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    register_once(&ONCE);
}

/// [`stats_at_exit`] as the preload loads.
pub(crate) fn stats_at_load() {
    static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    register_once(&ONCE);
}

fn register_once(once: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    static PRINTED: AtomicBool = AtomicBool::new(false);
    if wanted() && !once.swap(true, SeqCst) {
        extern "C" fn print_stats() {
            if PRINTED.swap(true, SeqCst) {
                return;
            }
            let _g = internal::Guard::new();
            eprint!("{}", stats_table());
        }
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe { libc::atexit(print_stats) };
    }
}

/// The stats table printed at exit with `GREENHOOK_STATS=1`.
pub fn stats_table() -> String {
    let st = stats();
    // The pid tells the tables of a program's processes apart (each that
    // loaded the preload prints its own).
    let mut out = format!("greenhook stats (pid {})\n", std::process::id());
    out.push_str(&format!(
        "  fibers     spawned {}  peak live {}  live {}\n",
        st.spawned, st.peak_live, st.live
    ));
    out.push_str(&format!("  switches   {}\n", st.switches));
    out.push_str(&format!(
        "  waits      timer {}  fd {}  park {}  (poller calls {})\n",
        st.timer_waits, st.fd_waits, st.parks, st.polls
    ));
    out.push_str(&format!("  offloads   {}\n  stalls     {}\n", st.offloads, stalls()));
    let extra = internal::stats_extra();
    if !extra.is_empty() {
        out.push_str("  hooked     ");
        let parts: Vec<String> = extra.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&parts.join("  "));
        out.push('\n');
    }
    out
}
