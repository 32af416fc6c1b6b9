//! Read-write locks, emulated in the caller's `pthread_rwlock_t`: one word
//! is -1 (a writer holds it) or the number of readers, another the
//! writer's owner id. Readers are preferred, as in glibc's default: a
//! reader gets in whenever no writer holds the lock, even while writers
//! wait; in a lock made `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`, a
//! new reader waits while a writer does. A process-shared rwlock
//! (`__shared`, set by glibc's init) is glibc's ([`super::pshared`]).

use std::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, clockid_t, pthread_rwlock_t, timespec};

use super::{park, tag, timed, wake_all, word, Kind, Wait};
use crate::gate::emulating_objects;
use crate::hook::hook;

/// `__readers`: -1 while a writer holds the lock, else the reader count.
const STATE: usize = 0;
/// `__cur_writer`: the writer's owner id.
pub(super) const WRITER: usize = 6;
/// `__writers`: 1 once a waiter may be parked, 0 after an unlock woke them
/// all; an unlock with none (the uncontended case) touches nothing else.
const WAITERS: usize = 1;
/// `__pad3`: how many writers wait (only counted, and only looked at, in a
/// writer-preferring lock).
const WRITERS_WAITING: usize = 4;
/// `__flags`: the kind from `pthread_rwlockattr_setkind_np`.
const FLAGS: usize = 12;
/// The kind in which waiting writers keep new readers out (glibc's only
/// writer-preferring kind: `PTHREAD_RWLOCK_PREFER_WRITER_NP` behaves as
/// the reader-preferring default there).
const PREFER_WRITER_NONRECURSIVE: i32 = 2;

/// Whether a lock operation is shared (read) or exclusive (write).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}
use Mode::{Read, Write};

/// Takes the lock in `mode` if it is free for that mode, `s` being the
/// state word's value just read: a writer when nobody holds it; a reader
/// when no writer holds it or, in a writer-preferring lock, waits for it
/// (writers are counted in such a lock only, so the count alone says it).
/// `Ok(false)`: taken by others, or the compare-and-swap lost;
/// `Err(EAGAIN)`: the reader count is full.
#[inline(always)]
fn take(state: &AtomicI32, writers_waiting: &AtomicI32, mode: Mode, s: i32) -> Result<bool, c_int> {
    let swap = |new| {
        state
            .compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    };
    match mode {
        Write => Ok(s == 0 && swap(-1)),
        Read if s >= 0 && writers_waiting.load(Ordering::Relaxed) == 0 => {
            if s == i32::MAX {
                return Err(libc::EAGAIN);
            }
            Ok(swap(s + 1))
        }
        Read => Ok(false),
    }
}

/// Locks an emulated rwlock in `mode`, waiting as `wait` says.
///
/// The uncontended case (a reader when no writer holds or, in a
/// writer-preferring lock, waits; a writer when the lock is free) is one
/// compare-and-swap here; everything else is [`lock_slow`]'s, out of line,
/// so the fast path saves no registers for a park it does not make.
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn lock(l: *mut pthread_rwlock_t, mode: Mode, wait: Wait) -> c_int {
    // SAFETY: the caller's rwlock.
    if unsafe { take_uncontended(l, mode, hub::owner_id) } {
        return 0;
    }
    // SAFETY: the caller's rwlock.
    unsafe { lock_slow(l, mode, wait) }
}

/// [`lock`]'s uncontended case: takes a private rwlock in `mode` if it is
/// free for it (see [`take`]), recording `me()` as the writer; false,
/// touching nothing, otherwise (a full reader count, `EAGAIN`, is the slow
/// path's to answer).
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn take_uncontended(l: *mut pthread_rwlock_t, mode: Mode, me: impl FnOnce() -> i32) -> bool {
    // SAFETY: the caller's rwlock.
    if unsafe { super::pshared::rwlock::is_shared(l) } {
        return false;
    }
    let a = l as usize;
    // SAFETY: the caller's rwlock (56 bytes).
    let (state, writers_waiting) = unsafe { (word(a, STATE), word(a, WRITERS_WAITING)) };
    if take(state, writers_waiting, mode, state.load(Ordering::Relaxed)) != Ok(true) {
        return false;
    }
    if mode == Write {
        // SAFETY: the caller's rwlock.
        unsafe { word(a, WRITER) }.store(me(), Ordering::Relaxed);
    }
    true
}

