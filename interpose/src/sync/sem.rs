//! Semaphores, in glibc's own representation (the value in the low half of
//! the first 64-bit word), so the real `sem_post`, `sem_trywait`,
//! `sem_getvalue` and `sem_open` work on them unchanged and they cooperate
//! in every mode. A fiber waits on the hub for a post from this hub; when a
//! post may come from outside (another process, a thread that is not a
//! fiber) it waits as one of glibc's waiters, in the kernel, through a
//! waiter thread (`pshared::sem`). A wait is a cancellation point.
//!
//! A post that finds a fiber of this hub waiting on a process-private
//! semaphore hands the unit straight to it ([`HANDED`]) instead of adding
//! it to glibc's value for the woken fiber to take back: two locked
//! read-modify-writes fewer per hand-over (~5 ns each here), as Go's
//! semaphores hand off. What glibc's value says and what the program can
//! take are then two numbers; `sem_getvalue` and `sem_trywait` count both.

use std::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, c_uint, clockid_t, sem_t, timespec};

use super::{tag, wake_one, word, Kind};
use crate::gate::cooperative;
use crate::hook::hook;

/// The semaphore's value word (low half of glibc's 64-bit `data`).
///
/// # Safety
/// `s` is a live semaphore.
unsafe fn value<'a>(s: *mut sem_t) -> &'a AtomicU32 {
    // SAFETY: per the contract; sem_t is 8-aligned and at least 16 bytes.
    unsafe { &*(s as *const AtomicU32) }
}

/// The word past glibc's 16-byte `struct new_sem` in the 32-byte `sem_t`
/// (bytes 16..20): posts handed to a woken fiber that it has not taken yet
/// (see the module docs). Zeroed by `sem_init`'s hook; used only in a
/// process-private semaphore and only by its hub's fibers, one at a time,
/// so it needs no locked instruction.
const HANDED: usize = 4;

/// The handed-over posts of `s`, if it is process-private.
///
/// # Safety
/// `s` is a live semaphore.
#[inline(always)]
unsafe fn handed<'a>(s: *mut sem_t) -> Option<&'a std::sync::atomic::AtomicI32> {
    // SAFETY: per the contract (32 bytes); `private` is the int at byte 8
    // (see `remote`).
    unsafe { (word(s as usize, 2).load(Ordering::Relaxed) == 0).then(|| word(s as usize, HANDED)) }
}

/// Takes one post handed to a woken fiber, if one is there.
///
/// # Safety
/// `s` is a live semaphore; the caller runs on its hub's thread.
#[inline(always)]
unsafe fn take_handed(s: *mut sem_t) -> bool {
    // SAFETY: per the contract.
    match unsafe { handed(s) } {
        Some(h) => {
            let n = h.load(Ordering::Relaxed);
            if n > 0 {
                h.store(n - 1, Ordering::Relaxed);
            }
            n > 0
        }
        None => false,
    }
}

