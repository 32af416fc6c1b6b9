//! Read-write locks, emulated in the caller's `pthread_rwlock_t`: one word
//! is -1 (a writer holds it) or the number of readers, another the
//! writer's owner id. Readers are preferred, as in glibc's default: a
//! reader gets in whenever no writer holds the lock, even while writers
//! wait; in a lock made `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`, a
//! new reader waits while a writer does. A process-shared rwlock
//! (`__shared`, set by glibc's init) is glibc's ([`super::pshared`]).
//!
//! A thread that is not the fibers' own (made with libc's own
//! `pthread_create`, a `SIGEV_THREAD` notification) cannot use glibc's
//! functions on these words, whose meaning is ours: it uses ours too
//! ([`foreign_lock`], [`unlock_shared_with_threads`]), by atomic instructions, and
//! sleeps in the kernel on the state word, counted in `__writers_futex`
//! ([`SLEEPERS`]). Once such a thread is known
//! (`gate::foreign_threads`) the fibers' unlocks are atomic too, and wake
//! both kinds of waiter. An unlock a fiber is making by plain stores when
//! the first such thread appears is finished before that thread goes on
//! (`gate::plain`).

use std::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, clockid_t, pthread_rwlock_t, timespec};

use super::{park, tag, timed, wake_all, word, Kind, Wait};
use crate::gate::ObjectsCaller;
use crate::hook::hook;

