//! Mutexes, emulated in the caller's `pthread_mutex_t` (the words are in
//! the [module docs](super)): normal, recursive and errorcheck kinds, and
//! robust mutexes whose owner fiber ended.
//!
//! The uncontended path is one compare-and-swap to lock and plain stores to
//! unlock: no system call, no allocation, and no atomic read-modify-write
//! on an unlock that finds nobody waiting (`__lock` is 1, not 2).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use libc::{c_int, clockid_t, pthread_mutex_t, timespec};

use super::{park, tag, timed, wake_one, word, Kind, Wait};
use crate::gate::emulating_objects;
use crate::hook::hook;

const LOCK: usize = 0;
pub(super) const COUNT: usize = 1;
pub(super) const OWNER: usize = 2;
const KIND: usize = 4;
const ROBUST: usize = 5;
const KIND_ROBUST_FLAG: i32 = 16;
/// glibc's `PTHREAD_MUTEX_PSHARED_BIT`.
const KIND_PSHARED_FLAG: i32 = 128;
const ROBUST_DIED: i32 = 1;
const ROBUST_UNRECOVERABLE: i32 = 2;
const KIND_RECURSIVE: i32 = 1;
const KIND_ERRORCHECK: i32 = 2;
/// `__lock` values, as glibc's.
const LOCKED: i32 = 1;
const LOCKED_WAITERS: i32 = 2;

/// Robust mutexes held, by owner id; per OS thread (see `hub::PerThread`).
static ROBUST_HELD: hub::PerThread<RefCell<HashMap<i32, Vec<usize>>>> =
    hub::PerThread::new(|| RefCell::new(HashMap::new()));

/// The mutex kind (0 normal/adaptive, 1 recursive, 2 errorcheck) from the
/// `__kind` word.
fn kind_of(kind_word: i32) -> i32 {
    let k = kind_word & 3;
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
#[inline]
pub(super) unsafe fn acquire(m: *mut pthread_mutex_t, wait: Wait) -> c_int {
    let a = m as usize;
    // SAFETY: per the contract (pthread_mutex_t is 40 bytes, 8-aligned).
    let kind_word = unsafe { word(a, KIND) }.load(Ordering::Relaxed);
    // SAFETY: per the contract.
    if unsafe { take_free(a, kind_word, hub::owner_id) } {
        return 0;
    }
    // SAFETY: per the contract.
    unsafe { acquire_slow(a, kind_word, wait) }
}

/// The uncontended lock: a free mutex, neither robust nor process-shared,
/// taken by one compare-and-swap, then `me()` recorded as its owner; false,
/// touching nothing, otherwise.
///
/// # Safety
/// `a` is a live mutex whose `__kind` word is `kind_word`.
#[inline(always)]
unsafe fn take_free(a: usize, kind_word: i32, me: impl FnOnce() -> i32) -> bool {
    // SAFETY: per the contract.
    let lock = unsafe { word(a, LOCK) };
    if kind_word & (KIND_ROBUST_FLAG | KIND_PSHARED_FLAG) != 0
        || lock
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return false;
    }
    // SAFETY: per the contract.
    unsafe {
        word(a, OWNER).store(me(), Ordering::Relaxed);
        word(a, COUNT).store(1, Ordering::Relaxed);
    }
    true
}

/// `pthread_mutex_lock`'s fast path, before the hook's entry (see
/// `hook!`'s `#[fast_path]`): a free mutex of the fibers' thread taken by
/// one compare-and-swap in the program's memory. It holds no hook depth:
/// a signal handler may run anywhere in it, as in glibc's lock, since
/// nothing of greenhook's is half-updated there and the swap is atomic;
/// the owner and count stores after it are read only by their owner or
/// by waiters, who find 0 until then (an unlock leaves 0). Nor is it a
/// time slice's end: the unlock is.
///
/// # Safety
/// `m` is a live mutex, as for `pthread_mutex_lock`.
#[inline(always)]
unsafe fn lock_fast(m: *mut pthread_mutex_t) -> Option<c_int> {
    let me = hub::internal::lean_owner_id();
    let a = m as usize;
    // SAFETY: per the contract.
    let kind_word = unsafe { word(a, KIND) }.load(Ordering::Relaxed);
    // SAFETY: per the contract.
    (me != 0 && unsafe { take_free(a, kind_word, || me) }).then_some(0)
}

