//! Cross-thread wake-ups.
//!
//! Another OS thread cannot touch a hub's run queue; it pushes a token into
//! the hub's lock-free inbox and pokes the reactor's notifier (only when the
//! inbox was not already flagged, so a burst costs one system call). The hub
//! drains the inbox on every loop turn and wakes the task that registered
//! each token.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::SegQueue;

use crate::reactor::Notifier;
use crate::task::Waiter;
use crate::{Deadline, Hub, Park, Waiting, Wake};

struct Shared {
    queue: SegQueue<u64>,
    /// Keys to unpark, with how many, from threads that are not the hub's
    /// ([`unpark_from_elsewhere`]).
    unparks: SegQueue<(usize, usize)>,
    /// Work for the hub's thread from threads that are not the hub's
    /// ([`call_on_fiber_hub`]).
    calls: SegQueue<Box<dyn FnOnce() + Send>>,
    notified: AtomicBool,
    notifier: Notifier,
}

impl Shared {
    /// Makes sure the hub's loop looks at its inbox soon.
    fn announce(&self) {
        if !self.notified.swap(true, Ordering::SeqCst) {
            self.notifier.notify();
        }
    }
}

/// The inbox of the first hub that ran fibers (under the preload, the main
/// thread's): where [`unpark_from_elsewhere`] posts.
static FIBER_HUB: OnceLock<Arc<Shared>> = OnceLock::new();

/// Wakes up to `n` tasks parked on `key` in the hub that runs the process's
/// fibers, from any thread: a thread that is not a fiber (a library's own,
/// made past our `pthread_create`) releasing a pthread object fibers wait
/// for. On that hub's own thread it is [`unpark`](crate::unpark); elsewhere
/// the request is queued and the hub's loop is woken to carry it out.
pub fn unpark_from_elsewhere(key: usize, n: usize) {
    let Some(target) = FIBER_HUB.get() else { return };
    if let Some(hub) = Hub::existing() {
        if Arc::ptr_eq(&hub.remote.shared, target) {
            crate::unpark(key, n);
            return;
        }
    }
    crate::internal::bookkeeping(|| target.unparks.push((key, n)));
    target.announce();
}

/// Has the hub that runs the process's fibers call `f` on its own thread,
/// at its loop's next turn, from a thread that is not that hub's (on it,
/// `f` runs now). For what only that thread may touch: its fibers'
/// records, their signals, their cancellation. The caller does not wait:
/// that hub may be blocked in the kernel until the caller does something.
/// False, and `f` dropped, when no hub has run fibers.
pub fn call_on_fiber_hub(f: Box<dyn FnOnce() + Send>) -> bool {
    let Some(target) = FIBER_HUB.get() else { return false };
    if let Some(hub) = Hub::existing() {
        if Arc::ptr_eq(&hub.remote.shared, target) {
            f();
            return true;
        }
    }
    crate::internal::bookkeeping(|| target.calls.push(f));
    target.announce();
    true
}

/// The hub side.
pub(crate) struct Inbox {
    shared: Arc<Shared>,
    pending: RefCell<HashMap<u64, Waiter>>,
    next: Cell<u64>,
    /// Waits that something outside the hub may end (signals, cancellation):
    /// they keep the deadlock detector quiet.
    holds: Cell<usize>,
}

impl Inbox {
    pub(crate) fn new(notifier: Notifier) -> Inbox {
        Inbox {
            shared: Arc::new(Shared {
                queue: SegQueue::new(),
                unparks: SegQueue::new(),
                calls: SegQueue::new(),
                notified: AtomicBool::new(false),
                notifier,
            }),
            pending: RefCell::new(HashMap::new()),
            next: Cell::new(0),
            holds: Cell::new(0),
        }
    }

    /// Outstanding remote wake-ups plus holds.
    pub(crate) fn pending(&self) -> usize {
        self.pending.borrow().len() + self.holds.get()
    }

