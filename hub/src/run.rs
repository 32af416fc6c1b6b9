//! The run queue and the root's scheduler loop.
//!
//! Runnable fibers wait in one FIFO queue. The root context runs the loop
//! only while it waits itself ([`Hub::run_root`]): it resumes the queue's
//! front fiber until that suspends, requeues it if it merely yielded, and
//! every 64 fibers (or whenever the queue is empty) takes one turn of the
//! poller, the remote inbox and the timers ([`Hub::poll`]), so I/O is never
//! starved by fibers that keep yielding. A yield between two fibers usually
//! skips this loop altogether: see [`handover`](crate::handover).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::list::{Linked, Links, List};
use crate::stats::bump;
use crate::{fork, monitor, Hub, State, Task};

/// The FIFO run queue of a hub: a doubly linked list threaded through the
/// queued tasks themselves ([`Task::queue`]), each holding a strong
/// reference while it is queued. Pushing and popping touch a few words
/// and never allocate; it also answers, in one load, the question the
/// hand-over in [`yield_now`](crate::yield_now) asks at every yield: is
/// exactly one fiber runnable, and which?
pub(crate) struct RunQueue {
    /// # Invariant
    /// Every task linked here is queued exactly once and owns one strong
    /// count that the queue gave up by `Rc::into_raw`; `len` counts them.
    list: List<Task>,
    len: Cell<usize>,
}

impl Linked for Task {
    #[inline(always)]
    fn links(&self) -> &Links<Task> {
        &self.queue
    }
}

impl RunQueue {
    pub(crate) fn new() -> RunQueue {
        RunQueue {
            list: List::new(),
            len: Cell::new(0),
        }
    }

    #[inline]
    pub(crate) fn push_back(&self, t: Rc<Task>) {
        if crate::internal::priorities_differ() {
            return self.place(t, false);
        }
        self.link_back(Rc::into_raw(t));
    }

    /// Puts `t` first (see [`Hub::wake_raw`](crate::Hub::wake_raw)). Once
    /// priorities differ, first among those of its priority (see
    /// [`RunQueue::place`]).
    pub(crate) fn push_front(&self, t: Rc<Task>) {
        if crate::internal::priorities_differ() {
            return self.place(t, true);
        }
        self.link_after(Rc::into_raw(t), std::ptr::null());
    }

    /// Links `t`, whose strong count the queue now owns, after `prev`
    /// (null: at the front).
    #[inline(always)]
    fn link_after(&self, t: *const Task, prev: *const Task) {
        // SAFETY: `t` is alive (the queue owns a strong count of it) and not
        // queued; `prev`, when not null, is queued; queued tasks are alive
        // (the invariant).
        unsafe { self.list.link_after(t, prev) };
        self.len.set(self.len.get() + 1);
    }

    /// Links `t`, whose strong count the queue now owns, at the back.
    #[inline(always)]
    fn link_back(&self, t: *const Task) {
        // SAFETY: as in `link_after`, after the tail.
        unsafe { self.list.push_back(t) };
        self.len.set(self.len.get() + 1);
    }

    /// Unlinks the queued task `t`; the caller takes over its strong count.
    #[inline(always)]
    fn unlink(&self, t: *const Task) {
        // SAFETY: `t` is queued; queued tasks are alive (the invariant).
        unsafe { self.list.unlink(t) };
        self.len.set(self.len.get() - 1);
    }

    /// Inserts `t` where the kernel would queue a thread of its priority:
    /// the queue is kept highest priority first (it was all 0s when
    /// priorities began to differ, and stays sorted), FIFO within one
    /// priority; `first` puts it before the others of its priority.
    #[cold]
    #[inline(never)]
    fn place(&self, t: Rc<Task>, first: bool) {
        let p = t.prio.get();
        // The last queued task that stays before `t` (null: none).
        let mut prev = std::ptr::null();
        let mut at = self.list.head();
        // SAFETY: queued tasks are alive (the invariant).
        while let Some(x) = unsafe { at.as_ref() } {
            let before = if first { x.prio.get() > p } else { x.prio.get() >= p };
            if !before {
                break;
            }
            prev = at;
            at = x.queue.next();
        }
        self.link_after(Rc::into_raw(t), prev);
    }

    /// The highest priority queued (the front's: see [`RunQueue::place`]).
    pub(crate) fn best(&self) -> Option<u32> {
        // SAFETY: a queued task is alive (the invariant).
        unsafe { self.list.head().as_ref() }.map(|t| t.prio.get())
    }

    pub(crate) fn pop_front(&self) -> Option<Rc<Task>> {
        let t = self.list.head();
        if t.is_null() {
            return None;
        }
        self.unlink(t);
        // SAFETY: the strong count the queue owned, handed to the caller.
        Some(unsafe { Rc::from_raw(t) })
    }

    /// The last queued task (null: none), to hand to
    /// [`RunQueue::move_after_to_front`] later.
    #[inline]
    pub(crate) fn last(&self) -> *const Task {
        self.list.tail()
    }

