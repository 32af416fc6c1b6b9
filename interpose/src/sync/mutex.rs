//! Mutexes, emulated in the caller's `pthread_mutex_t` (the words are in
//! the [module docs](super)): normal, recursive and errorcheck kinds, and
//! robust mutexes whose owner fiber ended.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use libc::{c_int, clockid_t, pthread_mutex_t, timespec};

use super::{owner_id, park, timed, word, Kind, Wait};
use crate::gate::emulating;
use crate::hook::hook;

const LOCK: usize = 0;
pub(super) const COUNT: usize = 1;
pub(super) const OWNER: usize = 2;
const KIND: usize = 4;
const ROBUST: usize = 5;
const KIND_ROBUST_FLAG: i32 = 16;
const ROBUST_DIED: i32 = 1;
const ROBUST_UNRECOVERABLE: i32 = 2;
const KIND_RECURSIVE: i32 = 1;
const KIND_ERRORCHECK: i32 = 2;

thread_local! {
    /// Robust mutexes held, by owner id.
    static ROBUST_HELD: RefCell<HashMap<i32, Vec<usize>>> = RefCell::new(HashMap::new());
}

/// The mutex kind (0 normal/adaptive, 1 recursive, 2 errorcheck).
///
/// # Safety
/// `m` is a live mutex.
unsafe fn kind(m: usize) -> i32 {
    // SAFETY: per the contract.
    let k = unsafe { word(m, KIND) }.load(Ordering::Relaxed) & 3;
    if k == 3 {
        0
    } else {
        k
    }
}

/// Locks an emulated mutex, waiting as `wait` says.
///
/// # Safety
/// `m` is a live mutex.
pub(super) unsafe fn acquire(m: *mut pthread_mutex_t, wait: Wait) -> c_int {
    let a = m as usize;
    // SAFETY: per the contract (pthread_mutex_t is 40 bytes, 4-aligned).
    let (lock, count, owner) = unsafe { (word(a, LOCK), word(a, COUNT), word(a, OWNER)) };
    let me = owner_id();
    // SAFETY: per the contract.
    let k = unsafe { kind(a) };
    // SAFETY: per the contract.
    let robust_kind = unsafe { word(a, KIND) }.load(Ordering::Relaxed) & KIND_ROBUST_FLAG != 0;
    if owner.load(Ordering::Relaxed) == me && lock.load(Ordering::Relaxed) != 0 {
        match (k, wait) {
            (KIND_RECURSIVE, _) => {
                let c = count.load(Ordering::Relaxed);
                if c == -1 {
                    return libc::EAGAIN;
                }
                count.store(c + 1, Ordering::Relaxed);
                return 0;
            }
            (_, Wait::Try) => return libc::EBUSY,
            (KIND_ERRORCHECK, _) => return libc::EDEADLK,
            _ => {} // a normal mutex relocked by its owner deadlocks, as in glibc
        }
    }
    loop {
        // SAFETY: per the contract.
        let robust = unsafe { word(a, ROBUST) };
        if robust_kind && robust.load(Ordering::Relaxed) == ROBUST_UNRECOVERABLE {
            return libc::ENOTRECOVERABLE;
        }
        if lock
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            owner.store(me, Ordering::Relaxed);
            count.store(1, Ordering::Relaxed);
            if robust_kind {
                ROBUST_HELD.with(|h| h.borrow_mut().entry(me).or_default().push(a));
                if robust.load(Ordering::Relaxed) == ROBUST_DIED {
                    return libc::EOWNERDEAD;
                }
            }
            return 0;
        }
        let deadline = match wait {
            Wait::Try => return libc::EBUSY,
            Wait::Until(d) => d,
        };
        if park(Kind::Mutex, a, deadline, || lock.load(Ordering::Relaxed) != 0) == hub::Park::TimedOut {
            return libc::ETIMEDOUT;
        }
    }
}

