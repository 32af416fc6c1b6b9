//! The hub: greenhook's single-threaded scheduler.
//!
//! One hub per OS thread, created lazily the first time the thread spawns or
//! waits. The thread's own stack is the **root context**: when the root has
//! to wait (join, sleep, fd readiness, park), it runs the scheduler loop
//! inline until its condition holds, and fibers always switch back to that
//! loop. There is no separate hub thread.
//!
//! The loop's pieces:
//! - a FIFO run queue of [`Task`]s;
//! - timers in an ordered map keyed by `(deadline, seq)` that never fire
//!   early (a timer due exactly now fires);
//! - fd readiness through a [`reactor`] (epoll directly on Linux, each fd
//!   registered once, edge-triggered, one `epoll_wait` per turn);
//! - wait queues keyed by an address ([`park`] / [`unpark`]), the building
//!   block for fiber-aware locks and futex emulation;
//! - cross-thread wake-ups ([`RemoteWaker`]) and an offload pool of worker
//!   threads for blocking calls ([`offload`]).
//!
//! Nothing here knows libc symbols. All of the hub's own system calls go
//! through rustix's raw syscalls on Linux, so they cannot re-enter the
//! interposer's hooks; code that must reach real libc functions from hub
//! machinery marks itself with [`internal::Guard`].
//!
//! ```
//! use std::time::{Duration, Instant};
//! let t0 = Instant::now();
//! let tasks: Vec<_> = (0..3)
//!     .map(|_| hub::spawn(hub::Spawn::default(), || hub::sleep(Duration::from_millis(50))).unwrap())
//!     .collect();
//! for t in &tasks {
//!     hub::join(t);
//! }
//! assert!(t0.elapsed() < Duration::from_millis(150)); // they slept together
//! ```

pub mod internal;
#[cfg(target_os = "linux")]
mod monitor;
#[cfg(not(target_os = "linux"))]
mod monitor {
    //! The stall monitor needs /proc and tgkill: Linux only.
    pub(crate) struct Beat {
        pub(crate) switches: std::sync::atomic::AtomicU64,
        pub(crate) idle: std::sync::atomic::AtomicBool,
        pub(crate) live: std::sync::atomic::AtomicU64,
    }
    pub(crate) static STALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    pub(crate) fn register() -> Option<std::sync::Arc<Beat>> {
        None
    }
}
mod fork;
mod pool;
pub mod reactor;
mod remote;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub use fork::{in_loop, reset_after_fork, set_poll_hook};
pub use pool::{offload, pool_size};
pub use remote::{park_remote, wait_remote, RemoteWaker};

use reactor::Reactor;

/// Exit status used when every fiber is blocked and nothing can wake any of
/// them (like Go's "all goroutines are asleep - deadlock!").
pub const DEADLOCK_EXIT_CODE: i32 = 86;

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
    Fd(RawFd, Interest),
    /// A wait queue keyed by this address (mutex, condvar, futex, ...).
    Park(usize),
    /// Another fiber to finish.
    Join(u64),
    /// Another OS thread (offload pool, remote waker).
    Remote,
}

/// Direction of fd readiness.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Interest {
    /// Readable (or hung up, or in error).
    Readable,
    /// Writable (or hung up, or in error).
    Writable,
}

/// A schedulable context: a fiber, or the root context of the thread.
pub struct Task {
    fiber: Option<fiber::Fiber>,
    state: Cell<State>,
    /// Bumped at every wake-up; stale wake-ups carry an older value.
    seq: Cell<u64>,
    reason: Cell<Wake>,
    waiting: Cell<Waiting>,
    /// Position in the hub's registry of live fibers.
    index: Cell<usize>,
    joiners: RefCell<Vec<Waiter>>,
    detached: Cell<bool>,
    /// Set by [`exit_current`]: the fiber ends at its next suspension.
    exiting: Cell<bool>,
    /// Opaque per-task word for the layer above (the interposer keeps its
    /// pthread record here).
    user: Cell<usize>,
}

impl Task {
    fn new(fiber: Option<fiber::Fiber>) -> Task {
        Task {
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
        }
    }

    /// Suspends this task's fiber back to whoever resumed it.
    ///
    /// # Safety
    /// `self` is the running task, and not the root (see
    /// [`fiber::Fiber::suspend`]).
    #[inline(always)]
    unsafe fn suspend(&self) {
        debug_assert!(!self.is_root());
        // SAFETY: the caller's contract: a running fiber task has a fiber,
        // and we run on its stack.
        unsafe { self.fiber.as_ref().unwrap_unchecked().suspend() }
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
}

/// A registration to wake `task` if it is still in the wait that `seq` names.
#[derive(Clone)]
pub(crate) struct Waiter {
    task: Rc<Task>,
    seq: u64,
}

#[derive(Default)]
struct FdSlot {
    registered: bool,
    readers: Vec<Waiter>,
    writers: Vec<Waiter>,
}

/// Counters, per hub (per OS thread).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Fibers spawned.
    pub spawned: u64,
    /// Fibers finished.
    pub finished: u64,
    /// Fibers alive now (spawned and not finished).
    pub live: u64,
    /// Most fibers alive at once.
    pub peak_live: u64,
    /// Switches into a fiber.
    pub switches: u64,
    /// Waits on a timer (sleeps and timed waits).
    pub timer_waits: u64,
    /// Waits on fd readiness.
    pub fd_waits: u64,
    /// Waits on a wait queue.
    pub parks: u64,
    /// Closures run on the offload pool.
    pub offloads: u64,
    /// Calls to the reactor's wait.
    pub polls: u64,
}

