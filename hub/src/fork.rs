//! Hooks for the interposer's process and signal support: a callback at the
//! end of each loop turn, and the reset of a hub in the child of `fork()`.

use std::rc::Rc;
use std::sync::OnceLock;

use crate::handover::Handover;
use crate::{internal, pool, Hub};

/// Set at most once: see [`set_poll_hook`].
static POLL_HOOK: OnceLock<fn()> = OnceLock::new();

/// Registers `f` to run at the start of every poller turn (before the loop
/// decides how long it may wait, and whether nothing can ever wake anything)
/// and at its end (after readiness events, remote wake-ups and timers were
/// handled), on the hub's own stack, where it may wake tasks
/// ([`crate::Task::interrupt`]) but must not block. The interposer uses it
/// to act on signals noted since the last turn (an interrupted
/// `epoll_wait` ends the turn early; a signal that arrives just before the
/// wait wakes it with [`crate::internal::wake_loop`]).
///
/// The first registration wins and later ones are ignored: the interposer
/// calls this with the same function from every path that may be the first
/// to need it (installing a handler, changing a mask, `kill`, `pause`).
pub fn set_poll_hook(f: fn()) {
    let _ = POLL_HOOK.set(f);
}

pub(crate) fn run_poll_hook() {
    if let Some(f) = POLL_HOOK.get() {
        f();
    }
}

/// Whether the calling thread's hub is running its loop in the root
/// context (idle or between fibers) rather than user code. Reads two
/// thread-local cells and nothing else, so a signal handler may call it.
pub fn in_loop() -> bool {
    crate::current_ptr().is_null() && Hub::existing().is_some_and(|h| h.looping.get())
}

/// Called when the root must wait and nothing can ever wake anything: in a
/// forked child whose only thread (a fiber) has ended, the process ends with
/// status 0, as when the last thread of a process ends.
pub(crate) fn exit_if_orphaned(hub: &Hub) {
    if hub.orphan_root.get() && hub.tasks.borrow().is_empty() {
        let _g = internal::Guard::new();
        std::process::exit(0);
    }
}

/// In the child of `fork()`, before anything else runs there: gives the
/// calling thread's hub a poller of its own (as [`reset_after_fork`] does,
/// which then keeps it). The interposer calls it from an `atfork` child
/// handler registered as it loads, so before the handlers of the libraries
/// loaded later: those run inside glibc's `fork`, before the interposer's
/// reset, and a `close` of theirs took the fd out of the epoll set the
/// child still shared with the parent. gRPC's closes its poller's epoll
/// fd: the parent's fiber waiting on that fd was never woken again, and
/// every call after a `subprocess` timed out.
pub fn poller_after_fork() {
    if let Some(hub) = Hub::existing() {
        new_poller(hub);
    }
}