/// Takes one unit of `s` (whose value word is `v`) if it has one: a post
/// handed to a woken fiber, else one of glibc's value.
///
/// # Safety
/// `s` is a live semaphore; the caller runs on its hub's thread.
#[inline(always)]
unsafe fn take(s: *mut sem_t, v: &AtomicU32) -> bool {
    // SAFETY: per the contract.
    if unsafe { take_handed(s) } {
        return true;
    }
    loop {
        let cur = v.load(Ordering::Relaxed);
        if cur == 0 {
            return false;
        }
        if v.compare_exchange(cur, cur - 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
    }
}

/// Whether a post may come from outside this hub (another process or a
/// real thread), so waiters must wait where such a post wakes them: in the
/// kernel, as glibc's waiters (see `pshared::sem`).
///
/// # Safety
/// `s` is a live semaphore.
unsafe fn remote(s: *mut sem_t) -> bool {
    // SAFETY: per the contract; `private` is the int at byte 8: glibc's
    // `sem_init` stores 0 for a process-private semaphore and
    // `FUTEX_PRIVATE_FLAG` (128) for a shared one (measured, glibc 2.36).
    !crate::threads_as_fibers()
        || crate::gate::foreign_threads()
        || unsafe { word(s as usize, 2) }.load(Ordering::Relaxed) != 0
}

/// Waits on a semaphore as a fiber. Err is an errno value.
///
/// The common wait (no timeout, a post can only come from this hub) is
/// this loop; a timed one (`timeout` the deadline the hook made, None
/// inside it: too far to represent), or one that must wait as glibc's
/// waiter, is [`wait_slow`]'s.
///
/// # Safety
/// `s` is a live semaphore.
#[inline(always)]
unsafe fn wait(s: *mut sem_t, timeout: Option<Option<hub::Deadline>>) -> Result<(), c_int> {
    // SAFETY: per the contract.
    let v = unsafe { value(s) };
    loop {
        // SAFETY: per the contract; a fiber's wait runs on its hub.
        if unsafe { take(s, v) } {
            return Ok(());
        }
        // SAFETY: per the contract.
        if timeout.is_some() || unsafe { remote(s) } {
            // SAFETY: per the contract.
            return unsafe { wait_slow(s, timeout) };
        }
        // SAFETY: per the contract.
        if unsafe { park_sem(s, v, None, false) }? == hub::Park::Interrupted {
            // A post taken: see `park_sem`.
            return Ok(());
        }
        crate::cancel_point();
    }
}

/// Parks a fiber on `s` until `deadline`, as [`park`](super::park) does, but a signal
/// handler that ran in the wait ends it with `EINTR`, as the kernel ends
/// glibc's futex wait in `sem_wait` after a handler without `SA_RESTART`
/// and in a `timed` wait (`sem_timedwait`, `sem_clockwait`) after any
/// handler (its restart block is not restarted after one); a
/// mutex or condvar wait goes on after a handler, as glibc loops on
/// `EINTR` there. `Ok(Park::Interrupted)`: interrupted, but a post came
/// meanwhile and was taken (a post and a signal at once may end a native
/// wait either way; taking it loses no post).
///
/// # Safety
/// `s` is a live semaphore whose value word is `v`; the caller is a fiber
/// of its hub.
#[inline(always)]
unsafe fn park_sem(
    s: *mut sem_t,
    v: &AtomicU32,
    deadline: Option<hub::Deadline>,
    timed: bool,
) -> Result<hub::Park, c_int> {
    let r = hub::park_object(Kind::Semaphore.name(), s as usize, tag(0), deadline, || {
        v.load(Ordering::Relaxed) == 0
    });
    if r != hub::Park::Interrupted {
        return Ok(r);
    }
    // SAFETY: per the contract.
    unsafe { interrupted(s, v, timed) }
}

/// The end of [`park_sem`]'s interrupted wait: the cancellation or the
/// handlers due run here.
///
/// # Safety
/// As [`park_sem`]'s.
#[cold]
#[inline(never)]
unsafe fn interrupted(s: *mut sem_t, v: &AtomicU32, timed: bool) -> Result<hub::Park, c_int> {
    if crate::thread::cancel::any_pending() {
        crate::thread::cancel::async_point();
    }
    let ran = crate::signal::run_pending();
    crate::cancel_point();
    if !(ran.interrupts || timed && ran.handler) {
        return Ok(hub::Park::Unparked);
    }
    // SAFETY: per the contract.
    unsafe { ended_by_handler(s, v) }.map(|()| hub::Park::Interrupted)
}

/// The result of a wait on `s` that a handler ended: a post that came
/// meanwhile is taken (a post and a signal at once may end a native wait
/// either way; taking it loses no post), else `EINTR`.
///
/// # Safety
/// As [`park_sem`]'s.
unsafe fn ended_by_handler(s: *mut sem_t, v: &AtomicU32) -> Result<(), c_int> {
    // SAFETY: per the contract.
    if unsafe { take(s, v) } {
        Ok(())
    } else {
        Err(libc::EINTR)
    }
}

/// [`wait`] with a timeout, or as one of glibc's waiters.
///
/// # Safety
/// `s` is a live semaphore.
#[cold]
#[inline(never)]
unsafe fn wait_slow(s: *mut sem_t, timeout: Option<Option<hub::Deadline>>) -> Result<(), c_int> {
    // SAFETY: per the contract.
    let (v, remote) = unsafe { (value(s), remote(s)) };
    let d = timeout.flatten();
    loop {
        // SAFETY: per the contract; a fiber's wait runs on its hub.
        if unsafe { take(s, v) } {
            return Ok(());
        }
        // About to wait: glibc's futex wait is a cancellation point (for
        // `sem_clockwait`, the only one).
        crate::cancel_point();
        if remote {
            if super::pshared::passed(d) {
                return Err(libc::ETIMEDOUT);
            }
            // A post from outside this hub wakes only the kernel's
            // waiters: wait as one, then look again.
            // SAFETY: per the contract.
            if unsafe { super::pshared::sem::sleep(s, d, timeout.is_some()) }.is_err() {
                crate::cancel_point();
                // SAFETY: per the contract.
                return unsafe { ended_by_handler(s, v) };
            }
        } else {
            // SAFETY: per the contract.
            match unsafe { park_sem(s, v, d, timeout.is_some()) }? {
                // A post taken: see `park_sem`.
                hub::Park::Interrupted => return Ok(()),
                hub::Park::TimedOut => {}
                _ => {
                    crate::cancel_point();
                    continue;
                }
            }
            // The hub's timer never fires early, so the time is not read
            // again here (a deadline already past when the wait began
            // fires at the hub's next turn). A post may have come since.
            crate::cancel_point();
            // SAFETY: per the contract.
            return if unsafe { take(s, v) } {
                Ok(())
            } else {
                Err(libc::ETIMEDOUT)
            };
        }
        crate::cancel_point();
    }
}

/// `sem_post`'s fast path: the program's post to a private semaphore on
/// the fibers' thread, made as the full hook makes it (handed to a fiber
/// that waits, else glibc's post), shielded from signal handlers
/// (`hook::lean`) instead of entering the hook: ~30 instructions fewer a
/// post. Fibers of differing priorities (the woken may have to run at the
/// hook's return) take the full hook.
///
/// # Safety
/// `s` is a live semaphore.
#[inline(always)]
unsafe fn post_fast(s: *mut sem_t) -> Option<c_int> {
    // SAFETY: the caller's semaphore.
    if unsafe { remote(s) } || hub::internal::priorities_differ() {
        return None;
    }
    // The hub's wake-up itself (`wake_one`'s arm for equal priorities),
    // inlined here: through `wake_one` it stays a call, and the ping-pong
    // took 1.3 ns more, a post nobody waits for 1.8 ns more.
    // SAFETY: the caller's semaphore, process-private (not remote).
    crate::hook::lean(|| Some(unsafe { post_private(s, |a| hub::unpark_where(a, |_| true)) }))
}

/// A post to a process-private semaphore whose posts come from this hub
/// alone: handed to a fiber that waits (`wake` wakes one, by its address),
/// else glibc's post.
///
/// # Safety
/// `s` is a live semaphore, not [`remote`]; the caller runs on its hub's
/// thread.
#[inline(always)]
unsafe fn post_private(s: *mut sem_t, wake: impl FnOnce(usize) -> bool) -> c_int {
    if wake(s as usize) {
        // SAFETY: per the contract (process-private), so the word is ours
        // (see `handed`).
        let h = unsafe { word(s as usize, HANDED) };
        h.store(h.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        return 0;
    }
    // SAFETY: the caller's semaphore, forwarded unchanged.
    unsafe { sem_post::real(s) }
}

/// `sem_timedwait`/`sem_clockwait`: the clock and time checked first
/// (`EINVAL` even when the semaphore is free, as glibc's), then, for
/// `sem_timedwait` (`point`), a pending cancellation acts; the deadline
/// made here is the wait's.
fn timed_wait(s: *mut sem_t, clock: clockid_t, t: *const timespec, point: bool) -> c_int {
    let d = match crate::deadline::absolute_bounded(clock, t) {
        Ok(d) => d,
        Err(e) => return crate::errno::fail(e),
    };
    if point {
        crate::cancel_point();
    }
    // SAFETY: the caller's semaphore.
    result(unsafe { wait(s, Some(d)) })
}

/// The C return of a wait: 0, or -1 with errno.
fn result(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => crate::errno::fail(e),
    }
}

hook! {
    /// `sem_wait`.
    #[gate(cooperative())]
    #[return_by_jump(sem_wait_by_jump)]
    [sync] fn sem_wait(s: *mut sem_t) -> c_int {
        crate::cancel_point();
        // SAFETY: the caller's semaphore.
        result(unsafe { wait(s, None) })
    }

    /// `sem_timedwait` (CLOCK_REALTIME): as glibc's, the time is checked
    /// first (`EINVAL` even when the semaphore is free), then a pending
    /// cancellation acts.
    #[gate(cooperative())]
    [sync] fn sem_timedwait(s: *mut sem_t, t: *const timespec) -> c_int {
        timed_wait(s, libc::CLOCK_REALTIME, t, true)
    }

    /// `sem_clockwait`: the clock and the time are checked first; glibc
    /// makes it a cancellation point only where it waits.
    #[gate(cooperative())]
    [sync] fn sem_clockwait(s: *mut sem_t, c: clockid_t, t: *const timespec) -> c_int {
        timed_wait(s, c, t, false)
    }

    /// `sem_post`: to a fiber of this hub waiting on a private semaphore,
    /// handed over; otherwise the real post (it also wakes kernel waiters,
    /// in other processes or threads that are not fibers), then a fiber
    /// parked on this semaphore.
    #[fast_path(post_fast)]
    [sync] fn sem_post(s: *mut sem_t) -> c_int {
        let emulating = crate::gate::emulating_objects();
        // SAFETY: the caller's semaphore.
        if emulating && !unsafe { remote(s) } {
            // SAFETY: as just checked.
            return unsafe { post_private(s, wake_one) };
        }
        // SAFETY: the caller's semaphore, forwarded unchanged.
        let r = unsafe { sem_post::real(s) };
        if r != 0 {
            return r;
        }
        if emulating {
            wake_one(s as usize);
        } else if crate::gate::patched() {
            if crate::threads_as_fibers() {
                // A thread that is not the fibers' own posted.
                super::foreign_release(s as usize, 1);
            } else {
                // Threads stay native (`patch_all`): a fiber of this
                // thread's hub may wait.
                wake_one(s as usize);
            }
        }
        r
    }

    /// `sem_init`: glibc's, then our word past glibc's fields cleared (a
    /// semaphore on the stack starts with whatever was there).
    [sync] fn sem_init(s: *mut sem_t, pshared: c_int, value: c_uint) -> c_int {
        // SAFETY: the caller's arguments, forwarded unchanged.
        let r = unsafe { sem_init::real(s, pshared, value) };
        if r == 0 {
            // SAFETY: glibc initialised the 32-byte semaphore.
            unsafe { word(s as usize, HANDED) }.store(0, Ordering::Relaxed);
        }
        r
    }

    /// `sem_trywait`: a post handed to a woken fiber counts (it is the
    /// semaphore's), then glibc's.
    [sync] fn sem_trywait(s: *mut sem_t) -> c_int {
        // SAFETY: the caller's semaphore; handed posts exist only where
        // its hub's fibers run.
        if crate::gate::emulating_objects() && unsafe { take_handed(s) } {
            return 0;
        }
        // SAFETY: the caller's semaphore, forwarded unchanged.
        unsafe { sem_trywait::real(s) }
    }

    /// `sem_getvalue`: glibc's value plus the posts handed to woken fibers.
    [sync] fn sem_getvalue(s: *mut sem_t, v: *mut c_int) -> c_int {
        // SAFETY: the caller's arguments, forwarded unchanged.
        let r = unsafe { sem_getvalue::real(s, v) };
        if r == 0 && crate::gate::emulating_objects() {
            // SAFETY: the caller's semaphore.
            if let Some(h) = unsafe { handed(s) } {
                // SAFETY: `v` is the caller's, which glibc just wrote.
                unsafe { *v += h.load(Ordering::Relaxed) };
            }
        }
        r
    }
}