struct Counters {
    spawned: Cell<u64>,
    finished: Cell<u64>,
    peak_live: Cell<u64>,
    switches: Cell<u64>,
    timer_waits: Cell<u64>,
    fd_waits: Cell<u64>,
    parks: Cell<u64>,
    offloads: Cell<u64>,
    polls: Cell<u64>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// The per-thread scheduler.
pub(crate) struct Hub {
    root: Rc<Task>,
    runq: RunQueue,
    /// Live fibers, for diagnostics; each knows its index.
    tasks: RefCell<Vec<Rc<Task>>>,
    timers: RefCell<BTreeMap<(Instant, u64), Waiter>>,
    timer_seq: Cell<u64>,
    reactor: Reactor,
    fds: RefCell<Vec<FdSlot>>,
    fd_waiting: Cell<usize>,
    events: RefCell<Vec<(RawFd, bool, bool)>>,
    waitq: RefCell<HashMap<usize, VecDeque<Waiter>>>,
    pub(crate) remote: remote::Inbox,
    looping: Cell<bool>,
    counters: Counters,
    /// The stall monitor's heartbeat, when `GREENHOOK_STALL_MS` is set.
    beat: Option<std::sync::Arc<monitor::Beat>>,
    /// Whether a fiber is resuming another directly from its own stack
    /// (see [`yield_now`]).
    handing_over: Cell<Handover>,
    /// Direct hand-overs left before the next trip through the root.
    direct_left: Cell<u32>,
    /// What `direct_left` is renewed to: [`DIRECT_BUDGET`], or 0 under the
    /// stall monitor (see [`Hub::hand_over`]).
    direct_budget: u32,
    /// This thread's `errno` slot, looked up once (see
    /// [`fiber::Fiber::resume_with_errno`]).
    errno: *mut i32,
}

/// The FIFO run queue of a hub. It also keeps its only entry at hand, for
/// the question the hand-over in [`yield_now`] asks at every yield: is
/// exactly one fiber runnable, and which?
struct RunQueue {
    q: RefCell<VecDeque<Rc<Task>>>,
    /// # Invariant
    /// The queue's only entry while it has exactly one (so the queue holds
    /// a strong reference to it), else null.
    sole: Cell<*const Task>,
}

impl RunQueue {
    fn new() -> RunQueue {
        RunQueue {
            q: RefCell::new(VecDeque::new()),
            sole: Cell::new(std::ptr::null()),
        }
    }

    fn push_back(&self, t: Rc<Task>) {
        let mut q = self.q.borrow_mut();
        q.push_back(t);
        self.note(&q);
    }

    fn pop_front(&self) -> Option<Rc<Task>> {
        let mut q = self.q.borrow_mut();
        let t = q.pop_front();
        self.note(&q);
        t
    }

    /// Moves the front entry, which must be `t`, to the back.
    fn rotate_front_to_back(&self, t: *const Task) {
        let mut q = self.q.borrow_mut();
        debug_assert!(q.front().is_some_and(|f| std::ptr::eq(Rc::as_ptr(f), t)));
        q.rotate_left(1);
        self.note(&q);
    }

    fn len(&self) -> usize {
        self.q.borrow().len()
    }

    fn is_empty(&self) -> bool {
        self.q.borrow().is_empty()
    }

    /// Empties the queue, handing its entries to the caller.
    fn take(&self) -> VecDeque<Rc<Task>> {
        self.sole.set(std::ptr::null());
        std::mem::take(&mut *self.q.borrow_mut())
    }

    /// The only queued task, if exactly one is queued; valid while it stays
    /// queued.
    #[inline(always)]
    fn sole(&self) -> Option<*const Task> {
        let p = self.sole.get();
        (!p.is_null()).then_some(p)
    }

    fn note(&self, q: &VecDeque<Rc<Task>>) {
        self.sole.set(if q.len() == 1 {
            Rc::as_ptr(&q[0])
        } else {
            std::ptr::null()
        });
    }
}

/// Direct hand-overs between two fibers (see [`yield_now`]) before a yield
/// goes through the root, which polls timers and I/O.
const DIRECT_BUDGET: u32 = 64;

/// The state of a direct hand-over between two fibers (see [`yield_now`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handover {
    /// No fiber is resuming another from its own stack.
    Idle,
    /// The running fiber was resumed by another that yielded to it, and
    /// suspends straight back to it.
    Active,
    /// Set by a fork reset made while handing over: the fiber that handed
    /// over does not exist in the child.
    ResumerGone,
}

