//! Sleeps and yields: `sleep`, `usleep`, `nanosleep`, `clock_nanosleep`,
//! `sched_yield`, `pthread_yield`. Each needs its own hook: glibc's `sleep`
//! calls its internal nanosleep, which no `nanosleep` hook sees.
//!
//! Gate: cooperative only inside a fiber, or in a root context whose hub has
//! fibers to run meanwhile; otherwise the real call (exact kernel
//! semantics). Invalid arguments get the kernel's answer.

use std::time::{Duration, Instant};

use libc::{c_int, c_uint, timespec};

use crate::deadline::{self, duration_of, timespec_of};
use crate::errno;
use crate::gate::cooperative;
use crate::hook::hook;

/// Sleeps cooperatively until `at` (`None`: for ever), a cancellation
/// point on the way in and, when interrupted, on the way out; false when
/// a signal handler ran meanwhile (the kernel's sleeps then end with
/// `EINTR`, whatever `SA_RESTART` says; the handlers run here) or a
/// cancellation that was not acted on is due. An interruption that
/// brought neither (the signal went to another thread) sleeps on.
///
/// A sleep whose deadline has passed already (`usleep(0)`, `nanosleep` of
/// zero, an absolute time in the past) is a yield, as `sched_yield`'s
/// (`hub::yield_for_io`): the kernel puts the caller to sleep on a timer
/// that fires at once (or within its timer slack, ~50 µs), so the others
/// run meanwhile. Returning at once instead made a loop of `usleep(0)`
/// hold the hub until its time slice ran out: 8 ms a round trip of a
/// pipe echo beside two such threads, 54 µs unpatched.
fn sleep_until(at: Option<hub::Deadline>) -> bool {
    crate::cancel_point();
    if at.is_some_and(|at| at.instant() <= Instant::now()) {
        hub::yield_for_io();
        return true;
    }
    loop {
        let done = match at {
            Some(at) => hub::sleep_interruptible(at),
            None => {
                hub::sleep_forever();
                false
            }
        };
        if done {
            return true;
        }
        crate::cancel_point();
        if interrupts_a_sleep() {
            return false;
        }
    }
}

/// After a sleep was interrupted: runs the handlers due for the caller and
/// says whether the sleep ends (see [`sleep_until`]).
#[cfg(greenhook_linux_hooks)]
fn interrupts_a_sleep() -> bool {
    crate::signal::run_pending().handler || crate::thread::cancel::due_here()
}

#[cfg(not(greenhook_linux_hooks))]
fn interrupts_a_sleep() -> bool {
    true
}

/// Sleeps cooperatively; `Err(remaining)` when interrupted (a handler ran,
/// or a cancellation that was not acted on is due: see [`sleep_until`]).
pub(crate) fn sleep_for(d: Duration) -> Result<(), Duration> {
    let deadline = deadline::after(d);
    if sleep_until(deadline.map(Into::into)) {
        Ok(())
    } else {
        Err(deadline.map_or(d, |at| at.saturating_duration_since(Instant::now())))
    }
}

hook! {
    /// `nanosleep(2)`.
    #[cancel_point]
    #[gate(cooperative())]
    [time] fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
        let d = match deadline::read(req).and_then(|req| duration_of(&req)) {
            Ok(d) => d,
            Err(e) => return errno::fail(e),
        };
        match sleep_for(d) {
            Ok(()) => 0,
            Err(left) => {
                if !rem.is_null() {
                    if let Err(e) = crate::user::write(rem, timespec_of(left)) {
                        return errno::fail(e);
                    }
                }
                errno::fail(libc::EINTR)
            }
        }
    }

    /// `clock_nanosleep(2)`: returns an error number, never sets errno.
    #[cfg(greenhook_linux_hooks)]
    #[cancel_point]
    [time] fn clock_nanosleep(clock: libc::clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int {
        let known = matches!(
            clock,
            libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI
        );
        if !cooperative() || !known || flags & !libc::TIMER_ABSTIME != 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { clock_nanosleep::real(clock, flags, req, rem) };
        }
        let (req, d) = match deadline::read(req).and_then(|req| Ok((req, duration_of(&req)?))) {
            Ok(read) => read,
            Err(e) => return e,
        };
        if flags & libc::TIMER_ABSTIME != 0 {
            // Until a time on `clock`: on `CLOCK_REALTIME` it follows the
            // wall clock when that is set, as the kernel's sleep does.
            return if sleep_until(deadline::at(clock, &req)) { 0 } else { libc::EINTR };
        }
        match sleep_for(d) {
            Ok(()) => 0,
            Err(left) => {
                if !rem.is_null() {
                    if let Err(e) = crate::user::write(rem, timespec_of(left)) {
                        return e;
                    }
                }
                libc::EINTR
            }
        }
    }

    /// `sleep(3)`: returns the unslept seconds when interrupted.
    #[cancel_point]
    #[gate(cooperative())]
    [time] fn sleep(secs: c_uint) -> c_uint {
        match sleep_for(Duration::from_secs(secs.into())) {
            Ok(()) => 0,
            // Like glibc: round the remainder up, never report 0 if interrupted early.
            Err(left) => (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1) as c_uint,
        }
    }

    /// `usleep(3)`.
    #[cancel_point]
    #[gate(cooperative())]
    [time] fn usleep(us: libc::useconds_t) -> c_int {
        match sleep_for(Duration::from_micros(us.into())) {
            Ok(()) => 0,
            Err(_) => errno::fail(libc::EINTR),
        }
    }

    /// `sched_yield(2)`: lets the other fibers run; while some wait for
    /// I/O, after a look at it whose wake-ups run first
    /// (`hub::yield_for_io`), as the kernel runs a thread it woke before
    /// one that yields. Not then the direct hand-over of a plain yield,
    /// which polls only every 64: a thread that waits for work by yielding
    /// in a loop would hold back the fiber that waits for the I/O making
    /// that work.
    #[gate(cooperative())]
    [time] fn sched_yield() -> c_int {
        hub::yield_for_io();
        crate::async_cancel_point();
        0
    }
}

/// `pthread_yield(3)` (deprecated alias of `sched_yield`). Not in the
/// interpose table: glibc keeps it only as a compatibility symbol (no
/// default version to bind to), and macOS never had it.
#[cfg(greenhook_linux_hooks)]
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_yield")]
pub unsafe extern "C-unwind" fn pthread_yield() -> c_int {
    // SAFETY: same contract.
    unsafe { sched_yield() }
}
