//! Condition variables, emulated without any state: waiters park on the
//! condvar's address, a signal wakes one of them and a broadcast all. A
//! wait is a cancellation point, before and after it. A process-shared
//! condvar is glibc's ([`super::pshared`]).

use std::sync::atomic::Ordering;

use libc::{c_int, clockid_t, pthread_cond_t, pthread_mutex_t, timespec};

use super::{mutex, park, tag, wake_all, wake_one, word, Kind, Wait};
use crate::gate::emulating_objects;
use crate::hook::hook;

/// `__wrefs`, at byte 36 in glibc's layout: bit 1 is the clock chosen
/// with `pthread_condattr_setclock`.
const WREFS: usize = 9;

/// The clock the condvar's timed waits use.
///
/// # Safety
/// `c` is a live condvar.
unsafe fn clock(c: *mut pthread_cond_t) -> clockid_t {
    // SAFETY: per the contract.
    if unsafe { word(c as usize, WREFS) }.load(Ordering::Relaxed) & 2 != 0 {
        libc::CLOCK_MONOTONIC
    } else {
        libc::CLOCK_REALTIME
    }
}

/// Waits on an emulated condvar; `timeout`: None = forever, Some((clock, ts)).
///
/// The common wait (untimed, private, only fibers use pthread objects) is
/// here; the others are [`wait_slow`]'s.
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex.
#[inline(always)]
unsafe fn wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    timeout: Option<(clockid_t, *const timespec)>,
) -> c_int {
    // SAFETY: the caller's condvar.
    if timeout.is_some() || crate::gate::foreign_threads() || unsafe { super::pshared::cond::is_shared(c) } {
        // SAFETY: the caller's objects.
        return unsafe { wait_slow(c, m, timeout) };
    }
    crate::cancel_point();
    // SAFETY: the caller's mutex.
    let (relocked, r) = match unsafe {
        released(
            m,
            #[inline(always)]
            || park(Kind::Condvar, c as usize, tag(0), None, || true),
        )
    } {
        Ok(done) => done,
        Err(e) => return e,
    };
    crate::cancel_point();
    // A robust mutex's EOWNERDEAD or ENOTRECOVERABLE, as glibc's; an
    // untimed park ends woken (or interrupted, a spurious wake-up).
    debug_assert!(r != hub::Park::TimedOut);
    relocked
}

/// Releases the mutex `m` wholly (every recursion level), runs `park`,
/// and locks `m` again at the level it had: the condvar wait's frame.
/// Returns the relock's answer (0, or a robust mutex's `EOWNERDEAD` or
/// `ENOTRECOVERABLE`) with the park's; `Err` is the release's error.
///
/// # Safety
/// `m` is a live mutex.
#[inline(always)]
unsafe fn released(m: *mut pthread_mutex_t, park: impl FnOnce() -> hub::Park) -> Result<(c_int, hub::Park), c_int> {
    // SAFETY: per the contract.
    let saved = unsafe { mutex::release(m, true) }?;
    let r = park();
    // SAFETY: per the contract.
    let relocked = unsafe { mutex::acquire(m, Wait::Until(None)) };
    if saved > 1 && relocked == 0 {
        // SAFETY: the caller's mutex, which we own again.
        unsafe { word(m as usize, mutex::COUNT) }.store(saved, Ordering::Relaxed);
    }
    Ok((relocked, r))
}

/// [`wait`] with a timeout, on a process-shared condvar, or once threads
/// that are not fibers use pthread objects.
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex.
#[cold]
#[inline(never)]
unsafe fn wait_slow(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    timeout: Option<(clockid_t, *const timespec)>,
) -> c_int {
    // SAFETY: the caller's condvar.
    if unsafe { super::pshared::cond::is_shared(c) } {
        // SAFETY: the caller's objects.
        return unsafe { super::pshared::cond::wait(c, m, timeout) };
    }
    crate::cancel_point();
    let deadline = match timeout {
        None => None,
        Some((clock, ts)) => match crate::deadline::absolute_bounded(clock, ts) {
            Ok(d) => d,
            Err(e) => return e,
        },
    };
    // No look now and then for a thread that is not a fiber: its signal
    // and broadcast come through our hooks too, which wake the fibers'
    // waiters from the hub's inbox (`foreign_release`), after this park.
    // A 2 ms re-check here returned every wait of the process as a
    // spurious wake-up once such a thread existed (libopenblas makes
    // them): a `wait_for(50 ms)` at once, and x265 crashed.
    let park_until = || park(Kind::Condvar, c as usize, tag(0), deadline, || true);
    // SAFETY: the caller's mutex.
    let (relocked, r) = match unsafe { released(m, park_until) } {
        Ok(done) => done,
        Err(e) => return e,
    };
    crate::cancel_point();
    if relocked != 0 {
        relocked // a robust mutex's EOWNERDEAD or ENOTRECOVERABLE, as glibc's
    } else if r == hub::Park::TimedOut {
        libc::ETIMEDOUT
    } else {
        0
    }
}

