//! Cancellation of pthread fibers, deferred and asynchronous.
//!
//! `pthread_cancel` marks the target's cancellation pending and interrupts
//! its current wait; the target then ends with `PTHREAD_CANCELED`, running
//! its cleanup handlers and key destructors as `pthread_exit` does.
//!
//! **Deferred** (the default): at the next cancellation point. Every hook
//! that is one (sleeps, fd waits, condition and semaphore waits, joins,
//! `pause`, …) calls [`crate::cancel_point`], which asks [`any_pending`]
//! (one atomic load) and only then [`act`]: the one way in, so no module
//! but this one knows where the state lives.
//!
//! **Asynchronous**: as soon as the target runs again. Under N:1 a fiber
//! is never stopped between two instructions, so "asynchronous" means:
//! wherever it is suspended. A wait that is a cancellation point acts as
//! above once interrupted; a wait that is not (a mutex or rwlock lock, a
//! barrier, `pthread_once`, `sched_yield`) calls [`async_point`] when it is
//! interrupted or resumed, which acts only for the asynchronous type.
//! Turning the asynchronous type (or cancellation itself) on with a cancel
//! pending acts at once, as in glibc. Limits: a fiber computing without
//! calling any hook is not stopped (nothing runs beside it to cancel it
//! anyway), and a call running on the offload pool finishes first.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void, pthread_t};

use super::handle::Gone;
use super::{current_record, exit, resolve, Target};
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
    /// Inside a call that is no cancellation point but shares the waits of
    /// ones that are (see [`NotAPoint`]): a deferred cancellation waits.
    not_a_point: Cell<bool>,
}

impl State {
    /// Marks a cancellation requested (again is no more).
    fn request(&self) {
        if !self.pending.replace(true) {
            PENDING.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a pending cancellation may act here (the fiber's type, and
    /// where it is).
    fn acts_here(&self) -> bool {
        self.pending.get() && !self.disabled.get() && (!self.not_a_point.get() || self.asynchronous.get())
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

/// Whether a cancellation is pending and enabled for the calling fiber:
/// an interrupted wait that would otherwise go on ends so that its
/// cancellation point acts.
pub(crate) fn due_here() -> bool {
    any_pending() && current_record().is_some_and(|r| r.cancel.acts_here())
}

/// Acts on the calling fiber's pending cancellation, if it is enabled and
/// the fiber is not already exiting: ends the fiber with `PTHREAD_CANCELED`.
pub(crate) fn act() {
    let Some(rec) = current_record() else { return };
    if rec.cancel.acts_here() && !rec.exiting.get() && rec.cancel.take() {
        exit::exit_fiber(rec, PTHREAD_CANCELED);
    }
}

/// Held for the length of a call that glibc does not make a cancellation
/// point (`sendfile`) but that waits through the helpers of calls that
/// are (`read`, `write`): the cancellation points it passes act only on
/// an asynchronous cancellation, as natively.
pub(crate) struct NotAPoint(Option<(Rc<super::Record>, bool)>);

impl NotAPoint {
    /// Marks the calling fiber (if it is a pthread) until dropped.
    pub(crate) fn enter() -> NotAPoint {
        NotAPoint(current_record().map(|r| {
            let was = r.cancel.not_a_point.replace(true);
            (r, was)
        }))
    }

    /// Lifts the calling fiber's mark while the program's own code runs
    /// from inside such a call (a signal handler run in `sendfile`'s
    /// wait, through `hook::program`): the points that code passes are the
    /// program's, and act as anywhere. The mark comes back when dropped.
    pub(crate) fn lift() -> Option<NotAPoint> {
        let r = current_record()?;
        r.cancel.not_a_point.replace(false).then(|| NotAPoint(Some((r, true))))
    }
}

impl Drop for NotAPoint {
    fn drop(&mut self) {
        if let Some((r, was)) = &self.0 {
            r.cancel.not_a_point.set(*was);
        }
    }
}

/// Where a suspended fiber resumes in a wait that is not a cancellation
/// point: acts on a pending cancellation if the fiber's type is
/// asynchronous (and cancellation enabled); does nothing otherwise. Lock
/// wait loops call it when their park was interrupted.
pub(crate) fn async_point() {
    if !any_pending() {
        return;
    }
    let Some(rec) = current_record() else { return };
    if rec.cancel.asynchronous.get() && rec.cancel.pending.get() {
        drop(rec);
        act();
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

/// Marks a cancellation request for the live thread of `rec`; whether it
/// acts now (cancellation is enabled), for `pthread_cancel` to carry out.
fn requested(rec: &super::Record) -> bool {
    rec.cancel.request();
    !rec.cancel.disabled.get()
}

hook! {
    /// `pthread_cancel`: marks the cancellation and interrupts the fiber's
    /// current wait. A thread that ended gets nothing (0, as glibc answers).
    /// From an OS thread that is not the fibers' own, it is carried to
    /// theirs (`thread::to_fibers_thread`).
    [thread] fn pthread_cancel(t: pthread_t) -> c_int {
        if super::from_elsewhere(t) {
            return super::to_fibers_thread(t, |rec| {
                if !rec.exiting.get() && requested(rec) {
                    rec.task.interrupt();
                }
            });
        }
        let rec = match resolve(t) {
            Target::Fiber(rec) => rec,
            Target::Gone(Gone::Never) => return libc::ESRCH,
            Target::Gone(_) => return 0,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => return unsafe { pthread_cancel::real(t) },
        };
        if rec.ended.get() || rec.exiting.get() {
            return 0;
        }
        if requested(&rec) {
            let is_self = current_record().is_some_and(|c| Rc::ptr_eq(&c, &rec));
            if is_self {
                if rec.cancel.asynchronous.get() {
                    drop(rec);
                    crate::cancel_point();
                }
            } else {
                rec.task.interrupt();
            }
        }
        0
    }

    /// `pthread_testcancel`.
    #[gate(emulating() && hub::in_fiber())]
    [thread] fn pthread_testcancel() {
        crate::cancel_point()
    }

    /// `pthread_setcancelstate`: enabling it with an asynchronous cancel
    /// pending acts at once.
    [thread] fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int {
        match current_record() {
            Some(rec) if emulating() => {
                let r = set(&rec.cancel.disabled, state, old, PTHREAD_CANCEL_DISABLE, PTHREAD_CANCEL_ENABLE);
                drop(rec);
                async_point();
                r
            }
            // SAFETY: not one of our fibers: forwarded unchanged.
            _ => unsafe { pthread_setcancelstate::real(state, old) },
        }
    }

    /// `pthread_setcanceltype`: the asynchronous type with a cancel pending
    /// acts at once.
    [thread] fn pthread_setcanceltype(ty: c_int, old: *mut c_int) -> c_int {
        match current_record() {
            Some(rec) if emulating() => {
                let r = set(&rec.cancel.asynchronous, ty, old, PTHREAD_CANCEL_ASYNCHRONOUS, PTHREAD_CANCEL_DEFERRED);
                drop(rec);
                async_point();
                r
            }
            // SAFETY: not one of our fibers: forwarded unchanged.
            _ => unsafe { pthread_setcanceltype::real(ty, old) },
        }
    }
}