thread_local! {
    static HUB: Cell<*const Hub> = const { Cell::new(std::ptr::null()) };
    /// The task running now on this thread; null in the root context.
    static CURRENT: Cell<*const Task> = const { Cell::new(std::ptr::null()) };
}

impl Hub {
    /// The calling thread's hub, created on first use. The hub is leaked on
    /// purpose: suspended fibers may still reference it when the thread
    /// exits, and it must never be unwound or dropped under them.
    #[inline]
    pub(crate) fn get() -> &'static Hub {
        let p = HUB.with(|h| h.get());
        if !p.is_null() {
            // SAFETY: a non-null HUB was leaked by `create` on this thread and
            // is never freed.
            return unsafe { &*p };
        }
        Self::create()
    }

    #[cold]
    fn create() -> &'static Hub {
        let _g = internal::Guard::new();
        let reactor = Reactor::new().unwrap_or_else(|e| {
            eprintln!("greenhook: cannot create the hub's poller: {e}");
            std::process::abort()
        });
        let remote = remote::Inbox::new(reactor.notifier());
        let beat = monitor::register();
        // Under the stall monitor every yield goes through the root, which
        // beats (see Hub::hand_over).
        let direct_budget = if beat.is_none() { DIRECT_BUDGET } else { 0 };
        let hub = Box::leak(Box::new(Hub {
            root: Rc::new(Task::new(None)),
            runq: RunQueue::new(),
            tasks: RefCell::new(Vec::new()),
            timers: RefCell::new(BTreeMap::new()),
            timer_seq: Cell::new(0),
            reactor,
            fds: RefCell::new(Vec::new()),
            fd_waiting: Cell::new(0),
            events: RefCell::new(Vec::with_capacity(256)),
            waitq: RefCell::new(HashMap::new()),
            remote,
            looping: Cell::new(false),
            beat,
            handing_over: Cell::new(Handover::Idle),
            direct_left: Cell::new(direct_budget),
            direct_budget,
            errno: fiber::errno::location(),
            counters: Counters {
                spawned: Cell::new(0),
                finished: Cell::new(0),
                peak_live: Cell::new(0),
                switches: Cell::new(0),
                timer_waits: Cell::new(0),
                fd_waits: Cell::new(0),
                parks: Cell::new(0),
                offloads: Cell::new(0),
                polls: Cell::new(0),
            },
        }));
        hub.root.state.set(State::Running);
        fiber::set_running_hook(running_fiber);
        HUB.with(|h| h.set(hub));
        stats_at_exit();
        hub
    }

    /// The running task (the root when not in a fiber).
    #[inline]
    fn current(&self) -> Rc<Task> {
        let p = CURRENT.with(|c| c.get());
        if p.is_null() {
            self.root.clone()
        } else {
            // SAFETY: CURRENT is set from `Rc::as_ptr` of a task the run loop
            // holds a strong reference to for as long as it runs.
            unsafe {
                Rc::increment_strong_count(p);
                Rc::from_raw(p)
            }
        }
    }

    /// Puts the current task into the blocked state and returns its waiter.
    #[inline]
    fn prepare(&self, cur: &Rc<Task>, what: Waiting) -> Waiter {
        cur.state.set(State::Blocked);
        cur.waiting.set(what);
        Waiter {
            task: cur.clone(),
            seq: cur.seq.get(),
        }
    }

    /// Blocks the current task (already `prepare`d) until woken; with a
    /// deadline, a timer wakes it with `TimedOut`.
    fn block(&self, cur: &Rc<Task>, deadline: Option<Instant>) -> Wake {
        let key = deadline.map(|d| {
            let k = (d, self.timer_seq.get());
            self.timer_seq.set(k.1 + 1);
            self.timers.borrow_mut().insert(
                k,
                Waiter {
                    task: cur.clone(),
                    seq: cur.seq.get(),
                },
            );
            bump(&self.counters.timer_waits);
            k
        });
        if cur.is_root() {
            self.run_root(cur);
        } else {
            // SAFETY: `cur` is the running task, and a fiber.
            unsafe { cur.suspend() };
        }
        let reason = cur.reason.get();
        if let Some(k) = key {
            if reason != Wake::TimedOut {
                self.timers.borrow_mut().remove(&k);
            }
        }
        cur.waiting.set(Waiting::Nothing);
        reason
    }

    /// Makes `w.task` runnable if it is still in the wait `w` names.
    fn wake(&self, w: &Waiter, reason: Wake) -> bool {
        let t = &w.task;
        if t.seq.get() != w.seq || t.state.get() != State::Blocked {
            return false;
        }
        t.seq.set(w.seq + 1);
        t.reason.set(reason);
        t.state.set(State::Runnable);
        if !t.is_root() {
            self.runq.push_back(t.clone());
        }
        true
    }

    /// The root's scheduler loop: runs fibers and polls until the root is
    /// woken.
    fn run_root(&self, root: &Rc<Task>) {
        assert!(!self.looping.replace(true), "greenhook: the hub loop was re-entered");
        let mut since_poll = 0u32;
        while root.state.get() == State::Blocked {
            let next = self.runq.pop_front();
            match next {
                Some(t) => {
                    self.run_task(t);
                    since_poll += 1;
                    if since_poll == 64 {
                        since_poll = 0;
                        self.poll(false);
                    }
                }
                None => {
                    since_poll = 0;
                    self.poll(true);
                }
            }
        }
        root.state.set(State::Running);
        self.looping.set(false);
    }

    #[inline]
    fn run_task(&self, t: Rc<Task>) {
        let done = self.switch_to(&t);
        if done || t.exiting.get() {
            self.finish(t);
        } else if t.state.get() == State::Runnable {
            // It yielded: back of the queue, reusing the reference we hold.
            self.runq.push_back(t);
        }
    }

    /// Runs `t` until it suspends or finishes (returns whether it finished),
    /// keeping the current-task pointer and the stall monitor's heartbeat
    /// true on both sides of the switch. The resumer is the root, or a
    /// fiber that runs the loop itself (see [`yield_now`]): whichever it is
    /// is current again when `t` suspends.
    #[inline(always)]
    fn switch_to(&self, t: &Task) -> bool {
        let back = CURRENT.with(|c| c.get());
        let next: *const Task = t;
        t.state.set(State::Running);
        CURRENT.with(|c| c.set(next));
        bump(&self.counters.switches);
        if let Some(b) = &self.beat {
            self.beat(b, next);
        }
        // SAFETY: the hub belongs to this thread, and so does its errno slot.
        let done = t
            .fiber
            .as_ref()
            .is_some_and(|f| unsafe { f.resume_with_errno(self.errno) });
        CURRENT.with(|c| c.set(back));
        if let Some(b) = &self.beat {
            self.beat(b, back);
        }
        done
    }

    /// Runs `next`, the only runnable task, from the stack of `me`, the
    /// running fiber, which has just yielded (see [`yield_now`]).
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
    /// gives the stall monitor no heartbeat: with the monitor on, the
    /// budget is 0 and every yield goes through the root, which beats.
    #[inline(always)]
    fn hand_over(&self, me: *const Task, next: *const Task) {
        // SAFETY: `next` is the run queue's front entry, which holds a strong
        // reference for the whole call (see above; a fork in `next` leaks
        // the queue, it does not drop it).
        let t = unsafe { &*next };
        // SAFETY: only fibers are queued (the root waits in its own loop).
        let f = unsafe { t.fiber.as_ref().unwrap_unchecked() };
        debug_assert!(self.beat.is_none());
        self.handing_over.set(Handover::Active);
        t.state.set(State::Running);
        CURRENT.with(|c| c.set(next));
        bump(&self.counters.switches);
        // SAFETY: the hub belongs to this thread, and so does its errno slot.
        let done = unsafe { f.resume_with_errno(self.errno) };
        CURRENT.with(|c| c.set(me));
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
    /// (its stack is leaked like every other lost fiber's).
    #[cold]
    fn orphaned_by_fork(&self, me: *const Task, next: *const Task, done: bool) {
        // SAFETY: `next` is registered in `tasks` (the fork reset kept the
        // forking task), which holds a strong reference; take one more.
        let t = unsafe {
            Rc::increment_strong_count(next);
            Rc::from_raw(next)
        };
        if done || t.exiting.get() {
            self.finish(t);
        } else if t.state.get() == State::Runnable {
            self.runq.push_back(t);
        }
        // SAFETY: `me` is the running fiber (CURRENT was restored above).
        unsafe {
            (*me).state.set(State::Blocked);
            (*me).suspend();
        }
        unreachable!("a fiber lost in fork() was resumed");
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

    #[cold]
    fn finish(&self, t: Rc<Task>) {
        t.state.set(State::Finished);
        bump(&self.counters.finished);
        for w in t.joiners.take() {
            self.wake(&w, Wake::Ready);
        }
        let mut tasks = self.tasks.borrow_mut();
        let i = t.index.get();
        tasks.swap_remove(i);
        if let Some(moved) = tasks.get(i) {
            moved.index.set(i);
        }
        if let Some(b) = &self.beat {
            b.live.store(tasks.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// One turn of the reactor and the timers. With `block`, waits until the
    /// next timer (or forever) when nothing is runnable.
    fn poll(&self, block: bool) {
        let now = Instant::now();
        let timeout = if !block || !self.runq.is_empty() {
            Some(Duration::ZERO)
        } else {
            self.timers
                .borrow()
                .keys()
                .next()
                .map(|k| k.0.saturating_duration_since(now))
        };
        if timeout.is_none() && self.fd_waiting.get() == 0 && self.remote.pending() == 0 {
            fork::exit_if_orphaned(self);
            self.deadlock();
        }
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
            let mut fds = self.fds.borrow_mut();
            for &(fd, r, w) in events.iter() {
                if let Some(slot) = fds.get_mut(fd as usize) {
                    if r {
                        for w in slot.readers.drain(..) {
                            self.wake(&w, Wake::Ready);
                        }
                    }
                    if w {
                        for w in slot.writers.drain(..) {
                            self.wake(&w, Wake::Ready);
                        }
                    }
                }
            }
        }
        self.remote.drain(self);
        self.fire_timers();
        fork::run_poll_hook();
    }

    fn fire_timers(&self) {
        let mut timers = self.timers.borrow_mut();
        if timers.is_empty() {
            return;
        }
        let now = Instant::now();
        // A timer due exactly now fires: deadlines are "not before".
        while let Some(entry) = timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let w = entry.remove();
            self.wake(&w, Wake::TimedOut);
        }
    }

    #[cold]
    fn deadlock(&self) -> ! {
        let mut msg = String::from("greenhook: deadlock: all fibers are asleep and nothing can wake them\n");
        let describe = |t: &Task| -> String {
            let name = t
                .name()
                .map(str::to_owned)
                .or_else(|| internal::user_name(t.user()))
                .filter(|n| !n.is_empty())
                .map(|n| format!(" '{n}'"))
                .unwrap_or_default();
            let what = match t.waiting.get() {
                Waiting::Nothing => "is not waiting".to_string(),
                Waiting::Sleep => "sleeps".to_string(),
                Waiting::Fd(fd, i) => format!("waits for fd {fd} to be {i:?}"),
                Waiting::Park(a) => format!("waits on {}", internal::describe_key(a)),
                Waiting::Join(id) => format!("joins fiber {id}"),
                Waiting::Remote => "waits for another thread".to_string(),
            };
            if t.is_root() {
                format!("  main (root){name} {what}\n")
            } else {
                format!("  fiber {}{name} {what}\n", t.id())
            }
        };
        msg.push_str(&describe(&self.root));
        for t in self.tasks.borrow().iter() {
            msg.push_str(&describe(t));
        }
        let _g = internal::Guard::new();
        eprint!("{msg}");
        std::process::exit(DEADLOCK_EXIT_CODE);
    }

    fn fd_slot<R>(&self, fd: RawFd, f: impl FnOnce(&mut FdSlot) -> R) -> R {
        let mut fds = self.fds.borrow_mut();
        let i = fd as usize;
        if fds.len() <= i {
            fds.resize_with(i + 1, FdSlot::default);
        }
        f(&mut fds[i])
    }
}

/// Options for [`spawn`].
#[derive(Default, Clone, Debug)]
pub struct Spawn {
    /// The fiber's name, shown in reports.
    pub name: Option<String>,
    /// Usable stack bytes; default [`fiber::default_stack_size`].
    pub stack_size: Option<usize>,
    /// Run on caller-provided memory `(lo, size)` instead of a pooled stack
    /// (`pthread_attr_setstack`). The caller guarantees the memory stays
    /// valid and unused until the fiber finishes.
    pub user_stack: Option<(usize, usize)>,
}

/// Spawns a fiber on this thread's hub. It is queued, not run: it first runs
/// when the current task blocks or yields.
///
/// A panic escaping `f` aborts the process with a message (the facade
/// crate catches panics at the fiber boundary before they get here).
pub fn spawn(opts: Spawn, f: impl FnOnce() + 'static) -> io::Result<Rc<Task>> {
    let hub = Hub::get();
    let body = move |_: fiber::Suspender<'_>| {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            let _g = internal::Guard::new();
            eprintln!("greenhook: a panic escaped a fiber; aborting");
            std::process::abort();
        }
    };
    let name = opts.name.map(String::into_boxed_str);
    let fib = match opts.user_stack {
        // SAFETY: the Spawn contract: the caller vouches for the memory.
        Some((lo, size)) => fiber::Fiber::on_stack(name, unsafe { fiber::FiberStack::foreign(lo, size)? }, body)?,
        None => fiber::Fiber::new(name, opts.stack_size, body)?,
    };
    let t = Rc::new(Task::new(Some(fib)));
    {
        let mut tasks = hub.tasks.borrow_mut();
        t.index.set(tasks.len());
        tasks.push(t.clone());
        let live = tasks.len() as u64;
        if live > hub.counters.peak_live.get() {
            hub.counters.peak_live.set(live);
        }
        if let Some(b) = &hub.beat {
            b.live.store(live, std::sync::atomic::Ordering::Relaxed);
        }
    }
    bump(&hub.counters.spawned);
    hub.runq.push_back(t.clone());
    Ok(t)
}

