//! Tasks: what the hub schedules (a fiber, or the thread's root context),
//! their life cycle, and the one protocol by which every wait blocks and
//! ends.
//!
//! A wait has three steps. [`Hub::prepare`] marks the running task blocked
//! and returns a [`Waiter`] that names this very wait by the task's sequence
//! number; the caller files it wherever the wake-up will come from (an fd
//! slot, a wait queue, a joiner list, the remote inbox). [`Hub::block`] arms
//! the deadline's timer, if any, and switches away. [`Hub::wake`] makes the
//! task runnable again only if the waiter's sequence number is still
//! current, so a wake-up that lost a race (a timeout against a readiness
//! event) can never end the task's *next* wait.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::{Deadline, Hub, Interest};

/// The life cycle of a task.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// In the run queue (or, for the root, about to return from its wait).
    Runnable,
    /// Running now.
    Running,
    /// Waiting for a wake-up.
    Blocked,
    /// The fiber's closure returned.
    Finished,
}

/// Why a blocked task was woken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wake {
    /// What it waited for happened (or may have: callers re-check).
    Ready,
    /// Its deadline passed first.
    TimedOut,
    /// The fd it waited on was closed by another fiber.
    Closed,
    /// [`Task::interrupt`] was called (cancellation, signals).
    Interrupted,
}

/// What a blocked task waits on, for diagnostics (deadlock and stall reports).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Waiting {
    /// Not waiting.
    Nothing,
    /// A timer.
    Sleep,
    /// Readiness of an fd.
    Fd(std::os::fd::RawFd, Interest),
    /// A wait queue keyed by this address (a futex word, ...).
    Park(usize),
    /// A [`WaitList`](crate::WaitList) in an object of this kind ("mutex",
    /// "condvar", …) at this address.
    Object(&'static str, usize),
    /// Another fiber to finish.
    Join(u64),
    /// Another OS thread (offload pool, remote waker).
    Remote,
}

/// A schedulable context: a fiber, or the root context of the thread.
pub struct Task {
    pub(crate) fiber: Option<fiber::Fiber>,
    pub(crate) state: Cell<State>,
    /// Bumped at every wake-up; stale wake-ups carry an older value.
    pub(crate) seq: Cell<u64>,
    pub(crate) reason: Cell<Wake>,
    pub(crate) waiting: Cell<Waiting>,
    /// Position in the hub's registry of live fibers.
    pub(crate) index: Cell<usize>,
    pub(crate) joiners: RefCell<Vec<Waiter>>,
    detached: Cell<bool>,
    /// Set by [`exit_current`](crate::exit_current): the fiber ends at its
    /// next suspension.
    pub(crate) exiting: Cell<bool>,
    /// Opaque per-task word for the layer above (the interposer keeps its
    /// pthread handle here).
    user: Cell<usize>,
    /// The fiber's id as [`owner_id`] gives it (0 for the root).
    pub(crate) owner: i32,
    /// CPU time charged to this fiber, in nanoseconds ([`cputime`](crate::cputime)).
    pub(crate) cpu: Cell<u64>,
    /// How deep this fiber is in the layer above's hooks
    /// ([`internal::enter_hook`](crate::internal::enter_hook)); the root's
    /// is in `Local`. 1 until the fiber's body begins, so that the switch
    /// into a new fiber counts as greenhook's code.
    pub(crate) hooks: Cell<u32>,
    /// Its real-time scheduling priority, 0 for none ([`priority`](crate::priority)).
    pub(crate) prio: Cell<u32>,
    /// Its links in the hub's run queue, while it is queued.
    pub(crate) queue: crate::list::Links<Task>,
    /// Set by [`Task::interrupt_soon`] while the task was not in a wait it
    /// could be woken from: its next interruptible wait ends at once.
    interrupt_due: Cell<bool>,
}

