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
//! - timers in a binary heap ordered by `(deadline, order)` that never
//!   fire early (a timer due exactly now fires); a wait that ends first
//!   leaves its entry to be dropped later ([`timer`](mod@timer));
//! - fd readiness through a [`reactor`] (epoll directly on Linux, each fd
//!   registered once, edge-triggered, one `epoll_wait` per turn);
//! - wait queues keyed by an address ([`park()`] / [`unpark`]), the building
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
        pub(crate) current: std::sync::atomic::AtomicU64,
        pub(crate) idle: std::sync::atomic::AtomicBool,
        pub(crate) live: std::sync::atomic::AtomicU64,
    }
    pub(crate) static STALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    pub(crate) fn register() -> Option<std::sync::Arc<Beat>> {
        None
    }
    pub(crate) fn configured() {}
}
mod clock;
mod cputime;
mod deadlock;
mod fd;
mod fork;
mod handover;
mod list;
mod park;
mod per_thread;
mod pool;
mod priority;
pub mod reactor;
mod remote;
mod run;
mod spawn;
mod stats;
mod task;
mod timer;
mod waitlist;

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::rc::Rc;

pub use clock::{now_nanos, offset_now, Deadline};
pub use cputime::cpu_time;
pub use deadlock::DEADLOCK_EXIT_CODE;
pub use fd::{forget_fd, registered_high, wait_fd, wait_fds, wake_fd, Interest};
pub use fork::{in_loop, poller_after_fork, reset_after_fork, set_poll_hook};
pub use handover::{yield_for_io, yield_now, yield_to_hub};
pub use park::{park, park_object, parked, parked_where, unpark, unpark_best, unpark_where, Park};
pub use per_thread::PerThread;
pub use pool::{offload, offload_interruptible, pool_size, pool_workers, Lane, LINGER};
pub use priority::{preempt_point, preempt_wanted, set_priority};
pub use remote::{call_on_fiber_hub, park_remote, unpark_from_elsewhere, wait_remote, RemoteWaker};
pub use spawn::{
    exit_current, for_each_task, home_thread_pointer, join, join_interruptible, join_until, live_fibers, on_thread_tls,
    run_tls_destructors, spawn, Spawn,
};
pub use stats::{stalls, stats, stats_table, switch_count, Stats};
pub use task::{
    current, current_id, current_user, in_fiber, owner_id, root, with_current_fiber, State, Task, Waiting, Wake,
};
pub use timer::{sleep, sleep_forever, sleep_interruptible, sleep_until, timer_slack_changed};
pub use waitlist::WaitList;

use fd::FdSlot;
use handover::{Handover, DIRECT_BUDGET};
use reactor::Reactor;
use run::RunQueue;
use stats::Counters;