/// The task running now (the root context when not in a fiber).
pub fn current() -> Rc<Task> {
    Hub::get().current()
}

/// The running fiber's opaque user word (see [`Task::set_user`]), read
/// without touching reference counts (usable from a signal handler).
pub fn current_user() -> Option<usize> {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: CURRENT points at the running task, alive while it runs.
    unsafe { p.as_ref() }.map(|t| t.user.get())
}

/// Runs `f` with the fiber running on this thread, if any (the root
/// context has none).
pub fn with_current_fiber<R>(f: impl FnOnce(Option<&fiber::Fiber>) -> R) -> R {
    // SAFETY: non-null CURRENT points at the running task, which the run
    // loop keeps alive while it runs; `f` runs within that time (should it
    // switch, it does so on this fiber's own stack, which the fiber outlives).
    f(unsafe { CURRENT.with(|c| c.get()).as_ref() }.and_then(|t| t.fiber.as_ref()))
}

/// The fiber running on this thread, or null: the overflow handler's hook
/// (see [`fiber::set_running_hook`]). Reads one thread-local pointer, so it
/// is async-signal-safe.
fn running_fiber() -> *const fiber::Fiber {
    with_current_fiber(|f| f.map_or(std::ptr::null(), |f| f as *const fiber::Fiber))
}