impl Task {
    pub(crate) fn new(fiber: Option<fiber::Fiber>) -> Task {
        let owner = fiber
            .as_ref()
            .map_or(0, |f| (f.id().wrapping_sub(1) % i32::MAX as u64 + 1) as i32);
        Task {
            owner,
            fiber,
            state: Cell::new(State::Runnable),
            seq: Cell::new(0),
            reason: Cell::new(Wake::Ready),
            waiting: Cell::new(Waiting::Nothing),
            index: Cell::new(usize::MAX),
            joiners: RefCell::new(Vec::new()),
            detached: Cell::new(false),
            exiting: Cell::new(false),
            user: Cell::new(0),
            cpu: Cell::new(0),
            hooks: Cell::new(1),
            prio: Cell::new(0),
            queue: crate::list::Links::new(),
            interrupt_due: Cell::new(false),
        }
    }

    /// Suspends this task's fiber back to whoever resumed it.
    ///
    /// # Safety
    /// `self` is the running task, and not the root (see
    /// [`fiber::Fiber::suspend`]).
    #[inline(always)]
    pub(crate) unsafe fn suspend(&self) {
        debug_assert!(!self.is_root());
        // SAFETY: the caller's contract: a running fiber task has a fiber,
        // and we run on its stack.
        unsafe { self.fiber.as_ref().unwrap_unchecked().suspend() }
    }

    /// Suspends this task's fiber as runnable: it yields.
    ///
    /// # Safety
    /// As for [`Task::suspend`].
    #[inline(always)]
    pub(crate) unsafe fn suspend_runnable(&self) {
        self.state.set(State::Runnable);
        // SAFETY: the caller's contract.
        unsafe { self.suspend() }
    }

    /// The fiber id, or 0 for the root context.
    pub fn id(&self) -> u64 {
        self.fiber.as_ref().map_or(0, |f| f.id())
    }

    /// The fiber's name (None for unnamed fibers and the root).
    pub fn name(&self) -> Option<&str> {
        self.fiber.as_ref().and_then(|f| f.name())
    }

    /// The fiber itself (None for the root).
    pub fn fiber(&self) -> Option<&fiber::Fiber> {
        self.fiber.as_ref()
    }

    /// Whether this is the thread's root context.
    pub fn is_root(&self) -> bool {
        self.fiber.is_none()
    }

    /// Current state.
    pub fn state(&self) -> State {
        self.state.get()
    }

    /// Whether the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.state.get() == State::Finished
    }

    /// What the task is blocked on.
    pub fn waiting(&self) -> Waiting {
        self.waiting.get()
    }

    /// Marks the task detached: nobody will join it.
    pub fn set_detached(&self) {
        self.detached.set(true);
    }

    /// Whether [`Task::set_detached`] was called.
    pub fn is_detached(&self) -> bool {
        self.detached.get()
    }

    /// Its scheduling priority (see [`set_priority`](crate::set_priority)).
    pub fn priority(&self) -> u32 {
        self.prio.get()
    }

    /// The opaque word kept for the layer above.
    pub fn user(&self) -> usize {
        self.user.get()
    }

    /// Sets the opaque word.
    pub fn set_user(&self, v: usize) {
        self.user.set(v)
    }

    /// Wakes the task with [`Wake::Interrupted`] if it is blocked on anything
    /// but another OS thread (an offload must run to completion because it
    /// borrows the caller's memory). Returns whether it was woken.
    pub fn interrupt(self: &Rc<Task>) -> bool {
        if self.state.get() != State::Blocked || self.waiting.get() == Waiting::Remote {
            return false;
        }
        let w = Waiter {
            task: self.clone(),
            seq: self.seq.get(),
        };
        Hub::get().wake(&w, Wake::Interrupted)
    }

    /// [`Task::interrupt`], or, if the task cannot be woken now (it is
    /// runnable: woken from a wait but not yet back in it; or it waits on
    /// another OS thread), its next wait that could be interrupted ends
    /// with [`Wake::Interrupted`] at once, before it blocks: what it must
    /// act on (a signal due for it) is not lost to a wake-up that came
    /// first. The running task is left alone (it is where it would act
    /// on it), as is a finished one. [`Task::clear_interrupt`] takes the
    /// request back once acted on. Returns whether it was woken now.
    pub fn interrupt_soon(self: &Rc<Task>) -> bool {
        match self.state.get() {
            State::Blocked if self.waiting.get() != Waiting::Remote => self.interrupt(),
            State::Blocked | State::Runnable => {
                self.interrupt_due.set(true);
                false
            }
            State::Running | State::Finished => false,
        }
    }

    /// Forgets an [`Task::interrupt_soon`] request not yet acted on.
    pub fn clear_interrupt(&self) {
        self.interrupt_due.set(false);
    }
}

