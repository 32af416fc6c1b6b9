//! Process-shared barriers: glibc's (its init too, so its `shared` word
//! tells them from ours). A fiber's wait is glibc's, made by a waiter
//! thread; it cannot be left (a cancellation acts once the round is over).

use std::sync::atomic::Ordering;

use libc::{c_int, pthread_barrier_t};

use super::alone;
use super::waiter::{self, Interrupted};
use crate::sync::barrier::{pthread_barrier_destroy, pthread_barrier_init, pthread_barrier_wait};
use crate::sync::word;

/// `pthread_barrier_t`'s `shared` (byte 12): glibc stores 128 there for a
/// process-shared barrier, 0 for a private one (our emulated init too).
const SHARED: usize = 3;
const SHARED_VALUE: i32 = 128;

/// Whether the barrier at `b` is glibc's process-shared one.
///
/// # Safety
/// `b` is a live barrier.
#[inline]
pub(in crate::sync) unsafe fn is_shared(b: *mut pthread_barrier_t) -> bool {
    // SAFETY: per the contract (32 bytes).
    unsafe { word(b as usize, SHARED) }.load(Ordering::Relaxed) == SHARED_VALUE
}

/// `pthread_barrier_init` with a process-shared attribute: glibc's.
///
/// # Safety
/// The caller's barrier and attribute.
pub(in crate::sync) unsafe fn init(
    b: *mut pthread_barrier_t,
    attr: *const libc::pthread_barrierattr_t,
    count: libc::c_uint,
) -> c_int {
    // SAFETY: per the contract.
    unsafe { pthread_barrier_init::real(b, attr, count) }
}

/// Whether a barrier attribute says process-shared.
///
/// # Safety
/// `attr` is null or a live attribute.
pub(in crate::sync) unsafe fn attr_is_shared(attr: *const libc::pthread_barrierattr_t) -> bool {
    let mut shared = libc::PTHREAD_PROCESS_PRIVATE;
    // SAFETY: per the contract; not a function we hook.
    !attr.is_null()
        && unsafe { libc::pthread_barrierattr_getpshared(attr, &mut shared) } == 0
        && shared == libc::PTHREAD_PROCESS_SHARED
}

/// Waits on a process-shared barrier (not to be left: a cancellation acts
/// once the round is complete).
///
/// # Safety
/// `b` is a live barrier.
pub(in crate::sync) unsafe fn wait(b: *mut pthread_barrier_t) -> c_int {
    let ba = b as usize;
    let call = if alone() {
        None
    } else {
        waiter::start(move |t| {
            // SAFETY: the barrier stays alive while fibers wait on it.
            let r = unsafe { pthread_barrier_wait::real(ba as *mut pthread_barrier_t) };
            t.publish(r, || {});
        })
    };
    let r = match call {
        Some(call) => call.finish(ba, || Interrupted::Stay).unwrap_or(0),
        // SAFETY: per the contract.
        None => unsafe { pthread_barrier_wait::real(b) },
    };
    crate::async_cancel_point();
    r
}

/// `pthread_barrier_destroy` of a process-shared barrier: glibc's.
///
/// # Safety
/// `b` is a live barrier.
pub(in crate::sync) unsafe fn destroy(b: *mut pthread_barrier_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { pthread_barrier_destroy::real(b) }
}