/// The per-thread scheduler. Its parts live in the modules named after
/// them; this struct is where they meet.
pub(crate) struct Hub {
    /// The thread's own context, which runs the loop while it waits.
    root: Rc<Task>,
    /// Runnable fibers, FIFO ([`run`]).
    runq: RunQueue,
    /// Live fibers, for diagnostics; each knows its index ([`spawn`](mod@spawn)).
    tasks: RefCell<Vec<Rc<Task>>>,
    /// Armed deadlines ([`timer`]).
    timers: RefCell<timer::Timers>,
    reactor: Reactor,
    /// One slot per fd number ([`fd`]).
    fds: RefCell<Vec<FdSlot>>,
    /// Tasks waiting on fds now: without any (nor timers, nor remote
    /// wake-ups) the loop need not poll, and an idle root is a deadlock.
    fd_waiting: Cell<usize>,
    /// The poller's events of one turn, kept to reuse the allocation.
    events: RefCell<Vec<(RawFd, bool, bool)>>,
    /// Wait queues by key ([`park`](mod@park)).
    waits: park::WaitTable,
    /// Wake-ups from other threads ([`remote`]).
    pub(crate) remote: remote::Inbox,
    /// Whether the loop runs now (it must not be re-entered).
    looping: Cell<bool>,
    counters: Counters,
    /// The stall monitor's heartbeat, when `GREENHOOK_STALL_MS` is set.
    beat: Option<std::sync::Arc<monitor::Beat>>,
    /// Whether a fiber is resuming another directly from its own stack
    /// ([`handover`]).
    handing_over: Cell<Handover>,
    /// A fiber that blocked and handed over to the only runnable one
    /// ([`Hub::hand_over_blocked`]); null once woken without being queued.
    blocked_resumer: Cell<*const Task>,
    /// Direct hand-overs left before the next trip through the root.
    direct_left: Cell<u32>,
    /// A fiber's time slice ran out ([`yield_to_hub`]): the root's loop
    /// polls timers and I/O before it runs the next fiber, not 64 fibers
    /// later (64 slices would be most of a second).
    poll_soon: Cell<bool>,
    /// The poll `poll_soon` asks for puts what it wakes first
    /// ([`Hub::poll_woken_first`]): the running fiber gave way.
    woken_first: Cell<bool>,
    /// What `direct_left` is renewed to: [`DIRECT_BUDGET`], or 0 under the
    /// stall monitor and once CPU time is accounted (see [`Hub::hand_over`]).
    direct_budget: Cell<u32>,
    /// CPU time per fiber, once asked for ([`cputime`]).
    cpu: cputime::Clocks,
    /// The root's `LOCAL`: the thread's own, which a fiber sharing the
    /// thread's TLS reads too. Its `current` always names the running task
    /// (see [`Hub::set_current`]).
    root_local: *const Local,
    /// This thread's fiber stacks.
    stacks: fiber::StackPool,
    /// When `stacks` was last trimmed (see [`Hub::trim_stacks`]).
    stacks_trimmed: Cell<std::time::Instant>,
    /// The process the poller belongs to: a forked child replaces it once
    /// ([`fork::poller_after_fork`]).
    poller_pid: Cell<u32>,
    /// In the child of a fork made from a fiber: the root's own wait can
    /// never end (what it waited for stayed in the parent; see [`fork`]).
    orphan_root: Cell<bool>,
    /// A context that outranks the running one became runnable
    /// ([`priority`]).
    preempt_pending: Cell<bool>,
    /// The fiber that [`preempt_point`] suspended, to requeue first of its
    /// priority; null otherwise.
    preempted: Cell<*const Task>,
    /// Yields that returned at once (nobody of the yielder's priority or
    /// above was runnable) left before the next trip through the root
    /// ([`priority`]).
    prio_left: Cell<u32>,
}

/// What the hub keeps per OS thread, behind one thread-local (reached in
/// two instructions on x86-64 Linux, see `local_tls`; a `thread_local!`
/// elsewhere, where a shared library pays a `__tls_get_addr` call per
/// function that asks). It has no destructor, so it can be read at any
/// moment of the thread's life. A fiber with TLS of its own has a copy,
/// seeded from the thread's when it starts ([`Local::seed`]).
pub(crate) struct Local {
    /// This thread's hub, null until first used.
    pub(crate) hub: Cell<*const Hub>,
    /// The task running now on this thread; null in the root context.
    pub(crate) current: Cell<*const Task>,
    /// How deep the thread is in greenhook's own machinery ([`internal`]),
    /// in steps of [`MACHINERY`], plus [`LEAN`] where the lock hooks' fast
    /// paths may run: so their whole check is one compare with `LEAN`.
    pub(crate) depth: Cell<u32>,
    /// How deep the root context is in the layer above's hooks
    /// ([`internal::enter_hook`]); a fiber's count is in its task.
    pub(crate) root_hooks: Cell<u32>,
    /// The thread's kernel id, asked once (0 until then).
    pub(crate) tid: Cell<i32>,
    /// In a fiber's own `LOCAL` (TLS of its own), the fiber's lock owner id
    /// ([`owner_id`]), set once when it is seeded: one load for the lock
    /// hooks' fast paths. 0 in the thread's, which the root and the fibers
    /// sharing its TLS read (the owner is then the current task's, which
    /// a field set at every switch would cost every switch).
    pub(crate) owner: Cell<i32>,
    /// Whether this OS thread runs fibers (see [`is_fiber_thread`]): 0 not
    /// asked yet, 1 yes, 2 no.
    pub(crate) fiber_thread: Cell<u8>,
    /// The OS thread's [`PerThread`] slots, null until first used.
    pub(crate) block: Cell<*const per_thread::Block>,
}