/// Unlocks an emulated mutex; `full` releases every recursion level and
/// returns the count it had (for condvar waits).
///
/// # Safety
/// `m` is a live mutex.
pub(super) unsafe fn release(m: *mut pthread_mutex_t, full: bool) -> Result<i32, c_int> {
    let a = m as usize;
    // SAFETY: per the contract.
    let (lock, count, owner) = unsafe { (word(a, LOCK), word(a, COUNT), word(a, OWNER)) };
    // SAFETY: per the contract.
    let k = unsafe { kind(a) };
    let mine = owner.load(Ordering::Relaxed) == owner_id() && lock.load(Ordering::Relaxed) != 0;
    if (k == KIND_RECURSIVE || k == KIND_ERRORCHECK) && !mine {
        return Err(libc::EPERM);
    }
    let c = count.load(Ordering::Relaxed);
    if k == KIND_RECURSIVE && !full && c > 1 {
        count.store(c - 1, Ordering::Relaxed);
        return Ok(c - 1);
    }
    // SAFETY: per the contract.
    if unsafe { word(a, KIND) }.load(Ordering::Relaxed) & KIND_ROBUST_FLAG != 0 {
        let me = owner.load(Ordering::Relaxed);
        ROBUST_HELD.with(|h| {
            if let Some(v) = h.borrow_mut().get_mut(&me) {
                v.retain(|&x| x != a);
            }
        });
        // SAFETY: per the contract.
        let robust = unsafe { word(a, ROBUST) };
        if robust.load(Ordering::Relaxed) == ROBUST_DIED {
            robust.store(ROBUST_UNRECOVERABLE, Ordering::Relaxed);
        }
    }
    owner.store(0, Ordering::Relaxed);
    count.store(0, Ordering::Relaxed);
    lock.store(0, Ordering::Release);
    hub::unpark(a, 1);
    Ok(c)
}

/// The calling fiber is ending: its robust mutexes become "owner died" and
/// are released (the next locker gets EOWNERDEAD).
pub(crate) fn owner_died() {
    let me = owner_id();
    let held = ROBUST_HELD.with(|h| h.borrow_mut().remove(&me)).unwrap_or_default();
    for a in held {
        // SAFETY: a robust mutex this fiber locked and never unlocked; the
        // program must keep it alive while it may be locked.
        unsafe {
            word(a, ROBUST).store(ROBUST_DIED, Ordering::Relaxed);
            word(a, OWNER).store(0, Ordering::Relaxed);
            word(a, COUNT).store(0, Ordering::Relaxed);
            word(a, LOCK).store(0, Ordering::Release);
        }
        hub::unpark(a, 1);
    }
}

hook! {
    /// `pthread_mutex_consistent`.
    #[gate(emulating())]
    [sync] fn pthread_mutex_consistent(m: *mut pthread_mutex_t) -> c_int {
        let a = m as usize;
        // SAFETY: the caller's mutex.
        let (robust, owner, kind) = unsafe { (word(a, ROBUST), word(a, OWNER), word(a, KIND)) };
        if kind.load(Ordering::Relaxed) & KIND_ROBUST_FLAG == 0
            || robust.load(Ordering::Relaxed) != ROBUST_DIED
            || owner.load(Ordering::Relaxed) != owner_id()
        {
            return libc::EINVAL;
        }
        robust.store(0, Ordering::Relaxed);
        0
    }

    /// `pthread_mutex_lock`.
    #[gate(emulating())]
    [sync] fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        unsafe { acquire(m, Wait::Until(None)) }
    }

    /// `pthread_mutex_trylock`.
    #[gate(emulating())]
    [sync] fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        unsafe { acquire(m, Wait::Try) }
    }

    /// `pthread_mutex_timedlock` (CLOCK_REALTIME).
    #[gate(emulating())]
    [sync] fn pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's mutex.
        timed(libc::CLOCK_REALTIME, t, |w| unsafe { acquire(m, w) })
    }

    /// `pthread_mutex_clocklock`.
    #[gate(emulating())]
    [sync] fn pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's mutex.
        timed(c, t, |w| unsafe { acquire(m, w) })
    }

    /// `pthread_mutex_unlock`.
    #[gate(emulating())]
    [sync] fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        match unsafe { release(m, false) } {
            Ok(_) => 0,
            Err(e) => e,
        }
    }

    /// `pthread_mutex_destroy`: EBUSY while locked, else the real destroy
    /// (our state keeps the fields it checks as it expects them).
    #[gate(emulating())]
    [sync] fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        if unsafe { word(m as usize, LOCK) }.load(Ordering::Relaxed) != 0 {
            return libc::EBUSY;
        }
        // SAFETY: the caller's mutex, unlocked.
        unsafe { pthread_mutex_destroy::real(m) }
    }
}