/// A registration to wake `task` if it is still in the wait that `seq` names.
#[derive(Clone)]
pub(crate) struct Waiter {
    pub(crate) task: Rc<Task>,
    pub(crate) seq: u64,
}

impl Hub {
    /// Puts the current task into the blocked state and returns its waiter.
    #[inline]
    pub(crate) fn prepare(&self, cur: &Rc<Task>, what: Waiting) -> Waiter {
        cur.state.set(State::Blocked);
        cur.waiting.set(what);
        Waiter {
            task: cur.clone(),
            seq: cur.seq.get(),
        }
    }

    /// Blocks the current task (already `prepare`d) until woken; with a
    /// deadline, a timer wakes it with `TimedOut`.
    #[inline(always)]
    pub(crate) fn block(&self, cur: &Rc<Task>, deadline: Option<Deadline>) -> Wake {
        if cur.interrupt_due.get() && cur.waiting.get() != Waiting::Remote {
            return Self::interrupted_before_blocking(cur);
        }
        if let Some(d) = deadline {
            self.arm_timer(cur, d);
        }
        if cur.is_root() {
            // The root hands over as a fiber does, from this same frame
            // (below), so a ping-pong between main and a thread makes its
            // switches where one between two threads does. Not from inside
            // the loop (a signal handler run while it polls): that still
            // fails `run_root`'s check, as before.
            if self.looping.get() || self.hand_over_blocked(Rc::as_ptr(cur)) {
                self.run_root(cur);
            }
        } else if self.hand_over_blocked(Rc::as_ptr(cur)) {
            // The switch away is made here, in the frame of the hook that
            // parks, not in a helper's: after a switch every return made
            // on the resumed stack pops the other stack's entry off the
            // CPU's return predictor, so each frame between the hook and
            // the switch costs two mispredicted returns a round trip
            // (docs/DESIGN.md, "Locks at the cost of a switch").
            // SAFETY: `cur` is the running task, a fiber.
            unsafe { cur.suspend() }
        }
        let reason = cur.reason.get();
        if deadline.is_some() && reason != Wake::TimedOut {
            self.disarm_timer();
        }
        cur.waiting.set(Waiting::Nothing);
        reason
    }

    /// An [`Task::interrupt_soon`] request met the wait `cur` just
    /// prepared: it ends as if interrupted the moment it began (the
    /// registrations made for it are stale, as after any wake-up).
    #[cold]
    #[inline(never)]
    fn interrupted_before_blocking(cur: &Task) -> Wake {
        cur.interrupt_due.set(false);
        cur.seq.set(cur.seq.get() + 1);
        cur.reason.set(Wake::Interrupted);
        cur.state.set(State::Running);
        cur.waiting.set(Waiting::Nothing);
        Wake::Interrupted
    }