/// The fast path of the lock hooks without a deadline (see `hook!`'s
/// `#[fast_path]`): [`lock`]'s uncontended case, before the hook's entry,
/// as `mutex::lock_fast` (one compare-and-swap in the program's memory,
/// which a signal handler may come before or after, as in glibc's).
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn lock_fast(l: *mut pthread_rwlock_t, mode: Mode) -> Option<c_int> {
    let me = match mode {
        Read => hub::internal::lean_here().then_some(0),
        Write => Some(hub::internal::lean_owner_id()).filter(|&id| id != 0),
    }?;
    // SAFETY: the caller's rwlock.
    unsafe { take_uncontended(l, mode, || me) }.then_some(0)
}

/// `pthread_rwlock_rdlock`'s fast path.
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn rdlock_fast(l: *mut pthread_rwlock_t) -> Option<c_int> {
    // SAFETY: per the contract.
    unsafe { lock_fast(l, Read) }
}

/// `pthread_rwlock_wrlock`'s fast path.
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn wrlock_fast(l: *mut pthread_rwlock_t) -> Option<c_int> {
    // SAFETY: per the contract.
    unsafe { lock_fast(l, Write) }
}

/// `pthread_rwlock_unlock`'s fast path: a reader that is not the last, or
/// the last reader or the writer with nobody waiting, leaves by plain
/// stores, shielded from signal handlers (`hook::lean`) since one that
/// waits could let another fiber change the state between our look and
/// our store. Everything else (a wake-up, a wrong owner, an unlocked
/// lock) is the full hook's.
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn unlock_fast(l: *mut pthread_rwlock_t) -> Option<c_int> {
    // SAFETY: the caller's rwlock.
    if unsafe { super::pshared::rwlock::is_shared(l) } {
        return None;
    }
    let a = l as usize;
    crate::hook::lean(|| {
        // SAFETY: the caller's rwlock.
        let (state, waiters) = unsafe { (word(a, STATE), word(a, WAITERS)) };
        let s = state.load(Ordering::Relaxed);
        if s == 1 && waiters.load(Ordering::Relaxed) == 0 {
            // The last reader: a constant store, which does not wait for
            // the load (only the branch does, and it is predicted).
            state.store(0, Ordering::Release);
            return Some(0);
        }
        if s > 1 {
            state.store(s - 1, Ordering::Release);
            return Some(0);
        }
        if s == -1 && waiters.load(Ordering::Relaxed) == 0 {
            // SAFETY: the caller's rwlock.
            let writer = unsafe { word(a, WRITER) };
            if writer.load(Ordering::Relaxed) == hub::owner_id() {
                writer.store(0, Ordering::Relaxed);
                state.store(0, Ordering::Release);
                return Some(0);
            }
        }
        None
    })
}

