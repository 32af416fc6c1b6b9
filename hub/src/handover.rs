//! [`yield_now`], and the direct hand-over that makes it cheap.
//!
//! When exactly one other fiber is runnable, strict FIFO order runs it and
//! then the yielder again, so the yielder resumes it from its own stack
//! instead of going through the root: one coroutine round trip instead of
//! two. This path is inlined whole into `yield_now`'s caller (see
//! [`yield_now`] for why); everything else about a yield is out of line.

use std::rc::Rc;

use crate::stats::bump;
use crate::{Hub, State, Task};

/// Direct hand-overs between two fibers (see [`yield_now`]) before a yield
/// goes through the root, which polls timers and I/O.
pub(crate) const DIRECT_BUDGET: u32 = 64;

/// The state of a direct hand-over between two fibers (see [`yield_now`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handover {
    /// No fiber is resuming another from its own stack.
    Idle,
    /// The running fiber was resumed by another that yielded to it, and
    /// suspends straight back to it.
    Active,
    /// Set by a fork reset made while handing over: the fiber that handed
    /// over does not exist in the child.
    ResumerGone,
}

/// Lets every other runnable fiber run once, then continues.
///
/// In a fiber: goes to the back of the run queue. In the root: runs the
/// fibers that are runnable now, then polls once without blocking.
///
/// The common case, a yield between two busy fibers, is inlined into the
/// caller whole; everything else is out of line. Inlining saves the
/// mispredicted returns and the register saves an out-of-line switch costs
/// (docs/DESIGN.md, "The hub", has the reasons and the measurements).
#[inline]
pub fn yield_now() {
    let p = crate::current_ptr();
    if !p.is_null() {
        // SAFETY: a thread that runs a task has a hub (its hub is set before the
        // first task runs and never cleared), and it is never freed.
        let hub = unsafe { &*crate::with_local(|l| l.hub.get()) };
        if hub.handing_over.get() != Handover::Idle {
            // We were resumed by a fiber handing over to us (below), and it
            // is the only other runnable fiber: FIFO runs it next. Suspend
            // straight back to it; it requeues us.
            // SAFETY: the current-task pointer points at the running task (see Hub::current),
            // a fiber.
            return unsafe { (*p).suspend_runnable() };
        }
        // Direct hand-over (see the module doc): when it suspends, control
        // comes straight back here. One level deep only (a fiber resumed
        // this way suspends back at once, above), and after DIRECT_BUDGET
        // of them a switch goes through the root, which polls timers and
        // I/O (every yield, under the stall monitor; see `Hub::budget_spent`).
        let left = hub.direct_left.get();
        if left > 0 {
            if let Some(next) = hub.runq.sole() {
                hub.direct_left.set(left - 1);
                hub.hand_over(p, next);
                return;
            }
        }
    }
    yield_slow();
}

/// `sched_yield`'s yield: [`yield_to_hub`] while a poll could wake
/// someone (a fiber waits for an fd or for a wake-up from another thread,
/// or a timer is due), so the root looks first and what that wakes runs
/// before the yielders, as the kernel runs a thread it woke before one
/// that yields; otherwise [`yield_now`], whose direct hand-over keeps a
/// yield between two busy fibers at one switch.
pub fn yield_for_io() {
    if let Some(hub) = Hub::existing() {
        if hub.fd_waiting.get() > 0 || hub.remote.pending() > 0 || hub.timer_due() {
            return yield_to_hub();
        }
    }
    yield_now();
}

/// Like [`yield_now`], but never a direct hand-over: through the root,
/// which polls timers and I/O before it runs the next fiber, and runs what
/// that wakes first (unless the caller runs handed over, which must go
/// back to the fiber that handed over; the root polls when that one comes
/// back). For a yield that must let everything else have its turn, I/O
/// included: a time slice that ran out, a wait that keeps finding nothing,
/// and `sched_yield` while fibers wait for I/O ([`yield_for_io`]).
pub fn yield_to_hub() {
    let p = crate::current_ptr();
    if !p.is_null() {
        let hub = Hub::get();
        hub.poll_soon.set(true);
        hub.woken_first.set(true);
        // Under priorities too: the root polls, then runs the best (this
        // one again when nobody outranks it).
        if hub.handing_over.get() != Handover::Idle || crate::internal::priorities_differ() {
            // SAFETY: the current-task pointer points at the running task, a fiber.
            return unsafe { (*p).suspend_runnable() };
        }
    }
    yield_slow();
}

/// The rest of [`yield_now`], out of line: through the root.
#[inline(never)]
fn yield_slow() {
    // Once priorities differ no direct hand-over is made (the budget is 0:
    // see `Hub::priorities_on`), so every yield comes here, and the fast
    // path above pays nothing for them.
    if crate::internal::priorities_differ() {
        return crate::priority::yield_by_priority();
    }
    let p = crate::current_ptr();
    if !p.is_null() {
        let hub = Hub::get();
        debug_assert_eq!(hub.handing_over.get(), Handover::Idle);
        if hub.cpu.on.get() && hub.cpu_hand_over(p) {
            return;
        }
        hub.budget_spent();
        // The normal path: switch to the root, which requeues the reference
        // it already holds.
        // SAFETY: the current-task pointer points at the running task (see Hub::current),
        // a fiber.
        return unsafe { (*p).suspend_runnable() };
    }
    let hub = Hub::get();
    if hub.looping.get() {
        return;
    }
    let n = hub.runq.len();
    hub.looping.set(true);
    for _ in 0..n {
        let next = hub.runq.pop_front();
        match next {
            Some(t) => hub.run_task(t),
            None => break,
        }
    }
    hub.looping.set(false);
    hub.poll(false);
}