/// The fast path of `pthread_cond_signal` (`all`: of
/// `pthread_cond_broadcast`): the program's wake-up of a process-private
/// condvar on the fibers' thread, made as the full hook makes it, shielded
/// from signal handlers (`hook::lean`) instead of entering the hook.
/// Left to the full hook: a process-shared condvar, a thread that is not a
/// fiber known to use pthread objects (glibc's waiters may need the real
/// call), fibers of differing priorities (the woken may have to run at the
/// hook's return).
///
/// # Safety
/// `c` is a live condvar.
#[inline(always)]
unsafe fn wake_fast(c: *mut pthread_cond_t, all: bool) -> Option<c_int> {
    // SAFETY: the caller's condvar.
    if unsafe { super::pshared::cond::is_shared(c) }
        || crate::gate::foreign_threads()
        || hub::internal::priorities_differ()
    {
        return None;
    }
    // The hub's wake-ups themselves (`wake_one`'s and `wake_all`'s arms
    // for equal priorities), inlined here: through those two they stay
    // calls, and the ping-pong took ~3 ns more.
    crate::hook::lean(|| {
        if all {
            hub::unpark(c as usize, usize::MAX);
        } else {
            hub::unpark_where(c as usize, |_| true);
        }
        Some(0)
    })
}

/// `pthread_cond_signal`'s fast path (see [`wake_fast`]).
///
/// # Safety
/// `c` is a live condvar.
#[inline(always)]
unsafe fn signal_fast(c: *mut pthread_cond_t) -> Option<c_int> {
    // SAFETY: per the contract.
    unsafe { wake_fast(c, false) }
}

/// `pthread_cond_broadcast`'s fast path (see [`wake_fast`]).
///
/// # Safety
/// `c` is a live condvar.
#[inline(always)]
unsafe fn broadcast_fast(c: *mut pthread_cond_t) -> Option<c_int> {
    // SAFETY: per the contract.
    unsafe { wake_fast(c, true) }
}

hook! {
    /// `pthread_cond_wait`.
    #[gate(emulating_objects())]
    [sync] fn pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's objects.
        unsafe { wait(c, m, None) }
    }

    /// `pthread_cond_timedwait`, on the condvar's clock.
    #[gate(emulating_objects())]
    [sync] fn pthread_cond_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's objects.
        unsafe { wait(c, m, Some((clock(c), t))) }
    }

    /// `pthread_cond_clockwait`.
    #[gate(emulating_objects())]
    [sync] fn pthread_cond_clockwait(
        c: *mut pthread_cond_t,
        m: *mut pthread_mutex_t,
        k: clockid_t,
        t: *const timespec,
    ) -> c_int {
        // SAFETY: the caller's objects.
        unsafe { wait(c, m, Some((k, t))) }
    }

    /// `pthread_cond_signal`.
    #[fast_path(signal_fast)]
    [sync] fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
        if !emulating_objects() {
            // SAFETY: the caller's condvar, forwarded unchanged.
            let r = unsafe { pthread_cond_signal::real(c) };
            super::foreign_release(c as usize, 1);
            return r;
        }
        // SAFETY: the caller's condvar.
        if unsafe { super::pshared::cond::is_shared(c) } {
            // SAFETY: the caller's condvar.
            return unsafe { super::pshared::cond::wake(c, false) };
        }
        if !wake_one(c as usize) && crate::gate::foreign_threads() {
            // Perhaps a thread that is not a fiber waits through glibc
            // (whose state we never touch).
            // SAFETY: the caller's condvar.
            return unsafe { pthread_cond_signal::real(c) };
        }
        0
    }

    /// `pthread_cond_broadcast`.
    #[fast_path(broadcast_fast)]
    [sync] fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
        if !emulating_objects() {
            // SAFETY: the caller's condvar, forwarded unchanged.
            let r = unsafe { pthread_cond_broadcast::real(c) };
            super::foreign_release(c as usize, usize::MAX);
            return r;
        }
        // SAFETY: the caller's condvar.
        if unsafe { super::pshared::cond::is_shared(c) } {
            // SAFETY: the caller's condvar.
            return unsafe { super::pshared::cond::wake(c, true) };
        }
        wake_all(c as usize);
        if crate::gate::foreign_threads() {
            // SAFETY: the caller's condvar (see pthread_cond_signal).
            return unsafe { pthread_cond_broadcast::real(c) };
        }
        0
    }
}
