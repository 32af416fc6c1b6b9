//! Semaphores that a post from outside this hub may reach (see
//! `sync::sem`): a fiber waits as one of glibc's waiters, in the kernel,
//! through a waiter thread, and takes the token itself on the hub.

use std::sync::atomic::{AtomicU64, Ordering};

use libc::sem_t;

use super::spin;
use super::waiter::{self, leave_for_cancel, sliced, End, Interrupted};
use crate::sync::{self, word};

/// One of glibc's semaphore waiters: the count in the high half of the
/// semaphore's 64-bit word, which makes `sem_post` wake the kernel's
/// waiters on the value (the low half).
const SEM_WAITER: u64 = 1 << 32;

/// Sleeps until a semaphore that may be posted from outside this hub (see
/// `sem`) may have a token, or the deadline: registered as one of glibc's
/// waiters, a waiter thread sleeps in the kernel on the value while it is
/// 0, as glibc's waiters do. The caller takes the token on the hub (so a
/// waiter thread never holds one). `Ok(false)` when a pending cancellation
/// made us leave; `Err(EINTR)` when a signal handler that ran in the wait
/// ends it, as the kernel ends glibc's (see `sync::sem::park_sem`: any
/// handler in a `timed` wait, one without `SA_RESTART` in another).
///
/// # Safety
/// `s` is a live semaphore.
pub(in crate::sync) unsafe fn sleep(
    s: *mut sem_t,
    deadline: Option<hub::Deadline>,
    timed: bool,
) -> Result<bool, libc::c_int> {
    let sa = s as usize;
    // SAFETY: per the contract: sem_t is 8-aligned, its first 8 bytes are
    // glibc's `data`, its int at byte 8 glibc's `private` (0: a private
    // futex, else a shared one).
    let (data, value, shared) = unsafe {
        (
            &*(sa as *const AtomicU64),
            word(sa, 0),
            word(sa, 2).load(Ordering::Relaxed) != 0,
        )
    };
    if spin(|| value.load(Ordering::Relaxed) == 0) {
        return Ok(true);
    }
    let mut handled = false;
    data.fetch_add(SEM_WAITER, Ordering::Relaxed);
    let stayed = if value.load(Ordering::Acquire) != 0 {
        true
    } else {
        let call = waiter::start(move |t| {
            // SAFETY: the semaphore stays alive while a fiber waits on it,
            // and a cancelled fiber's thread stops within one slice.
            let value = unsafe { word(sa, 0) };
            let r = sliced(t, deadline, |end| waiter::futex_wait(value, 0, end, shared));
            if !t.publish(r, || {}) && r == 0 {
                // The post's wake-up was meant for a waiter: pass it on.
                sync::futex_wake(value, 1, shared);
            }
        });
        match call {
            Some(call) => call
                .finish(sa, || {
                    if leave_for_cancel() == Interrupted::Leave {
                        return Interrupted::Leave;
                    }
                    let ran = crate::signal::run_pending();
                    handled = ran.interrupts || timed && ran.handler;
                    if handled {
                        Interrupted::Leave
                    } else {
                        Interrupted::Stay
                    }
                })
                .is_some(),
            None => {
                // No waiter thread: sleep here, blocking the hub.
                waiter::futex_wait(value, 0, &End::of(deadline), shared);
                true
            }
        }
    };
    data.fetch_sub(SEM_WAITER, Ordering::Relaxed);
    if !stayed && value.load(Ordering::Relaxed) != 0 {
        // We may have been woken for this token: another waiter takes it.
        sync::futex_wake(value, 1, shared);
    }
    match stayed {
        false if handled => Err(libc::EINTR),
        _ => Ok(stayed),
    }
}