    /// Makes the switch away from `me`, the running fiber or the root, which
    /// has just blocked, if it is a hand-over; returns whether the caller
    /// must still wait until it is woken: a fiber suspends (to the fiber or
    /// root that resumed it), the root runs its loop.
    ///
    /// When exactly one other fiber is runnable, FIFO runs it next anyway:
    /// resume it from our own stack, as a yield does (see
    /// [`handover`](crate::handover)), so a lock or condvar hand-over
    /// between two fibers is one coroutine round trip, not two through the
    /// root. Control comes back here when it suspends; if it woke us
    /// meanwhile we just go on (`false`), else the caller suspends (`true`),
    /// as it does when no hand-over could be made.
    #[inline(always)]
    fn hand_over_blocked(&self, me: *const Task) -> bool {
        // SAFETY: `me` is the running task (the caller's).
        let t = unsafe { &*me };
        // Under priorities the root chooses who runs next (see `priority`).
        if self.handing_over.get() == crate::handover::Handover::Idle && !crate::internal::priorities_differ() {
            let left = self.direct_left.get();
            if left > 0 {
                if let Some(next) = self.runq.sole() {
                    self.direct_left.set(left - 1);
                    self.blocked_resumer.set(me);
                    self.hand_over(me, next);
                    let queued = !self.blocked_resumer.replace(std::ptr::null()).is_null();
                    if t.state.get() != State::Blocked {
                        return self.woken_while_handing_over(me, queued);
                    }
                }
            }
            self.budget_spent();
        }
        true
    }

    /// `me` was woken by the fiber it handed over to. Not `queued` (see
    /// [`Hub::wake_raw`]), or queued at the front, it just goes on running;
    /// queued behind others, it lets them go first, as FIFO order says:
    /// returns `true` for the caller to suspend it as runnable. The root is
    /// never queued: woken, it goes back to its caller (see `run_root`).
    #[inline]
    fn woken_while_handing_over(&self, me: *const Task, queued: bool) -> bool {
        // SAFETY: `me` is the running task.
        let t = unsafe { &*me };
        if !queued || t.is_root() || self.runq.remove(me) {
            t.state.set(State::Running);
            false
        } else {
            // The root requeues it.
            t.state.set(State::Runnable);
            true
        }
    }

    /// Makes `w.task` runnable if it is still in the wait `w` names.
    #[inline]
    pub(crate) fn wake(&self, w: &Waiter, reason: Wake) -> bool {
        self.wake_raw(Rc::as_ptr(&w.task), w.seq, reason)
    }

    /// Makes `t` runnable if it is still in the wait `seq` names.
    ///
    /// A task that was lost in a `fork` (see [`crate::reset_after_fork`])
    /// had its sequence number moved on, so no old wait of it matches.
    #[inline]
    pub(crate) fn wake_raw(&self, t: *const Task, seq: u64, reason: Wake) -> bool {
        // SAFETY: the callers hold a reference to `t` or a node whose task
        // is alive while it is parked (see `Waiter` and `WaitList`).
        let task = unsafe { &*t };
        if task.seq.get() != seq || task.state.get() != State::Blocked {
            return false;
        }
        task.seq.set(seq + 1);
        task.reason.set(reason);
        task.state.set(State::Runnable);
        if std::ptr::eq(t, self.blocked_resumer.get()) && self.runq.len() == 1 {
            // A fiber blocked in `hand_over_blocked` whose stack the running
            // fiber, the only one queued, returns to when it suspends: FIFO
            // runs it right after that one anyway, and it will just go on.
            self.blocked_resumer.set(std::ptr::null());
            return true;
        }
        if !task.is_root() {
            // SAFETY: `t` is alive (above); the run queue takes a strong
            // reference of its own.
            let t = unsafe {
                Rc::increment_strong_count(t);
                Rc::from_raw(t)
            };
            // An interrupted task (a signal for it, a cancellation) runs
            // next, as the kernel runs a thread a signal woke soon, not
            // after a whole round of the queue. Not while a fiber runs
            // handed over: it is the queue's front entry (see `hand_over`).
            if reason == Wake::Interrupted && self.handing_over.get() == crate::handover::Handover::Idle {
                self.runq.push_front(t);
            } else {
                self.runq.push_back(t);
            }
        }
        if crate::internal::priorities_differ() {
            self.note_runnable(task);
        }
        true
    }
}

