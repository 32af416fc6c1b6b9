//! Time slices at hook boundaries: a thread that keeps calling hooked
//! functions without ever blocking yields every `GREENHOOK_SLICE_MS` (10 ms
//! by default; 0 turns it off) at the return of one of them.
//!
//! N:1 has no preemption: a thread that never waits keeps the hub. Natively
//! the kernel would preempt it, and programs count on that, for instance a
//! thread that polls a flag under a mutex (`lock`, read, `unlock`, again)
//! until another thread sets it: under N:1 the other thread never runs and
//! the poller spins for ever. Every return from a hook to the program is a
//! point where the kernel might as well have preempted the thread, so the
//! yield changes nothing a program may rely on. A thread that calls no
//! hooked function at all (a pure computation) is preempted by a signal
//! instead, where its stack shows that is as safe ([`tick`], x86-64 under
//! the preload), and at once when it is waiting for another thread by
//! reading memory in a loop ([`spin`]); where it is not safe (a computation
//! inside libc, or in a callback libc called), it still holds the hub: the
//! stall monitor names it.
//!
//! Cost: one load and one store of a counter at each hook's return; every
//! 256th looks at the coarse monotonic clock and the hub's switch count. A
//! yield needs the same slice to have passed without any switch, so threads
//! that block now and then are never preempted.
//!
//! Never inside a signal handler run where the signal interrupted the
//! program (anywhere, `malloc` included, and another thread could then need
//! what it holds) nor inside greenhook's own machinery. A handler run at a
//! safe point (a hook's return, an interrupted wait) interrupted nothing and
//! gets slices like the program's code: handlers that keep coming (each
//! one's hooked call running the next at its return) would otherwise hold
//! the hub for good.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

mod allocator;
mod code;
#[cfg(target_arch = "x86_64")]
mod spin;
#[cfg(target_arch = "x86_64")]
mod tick;

/// Hook returns between two looks at the clock.
const EVERY: u32 = 256;

/// The slice in nanoseconds; 0: no preemption.
static SLICE_NS: AtomicU64 = AtomicU64::new(10_000_000);
/// Hook returns so far (wrapping; only the fibers' thread yields, so a race
/// with another thread only shifts when the clock is looked at).
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The hub's switch count when it was last seen to move, and when.
static SWITCHES: AtomicU64 = AtomicU64::new(0);
static SINCE_NS: AtomicU64 = AtomicU64::new(0);
/// How long the running context may keep finding nothing ([`found_nothing`])
/// before it gives way.
const IDLE_NS: u64 = 20_000;
/// When the running context's current run of finding nothing began (0:
/// none), the hub's switch count then, and when it last found nothing.
static IDLE_SINCE_NS: AtomicU64 = AtomicU64::new(0);
static IDLE_SWITCHES: AtomicU64 = AtomicU64::new(0);
static IDLE_LAST_NS: AtomicU64 = AtomicU64::new(0);
/// Set by [`found_nothing`]: the next [`look`] gives way whatever the slice.
static GIVE_WAY: AtomicBool = AtomicBool::new(false);
thread_local! {
    /// Signal handlers the running context is in (see `signal`): a
    /// thread-local, so per fiber where fibers have TLS of their own (the
    /// default), per OS thread where they share it. A handler left by
    /// `siglongjmp` leaves it raised, which only turns preemption off there.
    static IN_HANDLER: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs the signal handler call `f` marked as such (see [`IN_HANDLER`]);
/// the mark goes on return and on glibc's forced unwind (a handler that
/// calls `pthread_exit`).
pub(crate) fn in_handler<R>(f: impl FnOnce() -> R) -> R {
    struct Running;
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = IN_HANDLER.try_with(|h| h.set(h.get().saturating_sub(1)));
        }
    }
    let _ = IN_HANDLER.try_with(|h| h.set(h.get() + 1));
    let _running = Running;
    f()
}

/// Reads `GREENHOOK_SLICE_MS` (at load time).
pub(crate) fn init() {
    if let Some(ms) = std::env::var("GREENHOOK_SLICE_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        SLICE_NS.store(ms.saturating_mul(1_000_000), Relaxed);
    }
    // Whose allocator it is, and the unwinder's setup, while nothing is
    // held: both allocate, and the walks that need them run inside the
    // allocator (`allocator`) or a signal handler (`tick`).
    let _ = allocator::code();
    code::warm_unwinder();
    #[cfg(target_arch = "x86_64")]
    tick::init(slice_ns());
}