/// [`Local::depth`]'s low bit: this is the OS thread that runs fibers and
/// the layer above allowed fast paths ([`internal::allow_lean`]).
pub(crate) const LEAN: u32 = 1;
/// One level of machinery in [`Local::depth`].
pub(crate) const MACHINERY: u32 = 2;
/// Set once by [`internal::allow_lean`].
pub(crate) static LEAN_ALLOWED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The thread's `LOCAL` on x86-64 Linux: a symbol of ours in the
/// thread-local `.tbss` section, all zero in every new block (an all-zero
/// `Local` is the const one below), reached in the initial-exec model.
///
/// Why not `thread_local!`: in a shared library every access to one is a
/// call to `__tls_get_addr`, and every hook asks `LOCAL` (its depth, the
/// running task, the hub): a call of about 15 instructions in each hook,
/// about 130 per condvar round trip, more than the uncontended lock itself.
/// Initial-exec is the thread pointer plus a link-time offset from the
/// GOT: two instructions. It makes the library's TLS static, which a
/// preloaded library is anyway (and a `dlopen` finds room for it in
/// glibc's static-TLS surplus).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod local_tls {
    use super::Local;

    std::arch::global_asm!(
        ".section .tbss,\"awT\",@nobits",
        ".p2align {align}",
        // Global, so every object file of the link (hooks inline `get`)
        // finds it; hidden, so it is never exported or interposed.
        ".globl greenhook_hub_local",
        ".hidden greenhook_hub_local",
        ".type greenhook_hub_local, @object",
        ".size greenhook_hub_local, {size}",
        "greenhook_hub_local:",
        ".zero {size}",
        ".text",
        align = const std::mem::align_of::<Local>().trailing_zeros(),
        size = const std::mem::size_of::<Local>(),
    );

    /// The running context's `LOCAL`.
    #[inline(always)]
    pub(crate) fn get() -> *const Local {
        let p: usize;
        // SAFETY: reads the TCB's self pointer (fs:0, mapped in every
        // context of a glibc process, fibers' blocks included) and the
        // GOT entry the linker made for our TLS symbol's offset; writes
        // nothing.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + greenhook_hub_local@GOTTPOFF]",
                p = out(reg) p,
                options(nostack, readonly, preserves_flags, pure),
            )
        };
        p as *const Local
    }
}