/// The task running now (the root context when not in a fiber).
pub fn current() -> Rc<Task> {
    Hub::get().current()
}

/// The thread's root context (its own stack, which runs the loop while it
/// waits), from any of its contexts.
pub fn root() -> Rc<Task> {
    Hub::get().root.clone()
}

/// The running task's id ([`Task::id`]: 0 in the root context), read
/// without touching reference counts (usable from a signal handler).
#[inline]
pub fn current_id() -> u64 {
    // SAFETY: the current-task pointer points at the running task, alive while it runs.
    unsafe { crate::current_ptr().as_ref() }.map_or(0, |t| t.id())
}

/// The running fiber's opaque user word (see [`Task::set_user`]), read
/// without touching reference counts (usable from a signal handler).
pub fn current_user() -> Option<usize> {
    let p = crate::current_ptr();
    // SAFETY: the current-task pointer points at the running task, alive while it runs.
    unsafe { p.as_ref() }.map(|t| t.user.get())
}

/// Runs `f` with the fiber running on this thread, if any (the root
/// context has none).
pub fn with_current_fiber<R>(f: impl FnOnce(Option<&fiber::Fiber>) -> R) -> R {
    // SAFETY: a non-null current-task pointer points at the running task, which the run
    // loop keeps alive while it runs; `f` runs within that time (should it
    // switch, it does so on this fiber's own stack, which the fiber outlives).
    f(unsafe { crate::current_ptr().as_ref() }.and_then(|t| t.fiber.as_ref()))
}

/// The fiber running on this thread, or null: the overflow handler's hook
/// (see [`fiber::set_running_hook`]). Reads one thread-local pointer, so it
/// is async-signal-safe.
pub(crate) fn running_fiber() -> *const fiber::Fiber {
    with_current_fiber(|f| f.map_or(std::ptr::null(), |f| f as *const fiber::Fiber))
}

/// Who runs now, as a lock's owner word records it: the fiber's id folded
/// into 1..=`i32::MAX`, or in the root context minus the thread's kernel id.
/// The kernel id is asked once per thread and kept, so the child of a
/// `fork` still owns what its forking root had locked; and a lock taken by
/// the root costs no system call.
#[inline]
pub fn owner_id() -> i32 {
    crate::with_local(|l| {
        let t = l.current.get();
        if t.is_null() {
            let tid = l.tid.get();
            if tid != 0 {
                -tid
            } else {
                -root_tid(&l.tid)
            }
        } else {
            // SAFETY: the current-task pointer points at the running task,
            // alive while it runs.
            unsafe { &*t }.owner
        }
    })
}

/// For the fast paths of lock hooks (see the interposer's `hook!`): the
/// running context's lock owner id ([`owner_id`]) when
/// [`crate::internal::lean_here`] and the id needs no system call; else 0,
/// which no owner id is (the full hook then does the first looks).
#[inline(always)]
pub fn lean_owner_id() -> i32 {
    if !crate::internal::lean_here() {
        return 0;
    }
    let own = crate::local_field::owner();
    if own != 0 {
        return own;
    }
    let t = crate::local_field::current();
    if t.is_null() {
        -crate::local_field::tid()
    } else {
        // SAFETY: the current-task pointer points at the running task,
        // alive while it runs.
        unsafe { &*t }.owner
    }
}

#[cold]
fn root_tid(cache: &std::cell::Cell<i32>) -> i32 {
    let tid = rustix::thread::gettid().as_raw_nonzero().get();
    cache.set(tid);
    tid
}

/// Whether the caller runs inside a fiber.
#[inline]
pub fn in_fiber() -> bool {
    !crate::current_ptr().is_null()
}
