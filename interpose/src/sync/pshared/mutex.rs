//! Process-shared mutexes: glibc's, with the fiber that holds one kept
//! beside (see the [module docs](super)). A fiber that finds one locked
//! marks its word contended as glibc's waiters do and sleeps in the kernel
//! on it through a waiter thread, then tries again.

use std::sync::atomic::Ordering;

use libc::{c_int, pthread_mutex_t};

use super::waiter::{self, leave_for_cancel, sliced, End};
use super::{alone, hold, holder, mutexes_of, passed, spin, unhold};
use crate::gate::emulating;
use crate::hook::hook;
use crate::sync::mutex::{
    pthread_mutex_clocklock, pthread_mutex_consistent, pthread_mutex_destroy, pthread_mutex_lock,
    pthread_mutex_trylock, pthread_mutex_unlock,
};
use crate::sync::{self, word, Kind, Wait};

/// glibc's `__kind` bits.
pub(super) const KIND_ROBUST: i32 = 16;
pub(super) const KIND_PI: i32 = 32;
pub(super) const KIND_PP: i32 = 64;
const KIND_PSHARED: i32 = 128;
const TYPE_RECURSIVE: i32 = 1;
const TYPE_ERRORCHECK: i32 = 2;
/// The words of `pthread_mutex_t` (as in `sync::mutex`).
pub(super) const LOCK: usize = 0;
pub(super) const COUNT: usize = 1;
pub(super) const OWNER: usize = 2;
pub(super) const KIND: usize = 4;
/// A robust mutex's lock word: the owner's tid, and these.
const FUTEX_WAITERS: i32 = 0x8000_0000_u32 as i32;
const FUTEX_OWNER_DIED: i32 = 0x4000_0000;
const FUTEX_TID_MASK: i32 = 0x3fff_ffff;
/// glibc's `__owner` of a robust mutex made unrecoverable.
const NOTRECOVERABLE: i32 = i32::MAX - 1;

/// Whether a mutex of this `__kind` is process-shared.
#[inline]
pub(in crate::sync) fn kind_is_shared(kind: i32) -> bool {
    kind & KIND_PSHARED != 0
}

hook! {
    /// `pthread_mutex_init`: glibc's. glibc marks every robust mutex
    /// process-shared in `__kind` (the kernel wakes a dead owner's waiters
    /// with shared futex operations), so a robust mutex made private loses
    /// the mark here: it is one of ours, emulated. (Only initialising one
    /// does not make the caller a thread that shares objects with fibers:
    /// `emulating`, not `emulating_objects`.)
    #[gate(emulating())]
    [sync] fn pthread_mutex_init(m: *mut pthread_mutex_t, attr: *const libc::pthread_mutexattr_t) -> c_int {
        // SAFETY: the caller's mutex and attribute, forwarded unchanged.
        let r = unsafe { pthread_mutex_init::real(m, attr) };
        let (mut shared, mut robust) = (libc::PTHREAD_PROCESS_PRIVATE, libc::PTHREAD_MUTEX_STALLED);
        // SAFETY: an attribute glibc just accepted (these are not hooked).
        let private_robust = r == 0
            && !attr.is_null()
            && unsafe {
                libc::pthread_mutexattr_getpshared(attr, &mut shared) == 0
                    && libc::pthread_mutexattr_getrobust(attr, &mut robust) == 0
            }
            && shared == libc::PTHREAD_PROCESS_PRIVATE
            && robust == libc::PTHREAD_MUTEX_ROBUST;
        if private_robust {
            // SAFETY: the caller's mutex, just initialised.
            unsafe { word(m as usize, KIND) }.fetch_and(!KIND_PSHARED, Ordering::Relaxed);
        }
        r
    }
}

/// Whether glibc checks the owner of a mutex of this `__kind` on unlock.
pub(super) fn owner_checked(kind: i32) -> bool {
    kind & (KIND_ROBUST | KIND_PI) != 0 || matches!(kind & 3, TYPE_RECURSIVE | TYPE_ERRORCHECK)
}