/// The slice in nanoseconds (0: none).
fn slice_ns() -> u64 {
    SLICE_NS.load(Relaxed)
}

/// As the calling OS thread makes a fiber: from now on it may have a
/// context to switch to, so code that calls nothing is preempted too
/// ([`tick`]).
pub(crate) fn arm() {
    #[cfg(target_arch = "x86_64")]
    tick::arm();
}

/// In the child of `fork()`.
pub(crate) fn after_fork_child() {
    #[cfg(target_arch = "x86_64")]
    tick::after_fork_child();
}

/// The signal greenhook's preemption ticks arrive by, if it is on: the
/// program's own uses of it are passed on (see [`tick`]).
pub(crate) fn signal() -> Option<libc::c_int> {
    #[cfg(target_arch = "x86_64")]
    if tick::enabled() {
        return Some(tick::SIGNAL);
    }
    None
}

/// A call of the program's code from greenhook's, counted while it lasts
/// (`hook::program`): the preemption of code without unwind tables needs
/// to know that only a fiber's start routine is under way.
pub(crate) struct Nested {
    #[cfg(target_arch = "x86_64")]
    _inner: tick::Nested,
}

impl Nested {
    #[inline]
    pub(crate) fn enter() -> Nested {
        Nested {
            #[cfg(target_arch = "x86_64")]
            _inner: tick::Nested::enter(),
        }
    }
}

/// Calls a thread's start routine `f(arg)` so that the stack walk of a
/// preemption knows where the program's frames end (see [`tick`]'s scan of
/// frames without unwind tables).
pub(crate) fn call_start(
    f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
) -> *mut libc::c_void {
    #[cfg(target_arch = "x86_64")]
    return tick::call_start(f, arg);
    #[cfg(not(target_arch = "x86_64"))]
    f(arg)
}

/// Whether `pc` is in the stub [`call_start`] calls a start routine
/// through: a fiber's first frame, whose caller no unwinder sees.
#[cfg(target_arch = "x86_64")]
pub(crate) fn is_start_stub(pc: usize) -> bool {
    tick::is_start_stub(pc)
}