/// Whether the caller runs inside a fiber.
#[inline]
pub fn in_fiber() -> bool {
    !CURRENT.with(|c| c.get()).is_null()
}

/// Whether this thread has a hub (has spawned or waited through one).
#[inline]
pub fn has_hub() -> bool {
    !HUB.with(|h| h.get()).is_null()
}

/// Fibers alive on this thread's hub (0 when it has none).
pub fn live_fibers() -> usize {
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    unsafe { p.as_ref() }.map_or(0, |h| h.tasks.borrow().len())
}

/// Blocks until `task` has finished. Returns at once if it has.
pub fn join(task: &Rc<Task>) {
    assert!(!Rc::ptr_eq(&Hub::get().current(), task), "a fiber cannot join itself");
    join_inner(task, None);
}

/// Like [`join`] with a deadline; returns whether the task finished.
pub fn join_until(task: &Rc<Task>, deadline: Instant) -> bool {
    join_inner(task, Some(deadline))
}

fn join_inner(task: &Rc<Task>, deadline: Option<Instant>) -> bool {
    let hub = Hub::get();
    while !task.is_finished() {
        let cur = hub.current();
        let w = hub.prepare(&cur, Waiting::Join(task.id()));
        task.joiners.borrow_mut().push(w);
        if hub.block(&cur, deadline) == Wake::TimedOut {
            task.joiners.borrow_mut().retain(|w| !Rc::ptr_eq(&w.task, &cur));
            return task.is_finished();
        }
    }
    true
}