/// `__readers`: -1 while a writer holds the lock, else the reader count.
const STATE: usize = 0;
/// `__wrphase_futex`: never written here. glibc sets it in its write
/// phase, which outlasts the writer: a lock glibc's own functions wrote
/// and unlocked (in a library's constructor, run before the preload's
/// own, while the hooks still pass through) is left with 1 here and
/// `PTHREAD_RWLOCK_WRPHASE` (1) in [`STATE`], which read as ours say one
/// reader. No fiber takes such a lock (its read lock looks at this word
/// too); the slow paths make it ours, unlocked ([`settle`]).
const PHASE: usize = 2;
/// `__cur_writer`: the writer's owner id.
pub(super) const WRITER: usize = 6;
/// `__writers`: 1 once a fiber may be parked, 0 after an unlock woke them
/// all; an unlock with none (the uncontended case) touches nothing else.
const WAITERS: usize = 1;
/// `__writers_futex`: how many threads that are not fibers are in
/// [`foreign_lock`]'s wait, where they may sleep in the kernel on the state
/// word. A count, not a flag an unlock clears: a sleeper's flag cleared by
/// an unlock it did not wait for would leave it asleep at the next one.
const SLEEPERS: usize = 3;
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
///
/// `phase` is glibc's [`PHASE`] word: a reader does not count itself into
/// a state glibc left (a writer does not either, since that state is not
/// 0).
#[inline(always)]
fn take(state: &AtomicI32, writers_waiting: &AtomicI32, phase: &AtomicI32, mode: Mode, s: i32) -> Result<bool, c_int> {
    let swap = |new| {
        state
            .compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    };
    match mode {
        Write => Ok(s == 0 && swap(-1)),
        Read if s >= 0 && (writers_waiting.load(Ordering::Relaxed) | phase.load(Ordering::Relaxed)) == 0 => {
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
    let (state, writers_waiting, phase) = unsafe { (word(a, STATE), word(a, WRITERS_WAITING), word(a, PHASE)) };
    if take(state, writers_waiting, phase, mode, state.load(Ordering::Relaxed)) != Ok(true) {
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
        crate::gate::plain(|| {
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
    })
}

/// Makes a lock glibc's functions left unlocked in their write phase (see
/// [`PHASE`]; `s` is the state just read) ours and unlocked: the state
/// to 0, then the phase word. True if there was such a state to settle
/// (the caller looks again). A state of 0 with the word still set is one
/// another thread is settling: only the word is left to clear.
#[inline]
fn settle(state: &AtomicI32, phase: &AtomicI32, s: i32) -> bool {
    if phase.load(Ordering::Relaxed) == 0 || !(s == 0 || s == 1) {
        return false;
    }
    if s == 0
        || state
            .compare_exchange(1, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        phase.store(0, Ordering::Release);
    }
    true
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
    let (writers_waiting, flags, phase) = unsafe { (word(a, WRITERS_WAITING), word(a, FLAGS), word(a, PHASE)) };
    // A writer-preferring lock: a new reader waits while a writer does.
    // Writers are counted in such a lock only, so the count alone says it.
    let writer_waits = || writers_waiting.load(Ordering::Relaxed) > 0;
    let me = hub::owner_id();
    loop {
        let s = state.load(Ordering::Relaxed);
        if s == -1 && matches!(wait, Wait::Until(_)) && writer.load(Ordering::Relaxed) == me {
            return libc::EDEADLK;
        }
        if settle(state, phase, s) {
            continue;
        }
        let ok = match take(state, writers_waiting, phase, mode, s) {
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
        // Such a thread's unlock wakes us from its side, and the nap looks
        // again now and then besides, as a mutex's wait does.
        let nap = super::foreign_nap(deadline);
        let r = park(Kind::Rwlock, a, tag((mode == Write) as u32), nap, busy);
        let timed_out = r == hub::Park::TimedOut && nap == deadline;
        if counted && writers_waiting.fetch_sub(1, Ordering::Relaxed) == 1 && timed_out {
            // The last waiting writer gives up: readers it kept out go in.
            // SAFETY: the caller's rwlock.
            unsafe { wake_waiters(a) };
        }
        if timed_out {
            return libc::ETIMEDOUT;
        }
    }
}

/// Wakes every waiter of the rwlock at `a`, of both kinds: fibers on their
/// hub if its [`WAITERS`] word says there may be some, threads that are
/// not fibers in the kernel if [`SLEEPERS`] counts any. Called after the
/// state's change; the exchange is a full barrier between that change and
/// the count's load (a sleeper counts itself, then looks at the state).
///
/// A fiber that set [`WAITERS`] may find it cleared by an unlock made
/// before its park by a thread that is not a fiber; its park's nap
/// (`sync::foreign_nap`) looks again.
///
/// # Safety
/// `a` is a live rwlock.
unsafe fn wake_waiters(a: usize) {
    // SAFETY: per the contract.
    let (state, waiters, sleepers) = unsafe { (word(a, STATE), word(a, WAITERS), word(a, SLEEPERS)) };
    if waiters.swap(0, Ordering::SeqCst) != 0 {
        super::wake_all_fibers(a);
    }
    super::wake_sleepers(state, sleepers);
}

/// Unlocks an emulated rwlock by atomic instructions, from a thread that
/// is not a fiber, or from a fiber once such a thread is known: a reader
/// leaves by a compare-and-swap, since readers of the other kind may come
/// and go meanwhile; the last one out, or the writer, wakes every waiter.
///
/// # Safety
/// `a` is a live rwlock.
unsafe fn unlock_shared_with_threads(a: usize) -> c_int {
    // SAFETY: per the contract.
    let (state, writer) = unsafe { (word(a, STATE), word(a, WRITER)) };
    loop {
        let s = state.load(Ordering::Relaxed);
        if s == -1 {
            if writer.load(Ordering::Relaxed) != hub::owner_id() {
                return libc::EPERM;
            }
            // Nobody else changes the state while a writer holds it.
            writer.store(0, Ordering::Relaxed);
            state.store(0, Ordering::Release);
        } else if s > 0 {
            if state
                .compare_exchange(s, s - 1, Ordering::Release, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            if s > 1 {
                return 0;
            }
        } else {
            return libc::EPERM;
        }
        // SAFETY: per the contract.
        unsafe { wake_waiters(a) };
        return 0;
    }
}

/// Locks an emulated rwlock in `mode` from a thread that is not a fiber
/// (see the module docs): our words by atomic instructions, and a sleep in
/// the kernel on the state word while it is taken, until `wait`'s
/// deadline. Answers as [`lock_slow`] does.
///
/// # Safety
/// `l` is a live, process-private rwlock.
unsafe fn foreign_lock(l: *mut pthread_rwlock_t, mode: Mode, wait: Wait) -> c_int {
    let a = l as usize;
    // SAFETY: the caller's rwlock (56 bytes).
    let (state, writer, sleepers) = unsafe { (word(a, STATE), word(a, WRITER), word(a, SLEEPERS)) };
    // SAFETY: as above.
    let (writers_waiting, flags, phase) = unsafe { (word(a, WRITERS_WAITING), word(a, FLAGS), word(a, PHASE)) };
    let me = hub::owner_id();
    loop {
        let s = state.load(Ordering::Acquire);
        if s == -1 && matches!(wait, Wait::Until(_)) && writer.load(Ordering::Relaxed) == me {
            return libc::EDEADLK;
        }
        if settle(state, phase, s) {
            continue;
        }
        match take(state, writers_waiting, phase, mode, s) {
            Ok(true) => {
                if mode == Write {
                    writer.store(me, Ordering::Relaxed);
                }
                return 0;
            }
            Ok(false) => {}
            Err(e) => return e,
        }
        let deadline = match wait {
            Wait::Try => return libc::EBUSY,
            Wait::Until(d) => d,
        };
        let counted = mode == Write && flags.load(Ordering::Relaxed) == PREFER_WRITER_NONRECURSIVE;
        if counted {
            writers_waiting.fetch_add(1, Ordering::Relaxed);
        }
        // The futex rule: counted first, then a look at the state, and a
        // sleep only if it still holds what we saw (an unlock changes it,
        // then wakes the counted).
        sleepers.fetch_add(1, Ordering::SeqCst);
        let s = state.load(Ordering::SeqCst);
        let busy = match mode {
            Write => s != 0,
            Read => s < 0 || writers_waiting.load(Ordering::Relaxed) > 0,
        };
        let r = if busy {
            super::pshared::futex_wait(state, s, &super::pshared::End::of(deadline), false)
        } else {
            0
        };
        sleepers.fetch_sub(1, Ordering::Relaxed);
        if counted && writers_waiting.fetch_sub(1, Ordering::Relaxed) == 1 && r == libc::ETIMEDOUT {
            // The last waiting writer gives up: readers it kept out go in.
            // SAFETY: the caller's rwlock.
            unsafe { wake_waiters(a) };
        }
        if r == libc::ETIMEDOUT {
            return libc::ETIMEDOUT;
        }
    }
}

/// The lock hooks' body past [`ours`]: [`lock`] for a fiber,
/// [`foreign_lock`] for a thread that is not one (on a process-private
/// rwlock, as the gate lets through).
///
/// # Safety
/// `l` is a live rwlock.
#[inline(always)]
unsafe fn lock_here(l: *mut pthread_rwlock_t, mode: Mode, wait: Wait) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        if hub::is_fiber_thread() {
            lock(l, mode, wait)
        } else {
            foreign_lock(l, mode, wait)
        }
    }
}

/// The rwlock hooks' gate: the fibers' thread, or another OS thread while
/// they emulate rwlocks (`gate::ObjectsCaller::Beside`) on a
/// process-private `l`, which the hook then serves by [`foreign_lock`] or
/// [`unlock_shared_with_threads`]. Such a thread's process-shared rwlocks
/// stay glibc's. `l` is a hook's argument, the program's live rwlock.
#[inline(always)]
fn ours(l: *mut pthread_rwlock_t) -> bool {
    match crate::gate::objects_caller() {
        ObjectsCaller::Fibers => true,
        // SAFETY: the program's rwlock, passed to the hook (see above).
        ObjectsCaller::Beside => !unsafe { super::pshared::rwlock::is_shared(l) },
        ObjectsCaller::Neither => false,
    }
}

hook! {
    /// `pthread_rwlock_rdlock`.
    #[fast_path(rdlock_fast)]
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_rdlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock_here(l, Read, Wait::Until(None)) }
    }

    /// `pthread_rwlock_wrlock`.
    #[fast_path(wrlock_fast)]
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_wrlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock_here(l, Write, Wait::Until(None)) }
    }

    /// `pthread_rwlock_tryrdlock`.
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_tryrdlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock_here(l, Read, Wait::Try) }
    }

    /// `pthread_rwlock_trywrlock`.
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_trywrlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        unsafe { lock_here(l, Write, Wait::Try) }
    }

    /// `pthread_rwlock_timedrdlock` (CLOCK_REALTIME).
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_timedrdlock(l: *mut pthread_rwlock_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(libc::CLOCK_REALTIME, t, |w| unsafe { lock_here(l, Read, w) })
    }

    /// `pthread_rwlock_timedwrlock` (CLOCK_REALTIME).
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_timedwrlock(l: *mut pthread_rwlock_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(libc::CLOCK_REALTIME, t, |w| unsafe { lock_here(l, Write, w) })
    }

    /// `pthread_rwlock_clockrdlock`.
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_clockrdlock(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(c, t, |w| unsafe { lock_here(l, Read, w) })
    }

    /// `pthread_rwlock_clockwrlock`.
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_clockwrlock(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's rwlock.
        timed(c, t, |w| unsafe { lock_here(l, Write, w) })
    }

    /// `pthread_rwlock_unlock`: a writer wakes every waiter, and so does
    /// the last reader out.
    #[fast_path(unlock_fast)]
    #[gate(ours(l))]
    [sync] fn pthread_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's rwlock.
        if unsafe { super::pshared::rwlock::is_shared(l) } {
            // SAFETY: the caller's rwlock.
            return unsafe { super::pshared::rwlock::unlock(l) };
        }
        let a = l as usize;
        // A thread that is not a fiber got here noted (see `ours`); the
        // plain sequence below is the fibers' thread's alone.
        if crate::gate::foreign_threads() {
            // SAFETY: the caller's rwlock.
            return unsafe { unlock_shared_with_threads(a) };
        }
        // SAFETY: the caller's rwlock.
        let (state, writer, waiters) = unsafe { (word(a, STATE), word(a, WRITER), word(a, WAITERS)) };
        // Err is the answer; Ok(true) asks for the fibers' wake-up, made
        // after the sequence.
        let unlocked = crate::gate::plain(|| {
            let s = state.load(Ordering::Relaxed);
            let woken = || waiters.load(Ordering::Relaxed) != 0 && { waiters.store(0, Ordering::Relaxed); true };
            Some(if s == -1 {
                if writer.load(Ordering::Relaxed) != hub::owner_id() {
                    return Some(Err(libc::EPERM));
                }
                writer.store(0, Ordering::Relaxed);
                state.store(0, Ordering::Release);
                Ok(woken())
            } else if s > 0 {
                state.store(s - 1, Ordering::Release);
                Ok(s == 1 && woken())
            } else {
                Err(libc::EPERM)
            })
        });
        match unlocked {
            Some(Ok(wake)) => {
                if wake {
                    wake_all(a);
                }
                0
            }
            Some(Err(e)) => e,
            // The first such thread was noted meanwhile.
            // SAFETY: the caller's rwlock.
            None => unsafe { unlock_shared_with_threads(a) },
        }
    }
}