    /// Moves the tasks queued after `last` (an earlier [`RunQueue::last`],
    /// still queued) to the front, in their order.
    pub(crate) fn move_after_to_front(&self, last: *const Task) {
        // SAFETY: `last` is null or queued (the caller's contract); queued
        // tasks are alive (the invariant).
        unsafe { self.list.move_after_to_front(last) };
    }

    /// Moves the front entry, which must be `t`, to the back.
    pub(crate) fn rotate_front_to_back(&self, t: *const Task) {
        debug_assert!(std::ptr::eq(self.list.head(), t));
        self.unlink(t);
        self.link_back(t);
    }

    /// Takes `t` out of the queue; returns whether it was at the front.
    pub(crate) fn remove(&self, t: *const Task) -> bool {
        self.take_out(t) == Some(0)
    }

    /// Takes `t` out of the queue; returns where it was, if it was queued.
    pub(crate) fn take_out(&self, t: *const Task) -> Option<usize> {
        let mut at = self.list.head();
        let mut i = 0;
        // SAFETY: queued tasks are alive (the invariant).
        while let Some(x) = unsafe { at.as_ref() } {
            if std::ptr::eq(at, t) {
                self.unlink(t);
                // SAFETY: the strong count the queue owned, dropped.
                drop(unsafe { Rc::from_raw(t) });
                return Some(i);
            }
            i += 1;
            at = x.queue.next();
        }
        None
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.get()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.list.head().is_null()
    }

    /// Empties the queue without dropping its entries' strong counts: they
    /// leak (a `fork` child's lost fibers, see `fork`).
    pub(crate) fn leak_all(&self) {
        self.list.forget_all();
        self.len.set(0);
    }

    /// The only queued task, if exactly one is queued; valid while it stays
    /// queued.
    #[inline(always)]
    pub(crate) fn sole(&self) -> Option<*const Task> {
        (self.len.get() == 1).then(|| self.list.head())
    }
}

impl Hub {
    /// The root's scheduler loop: runs fibers and polls until the root is
    /// woken.
    pub(crate) fn run_root(&self, root: &Rc<Task>) {
        assert!(!self.looping.replace(true), "greenhook: the hub loop was re-entered");
        let mut since_poll = 0u32;
        // Once woken, the root goes back to its caller unless a fiber of
        // a higher priority is runnable (see `priority`).
        while root.state.get() == State::Blocked
            || (crate::internal::priorities_differ() && self.runq.best() > Some(root.prio.get()))
        {
            let next = self.runq.pop_front();
            match next {
                Some(t) => self.run_in_loop(t, &mut since_poll),
                None => {
                    since_poll = 0;
                    self.poll(true);
                }
            }
        }
        root.state.set(State::Running);
        self.looping.set(false);
    }

    /// One fiber of a loop the root runs: `t` runs, then every 64 fibers
    /// (or at once, when one asked: `poll_soon`) a turn of the poller, the
    /// remote inbox and the timers, so I/O is never starved.
    #[inline(always)]
    pub(crate) fn run_in_loop(&self, t: Rc<Task>, since_poll: &mut u32) {
        self.run_task(t);
        *since_poll += 1;
        if *since_poll == 64 || self.poll_soon.replace(false) {
            *since_poll = 0;
            if self.woken_first.replace(false) {
                self.poll_woken_first();
            } else {
                self.poll(false);
            }
        }
    }

    /// The poll after a fiber gave way ([`yield_to_hub`](crate::yield_to_hub)):
    /// what it wakes runs before the fibers already queued, as the kernel
    /// runs a thread woken by I/O or a timer before the threads that only
    /// yield (`sched_yield`) or used up their slice. Without this, fibers
    /// that wait for I/O-driven work by yielding in a loop (a spin-then-park
    /// pool: BEAM's schedulers, crossbeam's `Backoff::snooze`) took turns
    /// ahead of the woken fiber that makes that work, a whole round of
    /// them per hop. Under priorities the queue's order is theirs.
    #[cold]
    #[inline(never)]
    fn poll_woken_first(&self) {
        let last = self.runq.last();
        self.poll(false);
        if !crate::internal::priorities_differ() {
            self.runq.move_after_to_front(last);
        }
    }

    #[inline]
    pub(crate) fn run_task(&self, t: Rc<Task>) {
        let done = self.switch_to(&t);
        self.suspended(t, done);
    }

    /// `t` just suspended back to its resumer, `done` if its closure
    /// returned: finish it, or requeue it if it yielded (a task that
    /// blocked is requeued by its wake-up).
    #[inline(always)]
    pub(crate) fn suspended(&self, t: Rc<Task>, done: bool) {
        if done || t.exiting.get() {
            crate::internal::bookkeeping(|| self.finish(t));
        } else if t.state.get() == State::Runnable {
            if crate::internal::priorities_differ() && std::ptr::eq(self.preempted.get(), Rc::as_ptr(&t)) {
                // Preempted by a higher priority: first of its own again,
                // as the kernel queues a preempted SCHED_FIFO thread.
                self.preempted.set(std::ptr::null());
                self.runq.push_front(t);
            } else {
                // It yielded: back of the queue, reusing the reference we hold.
                self.runq.push_back(t);
            }
        }
    }