/// Ends the calling fiber now, without unwinding its stack (its frames may
/// be C frames that cannot unwind; whatever they own is leaked). Joiners are
/// woken as if the fiber had returned.
///
/// # Panics
/// When called from the root context (there is no fiber to end).
pub fn exit_current() -> ! {
    {
        let cur = Hub::get().current();
        assert!(!cur.is_root(), "hub::exit_current called outside a fiber");
        cur.exiting.set(true);
    }
    let p = CURRENT.with(|c| c.get());
    // SAFETY: the running task, a fiber (asserted above).
    unsafe { (*p).suspend() };
    unreachable!("an exited fiber was resumed")
}

/// Sleeps the current task for at least `dur`.
pub fn sleep(dur: Duration) {
    match Instant::now().checked_add(dur) {
        Some(d) => sleep_until(d),
        None => sleep_forever(),
    }
}

/// Sleeps the current task until `deadline` (never earlier), unless it is
/// interrupted ([`Task::interrupt`]) first.
pub fn sleep_until(deadline: Instant) {
    sleep_interruptible(deadline);
}

/// Sleeps until interrupted ([`Task::interrupt`]).
pub fn sleep_forever() {
    let hub = Hub::get();
    let cur = hub.current();
    hub.prepare(&cur, Waiting::Sleep);
    // Counted as pending so the deadlock detector stays quiet: a signal or
    // cancellation may end it.
    hub.remote.hold();
    hub.block(&cur, None);
    hub.remote.release();
}

/// Sleeps like [`sleep_until`] but returns early with `false` if the task is
/// interrupted.
pub fn sleep_interruptible(deadline: Instant) -> bool {
    let hub = Hub::get();
    let cur = hub.current();
    while Instant::now() < deadline {
        hub.prepare(&cur, Waiting::Sleep);
        if hub.block(&cur, Some(deadline)) == Wake::Interrupted {
            return false;
        }
    }
    true
}

