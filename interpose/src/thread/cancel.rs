//! Deferred cancellation of pthread fibers.
//!
//! `pthread_cancel` marks the target's cancellation pending and interrupts
//! its current wait; at the next cancellation point the target ends with
//! `PTHREAD_CANCELED`, running its cleanup handlers and key destructors as
//! `pthread_exit` does. The asynchronous type is accepted and treated as
//! deferred (except that a thread cancelling itself with it ends at once).
//!
//! Every hook that is a cancellation point (sleeps, fd waits, condition and
//! semaphore waits, joins, `pause`, …) calls [`crate::cancel_point`], which
//! asks [`any_pending`] (one atomic load) and only then [`act`]: the one
//! way in, so no module but this one knows where the state lives.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void, pthread_t};

use super::{current_record, exit, lookup, task_of};
use crate::gate::emulating;
use crate::hook::hook;

const PTHREAD_CANCEL_ENABLE: c_int = 0;
const PTHREAD_CANCEL_DISABLE: c_int = 1;
const PTHREAD_CANCEL_DEFERRED: c_int = 0;
const PTHREAD_CANCEL_ASYNCHRONOUS: c_int = 1;
/// What a cancelled thread's joiner gets.
const PTHREAD_CANCELED: *mut c_void = usize::MAX as *mut c_void;

/// Cancellations requested and not yet acted on, in the whole process (the
/// fast path of every cancellation point).
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// A pthread fiber's cancellation state, in its record.
#[derive(Default)]
pub(super) struct State {
    /// Requested and not acted on; counted in [`PENDING`] while set.
    pending: Cell<bool>,
    /// `PTHREAD_CANCEL_DISABLE`.
    disabled: Cell<bool>,
    /// `PTHREAD_CANCEL_ASYNCHRONOUS`.
    asynchronous: Cell<bool>,
}

impl State {
    /// Marks a cancellation requested (again is no more).
    fn request(&self) {
        if !self.pending.replace(true) {
            PENDING.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears a requested cancellation; whether there was one.
    pub(super) fn take(&self) -> bool {
        let was = self.pending.replace(false);
        if was {
            PENDING.fetch_sub(1, Ordering::Relaxed);
        }
        was
    }
}

/// Whether any deferred cancellation is pending in the process (one atomic
/// load: the cheap test before [`act`]).
#[inline]
pub(crate) fn any_pending() -> bool {
    PENDING.load(Ordering::Relaxed) != 0
}

/// Acts on the calling fiber's pending cancellation, if it is enabled and
/// the fiber is not already exiting: ends the fiber with `PTHREAD_CANCELED`.
pub(crate) fn act() {
    let Some(rec) = current_record() else { return };
    if !rec.cancel.disabled.get() && !rec.exiting.get() && rec.cancel.take() {
        exit::exit_fiber(rec, PTHREAD_CANCELED);
    }
}

/// The body of `pthread_setcancelstate`/`pthread_setcanceltype`: `flag`
/// is whether the setting is `on` rather than `off`; the previous value
/// goes to `old` (when not null). `EINVAL` for a value that is neither.
fn set(flag: &Cell<bool>, new: c_int, old: *mut c_int, on: c_int, off: c_int) -> c_int {
    if new != on && new != off {
        return libc::EINVAL;
    }
    if !old.is_null() {
        // SAFETY: the caller's out pointer.
        unsafe { *old = if flag.get() { on } else { off } };
    }
    flag.set(new == on);
    0
}

hook! {
    /// `pthread_cancel`: deferred; interrupts the fiber's current wait.
    [thread] fn pthread_cancel(t: pthread_t) -> c_int {
        let rec = match lookup(t) {
            Some(rec) if emulating() => rec,
            // SAFETY: not ours: forwarded unchanged.
            _ => return unsafe { pthread_cancel::real(t) },
        };
        let task = task_of(&rec);
        if task.is_finished() || rec.exiting.get() {
            return 0;
        }
        rec.cancel.request();
        if !rec.cancel.disabled.get() {
            let is_self = current_record().is_some_and(|c| Rc::ptr_eq(&c, &rec));
            if is_self {
                if rec.cancel.asynchronous.get() {
                    drop((task, rec));
                    crate::cancel_point();
                }
            } else {
                task.interrupt();
            }
        }
        0
    }

    /// `pthread_testcancel`.
    #[gate(emulating() && hub::in_fiber())]
    [thread] fn pthread_testcancel() {
        crate::cancel_point()
    }

    /// `pthread_setcancelstate`.
    [thread] fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int {
        match current_record() {
            Some(rec) if emulating() => {
                set(&rec.cancel.disabled, state, old, PTHREAD_CANCEL_DISABLE, PTHREAD_CANCEL_ENABLE)
            }
            // SAFETY: not one of our fibers: forwarded unchanged.
            _ => unsafe { pthread_setcancelstate::real(state, old) },
        }
    }

    /// `pthread_setcanceltype` (asynchronous is treated as deferred).
    [thread] fn pthread_setcanceltype(ty: c_int, old: *mut c_int) -> c_int {
        match current_record() {
            Some(rec) if emulating() => {
                set(&rec.cancel.asynchronous, ty, old, PTHREAD_CANCEL_ASYNCHRONOUS, PTHREAD_CANCEL_DEFERRED)
            }
            // SAFETY: not one of our fibers: forwarded unchanged.
            _ => unsafe { pthread_setcanceltype::real(ty, old) },
        }
    }
}
