//! Process-shared rwlocks: glibc's, with the fiber that write-holds one
//! kept beside (see the [module docs](super)). A fiber's wait is glibc's
//! timed lock made by a waiter thread; a write lock is then handed to the
//! hub's thread (glibc's `__cur_writer`, which is how glibc tells a
//! writer's unlock from a reader's).

use std::sync::atomic::Ordering;

use libc::{c_int, pthread_rwlock_t};

use super::waiter::{self, leave_for_cancel, sliced, End};
use super::{alone, hold, holder, passed, unhold};
use crate::sync::rwlock::{
    pthread_rwlock_clockrdlock, pthread_rwlock_clockwrlock, pthread_rwlock_rdlock, pthread_rwlock_tryrdlock,
    pthread_rwlock_trywrlock, pthread_rwlock_unlock, pthread_rwlock_wrlock,
};
use crate::sync::{word, Wait};

/// `pthread_rwlock_t.__cur_writer` and `__shared` (bytes 24 and 28).
const CUR_WRITER: usize = 6;
const SHARED: usize = 7;

/// Whether the rwlock at `l` is process-shared.
///
/// # Safety
/// `l` is a live rwlock.
#[inline]
pub(in crate::sync) unsafe fn is_shared(l: *mut pthread_rwlock_t) -> bool {
    // SAFETY: per the contract (56 bytes).
    unsafe { word(l as usize, SHARED) }.load(Ordering::Relaxed) != 0
}

/// glibc's `clock*lock` of an rwlock in `write` mode or not, until `end`.
///
/// # Safety
/// `l` is a live rwlock.
unsafe fn clocklock(l: *mut pthread_rwlock_t, write: bool, end: &End) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        if write {
            pthread_rwlock_clockwrlock::real(l, end.clock, &end.at)
        } else {
            pthread_rwlock_clockrdlock::real(l, end.clock, &end.at)
        }
    }
}

/// glibc's lock of an rwlock, for writing or reading, its `try` form or
/// not.
///
/// # Safety
/// `l` is a live rwlock.
unsafe fn real_lock(l: *mut pthread_rwlock_t, write: bool, only_try: bool) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        match (write, only_try) {
            (true, true) => pthread_rwlock_trywrlock::real(l),
            (false, true) => pthread_rwlock_tryrdlock::real(l),
            (true, false) => pthread_rwlock_wrlock::real(l),
            (false, false) => pthread_rwlock_rdlock::real(l),
        }
    }
}

/// Locks a process-shared rwlock, for writing or reading, waiting as `wait`
/// says.
///
/// # Safety
/// `l` is a live rwlock.
pub(in crate::sync) unsafe fn lock(l: *mut pthread_rwlock_t, write: bool, wait: Wait) -> c_int {
    let a = l as usize;
    let me = hub::owner_id();
    loop {
        let r = match holder(a) {
            // glibc answers the writer at once (EDEADLK, or EBUSY).
            // SAFETY: per the contract; glibc does not block its writer here.
            Some(o) if o == me => return unsafe { real_lock(l, write, matches!(wait, Wait::Try)) },
            // Another fiber here writes (glibc would say EDEADLK for us).
            Some(_) => libc::EBUSY,
            // SAFETY: per the contract.
            None => unsafe { real_lock(l, write, true) },
        };
        if r != libc::EBUSY {
            if r == 0 && write {
                hold(a, me, false);
            }
            return r;
        }
        let deadline = match wait {
            Wait::Try => return libc::EBUSY,
            Wait::Until(d) => d,
        };
        if passed(deadline) {
            return libc::ETIMEDOUT;
        }
        let r = if alone() {
            // SAFETY: per the contract.
            unsafe {
                match deadline {
                    None => real_lock(l, write, false),
                    Some(_) => clocklock(l, write, &End::of(deadline)),
                }
            }
        } else {
            // glibc sees the hub's thread as the writer, whichever thread
            // took the lock for it.
            let tid = hub::internal::os_tid();
            let call = waiter::start(move |t| {
                let l = a as *mut pthread_rwlock_t;
                // SAFETY: the rwlock stays alive while its fiber waits, and
                // a cancelled fiber's thread stops within one slice.
                let r = sliced(t, deadline, |end| unsafe { clocklock(l, write, end) });
                let keep = || {
                    if write {
                        // SAFETY: as above; the word is glibc's __cur_writer.
                        unsafe { word(a, CUR_WRITER) }.store(tid, Ordering::Relaxed);
                    }
                };
                if r == 0 && !t.publish(0, keep) {
                    // SAFETY: as above; this thread holds the lock.
                    unsafe { pthread_rwlock_unlock::real(l) };
                } else if r != 0 {
                    t.publish(r, || {});
                }
            });
            match call {
                Some(call) => match call.finish(a, leave_for_cancel) {
                    Some(r) => r,
                    None => {
                        crate::async_cancel_point();
                        continue;
                    }
                },
                // SAFETY: per the contract.
                None => unsafe { clocklock(l, write, &End::of(deadline)) },
            }
        };
        if r == 0 && write {
            hold(a, me, false);
        }
        return r;
    }
}

/// Unlocks a process-shared rwlock.
///
/// # Safety
/// `l` is a live rwlock.
#[inline(never)] // the hook's rare path: keeps its common one small
pub(in crate::sync) unsafe fn unlock(l: *mut pthread_rwlock_t) -> c_int {
    let a = l as usize;
    match holder(a) {
        // Another fiber writes: the caller holds nothing (glibc would take
        // this for the writer's unlock).
        Some(o) if o != hub::owner_id() => libc::EPERM,
        w => {
            // SAFETY: per the contract.
            let r = unsafe { pthread_rwlock_unlock::real(l) };
            if r == 0 && w.is_some() {
                unhold(a);
            }
            r
        }
    }
}