impl Hub {
    /// The running fiber switches through the root: if that is because the
    /// direct hand-overs' budget is spent, the root polls timers and I/O at
    /// its next turn (not up to 64 fibers later), and renews the budget
    /// when it does ([`Hub::poll`]). Without this a fiber ping-pong that
    /// only blocks (a condvar, a semaphore: no yield ever reaches the root
    /// otherwise) spent the budget once and then went through the root at
    /// every switch, twice the switches for good. Not where the budget is
    /// 0 by design (stall monitor, CPU clocks), whose root polls as usual.
    #[inline]
    pub(crate) fn budget_spent(&self) {
        if self.direct_left.get() == 0 && self.direct_budget.get() != 0 {
            self.poll_soon.set(true);
        }
    }

    /// Runs `next`, the only runnable task, from the stack of `me`, the
    /// running fiber, which has just yielded (see [`yield_now`]), or the
    /// running fiber or root, which has just blocked
    /// ([`Hub::hand_over_blocked`]).
    ///
    /// `next` stays at the front of the run queue while it runs: nothing
    /// pops the queue meanwhile (the root is not running, and `next` can
    /// only suspend back here), and if it yields again it is exactly where
    /// FIFO order puts it, so the common round trip touches the queue not
    /// at all.
    ///
    /// This is [`Hub::switch_to`] pared down to what a yield between two
    /// fibers needs, because it is inlined into every `yield_now` caller
    /// and its instructions are most of a round trip. In particular it
    /// gives the stall monitor no heartbeat and keeps no CPU clock: with
    /// the monitor on, or CPU time accounted, the budget is 0 and every
    /// yield goes through the root, which does both.
    #[inline(always)]
    pub(crate) fn hand_over(&self, me: *const Task, next: *const Task) {
        // SAFETY: `next` is the run queue's front entry, which holds a strong
        // reference for the whole call (see above; a fork in `next` leaks
        // the queue, it does not drop it).
        let t = unsafe { &*next };
        // SAFETY: only fibers are queued (the root waits in its own loop).
        let f = unsafe { t.fiber.as_ref().unwrap_unchecked() };
        debug_assert!(self.beat.is_none());
        self.handing_over.set(Handover::Active);
        t.state.set(State::Running);
        // Whoever runs this call is current again when `next` suspends, as
        // in `switch_to`: `me`, or null for the root.
        let back = self.root_local().current.get();
        debug_assert!(std::ptr::eq(back, me) || back.is_null());
        self.set_current(next);
        bump(&self.counters.switches);
        let done = f.resume();
        self.set_current(back);
        // The common case: it yielded again. A fiber that ended, blocked or
        // exited suspends in another state (`Running` for the first and
        // last), so one test covers them all.
        let how = self.handing_over.replace(Handover::Idle);
        if how != Handover::Active || t.state.get() != State::Runnable {
            return self.handed_back(me, next, done, how);
        }
        debug_assert!(!done && !t.exiting.get());
        if self.runq.sole() != Some(next) {
            self.behind_the_woken(next);
        }
    }

    /// The handed-over fiber `next` yielded after waking others: FIFO order
    /// puts it behind them.
    #[cold]
    #[inline(never)]
    fn behind_the_woken(&self, next: *const Task) {
        self.runq.rotate_front_to_back(next);
    }

    /// The rest of [`Hub::hand_over`]: `next` blocked, ended, or forked.
    #[cold]
    #[inline(never)]
    fn handed_back(&self, me: *const Task, next: *const Task, done: bool, how: Handover) {
        if how == Handover::ResumerGone {
            return self.orphaned_by_fork(me, next, done);
        }
        // It blocked or ended: off the queue.
        let t = self.runq.pop_front().expect("the handed-over task left the run queue");
        debug_assert!(std::ptr::eq(Rc::as_ptr(&t), next));
        if done || t.exiting.get() {
            self.finish(t);
        }
    }

    /// In the child of a `fork()` made by a fiber that was handed control
    /// (see [`Hub::hand_over`]): the fiber that handed over, `me`, does not
    /// exist in the child, yet `next` just suspended back onto its stack.
    /// Requeue `next` as the root would, then leave `me` suspended for good
    /// (its stack is leaked like every other lost fiber's). If `me` is the
    /// root, whose stack is still there, it goes on: blocked for good (the
    /// fork reset made its waits stale), it runs the child's loop.
    #[cold]
    fn orphaned_by_fork(&self, me: *const Task, next: *const Task, done: bool) {
        // SAFETY: `next` is registered in `tasks` (the fork reset kept the
        // forking task), which holds a strong reference; take one more.
        let t = unsafe {
            Rc::increment_strong_count(next);
            Rc::from_raw(next)
        };
        self.suspended(t, done);
        // SAFETY: `me` is the task running this call, alive.
        if unsafe { &*me }.is_root() {
            return;
        }
        // SAFETY: `me` is the running fiber (the current-task pointer was restored above).
        unsafe {
            (*me).state.set(State::Blocked);
            (*me).suspend();
        }
        unreachable!("a fiber lost in fork() was resumed");
    }
}