    /// Runs `t` until it suspends or finishes (returns whether it finished),
    /// keeping the current-task pointer, the stall monitor's heartbeat and
    /// (once asked for) the fibers' CPU time true on both sides of the
    /// switch. The resumer is the root, or a
    /// fiber that runs the loop itself (see [`yield_now`](crate::yield_now)):
    /// whichever it is is current again when `t` suspends.
    #[inline(always)]
    fn switch_to(&self, t: &Task) -> bool {
        let back = crate::current_ptr();
        let next: *const Task = t;
        t.state.set(State::Running);
        self.set_current(next);
        bump(&self.counters.switches);
        if let Some(b) = &self.beat {
            self.beat(b, next);
        }
        if self.cpu.on.get() {
            self.cpu_resuming();
        }
        let done = t.fiber.as_ref().is_some_and(|f| f.resume());
        if self.cpu.on.get() {
            self.cpu_suspended(t);
        }
        self.set_current(back);
        if let Some(b) = &self.beat {
            self.beat(b, back);
        }
        done
    }

    /// Tells the stall monitor that `now` (null: the root) runs.
    #[cold]
    fn beat(&self, b: &monitor::Beat, now: *const Task) {
        use std::sync::atomic::Ordering::Relaxed;
        b.switches.store(self.counters.switches.get(), Relaxed);
        // SAFETY: a non-null `now` is a task the run loop holds, alive while
        // it runs.
        let id = unsafe { now.as_ref() }.map_or(0, |p| p.id());
        b.current.store(id, Relaxed);
    }

    /// Gives back the pages of free stacks left unused beyond the pool's
    /// warm bytes ([`fiber::StackPool::trim`]) once a period has passed
    /// since the last trim; returns when the next is due, while any such
    /// stacks wait.
    fn trim_stacks(&self, now: Instant) -> Option<Instant> {
        if !self.stacks.has_excess() {
            return None;
        }
        let due = self.stacks_trimmed.get() + fiber::stack::TRIM_AFTER;
        if now < due {
            return Some(due);
        }
        self.stacks_trimmed.set(now);
        crate::internal::bookkeeping(|| self.stacks.trim()).then(|| now + fiber::stack::TRIM_AFTER)
    }

    /// One turn of the reactor and the timers. With `block`, waits until the
    /// next timer (or forever) when nothing is runnable.
    pub(crate) fn poll(&self, block: bool) {
        // Timers and I/O are polled: fibers may hand over directly again
        // (see `Hub::budget_spent`).
        self.direct_left.set(self.direct_budget.get());
        // What arrived since the last turn (signals) may wake tasks: before
        // deciding how long to wait, and whether this is a deadlock.
        fork::run_poll_hook();
        let now = Instant::now();
        let trim_at = self.trim_stacks(now);
        let timeout = if !block || !self.runq.is_empty() {
            Some(Duration::ZERO)
        } else {
            self.until_next_timer(now)
        };
        let timer_wait = timeout;
        if timeout.is_none()
            && self.fd_waiting.get() == 0
            && self.remote.pending() == 0
            && !crate::internal::threads_may_wake()
        {
            fork::exit_if_orphaned(self);
            if !crate::internal::signals_may_wake() {
                self.deadlock();
            }
            // A handler may still run and wake someone: wait for it.
            self.report_deadlock_once();
        }
        // An idle hub wakes for the next trim, if stacks wait for one.
        let timeout = match trim_at {
            Some(at) if timeout != Some(Duration::ZERO) => {
                let d = at.saturating_duration_since(now);
                Some(timeout.map_or(d, |t| t.min(d)))
            }
            _ => timeout,
        };
        // Whether this turn waits for the next timer's deadline (see
        // `fire_timers`).
        let for_timer = timeout.is_some_and(|t| !t.is_zero()) && timeout == timer_wait;
        let mut waited = false;
        // Skip the syscall when nothing could be reported.
        if timeout != Some(Duration::ZERO) || self.fd_waiting.get() > 0 || self.remote.pending() > 0 {
            bump(&self.counters.polls);
            let mut events = self.events.borrow_mut();
            events.clear();
            let idle = self.beat.as_ref().filter(|_| timeout != Some(Duration::ZERO));
            if let Some(b) = idle {
                b.idle.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let r = self.reactor.wait(timeout, &mut events);
            if let Some(b) = idle {
                b.idle.store(false, std::sync::atomic::Ordering::Relaxed);
            }
            if let Err(e) = r {
                eprintln!("greenhook: poller wait failed: {e}");
                std::process::abort();
            }
            waited = for_timer && events.is_empty();
            self.wake_ready_fds(&events);
        }
        self.remote.drain(self);
        self.fire_timers(waited);
        fork::run_poll_hook();
    }
}
