//! Process-shared condition variables: glibc's. A fiber's wait is made by
//! a waiter thread: with the caller's own mutex, which glibc then sees
//! handed to that thread for the wait, when glibc can hand it over (a
//! process-shared mutex neither robust nor PI nor PP), so glibc's atomic
//! release-and-wait and its re-lock are exactly glibc's; else with a
//! helper mutex of its own, the caller's mutex being released only once
//! glibc has queued the waiter thread on the condvar (so a signal sent
//! under the caller's mutex is never lost) and re-locked on the hub.

use std::cell::UnsafeCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::{c_int, clockid_t, pthread_cond_t, pthread_mutex_t, timespec};

use super::waiter::{self, Interrupted};
use super::{alone, hold, holder, mutex, unhold};
use crate::sync::cond::{pthread_cond_broadcast, pthread_cond_clockwait, pthread_cond_signal, pthread_cond_wait};
use crate::sync::mutex::{pthread_mutex_lock, pthread_mutex_unlock};
use crate::sync::{self, word, Wait};

/// `pthread_cond_t.__wrefs` (byte 36): bit 0 is "process-shared".
const WREFS: usize = 9;

/// Whether the condvar at `c` is process-shared.
///
/// # Safety
/// `c` is a live condvar.
#[inline]
pub(in crate::sync) unsafe fn is_shared(c: *mut pthread_cond_t) -> bool {
    // SAFETY: per the contract (48 bytes).
    unsafe { word(c as usize, WREFS) }.load(Ordering::Relaxed) & 1 != 0
}

/// A helper mutex of one condition wait (see the module docs).
struct Helper(UnsafeCell<pthread_mutex_t>);

// SAFETY: glibc's mutex functions are thread-safe; the cell is only ever
// passed to them.
unsafe impl Sync for Helper {}

impl Helper {
    fn get(&self) -> *mut pthread_mutex_t {
        self.0.get()
    }
}

/// Waits on a process-shared condvar; `timeout`: `None` = for ever, or the
/// clock and the caller's absolute time. A cancellation point.
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex.
pub(in crate::sync) unsafe fn wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    timeout: Option<(clockid_t, *const timespec)>,
) -> c_int {
    crate::cancel_point();
    // The caller's time, checked as our emulated waits check it (EINVAL,
    // EFAULT), and copied: glibc's wait is given the very clock and time.
    let until = match timeout {
        None => None,
        Some((clock, ts)) => match crate::deadline::absolute_bounded(clock, ts).and_then(|_| crate::deadline::read(ts))
        {
            Ok(t) => Some((clock, t)),
            Err(e) => return e,
        },
    };
    // SAFETY: per the contract.
    let kind = unsafe { word(m as usize, mutex::KIND) }.load(Ordering::Relaxed);
    let r = if !mutex::kind_is_shared(kind) {
        // SAFETY: per the contract.
        unsafe { wait_helped(c, m, until) }
    } else if alone() {
        // Nothing else could run: glibc's own wait, as natively.
        // SAFETY: per the contract.
        unsafe { glibc_wait(c, m, until) }
    } else if kind & (mutex::KIND_ROBUST | mutex::KIND_PI | mutex::KIND_PP) == 0 {
        // SAFETY: per the contract.
        unsafe { wait_handing_over(c, m, kind, until) }
    } else {
        // SAFETY: per the contract.
        unsafe { wait_helped(c, m, until) }
    };
    crate::cancel_point();
    r
}

/// The caller's clock and absolute time of a timed wait, or `None`.
type Until = Option<(clockid_t, timespec)>;

/// glibc's wait on `c` with the mutex `m`, until `until`.
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex.
unsafe fn glibc_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, until: Until) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        match until {
            None => pthread_cond_wait::real(c, m),
            Some((clock, t)) => pthread_cond_clockwait::real(c, m, clock, &t),
        }
    }
}

