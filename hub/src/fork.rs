//! Hooks for the interposer's process and signal support: a callback at the
//! end of each loop turn, and the reset of a hub in the child of `fork()`.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::{internal, pool, Hub, CURRENT, HUB};

static POLL_HOOK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// In the child of a fork made from a fiber: the root's own wait can
    /// never end (what it waited for stayed in the parent).
    static ORPHAN_ROOT: Cell<bool> = const { Cell::new(false) };
}

/// Registers `f` to run at the end of every loop turn that polled (after
/// readiness events, remote wake-ups and timers were handled), on the hub's
/// own stack, where it may wake tasks ([`crate::Task::interrupt`]) but must
/// not block. The interposer uses it to act on signals that arrived while
/// the hub waited (an interrupted `epoll_wait` ends the turn early).
pub fn set_poll_hook(f: fn()) {
    POLL_HOOK.store(f as *mut (), Ordering::Release);
}

pub(crate) fn run_poll_hook() {
    let hook = POLL_HOOK.load(Ordering::Acquire);
    if !hook.is_null() {
        // SAFETY: only set_poll_hook stores here, from a `fn()`.
        let f: fn() = unsafe { std::mem::transmute::<*mut (), fn()>(hook) };
        f();
    }
}

/// Whether the calling thread's hub is running its loop in the root
/// context (idle or between fibers) rather than user code. Reads two
/// thread-local cells and nothing else, so a signal handler may call it.
pub fn in_loop() -> bool {
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    CURRENT.with(|c| c.get()).is_null() && unsafe { p.as_ref() }.is_some_and(|h| h.looping.get())
}

/// Called when the root must wait and nothing can ever wake anything: in a
/// forked child whose only thread (a fiber) has ended, the process ends with
/// status 0, as when the last thread of a process ends.
pub(crate) fn exit_if_orphaned(hub: &Hub) {
    if ORPHAN_ROOT.with(|o| o.get()) && hub.tasks.borrow().is_empty() {
        let _g = internal::Guard::new();
        std::process::exit(0);
    }
}

/// In the child of `fork()`: makes the calling context the hub's only one.
///
/// Every other fiber is dropped from the run queue, wait queues, timers and
/// fd lists, and is never resumed nor unwound (its stack is leaked). The
/// poller and its notifier are replaced by fresh kernel objects under the
/// same fd numbers, so the child never changes the parent's epoll set; the
/// offload pool forgets the parent's workers (they do not exist here). When
/// called from a fiber, the root context (which stays suspended in its loop)
/// is marked orphaned: once no fiber is left the process exits with status
/// 0, as when the last thread of a process ends.
pub fn reset_after_fork() {
    pool::reset_after_fork();
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    let Some(hub) = (unsafe { p.as_ref() }) else { return };
    if let Err(e) = hub.reactor.reset_after_fork() {
        let _g = internal::Guard::new();
        eprintln!("greenhook: cannot recreate the poller after fork: {e}");
        std::process::abort();
    }
    let cur = hub.current();
    // Leak, never drop: other fibers' waits must not run destructors that
    // could reset coroutines under C frames.
    std::mem::forget(std::mem::take(&mut *hub.runq.borrow_mut()));
    std::mem::forget(std::mem::take(&mut *hub.timers.borrow_mut()));
    std::mem::forget(std::mem::take(&mut *hub.waitq.borrow_mut()));
    std::mem::forget(std::mem::take(&mut *hub.fds.borrow_mut()));
    hub.fd_waiting.set(0);
    hub.remote.reset_after_fork();
    let mut tasks = hub.tasks.borrow_mut();
    let old = std::mem::take(&mut *tasks);
    if !cur.is_root() {
        cur.index.set(0);
        tasks.push(cur.clone());
        ORPHAN_ROOT.with(|o| o.set(true));
    }
    for t in old {
        if !Rc::ptr_eq(&t, &cur) {
            std::mem::forget(t);
        }
    }
}