/// Locks a process-shared mutex, waiting as `wait` says.
///
/// # Safety
/// `m` is a live mutex.
pub(in crate::sync) unsafe fn lock(m: *mut pthread_mutex_t, wait: Wait) -> c_int {
    let a = m as usize;
    // SAFETY: per the contract.
    let kind = unsafe { word(a, KIND) }.load(Ordering::Relaxed);
    let me = hub::owner_id();
    let mut waited = false;
    loop {
        // SAFETY: per the contract.
        let r = match unsafe { try_here(m, kind, me, wait) } {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        match r {
            0 | libc::EOWNERDEAD => {
                if waited {
                    // SAFETY: per the contract.
                    unsafe { still_contended(a, kind) };
                }
                hold(a, me, true);
                return r;
            }
            libc::EBUSY => {}
            e => return e,
        }
        let deadline = match wait {
            Wait::Try => return libc::EBUSY,
            Wait::Until(d) => d,
        };
        if passed(deadline) {
            return libc::ETIMEDOUT;
        }
        if alone() {
            // SAFETY: per the contract.
            let r = unsafe {
                match deadline {
                    None => pthread_mutex_lock::real(m),
                    Some(_) => {
                        let end = End::of(deadline);
                        pthread_mutex_clocklock::real(m, end.clock, &end.at)
                    }
                }
            };
            if r == 0 || r == libc::EOWNERDEAD {
                hold(a, me, true);
            }
            return r;
        }
        waited = true;
        // SAFETY: per the contract.
        if !unsafe { wait_for_unlock(a, kind, deadline) } {
            crate::async_cancel_point();
        }
    }
}

/// One try at locking the process-shared mutex at `m` (of `kind`) for
/// `me`, without waiting: `Ok` with glibc's trylock answer (`EBUSY`: wait),
/// or `Err` with the final answer.
///
/// # Safety
/// `m` is a live mutex.
unsafe fn try_here(m: *mut pthread_mutex_t, kind: i32, me: i32, wait: Wait) -> Result<c_int, c_int> {
    let a = m as usize;
    match holder(a) {
        // glibc answers its owner at once (EDEADLK, or one level more).
        Some(o) if o == me && matches!(kind & 3, TYPE_RECURSIVE | TYPE_ERRORCHECK) => Err(match wait {
            // SAFETY: per the contract.
            Wait::Try => unsafe { pthread_mutex_trylock::real(m) },
            // SAFETY: per the contract; glibc does not block its owner here.
            Wait::Until(_) => unsafe { pthread_mutex_lock::real(m) },
        }),
        // Another fiber here holds it (glibc would take it for us), or we
        // relock a normal one (which waits, as glibc's does).
        Some(_) => Ok(libc::EBUSY),
        None => {
            // SAFETY: per the contract.
            let owner = unsafe { word(a, OWNER) }.load(Ordering::Relaxed);
            if matches!(wait, Wait::Until(_)) && kind & KIND_ROBUST != 0 && owner == NOTRECOVERABLE {
                // glibc's lock leaves an unrecoverable robust mutex
                // unlocked, its trylock locked: the lock answers at once.
                // SAFETY: per the contract.
                Ok(unsafe { pthread_mutex_lock::real(m) })
            } else {
                // SAFETY: per the contract.
                Ok(unsafe { pthread_mutex_trylock::real(m) })
            }
        }
    }
}

/// After a wait, a lock taken with `trylock` (which marks it uncontended)
/// is marked contended again, as glibc's waiters take it: others may still
/// sleep in the kernel, and our unlock must wake one.
///
/// # Safety
/// `a` is a live mutex that we hold.
unsafe fn still_contended(a: usize, kind: i32) {
    // SAFETY: per the contract.
    let lock = unsafe { word(a, LOCK) };
    if kind & (KIND_PI | KIND_PP) != 0 {
    } else if kind & KIND_ROBUST != 0 {
        lock.fetch_or(FUTEX_WAITERS, Ordering::Relaxed);
    } else {
        let _ = lock.compare_exchange(1, 2, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Waits until the mutex at `a` may be free (or the deadline): marks it
/// contended as glibc's waiters do and sleeps in the kernel on its word,
/// on a waiter thread. False when a pending cancellation made us leave.
///
/// # Safety
/// `a` is a live mutex.
unsafe fn wait_for_unlock(a: usize, kind: i32, deadline: Option<hub::Deadline>) -> bool {
    // SAFETY: per the contract.
    let lock = unsafe { word(a, LOCK) };
    // Held: the owner's tid (robust, PI), 1 or 2 (plain); a PP mutex's
    // word also holds its ceiling.
    let held_bits = if kind & KIND_PP != 0 { 3 } else { FUTEX_TID_MASK };
    if spin(|| lock.load(Ordering::Relaxed) & held_bits != 0) {
        return true;
    }
    let expect = if kind & (KIND_PI | KIND_PP) != 0 {
        // The kernel hands a PI mutex over to its own waiters only, and a
        // PP mutex's word holds glibc's ceiling: look again now and then
        // (our own unlocks wake us at once).
        nap(a, deadline);
        return true;
    } else if kind & KIND_ROBUST != 0 {
        // The owner's tid, with FUTEX_WAITERS set by whoever waits.
        let v = lock.load(Ordering::Relaxed);
        if v & FUTEX_TID_MASK == 0 {
            return true; // free, or its owner died: try again
        }
        let w = v | FUTEX_WAITERS;
        if v != w
            && lock
                .compare_exchange(v, w, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return true;
        }
        w
    } else {
        // 0 free, 1 locked, 2 locked with waiters.
        match lock.load(Ordering::Relaxed) {
            0 => return true,
            1 if lock
                .compare_exchange(1, 2, Ordering::Relaxed, Ordering::Relaxed)
                .is_err() =>
            {
                return true
            }
            _ => {}
        }
        2
    };
    let call = waiter::start(move |t| {
        // SAFETY: the mutex stays alive while its fiber waits, and a
        // cancelled fiber's thread stops within one slice.
        let lock = unsafe { word(a, LOCK) };
        let r = sliced(t, deadline, |end| waiter::futex_wait(lock, expect, end, true));
        if !t.publish(r, || {}) && r == 0 {
            // The wake-up was meant for a waiter: pass it on.
            sync::futex_wake(lock, 1, true);
        }
    });
    match call {
        Some(call) => call.finish(a, leave_for_cancel).is_some(),
        None => {
            nap(a, deadline);
            true
        }
    }
}

/// Parks for [`FOREIGN_NAP`](sync::FOREIGN_NAP) at most (an unlock here
/// wakes us sooner).
fn nap(a: usize, deadline: Option<hub::Deadline>) {
    sync::park(Kind::Mutex, a, sync::tag(0), Some(sync::nap_until(deadline)), || true);
}

/// Unlocks a process-shared mutex; `full` releases every level of a
/// recursive one. Returns the levels released.
///
/// # Safety
/// `m` is a live mutex.
pub(in crate::sync) unsafe fn unlock(m: *mut pthread_mutex_t, full: bool) -> Result<i32, c_int> {
    let a = m as usize;
    // SAFETY: per the contract.
    let (kind, count) = unsafe {
        (
            word(a, KIND).load(Ordering::Relaxed),
            word(a, COUNT).load(Ordering::Relaxed),
        )
    };
    if owner_checked(kind) && holder(a).is_some_and(|o| o != hub::owner_id()) {
        // glibc would see its owner thread; the owner is another fiber.
        return Err(libc::EPERM);
    }
    let recursive = kind & 3 == TYPE_RECURSIVE;
    let levels = if full && recursive { count.max(1) } else { 1 };
    for _ in 0..levels {
        // SAFETY: per the contract.
        match unsafe { pthread_mutex_unlock::real(m) } {
            0 => {}
            e => return Err(e),
        }
    }
    if !recursive || count <= levels {
        unhold(a);
        if kind & (KIND_PI | KIND_PP) != 0 {
            sync::wake_one(a); // a fiber here looking again now and then
        }
    }
    Ok(levels)
}

/// `pthread_mutex_consistent` of a process-shared mutex: glibc's.
///
/// # Safety
/// `m` is a live mutex.
pub(in crate::sync) unsafe fn consistent(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { pthread_mutex_consistent::real(m) }
}

/// `pthread_mutex_destroy` of a process-shared mutex: glibc's.
///
/// # Safety
/// `m` is a live mutex.
pub(in crate::sync) unsafe fn destroy(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: per the contract.
    let r = unsafe { pthread_mutex_destroy::real(m) };
    if r == 0 {
        unhold(m as usize);
    }
    r
}

/// The calling fiber is ending: its process-shared robust mutexes become
/// "owner died", as the kernel makes them for a thread that ends holding
/// them (the hub's thread goes on, so that is ours to do).
pub(in crate::sync) fn owner_died() {
    let me = hub::owner_id();
    for a in mutexes_of(me) {
        // SAFETY: a mutex this fiber locked and never unlocked; the program
        // must keep it alive while it may be locked.
        let kind = unsafe { word(a, KIND) }.load(Ordering::Relaxed);
        if kind & KIND_ROBUST == 0 {
            continue; // natively it stays locked by a thread that is gone
        }
        unhold(a);
        if kind & KIND_PI != 0 {
            // Only the kernel hands a PI mutex over: unlocked plainly.
            // SAFETY: as above; glibc sees this thread as its owner.
            unsafe { pthread_mutex_unlock::real(a as *mut pthread_mutex_t) };
            continue;
        }
        // SAFETY: as above.
        unsafe { die_holding(a) };
    }
}

/// What the kernel does to a robust mutex whose owner thread ends (its
/// `handle_futex_death`), and what glibc's unlock would have done to this
/// thread's robust list: the mutex leaves the list (glibc's
/// `DEQUEUE_MUTEX`), its word becomes `FUTEX_OWNER_DIED` (keeping
/// `FUTEX_WAITERS`), and one waiter is woken. The next locker gets
/// `EOWNERDEAD`.
///
/// # Safety
/// `a` is a live, robust, not PI mutex that this thread holds in glibc.
unsafe fn die_holding(a: usize) {
    // `__list` (byte 24) is {__prev, __next}; both point at the `__next`
    // field of their neighbours (or at this thread's robust list head, which
    // glibc lays out the same way), with bit 0 marking a PI entry.
    const NEXT_OFFSET: usize = 8;
    let list = (a + 24) as *mut usize;
    // SAFETY: per the contract, the mutex is on this thread's robust list,
    // whose entries are live mutexes held by this thread (or its head), and
    // no other thread changes that list.
    unsafe {
        let prev = *list;
        let next = *list.add(1);
        let next_entry = ((next & !1) - NEXT_OFFSET) as *mut usize;
        *next_entry = prev; // next->__prev
        let prev_entry = ((prev & !1) - NEXT_OFFSET) as *mut usize;
        *prev_entry.add(1) = next; // prev->__next
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        *list = 0;
        *list.add(1) = 0;
    }
    // SAFETY: per the contract.
    let lock = unsafe { word(a, LOCK) };
    let mut v = lock.load(Ordering::Relaxed);
    while let Err(now) = lock.compare_exchange(
        v,
        (v & FUTEX_WAITERS) | FUTEX_OWNER_DIED,
        Ordering::Release,
        Ordering::Relaxed,
    ) {
        v = now;
    }
    if v & FUTEX_WAITERS != 0 {
        sync::futex_wake(lock, 1, true);
    }
}