/// Single fields of the running context's `LOCAL`, for the lock hooks'
/// fast paths (see [`internal::shield`]): on x86-64 Linux each is one load
/// or store relative to the thread pointer (the GOT entry's offset is a
/// constant the CPU loads ahead), not the thread pointer read first and
/// the field after it; between two locked instructions, which wait for
/// every older one, that is one load fewer in a row.
pub(crate) mod local_field {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    macro_rules! field {
        ($get:ident $(/ $set:ident)?, $field:ident, $ty:ty, $width:literal, $reg:literal) => {
            /// Reads the field.
            #[inline(always)]
            pub(crate) fn $get() -> $ty {
                let v: $ty;
                // SAFETY: reads the running context's own `LOCAL` (see
                // `local_tls`) at the field's offset; writes nothing.
                unsafe {
                    std::arch::asm!(
                        "mov {g}, qword ptr [rip + greenhook_hub_local@GOTTPOFF]",
                        concat!("mov {v", $reg, "}, ", $width, " ptr fs:[{g} + {off}]"),
                        g = out(reg) _,
                        v = out(reg) v,
                        off = const std::mem::offset_of!(super::Local, $field),
                        options(nostack, readonly, preserves_flags),
                    )
                };
                v
            }

            $(
            /// Writes the field.
            #[inline(always)]
            pub(crate) fn $set(v: $ty) {
                // SAFETY: writes the running context's own `LOCAL` (see
                // `local_tls`) at the field's offset, a `Cell` no
                // reference into is held across this.
                unsafe {
                    std::arch::asm!(
                        "mov {g}, qword ptr [rip + greenhook_hub_local@GOTTPOFF]",
                        concat!("mov ", $width, " ptr fs:[{g} + {off}], {v", $reg, "}"),
                        g = out(reg) _,
                        v = in(reg) v,
                        off = const std::mem::offset_of!(super::Local, $field),
                        options(nostack, preserves_flags),
                    )
                };
            }
            )?
        };
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    macro_rules! field {
        ($get:ident $(/ $set:ident)?, $field:ident, $ty:ty, $width:literal, $reg:literal) => {
            /// Reads the field.
            #[inline(always)]
            pub(crate) fn $get() -> $ty {
                super::with_local(|l| l.$field.get())
            }

            $(
            /// Writes the field.
            #[inline(always)]
            pub(crate) fn $set(v: $ty) {
                super::with_local(|l| l.$field.set(v))
            }
            )?
        };
    }
    field!(depth / set_depth, depth, u32, "dword", ":e");
    field!(tid, tid, i32, "dword", ":e");
    field!(owner, owner, i32, "dword", ":e");
    field!(current, current, *const crate::Task, "qword", "");
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
thread_local! {
    static LOCAL: Local = const { Local::ZERO };
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
impl Local {
    /// What a thread's `LOCAL` is before anything is set: all zero (the
    /// x86-64 `.tbss` symbol's initial state).
    const ZERO: Local = Local {
        hub: Cell::new(std::ptr::null()),
        current: Cell::new(std::ptr::null()),
        depth: Cell::new(0),
        root_hooks: Cell::new(0),
        tid: Cell::new(0),
        owner: Cell::new(0),
        fiber_thread: Cell::new(0),
        block: Cell::new(std::ptr::null()),
    };
}

/// Runs `f` with the running context's `LOCAL` (see `local_tls`).
#[inline(always)]
pub(crate) fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // SAFETY: the running context's own `LOCAL`, alive while it runs;
        // all-zero memory is a valid `Local` (null pointers, zero counts),
        // the state of a block that never touched it.
        f(unsafe { &*local_tls::get() })
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    LOCAL.with(f)
}

/// The task running now on this thread (null in the root context).
#[inline(always)]
pub(crate) fn current_ptr() -> *const Task {
    with_local(|l| l.current.get())
}

impl Hub {
    /// Makes `t` (null: the root) the task running now, as the root's
    /// `LOCAL` says it: what the root and fibers sharing its TLS read. A
    /// fiber with TLS of its own has its own `LOCAL`, whose `current` is
    /// itself for its whole life (see [`Local::seed`]), so this one store
    /// serves both kinds of fiber.
    #[inline(always)]
    pub(crate) fn set_current(&self, t: *const Task) {
        // SAFETY: the root's LOCAL lives as long as its thread, which is
        // the only one using this hub.
        unsafe { (*self.root_local).current.set(t) }
    }