/// Replaces the hub's poller and notifier with fresh kernel objects under
/// the same fd numbers, once per process, or ends the process.
fn new_poller(hub: &Hub) {
    let pid = std::process::id();
    if hub.poller_pid.replace(pid) == pid {
        return;
    }
    if let Err(e) = hub.reactor.reset_after_fork() {
        let _g = internal::Guard::new();
        eprintln!("greenhook: cannot recreate the poller after fork: {e}");
        std::process::abort();
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
    let Some(hub) = Hub::existing() else { return };
    new_poller(hub);
    let cur = hub.current();
    // A fiber that was handed control suspends back onto the stack of the
    // fiber that handed over, which is lost here: hand_over must not let
    // that fiber go on.
    if hub.handing_over.get() == Handover::Active {
        hub.handing_over.set(Handover::ResumerGone);
    }
    // Leak, never drop: other fibers' waits must not run destructors that
    // could reset coroutines under C frames.
    hub.runq.leak_all();
    std::mem::forget(std::mem::take(&mut *hub.timers.borrow_mut()));
    std::mem::forget(std::mem::take(&mut *hub.fds.borrow_mut()));
    hub.fd_waiting.set(0);
    hub.remote.reset_after_fork();
    let mut tasks = hub.tasks.borrow_mut();
    let old = std::mem::take(&mut *tasks);
    if !cur.is_root() {
        cur.index.set(0);
        tasks.push(cur.clone());
        hub.orphan_root.set(true);
        // The root only drives the loop in this child: whatever it waited
        // for (a lock's wait list) must not resume it, and a wake-up it
        // had before the fork must not send it back to the program.
        hub.root.seq.set(hub.root.seq.get() + 1);
        hub.root.state.set(crate::State::Blocked);
    }
    for t in old {
        if !Rc::ptr_eq(&t, &cur) {
            // Lost: its old waits may still be linked in the child's memory
            // (a mutex's wait list); moving its sequence on makes every one
            // of them stale, so nothing ever resumes it.
            t.seq.set(t.seq.get() + 1);
            std::mem::forget(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use crate::handover::Handover;
    use crate::{join, spawn, yield_now, Hub, Spawn};

    /// In a forked child: a panic would end only its thread, and the
    /// process with status 0; make it end the process with status 4.
    fn exit_4_on_panic() {
        std::panic::set_hook(Box::new(|_| {
            // SAFETY: ends the child at once, nothing left to run.
            unsafe { libc::_exit(4) }
        }));
    }

    /// A fiber that was handed control by another (see `Hub::hand_over`)
    /// forks: in the child, the fiber that handed over must never run
    /// again, although the forking fiber suspends back onto its stack.
    #[test]
    fn fork_in_a_handed_over_fiber_leaves_the_other_behind() {
        let a_runs = Rc::new(Cell::new(0u32));
        let stop = Rc::new(Cell::new(false));
        let (runs, st) = (a_runs.clone(), stop.clone());
        let a = spawn(Spawn::default(), move || {
            while !st.get() {
                runs.set(runs.get() + 1);
                yield_now();
            }
        })
        .unwrap();
        let status = Rc::new(Cell::new(-1));
        let s2 = status.clone();
        let b = spawn(Spawn::default(), move || {
            // Yield until it is `a` that resumes us directly.
            let mut tries = 0;
            while Hub::get().handing_over.get() == Handover::Idle {
                tries += 1;
                assert!(tries < 1000, "never handed control");
                yield_now();
            }
            // SAFETY: fork in a test; the child only runs the hub and _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                exit_4_on_panic();
                super::reset_after_fork();
                let before = a_runs.get();
                for _ in 0..10 {
                    yield_now();
                }
                let code = if a_runs.get() == before { 0 } else { 1 };
                // SAFETY: ends the child without running the parent's
                // atexit handlers or test harness.
                unsafe { libc::_exit(code) };
            }
            assert!(pid > 0, "fork failed");
            let mut st = 0;
            // SAFETY: waits for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            s2.set(st);
            stop.set(true);
        })
        .unwrap();
        join(&b);
        join(&a);
        let st = status.get();
        assert!(libc::WIFEXITED(st), "child died: {st:#x}");
        assert_eq!(libc::WEXITSTATUS(st), 0, "the lost fiber ran in the child");
    }

    /// The root blocks with one fiber runnable and hands over to it (see
    /// `Hub::block`); that fiber forks. In the child the root's stack is
    /// still there, but the program's main context must never run again:
    /// when the fiber ends, the root runs the child's loop, which ends the
    /// process with status 0 (its last thread ended). The parent's root is
    /// woken as usual.
    #[test]
    fn fork_in_a_fiber_the_root_handed_over_to_keeps_the_root_out_of_the_program() {
        let key = 0x6f72_6b00usize;
        let status = Rc::new(Cell::new(-1));
        let s2 = status.clone();
        let parent = std::process::id();
        let b = spawn(Spawn::default(), move || {
            let hub = Hub::get();
            assert_eq!(hub.handing_over.get(), Handover::Active, "the root did not hand over");
            assert!(std::ptr::eq(hub.blocked_resumer.get(), Rc::as_ptr(&hub.root)));
            // SAFETY: fork in a test; the child only runs the hub and ends.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                exit_4_on_panic();
                super::reset_after_fork();
                for _ in 0..3 {
                    yield_now();
                }
                // The fiber ends here, in the child too.
                return;
            }
            assert!(pid > 0, "fork failed");
            let mut st = 0;
            // SAFETY: waits for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            s2.set(st);
            assert_eq!(crate::unpark(key, 1), 1, "the root was not parked");
        })
        .unwrap();
        let r = crate::park(key, None, || true);
        if std::process::id() != parent {
            // The root went back to the program in the child.
            // SAFETY: ends the child at once, with a status the parent sees.
            unsafe { libc::_exit(3) };
        }
        assert_eq!(r, crate::Park::Unparked);
        join(&b);
        let st = status.get();
        assert!(libc::WIFEXITED(st), "child died: {st:#x}");
        assert_eq!(libc::WEXITSTATUS(st), 0, "the child's root ran the program again");
    }
}
