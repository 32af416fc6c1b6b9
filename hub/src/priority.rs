//! Real-time priorities among the fibers of a hub, as the kernel orders
//! `SCHED_FIFO`/`SCHED_RR` threads on one CPU.
//!
//! Until the layer above notes a priority other than 0
//! ([`internal::note_priorities_differ`]) nothing here runs: every path
//! that would ask is behind one test of that flag, and scheduling is FIFO.
//! Afterwards:
//! - the run queue is kept highest priority first, FIFO within one
//!   priority ([`RunQueue::place`](crate::run));
//! - a context that becomes runnable (created, woken, or given a higher
//!   priority) with a priority above the running one's preempts it at the
//!   running one's next safe point ([`preempt_point`], which the layer
//!   above calls at its hooks' returns): the preempted fiber goes back
//!   first among those of its priority;
//! - [`yield_now`](crate::yield_now) lets only runnable contexts of the
//!   same or a higher priority run first; when there are none it returns at
//!   once, going through the root (which polls timers, I/O and the remote
//!   inbox) every [`DIRECT_BUDGET`] such yields, as direct hand-overs do;
//! - the root context takes part with its own priority (the OS thread's):
//!   woken, it goes back to its caller only once no fiber of a higher
//!   priority is runnable, and a fiber it makes runnable at a higher
//!   priority runs at once, the root running the loop until none is left.
//!
//! Direct hand-overs between two fibers (see [`handover`](crate::handover))
//! are not made: the root chooses who runs next. Their budget is set to 0
//! instead ([`Hub::priorities_on`]), which sends every yield out of
//! `yield_now`'s inlined fast path to here, so that path tests nothing.

use std::rc::Rc;

use crate::handover::{Handover, DIRECT_BUDGET};
use crate::{internal, Hub, State, Task};

/// Sets `t`'s scheduling priority (the layer above's `sched_priority`:
/// 1–99 for `SCHED_FIFO`/`SCHED_RR`, 0 otherwise). A runnable fiber moves
/// to the back of its new priority if raised, to the front if lowered (as
/// the kernel moves a thread whose priority changed); whoever outranks the
/// running context then preempts it at its next safe point.
pub fn set_priority(t: &Rc<Task>, p: u32) {
    let old = t.prio.replace(p);
    if p != 0 {
        internal::note_priorities_differ();
    }
    if old == p || !internal::priorities_differ() {
        return;
    }
    let Some(hub) = Hub::existing() else { return };
    hub.priorities_on();
    if !t.is_root() && t.state.get() == State::Runnable && hub.handing_over.get() == Handover::Idle {
        let me = Rc::as_ptr(t);
        if hub.runq.take_out(me).is_some() {
            if p > old {
                hub.runq.push_back(t.clone());
            } else {
                hub.runq.push_front(t.clone());
            }
        }
    }
    if hub.outranked(hub.running_prio(), false) {
        hub.preempt_pending.set(true);
    }
}

/// Whether [`preempt_point`] has something to look at (one thread-local
/// read and one load): for the layer above's check at every hook return.
#[inline]
pub fn preempt_wanted() -> bool {
    Hub::existing().is_some_and(|h| h.preempt_pending.get())
}

/// A safe point of the running context (a hook's return to the program):
/// if a context that outranks it became runnable since, it lets that one
/// run now. Nothing to do (one load) unless priorities differ and one did.
pub fn preempt_point() {
    let Some(hub) = Hub::existing() else { return };
    if !hub.preempt_pending.replace(false) {
        return;
    }
    let p = crate::current_ptr();
    if p.is_null() {
        if !hub.looping.get() {
            hub.run_for_root(0);
        }
        return;
    }
    // SAFETY: the current-task pointer names the running task, a fiber.
    let me = unsafe { &*p };
    if hub.handing_over.get() == Handover::Idle && hub.outranked(me.prio.get(), false) {
        hub.preempted.set(p);
        // SAFETY: `me` is the running fiber; the root requeues it first of
        // its priority (`Hub::suspended`).
        unsafe { me.suspend_runnable() }
    }
}