    /// The root's `LOCAL` (see [`Hub::root_local`]).
    pub(crate) fn root_local(&self) -> &Local {
        // SAFETY: as in set_current.
        unsafe { &*self.root_local }
    }
}

impl Local {
    /// Makes the calling fiber's own `LOCAL` (in its own TLS block) say
    /// what the thread's says: the hub, the thread's id and per-thread
    /// block, that this thread runs fibers, and that the running task, the
    /// one the hub is resuming, is current (for the fiber's whole life). A
    /// fiber sharing the thread's TLS finds the thread's `LOCAL` itself.
    pub(crate) fn seed(&self, hub: &'static Hub) {
        let root = hub.root_local();
        if std::ptr::eq(self, root) {
            return;
        }
        self.hub.set(hub);
        let task = root.current.get();
        self.current.set(task);
        let owner = if task.is_null() {
            0
        } else {
            // SAFETY: the task the hub is resuming, this fiber's, alive.
            unsafe { (*task).owner }
        };
        self.owner.set(owner);
        self.depth.set(root.depth.get() & LEAN);
        self.tid.set(root.tid.get());
        self.fiber_thread.set(1);
        self.block.set(root.block.get());
    }

    /// Marks this OS thread as the one that runs fibers (see
    /// [`is_fiber_thread`]), and as [`LEAN`] if that is allowed.
    pub(crate) fn mark_fiber_thread(&self) {
        self.fiber_thread.set(1);
        if LEAN_ALLOWED.load(std::sync::atomic::Ordering::Relaxed) {
            self.depth.set(self.depth.get() | LEAN);
        }
    }

    /// Seeds the `LOCAL` of `task`'s fiber, made with TLS of its own and not
    /// started yet, in its block: as [`Local::seed`] will, but before the
    /// fiber's thread pointer is ever installed. Between that and the
    /// fiber's first instruction a signal may arrive, and the trampoline
    /// must then see the fiber (inside greenhook's code), not a blank
    /// `LOCAL` that reads as the root of a thread without a hub. Where
    /// `LOCAL` is in dynamic TLS (greenhook `dlopen`ed), the fiber's block
    /// has no `LOCAL` yet and `seed` alone does it.
    pub(crate) fn preseed(hub: &'static Hub, fib: &fiber::Fiber, task: *const Task) {
        static OFFSET: std::sync::OnceLock<Option<isize>> = std::sync::OnceLock::new();
        let off = *OFFSET.get_or_init(|| with_local(|l| fiber::tls::static_offset(l as *const Local as usize)));
        let (Some(off), true) = (off, fib.has_own_tls()) else {
            return;
        };
        let root = hub.root_local();
        let at = (fib.thread_pointer() as isize + off) as *mut Local;
        // SAFETY: `at` is this fiber's own `LOCAL` (the same static-TLS
        // offset in every block, above), in a block made for it and not in
        // use: the fiber has not run. `Local` has no destructor to skip.
        unsafe {
            at.write(Local {
                hub: Cell::new(hub),
                current: Cell::new(task),
                depth: Cell::new(root.depth.get() & LEAN),
                root_hooks: Cell::new(0),
                tid: Cell::new(root.tid.get()),
                // (`task` is this fiber's, alive.)
                owner: Cell::new((*task).owner),
                fiber_thread: Cell::new(1),
                block: Cell::new(root.block.get()),
            })
        };
    }
}

impl Hub {
    /// The calling thread's hub, created on first use. The hub is leaked on
    /// purpose: suspended fibers may still reference it when the thread
    /// exits, and it must never be unwound or dropped under them.
    #[inline]
    pub(crate) fn get() -> &'static Hub {
        let p = with_local(|l| l.hub.get());
        if !p.is_null() {
            // SAFETY: a non-null hub pointer was leaked by `create` on this thread and
            // is never freed.
            return unsafe { &*p };
        }
        Self::create()
    }

    /// The calling thread's hub if it has one, for calls that have nothing
    /// to do on a thread without one (and must not create it).
    #[inline]
    pub(crate) fn existing() -> Option<&'static Hub> {
        let p = with_local(|l| l.hub.get());
        // SAFETY: as in `get`: a non-null hub pointer is leaked, never freed.
        unsafe { p.as_ref() }
    }