/// Preemptions of code that called nothing, so far.
pub(crate) fn preemptions() -> u64 {
    #[cfg(target_arch = "x86_64")]
    return tick::PREEMPTIONS.load(Relaxed);
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Of [`preemptions`], those at a spin wait before the slice's end.
pub(crate) fn spin_preemptions() -> u64 {
    #[cfg(target_arch = "x86_64")]
    return tick::SPIN_PREEMPTIONS.load(Relaxed);
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// At a hook's return to the program (see the [module](self) docs).
#[inline(always)]
pub(crate) fn at_hook_return() {
    if count_return() {
        look();
    }
}

/// [`at_hook_return`]'s count alone, for a fast path that looks later
/// (see `hook::lean`): true when the clock is due a [`look`].
#[inline(always)]
pub(crate) fn count_return() -> bool {
    let n = COUNT.load(Relaxed).wrapping_add(1);
    COUNT.store(n, Relaxed);
    n.is_multiple_of(EVERY)
}

/// A call that could have waited was asked not to, and found nothing: a
/// `poll`, `select` or `epoll_wait` with a zero timeout that reports
/// nothing ready, an `EAGAIN` from an fd the program made non-blocking or
/// from a receive with `MSG_DONTWAIT`.
/// A context that keeps at it is waiting, in a loop, for something another
/// thread or the I/O of one brings, and natively that other thread runs
/// meanwhile (on another CPU, or woken and run at once on this one). Under
/// N:1 it ran only at the waiter's slice's end, 10 ms later: a busy loop of
/// `poll` with a zero timeout beside a pipe round trip made each trip take
/// 9 ms (6 µs unpatched). So once the running context has kept finding
/// nothing for [`IDLE_NS`] without a switch, each time within [`IDLE_NS`]
/// of the last (a loop that does little else), the return of the hook
/// that found nothing again gives way through the hub, as a slice's end
/// does (at the same safe points), whose look at I/O runs what it wakes
/// first (`hub::yield_to_hub`). A loop that works between its looks (an
/// event loop that reads until `EAGAIN`, a frame loop that polls its input
/// with a zero timeout) keeps its slice: giving way there would have
/// handed a CPU-bound neighbour a whole slice each time, where the kernel
/// shares the CPU evenly.
///
/// Counts only in a cooperative context (a fiber, or a root with fibers
/// to run): the state here is the fibers' thread's, and only there can it
/// give way.
pub(crate) fn found_nothing() {
    if SLICE_NS.load(Relaxed) == 0 || !crate::gate::cooperative() {
        return;
    }
    let switches = hub::switch_count();
    let since = IDLE_SINCE_NS.load(Relaxed);
    let now = now_ns(libc::CLOCK_MONOTONIC);
    let last = IDLE_LAST_NS.swap(now, Relaxed);
    if since == 0 || switches != IDLE_SWITCHES.load(Relaxed) || now.saturating_sub(last) >= IDLE_NS {
        IDLE_SWITCHES.store(switches, Relaxed);
        IDLE_SINCE_NS.store(now, Relaxed);
        return;
    }
    if now.saturating_sub(since) >= IDLE_NS {
        GIVE_WAY.store(true, Relaxed);
        // This hook's return looks (see `count_return`).
        COUNT.store(COUNT.load(Relaxed) | (EVERY - 1), Relaxed);
    }
}

/// Ends the running context's time slice if it has run a whole one
/// without a switch (every [`EVERY`] hook returns), or gives way when it
/// has found nothing for long enough ([`found_nothing`]).
#[cold]
#[inline(never)]
pub(crate) fn look() {
    let give_way = GIVE_WAY.swap(false, Relaxed);
    let slice = SLICE_NS.load(Relaxed);
    if slice == 0 || !may_switch_here() {
        return;
    }
    let now = now_ns(libc::CLOCK_MONOTONIC_COARSE);
    let switches = hub::switch_count();
    if switches != SWITCHES.load(Relaxed) {
        SWITCHES.store(switches, Relaxed);
        SINCE_NS.store(now, Relaxed);
        if !give_way {
            return;
        }
    } else if !give_way && now.saturating_sub(SINCE_NS.load(Relaxed)) < slice {
        return;
    }
    if allocator::inside() {
        // The next hook return out of it ends the slice.
        return;
    }
    SINCE_NS.store(now, Relaxed);
    // The next call that finds nothing starts a new wait.
    IDLE_SINCE_NS.store(0, Relaxed);
    switch_at_return(hub::yield_to_hub);
}

/// Whether a hook's return may switch to other fibers here: not inside a
/// signal handler that interrupted the program (see [`IN_HANDLER`]), and
/// where other fibers could run.
fn may_switch_here() -> bool {
    IN_HANDLER.try_with(|h| h.get()).unwrap_or(1) == 0 && crate::gate::cooperative()
}

/// Runs `switch` (which lets other fibers run) at a hook's return, as
/// greenhook's code again (the hook that called this has left): a signal
/// meanwhile waits for a safe point instead of running its handler inside
/// the switch. Then what the others sent this thread runs.
fn switch_at_return(switch: impl FnOnce()) {
    let depth = hub::internal::enter_hook();
    switch();
    crate::async_cancel_point();
    // SAFETY: entered just above, in this same context, left once.
    unsafe { depth.leave() };
}

/// At a hook's return to the program once threads have different
/// priorities: a thread that the hook made runnable (created, woke, or
/// raised) and that outranks the caller runs now, as the kernel would have
/// preempted the caller at once (`hub::preempt_point`). The same places as
/// a time slice's end, for the same reasons.
#[cold]
#[inline(never)]
pub(crate) fn priority_point() {
    if hub::preempt_wanted() && may_switch_here() && !allocator::inside() {
        switch_at_return(hub::preempt_point);
    }
}

/// `clock` in nanoseconds, by glibc's own `clock_gettime` (the vDSO's: a
/// few ns for `CLOCK_MONOTONIC_COARSE`, ~20 for `CLOCK_MONOTONIC`).
fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; glibc's own clock_gettime.
    unsafe { crate::thread::cputime::clock_gettime::real(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