    pub(crate) fn hold(&self) {
        self.holds.set(self.holds.get() + 1);
    }

    pub(crate) fn release(&self) {
        self.holds.set(self.holds.get() - 1);
    }

    /// In a forked child: the waits of other fibers are gone.
    pub(crate) fn reset_after_fork(&self) {
        std::mem::forget(std::mem::take(&mut *self.pending.borrow_mut()));
        self.holds.set(0);
        while self.shared.queue.pop().is_some() {}
        // The parent's other threads asked about fibers the child has not.
        while self.shared.calls.pop().is_some() {}
        self.shared.notified.store(false, Ordering::SeqCst);
    }

    pub(crate) fn drain(&self, hub: &Hub) {
        if !self.shared.notified.load(Ordering::Acquire) {
            return;
        }
        // Clear the flag before popping: a push after this point will flag
        // and notify again, so no token is left behind unannounced.
        self.shared.notified.store(false, Ordering::SeqCst);
        while let Some(token) = crate::internal::bookkeeping(|| self.shared.queue.pop()) {
            let w = crate::internal::bookkeeping(|| self.pending.borrow_mut().remove(&token));
            if let Some(w) = w {
                hub.wake(&w, Wake::Ready);
            }
        }
        while let Some((key, n)) = crate::internal::bookkeeping(|| self.shared.unparks.pop()) {
            crate::unpark(key, n);
        }
        while let Some(f) = crate::internal::bookkeeping(|| self.shared.calls.pop()) {
            f();
        }
    }

    /// Makes this hub the one [`unpark_from_elsewhere`] posts to, if none is.
    pub(crate) fn register_fiber_hub(&self) {
        if FIBER_HUB.get().is_none() {
            let _ = FIBER_HUB.set(self.shared.clone());
        }
    }
}

/// Wakes one waiting task of a hub from any thread. `Send + Sync`.
///
/// Dropping it wakes too, so a task can never be stranded by a waker that
/// was lost on the other side.
pub struct RemoteWaker {
    shared: Arc<Shared>,
    token: u64,
}

impl RemoteWaker {
    /// Wakes the task (consumes the waker).
    pub fn wake(self) {}
}

impl Drop for RemoteWaker {
    fn drop(&mut self) {
        crate::internal::bookkeeping(|| self.shared.queue.push(self.token));
        self.shared.announce();
    }
}

/// Blocks the current task until the [`RemoteWaker`] handed to `register`
/// is woken (or dropped), from any thread. Cannot be interrupted.
///
/// `register` runs after the task is marked waiting, so a wake-up that
/// happens before the task actually sleeps is not lost.
pub fn wait_remote(register: impl FnOnce(RemoteWaker)) {
    remote_wait(Waiting::Remote, None, register);
}

/// Like [`wait_remote`], but the wait ends at `deadline` or on
/// [`Task::interrupt`](crate::Task::interrupt) too; a later wake-up through
/// the waker is then ignored. `key` is shown in deadlock reports (e.g. the
/// futex address). This is the cross-thread half of futex emulation.
pub fn park_remote(key: usize, deadline: Option<Deadline>, register: impl FnOnce(RemoteWaker)) -> Park {
    Park::after(remote_wait(Waiting::Park(key), deadline, register))
}

fn remote_wait(what: Waiting, deadline: Option<Deadline>, register: impl FnOnce(RemoteWaker)) -> Wake {
    let hub = Hub::get();
    let cur = hub.current();
    let inbox = &hub.remote;
    let token = inbox.next.get();
    inbox.next.set(token + 1);
    let w = hub.prepare(&cur, what);
    crate::internal::bookkeeping(|| inbox.pending.borrow_mut().insert(token, w));
    register(RemoteWaker {
        shared: inbox.shared.clone(),
        token,
    });
    let r = hub.block(&cur, deadline);
    if r != Wake::Ready {
        crate::internal::bookkeeping(|| inbox.pending.borrow_mut().remove(&token));
    }
    r
}