/// `pthread_mutex_unlock`'s fast path: a normal mutex nobody waits for,
/// freed by plain stores, as [`release`]'s own fast path. A signal handler
/// coming between the look at the lock word and the store of 0 could let
/// another fiber mark the lock as waited for (a handler that waits), and
/// that mark would be lost: so this runs shielded (`hook::lean`), which
/// keeps handlers out until the stores are done, and then leaves as a hook
/// does.
///
/// # Safety
/// `m` is a live mutex, as for `pthread_mutex_unlock`.
#[inline(always)]
unsafe fn unlock_fast(m: *mut pthread_mutex_t) -> Option<c_int> {
    let a = m as usize;
    // SAFETY: per the contract.
    if unsafe { word(a, KIND) }.load(Ordering::Relaxed) & (KIND_ROBUST_FLAG | KIND_PSHARED_FLAG | 3) != 0 {
        return None;
    }
    crate::hook::lean(|| {
        // SAFETY: per the contract.
        unsafe { release_unwaited(a) }.then_some(0)
    })
}

/// [`acquire`] when the lock is taken, or robust, or process-shared.
///
/// # Safety
/// `a` is a live mutex.
#[cold]
#[inline(never)]
unsafe fn acquire_slow(a: usize, kind_word: i32, wait: Wait) -> c_int {
    if super::pshared::mutex::kind_is_shared(kind_word) {
        // SAFETY: per the contract.
        return unsafe { super::pshared::mutex::lock(a as *mut pthread_mutex_t, wait) };
    }
    // SAFETY: per the contract.
    let (lock, count, owner, robust) = unsafe { (word(a, LOCK), word(a, COUNT), word(a, OWNER), word(a, ROBUST)) };
    let me = hub::owner_id();
    let robust_kind = kind_word & KIND_ROBUST_FLAG != 0;
    if owner.load(Ordering::Relaxed) == me && lock.load(Ordering::Relaxed) != 0 {
        match (kind_of(kind_word), wait) {
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
        if robust_kind && robust.load(Ordering::Relaxed) == ROBUST_UNRECOVERABLE {
            return libc::ENOTRECOVERABLE;
        }
        let taken = if hub::parked(a) == 0 { LOCKED } else { LOCKED_WAITERS };
        if lock
            .compare_exchange(0, taken, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            owner.store(me, Ordering::Relaxed);
            count.store(1, Ordering::Relaxed);
            if robust_kind {
                // The map may grow: an allocator's lock taken meanwhile
                // must not come back into these hooks and park.
                let _g = hub::internal::Guard::new();
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
        // Tell the unlocker there is someone to wake.
        let _ = lock.compare_exchange(LOCKED, LOCKED_WAITERS, Ordering::Relaxed, Ordering::Relaxed);
        let busy = || lock.load(Ordering::Relaxed) != 0;
        // A holder on another OS thread unlocks through glibc, whose wake-up
        // goes to the kernel, not to the hub: look again now and then.
        let nap = super::foreign_nap(deadline);
        if park(Kind::Mutex, a, tag(0), nap, busy) == hub::Park::TimedOut && nap == deadline {
            return libc::ETIMEDOUT;
        }
    }
}

/// Unlocks an emulated mutex; `full` releases every recursion level and
/// returns the count it had (for condvar waits).
///
/// # Safety
/// `m` is a live mutex.
#[inline]
pub(super) unsafe fn release(m: *mut pthread_mutex_t, full: bool) -> Result<i32, c_int> {
    let a = m as usize;
    // SAFETY: per the contract.
    let kind_word = unsafe { word(a, KIND) }.load(Ordering::Relaxed);
    // SAFETY: per the contract.
    if kind_word & (KIND_ROBUST_FLAG | KIND_PSHARED_FLAG | 3) == 0 && unsafe { release_unwaited(a) } {
        return Ok(1);
    }
    // SAFETY: per the contract.
    unsafe { release_slow(a, kind_word, full) }
}

/// Frees a normal mutex if nobody waits for it (glibc does not check the
/// owner of a normal mutex either); false, touching nothing, if a waiter
/// may.
///
/// The look at the word and the store of 0 are two plain instructions: a
/// fiber of this thread cannot come between them, but a thread that is not
/// a fiber can, with glibc's lock (its exchange to 2, then a sleep in the
/// kernel that our 0 would never end). So they are a [`gate::plain`]
/// sequence: once such a thread is known, every unlock is glibc's own
/// shape instead, an atomic exchange and a wake-up if it found 2
/// (`release_slow`).
///
/// [`gate::plain`]: crate::gate::plain
///
/// # Safety
/// `a` is a live normal mutex, and no signal handler runs meanwhile (a
/// hook depth or `hook::lean`'s shield is held).
#[inline(always)]
unsafe fn release_unwaited(a: usize) -> bool {
    crate::gate::plain(|| {
        // SAFETY: per the contract.
        let lock = unsafe { word(a, LOCK) };
        if lock.load(Ordering::Relaxed) != LOCKED {
            return None;
        }
        // SAFETY: per the contract.
        unsafe {
            word(a, OWNER).store(0, Ordering::Relaxed);
            word(a, COUNT).store(0, Ordering::Relaxed);
        }
        lock.store(0, Ordering::Release);
        Some(())
    })
    .is_some()
}

/// [`release`] for the other kinds, or with waiters.
///
/// # Safety
/// `a` is a live mutex.
#[cold]
#[inline(never)]
unsafe fn release_slow(a: usize, kind_word: i32, full: bool) -> Result<i32, c_int> {
    if super::pshared::mutex::kind_is_shared(kind_word) {
        // SAFETY: per the contract.
        return unsafe { super::pshared::mutex::unlock(a as *mut pthread_mutex_t, full) };
    }
    // SAFETY: per the contract.
    let (lock, count, owner) = unsafe { (word(a, LOCK), word(a, COUNT), word(a, OWNER)) };
    let k = kind_of(kind_word);
    let mine = owner.load(Ordering::Relaxed) == hub::owner_id() && lock.load(Ordering::Relaxed) != 0;
    if (k == KIND_RECURSIVE || k == KIND_ERRORCHECK) && !mine {
        return Err(libc::EPERM);
    }
    let c = count.load(Ordering::Relaxed);
    if k == KIND_RECURSIVE && !full && c > 1 {
        count.store(c - 1, Ordering::Relaxed);
        return Ok(c - 1);
    }
    if kind_word & KIND_ROBUST_FLAG != 0 {
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
    // SAFETY: per the contract.
    unsafe { unlock_and_wake(a) };
    Ok(c)
}

/// Frees the lock word and wakes one waiter, if it said there may be one.
///
/// # Safety
/// `a` is a live mutex.
unsafe fn unlock_and_wake(a: usize) {
    // SAFETY: per the contract.
    let lock = unsafe { word(a, LOCK) };
    if lock.swap(0, Ordering::Release) == LOCKED_WAITERS && (!wake_one(a) || crate::gate::foreign_threads()) {
        // No fiber waited, or threads that are not fibers share pthread
        // objects with them: the 2 may be glibc's, from such a thread
        // sleeping in the kernel on this word. Wake it as glibc's unlock
        // would (if nobody sleeps there, the wake-up finds nobody).
        // SAFETY: per the contract.
        // (glibc's robust mutexes always use shared futexes.)
        let shared = unsafe { word(a, KIND) }.load(Ordering::Relaxed) & (KIND_PSHARED_FLAG | KIND_ROBUST_FLAG) != 0;
        super::futex_wake(lock, 1, shared);
    }
}

/// The calling fiber is ending: its robust mutexes become "owner died" and
/// are released (the next locker gets EOWNERDEAD).
pub(crate) fn owner_died() {
    let me = hub::owner_id();
    let held = ROBUST_HELD.with(|h| h.borrow_mut().remove(&me)).unwrap_or_default();
    for a in held {
        // SAFETY: a robust mutex this fiber locked and never unlocked; the
        // program must keep it alive while it may be locked.
        unsafe {
            word(a, ROBUST).store(ROBUST_DIED, Ordering::Relaxed);
            word(a, OWNER).store(0, Ordering::Relaxed);
            word(a, COUNT).store(0, Ordering::Relaxed);
            unlock_and_wake(a);
        }
    }
}

hook! {
    /// `pthread_mutex_consistent`.
    #[gate(emulating_objects())]
    [sync] fn pthread_mutex_consistent(m: *mut pthread_mutex_t) -> c_int {
        let a = m as usize;
        // SAFETY: the caller's mutex.
        if super::pshared::mutex::kind_is_shared(unsafe { word(a, KIND) }.load(Ordering::Relaxed)) {
            // SAFETY: the caller's mutex.
            return unsafe { super::pshared::mutex::consistent(m) };
        }
        // SAFETY: the caller's mutex.
        let (robust, owner, kind) = unsafe { (word(a, ROBUST), word(a, OWNER), word(a, KIND)) };
        if kind.load(Ordering::Relaxed) & KIND_ROBUST_FLAG == 0
            || robust.load(Ordering::Relaxed) != ROBUST_DIED
            || owner.load(Ordering::Relaxed) != hub::owner_id()
        {
            return libc::EINVAL;
        }
        robust.store(0, Ordering::Relaxed);
        0
    }

    /// `pthread_mutex_lock`.
    #[fast_path(lock_fast)]
    #[gate(emulating_objects())]
    [sync] fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        unsafe { acquire(m, Wait::Until(None)) }
    }

    /// `pthread_mutex_trylock`.
    #[gate(emulating_objects())]
    [sync] fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        unsafe { acquire(m, Wait::Try) }
    }

    /// `pthread_mutex_timedlock` (CLOCK_REALTIME).
    #[gate(emulating_objects())]
    [sync] fn pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's mutex.
        timed(libc::CLOCK_REALTIME, t, |w| unsafe { acquire(m, w) })
    }

    /// `pthread_mutex_clocklock`.
    #[gate(emulating_objects())]
    [sync] fn pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's mutex.
        timed(c, t, |w| unsafe { acquire(m, w) })
    }

    /// `pthread_mutex_unlock`.
    #[fast_path(unlock_fast)]
    [sync] fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
        if !emulating_objects() {
            // SAFETY: the caller's mutex.
            let waiters = unsafe { word(m as usize, LOCK) }.load(Ordering::Relaxed) == LOCKED_WAITERS;
            // SAFETY: the caller's mutex, forwarded unchanged.
            let r = unsafe { pthread_mutex_unlock::real(m) };
            if waiters {
                super::foreign_release(m as usize, 1);
            }
            return r;
        }
        // SAFETY: the caller's mutex.
        match unsafe { release(m, false) } {
            Ok(_) => 0,
            Err(e) => e,
        }
    }

    /// `pthread_mutex_destroy`: EBUSY while locked, else the real destroy
    /// (our state keeps the fields it checks as it expects them).
    #[gate(emulating_objects())]
    [sync] fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        if super::pshared::mutex::kind_is_shared(unsafe { word(m as usize, KIND) }.load(Ordering::Relaxed)) {
            // SAFETY: the caller's mutex.
            return unsafe { super::pshared::mutex::destroy(m) };
        }
        // SAFETY: the caller's mutex.
        if unsafe { word(m as usize, LOCK) }.load(Ordering::Relaxed) != 0 {
            return libc::EBUSY;
        }
        // SAFETY: the caller's mutex, unlocked.
        unsafe { pthread_mutex_destroy::real(m) }
    }
}