    #[cold]
    fn create() -> &'static Hub {
        let _g = internal::Guard::new();
        per_thread::make_block();
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
            timers: RefCell::new(timer::Timers::new()),
            reactor,
            fds: RefCell::new(Vec::new()),
            fd_waiting: Cell::new(0),
            events: RefCell::new(Vec::with_capacity(256)),
            waits: park::WaitTable::new(),
            remote,
            looping: Cell::new(false),
            beat,
            handing_over: Cell::new(Handover::Idle),
            blocked_resumer: Cell::new(std::ptr::null()),
            direct_left: Cell::new(direct_budget),
            poll_soon: Cell::new(false),
            woken_first: Cell::new(false),
            direct_budget: Cell::new(direct_budget),
            cpu: cputime::Clocks::default(),
            root_local: with_local(|l| l as *const Local),
            stacks: fiber::StackPool::new(),
            stacks_trimmed: Cell::new(std::time::Instant::now()),
            orphan_root: Cell::new(false),
            poller_pid: Cell::new(std::process::id()),
            preempt_pending: Cell::new(false),
            preempted: Cell::new(std::ptr::null()),
            prio_left: Cell::new(0),
            counters: Counters::default(),
        }));
        hub.root.state.set(State::Running);
        fiber::set_running_hook(task::running_fiber);
        with_local(|l| l.hub.set(hub));
        stats::stats_at_exit();
        hub
    }

    /// The calling thread's hub and its running task, from one read of
    /// the thread-local (see [`Local`]), the task borrowed: no strong count
    /// is taken, none dropped. It stays alive for as long as it runs or
    /// waits, whatever the caller does: the hub owns the root, and its
    /// registry of live fibers owns each fiber until it has finished.
    #[inline]
    pub(crate) fn get_and_current() -> (&'static Hub, std::mem::ManuallyDrop<Rc<Task>>) {
        let (h, p) = with_local(|l| (l.hub.get(), l.current.get()));
        // SAFETY: as in `get`: a non-null hub pointer is leaked, never freed.
        let hub = unsafe { h.as_ref() }.unwrap_or_else(|| Self::create());
        let cur = if p.is_null() { Rc::as_ptr(&hub.root) } else { p };
        // SAFETY: `cur` came from `Rc::as_ptr` of a live task (the root, or
        // the running fiber: see above); wrapped in `ManuallyDrop`, the
        // count this `Rc` stands for is never given back.
        (hub, std::mem::ManuallyDrop::new(unsafe { Rc::from_raw(cur) }))
    }

    /// The running task (the root when not in a fiber).
    #[inline]
    fn current(&self) -> Rc<Task> {
        self.task_at(current_ptr())
    }

    /// The task at `p`, the current-task pointer (null: the root).
    #[inline]
    fn task_at(&self, p: *const Task) -> Rc<Task> {
        if p.is_null() {
            self.root.clone()
        } else {
            // SAFETY: the current-task pointer is set from `Rc::as_ptr` of a task the run loop
            // holds a strong reference to for as long as it runs.
            unsafe {
                Rc::increment_strong_count(p);
                Rc::from_raw(p)
            }
        }
    }
}

/// Whether this OS thread runs fibers: it has spawned one, or it is the
/// process's main thread (which does, under the preload, from the first
/// `pthread_create`). Other threads are the hub's own workers or threads
/// a library made without going through the hooks (jemalloc's background
/// thread finds libc's `pthread_create` itself): objects they share with
/// fibers must keep working between the two (see `interpose::sync`).
#[inline]
pub fn is_fiber_thread() -> bool {
    with_local(|l| match l.fiber_thread.get() {
        1 => true,
        2 => false,
        _ => first_fiber_thread_check(l),
    })
}

#[cold]
fn first_fiber_thread_check(l: &Local) -> bool {
    let main = rustix::thread::gettid() == rustix::process::getpid();
    if main {
        l.mark_fiber_thread();
    } else {
        l.fiber_thread.set(2);
    }
    main
}

/// Whether this thread has a hub (has spawned or waited through one).
#[inline]
pub fn has_hub() -> bool {
    Hub::existing().is_some()
}