/// Lets every other runnable fiber run once, then continues.
///
/// In a fiber: goes to the back of the run queue. In the root: runs the
/// fibers that are runnable now, then polls once without blocking.
///
/// The common case, a yield between two busy fibers, is inlined into the
/// caller whole; everything else is [`yield_slow`], out of line. Why inline:
/// a fiber resumes by *returning* through the frames it suspended in, and
/// the return stack buffer was filled by the other fiber meanwhile, so each
/// such return is mispredicted; and the coroutine switch clobbers every
/// callee-saved register, which an out-of-line function must save and
/// restore around every call while an inlined loop saves them once.
/// Measured on this machine, inlining took a round trip from ~21 ns to
/// ~14 ns, before the trims described in docs/DESIGN.md took it to ~11 ns.
#[inline]
pub fn yield_now() {
    let p = CURRENT.with(|c| c.get());
    if !p.is_null() {
        // SAFETY: a thread that runs a task has a hub (HUB is set before the
        // first task runs and never cleared), and it is never freed.
        let hub = unsafe { &*HUB.with(|h| h.get()) };
        if hub.handing_over.get() != Handover::Idle {
            // We were resumed by a fiber handing over to us (below), and it
            // is the only other runnable fiber: FIFO runs it next. Suspend
            // straight back to it; it requeues us.
            // SAFETY: CURRENT points at the running task (see Hub::current),
            // a fiber.
            unsafe {
                (*p).state.set(State::Runnable);
                (*p).suspend();
            }
            return;
        }
        // Direct hand-over: when exactly one other fiber is runnable, strict
        // FIFO runs it and then us again, so resume it from our own stack:
        // when it suspends, control comes straight back here, one coroutine
        // round trip instead of two through the root. One level deep only
        // (a fiber resumed this way suspends back at once, above), and
        // every DIRECT_BUDGET-th yield goes through the root so timers and
        // I/O are polled (every yield, under the stall monitor).
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

/// The rest of [`yield_now`], out of line: through the root.
#[inline(never)]
fn yield_slow() {
    let p = CURRENT.with(|c| c.get());
    if !p.is_null() {
        let hub = Hub::get();
        debug_assert_eq!(hub.handing_over.get(), Handover::Idle);
        // Only a yield that really reaches the root renews the budget.
        hub.direct_left.set(hub.direct_budget);
        // The normal path: mark ourselves runnable and switch to the root,
        // which requeues the reference it already holds.
        // SAFETY: CURRENT points at the running task (see Hub::current),
        // a fiber.
        unsafe {
            (*p).state.set(State::Runnable);
            (*p).suspend();
        }
        return;
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

/// Waits until `fd` may be ready for `interest`, or the deadline passes.
///
/// Edge-triggered: call it only after an operation on `fd` returned
/// `EAGAIN`/`EWOULDBLOCK`, then retry the operation (wake-ups may be
/// spurious). Errors: `TimedOut` when the deadline passed; `EBADF` when the
/// fd was closed through [`forget_fd`] while waiting; `Interrupted` on
/// [`Task::interrupt`]; whatever the kernel says when the fd cannot be
/// polled at all (`EPERM` for regular files: they are always ready).
pub fn wait_fd(fd: RawFd, interest: Interest, deadline: Option<Instant>) -> io::Result<()> {
    wait_fds(&[(fd, interest)], deadline)
}

/// Waits until any of `fds` may be ready for its interest, or the deadline
/// passes (the building block of `poll`, `select` and `epoll_wait`). Same
/// contract and errors as [`wait_fd`]; an fd that cannot be polled
/// (`EPERM`) makes the call return that error at once.
pub fn wait_fds(fds: &[(RawFd, Interest)], deadline: Option<Instant>) -> io::Result<()> {
    let hub = Hub::get();
    for &(fd, _) in fds {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if !hub.fd_slot(fd, |s| s.registered) {
            hub.reactor.register(fd)?;
            hub.fd_slot(fd, |s| s.registered = true);
        }
    }
    let cur = hub.current();
    let what = fds.first().map_or(Waiting::Sleep, |&(fd, i)| Waiting::Fd(fd, i));
    let w = hub.prepare(&cur, what);
    for &(fd, interest) in fds {
        let w = w.clone();
        hub.fd_slot(fd, |s| match interest {
            Interest::Readable => s.readers.push(w),
            Interest::Writable => s.writers.push(w),
        });
    }
    bump(&hub.counters.fd_waits);
    hub.fd_waiting.set(hub.fd_waiting.get() + 1);
    let r = hub.block(&cur, deadline);
    hub.fd_waiting.set(hub.fd_waiting.get() - 1);
    if r != Wake::Ready || fds.len() > 1 {
        for &(fd, _) in fds {
            hub.fd_slot(fd, |s| {
                s.readers.retain(|w| !Rc::ptr_eq(&w.task, &cur));
                s.writers.retain(|w| !Rc::ptr_eq(&w.task, &cur));
            });
        }
    }
    match r {
        Wake::Ready => Ok(()),
        Wake::TimedOut => Err(io::ErrorKind::TimedOut.into()),
        Wake::Closed => Err(io::Error::from_raw_os_error(libc::EBADF)),
        Wake::Interrupted => Err(io::ErrorKind::Interrupted.into()),
    }
}

/// Forgets `fd` before it is closed (or replaced by `dup2`): drops its
/// registration and wakes every task waiting on it with `EBADF`.
pub fn forget_fd(fd: RawFd) {
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    let Some(hub) = (unsafe { p.as_ref() }) else { return };
    if fd < 0 {
        return;
    }
    let waiters = {
        let mut fds = hub.fds.borrow_mut();
        let Some(slot) = fds.get_mut(fd as usize) else { return };
        if !slot.registered {
            return;
        }
        slot.registered = false;
        let mut v = std::mem::take(&mut slot.readers);
        v.append(&mut slot.writers);
        v
    };
    hub.reactor.deregister(fd);
    for w in waiters {
        hub.wake(&w, Wake::Closed);
    }
}

/// One past the highest fd this thread's hub has a slot for (0 without a
/// hub): bulk closes need not look further.
pub fn registered_high() -> usize {
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    unsafe { p.as_ref() }.map_or(0, |h| h.fds.borrow().len())
}

/// How a [`park`] ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Park {
    /// Woken by [`unpark`].
    Unparked,
    /// The deadline passed.
    TimedOut,
    /// `validate` returned false: the caller did not sleep.
    Invalid,
    /// [`Task::interrupt`] was called.
    Interrupted,
}

/// Parks the current task on the wait queue keyed by `key` (usually an
/// address) until [`unpark`]ed or the deadline passes.
///
/// `validate` runs first, with nothing else able to run in between (the hub
/// is single-threaded): if it returns false the task does not sleep. This is
/// the futex contract: "sleep only if the word still holds the value I saw".
pub fn park(key: usize, deadline: Option<Instant>, validate: impl FnOnce() -> bool) -> Park {
    if !validate() {
        return Park::Invalid;
    }
    let hub = Hub::get();
    let cur = hub.current();
    let w = hub.prepare(&cur, Waiting::Park(key));
    hub.waitq.borrow_mut().entry(key).or_default().push_back(w);
    bump(&hub.counters.parks);
    let r = hub.block(&cur, deadline);
    if r != Wake::Ready {
        let mut q = hub.waitq.borrow_mut();
        if let Some(list) = q.get_mut(&key) {
            list.retain(|w| !Rc::ptr_eq(&w.task, &cur));
            if list.is_empty() {
                q.remove(&key);
            }
        }
    }
    match r {
        Wake::Ready => Park::Unparked,
        Wake::TimedOut => Park::TimedOut,
        Wake::Closed | Wake::Interrupted => Park::Interrupted,
    }
}

/// Wakes up to `n` tasks parked on `key`, oldest first; returns how many.
pub fn unpark(key: usize, n: usize) -> usize {
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    let Some(hub) = (unsafe { p.as_ref() }) else { return 0 };
    let mut woken = 0;
    let mut q = hub.waitq.borrow_mut();
    if let Some(list) = q.get_mut(&key) {
        while woken < n {
            let Some(w) = list.pop_front() else { break };
            if hub.wake(&w, Wake::Ready) {
                woken += 1;
            }
        }
        if list.is_empty() {
            q.remove(&key);
        }
    }
    woken
}

/// How many tasks are parked on `key`.
pub fn parked(key: usize) -> usize {
    let p = HUB.with(|h| h.get());
    // SAFETY: see Hub::get.
    unsafe { p.as_ref() }.map_or(0, |hub| hub.waitq.borrow().get(&key).map_or(0, |l| l.len()))
}

/// This thread's counters.
pub fn stats() -> Stats {
    let hub = Hub::get();
    let c = &hub.counters;
    Stats {
        spawned: c.spawned.get(),
        finished: c.finished.get(),
        live: hub.tasks.borrow().len() as u64,
        peak_live: c.peak_live.get(),
        switches: c.switches.get(),
        timer_waits: c.timer_waits.get(),
        fd_waits: c.fd_waits.get(),
        parks: c.parks.get(),
        offloads: c.offloads.get(),
        polls: c.polls.get(),
    }
}

/// Stalls the monitor has reported, process-wide.
pub fn stalls() -> u64 {
    monitor::STALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// With `GREENHOOK_STATS=1`, registers (once per process) an `atexit`
/// handler that prints one compact table of the exiting thread's hub.
fn stats_at_exit() {
    static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let on = std::env::var_os("GREENHOOK_STATS").is_some_and(|v| !v.is_empty() && v != "0");
    if on && !ONCE.swap(true, std::sync::atomic::Ordering::SeqCst) {
        extern "C" fn print_stats() {
            let _g = internal::Guard::new();
            eprint!("{}", stats_table());
        }
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe { libc::atexit(print_stats) };
    }
}

/// The stats table printed at exit with `GREENHOOK_STATS=1`.
pub fn stats_table() -> String {
    let st = stats();
    let mut out = String::from("greenhook stats\n");
    out.push_str(&format!(
        "  fibers     spawned {}  peak live {}  live {}\n",
        st.spawned, st.peak_live, st.live
    ));
    out.push_str(&format!("  switches   {}\n", st.switches));
    out.push_str(&format!(
        "  waits      timer {}  fd {}  park {}  (poller calls {})\n",
        st.timer_waits, st.fd_waits, st.parks, st.polls
    ));
    out.push_str(&format!("  offloads   {}\n  stalls     {}\n", st.offloads, stalls()));
    let extra = internal::stats_extra();
    if !extra.is_empty() {
        out.push_str("  hooked     ");
        let parts: Vec<String> = extra.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&parts.join("  "));
        out.push('\n');
    }
    out
}

/// Runs `f` for each live fiber of this thread's hub.
pub fn for_each_task(mut f: impl FnMut(&Rc<Task>)) {
    let hub = Hub::get();
    let tasks: Vec<_> = hub.tasks.borrow().clone();
    for t in &tasks {
        f(t);
    }
}