/// The interrupt policy of a condition wait on a waiter thread: a pending
/// cancellation acts once the caller's mutex is ours again, so the wait
/// must end. It ends by a broadcast (a spurious wake-up for every waiter,
/// which POSIX allows), once.
fn kick_for_cancel(c: *mut pthread_cond_t) -> impl FnMut() -> Interrupted {
    let mut kicked = false;
    move || {
        if crate::thread::cancel::any_pending() && !kicked {
            kicked = true;
            // SAFETY: the caller's condvar, alive while we wait on it.
            unsafe { pthread_cond_broadcast::real(c) };
        }
        Interrupted::Stay
    }
}

/// Or'ed into the hub thread's id while a mutex passes to a waiter thread:
/// above every thread id (the kernel's are below 2^22) and below glibc's
/// own markers (`0x7ffffffe`, `0x7fffffff`).
const HANDING_OVER: i32 = 0x4000_0000;

/// A condition wait with a mutex in glibc's hands (process-shared, neither
/// robust nor PI nor PP), made by a waiter thread with that very mutex:
/// glibc sees it handed to that thread for the wait (its `__owner`), so
/// glibc's atomic release-and-wait and its re-lock after are exactly
/// glibc's; the mutex is handed back to the hub's thread before the fiber
/// runs again.
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex of `kind`.
unsafe fn wait_handing_over(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, kind: i32, until: Until) -> c_int {
    let a = m as usize;
    let me = hub::owner_id();
    if mutex::owner_checked(kind) && holder(a) != Some(me) {
        // glibc checks the thread it sees, which is ours whichever fiber
        // holds the mutex.
        return libc::EPERM;
    }
    let hub_tid = hub::internal::os_tid();
    let ca = c as usize;
    // Until the waiter thread names itself the owner, glibc must not take
    // the hub's thread for it: another fiber's lock of a recursive or
    // error-checking mutex would succeed as a relock (or fail with
    // EDEADLK). A value no thread id takes, and none of glibc's markers.
    // SAFETY: the mutex is locked by us (checked above), so nobody else
    // writes its owner word.
    unsafe { word(a, mutex::OWNER) }.store(hub_tid | HANDING_OVER, Ordering::Relaxed);
    unhold(a);
    let call = waiter::start(move |t| {
        let (c, m) = (ca as *mut pthread_cond_t, a as *mut pthread_mutex_t);
        // SAFETY: the condvar and the mutex stay alive while a fiber waits
        // on them; the mutex is locked, by us, so nobody else writes its
        // owner word (glibc's `__owner`).
        let r = unsafe {
            word(a, mutex::OWNER).store(hub::internal::os_tid(), Ordering::Relaxed);
            glibc_wait(c, m, until)
        };
        // The mutex is the hub's thread's again only once the fiber runs
        // (below): until then another fiber's lock must still wait, not
        // take it for a relock.
        t.publish(r, || {
            // SAFETY: as above; glibc took the mutex back for this thread.
            unsafe { word(a, mutex::OWNER) }.store(hub_tid | HANDING_OVER, Ordering::Relaxed)
        });
    });
    let r = match call {
        Some(call) => {
            let r = call.finish(ca, kick_for_cancel(c)).unwrap_or(0);
            // SAFETY: the waiter thread holds the mutex for us and is done
            // with it; nobody else writes its owner word.
            unsafe { word(a, mutex::OWNER) }.store(hub_tid, Ordering::Relaxed);
            r
        }
        // No waiter thread: wait here, blocking the hub, as the owner
        // glibc checks (the marker is for a waiter thread only).
        None => {
            // SAFETY: as above: the mutex is locked by us.
            unsafe { word(a, mutex::OWNER) }.store(hub_tid, Ordering::Relaxed);
            // SAFETY: per the contract.
            unsafe { glibc_wait(c, m, until) }
        }
    };
    hold(a, me, true);
    r
}