/// [`yield_now`](crate::yield_now) once priorities differ (see the module
/// docs).
#[inline(never)]
pub(crate) fn yield_by_priority() {
    let hub = Hub::get();
    let p = crate::current_ptr();
    if p.is_null() {
        if !hub.looping.get() {
            hub.run_for_root(hub.runq.len());
            hub.poll(false);
        }
        return;
    }
    // SAFETY: the current-task pointer names the running task, a fiber.
    let me = unsafe { &*p };
    hub.priorities_on();
    if hub.handing_over.get() != Handover::Idle {
        // Handed control before priorities began to differ: back to the
        // fiber that handed over, as before.
        // SAFETY: `me` is the running fiber.
        return unsafe { me.suspend_runnable() };
    }
    if !hub.outranked(me.prio.get(), true) {
        // Nobody to yield to: go on, but let the root poll now and then
        // (every time under the stall monitor: the root beats).
        let left = hub.prio_left.get();
        if left > 0 {
            hub.prio_left.set(left - 1);
            return;
        }
        hub.poll_soon.set(true);
    }
    hub.prio_left.set(if hub.beat.is_some() { 0 } else { DIRECT_BUDGET });
    // SAFETY: `me` is the running fiber; the root requeues it behind the
    // others of its priority and runs the best.
    unsafe { me.suspend_runnable() }
}

impl Hub {
    /// No more direct hand-overs on this hub (the root chooses who runs
    /// next), which also sends every yield to `yield_slow`, and from there
    /// here: `yield_now`'s fast path has no test of its own for priorities.
    #[inline]
    pub(crate) fn priorities_on(&self) {
        if self.direct_budget.get() != 0 || self.direct_left.get() != 0 {
            self.direct_budget.set(0);
            self.direct_left.set(0);
        }
    }

    /// The running context's priority.
    pub(crate) fn running_prio(&self) -> u32 {
        // SAFETY: a non-null current-task pointer names the running task.
        unsafe { crate::current_ptr().as_ref() }.map_or_else(|| self.root.prio.get(), |t| t.prio.get())
    }

    /// Whether a runnable context other than the running one has a
    /// priority above `p` (or equal to it, with `ties`). The root competes
    /// while it is neither blocked nor running: woken in its loop, or
    /// running fibers from its own stack ([`Hub::run_for_root`]).
    pub(crate) fn outranked(&self, p: u32, ties: bool) -> bool {
        let beats = |q: u32| q > p || (ties && q == p);
        if self.runq.best().is_some_and(beats) {
            return true;
        }
        !crate::current_ptr().is_null() && self.root.state.get() != State::Blocked && beats(self.root.prio.get())
    }

    /// `t` just became runnable: it preempts the running context at its
    /// next safe point if it outranks it.
    #[cold]
    pub(crate) fn note_runnable(&self, t: &Task) {
        if t.prio.get() > self.running_prio() {
            self.preempt_pending.set(true);
        }
    }

    /// The root, running the program's code, lets the fibers that outrank
    /// it run, and `equals` of its own priority (a yield: those runnable
    /// now), polling as its wait loop does.
    pub(crate) fn run_for_root(&self, mut equals: usize) {
        let mine = self.root.prio.get();
        self.looping.set(true);
        let mut since_poll = 0u32;
        loop {
            match self.runq.best() {
                Some(b) if b > mine => {}
                Some(b) if b == mine && equals > 0 => equals -= 1,
                _ => break,
            }
            let Some(t) = self.runq.pop_front() else { break };
            self.run_in_loop(t, &mut since_poll);
        }
        self.looping.set(false);
        // In the child of a fork made by a fiber run here, the root's code
        // does not go on (see `fork`): it only drives the loop until that
        // fiber's end ends the process.
        while self.orphan_root.get() {
            self.root.state.set(State::Blocked);
            self.run_root(&self.root.clone());
        }
    }
}