/// [`lock`] when the lock is taken, or process-shared.
///
/// # Safety
/// `l` is a live rwlock.
#[cold]
#[inline(never)]
unsafe fn lock_slow(l: *mut pthread_rwlock_t, mode: Mode, wait: Wait) -> c_int {
    // SAFETY: the caller's rwlock.
    if unsafe { super::pshared::rwlock::is_shared(l) } {
        // SAFETY: the caller's rwlock.
        return unsafe { super::pshared::rwlock::lock(l, mode == Write, wait) };
    }
    let a = l as usize;
    // SAFETY: the caller's rwlock (56 bytes).
    let (state, writer, waiters) = unsafe { (word(a, STATE), word(a, WRITER), word(a, WAITERS)) };
    // SAFETY: as above.
    let (writers_waiting, flags) = unsafe { (word(a, WRITERS_WAITING), word(a, FLAGS)) };
    // A writer-preferring lock: a new reader waits while a writer does.
    // Writers are counted in such a lock only, so the count alone says it.
    let writer_waits = || writers_waiting.load(Ordering::Relaxed) > 0;
    let me = hub::owner_id();
    loop {
        let s = state.load(Ordering::Relaxed);
        if s == -1 && matches!(wait, Wait::Until(_)) && writer.load(Ordering::Relaxed) == me {
            return libc::EDEADLK;
        }
        let ok = match take(state, writers_waiting, mode, s) {
            Ok(ok) => ok,
            Err(e) => return e,
        };
        if ok {
            if mode == Write {
                writer.store(me, Ordering::Relaxed);
            }
            return 0;
        }
        let deadline = match wait {
            Wait::Try => return libc::EBUSY,
            Wait::Until(d) => d,
        };
        let busy = || {
            let s = state.load(Ordering::Relaxed);
            match mode {
                Write => s != 0,
                Read => s < 0 || writer_waits(),
            }
        };
        // Before `busy` is looked at again (the futex rule): an unlock
        // after this wakes us, one before it leaves the lock free. (Only
        // the fibers of one hub use an emulated rwlock, one at a time:
        // program order is enough, as for the state word's updates.)
        waiters.store(1, Ordering::Relaxed);
        let counted = mode == Write && flags.load(Ordering::Relaxed) == PREFER_WRITER_NONRECURSIVE;
        if counted {
            writers_waiting.fetch_add(1, Ordering::Relaxed);
        }
        let r = park(Kind::Rwlock, a, tag((mode == Write) as u32), deadline, busy);
        if counted && writers_waiting.fetch_sub(1, Ordering::Relaxed) == 1 && r == hub::Park::TimedOut {
            // The last waiting writer gives up: readers it kept out go in.
            waiters.store(0, Ordering::Relaxed);
            wake_all(a);
        }
        if r == hub::Park::TimedOut {
            return libc::ETIMEDOUT;
        }
    }
}

hook! {
    /// `pthread_rwlock_rdlock`.
    #[fast_path(rdlock_fast)]
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_rdlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock(l, Read, Wait::Until(None)) }
    }

    /// `pthread_rwlock_wrlock`.
    #[fast_path(wrlock_fast)]
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_wrlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock(l, Write, Wait::Until(None)) }
    }

    /// `pthread_rwlock_tryrdlock`.
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_tryrdlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock(l, Read, Wait::Try) }
    }

    /// `pthread_rwlock_trywrlock`.
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_trywrlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock(l, Write, Wait::Try) }
    }

    /// `pthread_rwlock_timedrdlock` (CLOCK_REALTIME).
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_timedrdlock(l: *mut pthread_rwlock_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(libc::CLOCK_REALTIME, t, |w| unsafe { lock(l, Read, w) })
    }

    /// `pthread_rwlock_timedwrlock` (CLOCK_REALTIME).
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_timedwrlock(l: *mut pthread_rwlock_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(libc::CLOCK_REALTIME, t, |w| unsafe { lock(l, Write, w) })
    }

    /// `pthread_rwlock_clockrdlock`.
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_clockrdlock(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(c, t, |w| unsafe { lock(l, Read, w) })
    }

    /// `pthread_rwlock_clockwrlock`.
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_clockwrlock(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(c, t, |w| unsafe { lock(l, Write, w) })
    }

    /// `pthread_rwlock_unlock`: a writer wakes every waiter, and so does
    /// the last reader out.
    #[fast_path(unlock_fast)]
    #[gate(emulating_objects())]
    [sync] fn pthread_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        if unsafe { super::pshared::rwlock::is_shared(l) } {
            // SAFETY: the caller's rwlock.
            return unsafe { super::pshared::rwlock::unlock(l) };
        }
        let a = l as usize;
        // SAFETY: the caller's rwlock.
        let (state, writer, waiters) = unsafe { (word(a, STATE), word(a, WRITER), word(a, WAITERS)) };
        let s = state.load(Ordering::Relaxed);
        let wake = |waiters: &std::sync::atomic::AtomicI32| {
            if waiters.load(Ordering::Relaxed) != 0 {
                waiters.store(0, Ordering::Relaxed);
                wake_all(a);
            }
        };
        if s == -1 {
            if writer.load(Ordering::Relaxed) != hub::owner_id() {
                return libc::EPERM;
            }
            writer.store(0, Ordering::Relaxed);
            state.store(0, Ordering::Release);
            wake(waiters);
        } else if s > 0 {
            state.store(s - 1, Ordering::Release);
            if s == 1 {
                wake(waiters);
            }
        } else {
            return libc::EPERM;
        }
        0
    }
}
