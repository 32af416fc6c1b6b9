//! Condition variables, emulated with no state but their waiters (the
//! condvar's wait list, or the hub's queue keyed by its address when it is
//! process-shared): a signal wakes the oldest waiter and a broadcast all. A
//! wait is a cancellation point, before and after it.

use std::sync::atomic::Ordering;

use libc::{c_int, clockid_t, pthread_cond_t, pthread_mutex_t, timespec};

use super::{mutex, word, Kind, Wait, Waiters};
use crate::gate::emulating;
use crate::hook::hook;

/// `__wrefs`, at byte 36 in glibc's layout: bit 0 process-shared, bit 1
/// the clock chosen with `pthread_condattr_setclock`.
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

/// Where the condvar's waiters wait: its wait list in `__wseq` and
/// `__g1_start` (bytes 0..16), unless it is process-shared.
///
/// # Safety
/// `c` is a live condvar.
#[inline]
unsafe fn waiters(c: *mut pthread_cond_t) -> Waiters {
    let a = c as usize;
    // SAFETY: per the contract; the condvar is 48 bytes, 8-aligned.
    unsafe { Waiters::of(a, 0, word(a, WREFS).load(Ordering::Relaxed) & 1 != 0) }
}

/// Waits on an emulated condvar; `timeout`: None = forever, Some((clock, ts)).
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex.
unsafe fn wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    timeout: Option<(clockid_t, *const timespec)>,
) -> c_int {
    crate::cancel_point();
    let deadline = match timeout {
        None => None,
        Some((clock, ts)) => match crate::deadline::absolute_bounded(clock, ts) {
            Ok(d) => d,
            Err(e) => return e,
        },
    };
    // SAFETY: the caller's mutex.
    let saved = match unsafe { mutex::release(m, true) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    // SAFETY: the caller's condvar.
    let r = unsafe { waiters(c) }.park(Kind::Condvar, c as usize, 0, deadline, || true);
    // SAFETY: the caller's mutex.
    unsafe { mutex::acquire(m, Wait::Until(None)) };
    if saved > 1 {
        // SAFETY: the caller's mutex, which we own again.
        unsafe { word(m as usize, mutex::COUNT) }.store(saved, Ordering::Relaxed);
    }
    crate::cancel_point();
    if r == hub::Park::TimedOut {
        libc::ETIMEDOUT
    } else {
        0
    }
}

hook! {
    /// `pthread_cond_wait`.
    #[gate(emulating())]
    [sync] fn pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's objects.
        unsafe { wait(c, m, None) }
    }

    /// `pthread_cond_timedwait`, on the condvar's clock.
    #[gate(emulating())]
    [sync] fn pthread_cond_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's objects.
        unsafe { wait(c, m, Some((clock(c), t))) }
    }

    /// `pthread_cond_clockwait`.
    #[gate(emulating())]
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
    #[gate(emulating())]
    [sync] fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
        // SAFETY: the caller's condvar.
        unsafe { waiters(c) }.wake_one();
        0
    }

    /// `pthread_cond_broadcast`.
    #[gate(emulating())]
    [sync] fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
        // SAFETY: the caller's condvar.
        unsafe { waiters(c) }.wake_all();
        0
    }
}