/// A condition wait whose mutex glibc cannot hand to another thread (ours,
/// or robust, PI or PP), made by a waiter thread with a helper mutex of its
/// own: the caller's mutex is released only once glibc has queued the
/// waiter thread on the condvar (glibc let go of the helper), so a signal
/// sent under the caller's mutex is never lost; it is re-locked on the hub.
///
/// # Safety
/// `c` is a live condvar and `m` a live mutex.
unsafe fn wait_helped(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, until: Until) -> c_int {
    // SAFETY: an all-zero pthread_mutex_t is PTHREAD_MUTEX_INITIALIZER.
    let helper = Arc::new(Helper(UnsafeCell::new(unsafe { std::mem::zeroed() })));
    // SAFETY: our own fresh mutex: taken at once, by this thread.
    unsafe { pthread_mutex_lock::real(helper.get()) };
    let (ca, h) = (c as usize, helper.clone());
    let call = waiter::start(move |t| {
        let c = ca as *mut pthread_cond_t;
        // SAFETY: the condvar stays alive while a fiber waits on it; the
        // helper is ours (a normal mutex: glibc lets any thread unlock it).
        let r = unsafe {
            let r = glibc_wait(c, h.get(), until);
            pthread_mutex_unlock::real(h.get());
            r
        };
        t.publish(r, || {});
    });
    let Some(call) = call else {
        // No waiter thread: wait here, blocking the hub.
        // SAFETY: the caller's mutex.
        let saved = match unsafe { sync::mutex::release(m, true) } {
            Ok(n) => n,
            Err(e) => return e,
        };
        // SAFETY: the caller's condvar and our helper.
        let r = unsafe { glibc_wait(c, helper.get(), until) };
        // SAFETY: the caller's mutex.
        return unsafe { relock(m, saved) }.err().unwrap_or(r);
    };
    // SAFETY: our helper mutex; its lock word is only read.
    let queued = || unsafe { word(helper.get() as usize, mutex::LOCK) }.load(Ordering::Acquire) == 0;
    settle(|| queued() || call.done());
    // SAFETY: the caller's mutex.
    let saved = match unsafe { sync::mutex::release(m, true) } {
        Ok(n) => n,
        Err(e) => {
            // Not the caller's to wait with: our waiter leaves the queue.
            // SAFETY: the caller's condvar.
            unsafe { pthread_cond_broadcast::real(c) };
            call.finish(ca, || Interrupted::Stay);
            return e;
        }
    };
    let r = call.finish(ca, kick_for_cancel(c)).unwrap_or(0);
    // SAFETY: the caller's mutex.
    unsafe { relock(m, saved) }.err().unwrap_or(r)
}

/// Takes the caller's mutex back after a condition wait, with the
/// recursion levels it had. `Err` is what the wait must answer instead of
/// its own result, as glibc's does: `EOWNERDEAD` (taken all the same) or
/// `ENOTRECOVERABLE` from a robust mutex.
///
/// # Safety
/// `m` is a live mutex.
unsafe fn relock(m: *mut pthread_mutex_t, saved: i32) -> Result<(), c_int> {
    // SAFETY: per the contract.
    match unsafe { sync::mutex::acquire(m, Wait::Until(None)) } {
        0 => {}
        e => return Err(e),
    }
    if saved > 1 {
        // SAFETY: the caller's mutex, which we hold again (`__count` is
        // glibc's recursion count and ours alike).
        unsafe { word(m as usize, mutex::COUNT) }.store(saved, Ordering::Relaxed);
    }
    Ok(())
}

/// Lets other fibers run until `ready()` (a waiter thread's first steps:
/// tens of microseconds): yields for up to 200 µs, then naps 1 ms at a time
/// (the hub's timers are that coarse).
fn settle(mut ready: impl FnMut() -> bool) {
    let spin_until = Instant::now() + Duration::from_micros(200);
    while !ready() {
        if Instant::now() < spin_until {
            hub::yield_now();
        } else {
            hub::sleep(Duration::from_millis(1));
        }
    }
}

/// `pthread_cond_signal` / `pthread_cond_broadcast` of a process-shared
/// condvar: glibc's (every waiter of one sleeps in the kernel).
///
/// # Safety
/// `c` is a live condvar.
pub(in crate::sync) unsafe fn wake(c: *mut pthread_cond_t, all: bool) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        if all {
            pthread_cond_broadcast::real(c)
        } else {
            pthread_cond_signal::real(c)
        }
    }
}
