//! A fiber's life seen from outside: [`spawn`] registers and queues it,
//! [`join`] waits for it, [`exit_current`] ends it early, and
//! [`Hub::finish`] unregisters it and wakes its joiners.
//!
//! The hub keeps a registry of its live fibers (each knows its index, so
//! removal is a swap) for diagnostics: the deadlock report, the stall
//! monitor's count, [`for_each_task`].

use std::io;
use std::rc::Rc;
use std::time::Instant;

use crate::stats::bump;
use crate::{internal, with_current_fiber, Deadline, Hub, State, Task, Waiting, Wake};

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
    /// Guard bytes below the stack (whole pages); default one page
    /// (`pthread_attr_setguardsize` asks for more). Not for `user_stack`.
    pub guard_size: Option<usize>,
    /// Run on the OS thread's TLS instead of a block of the fiber's own
    /// (see [`fiber::Tls`]); fibers get their own wherever
    /// [`fiber::tls::enabled`] says it works.
    pub shared_tls: bool,
}

/// Spawns a fiber on this thread's hub. It is queued, not run: it first runs
/// when the current task blocks or yields.
///
/// A panic escaping `f` aborts the process with a message (the facade
/// crate catches panics at the fiber boundary before they get here).
pub fn spawn(opts: Spawn, f: impl FnOnce() + 'static) -> io::Result<Rc<Task>> {
    internal::bookkeeping(|| spawn_task(opts, f))
}

fn spawn_task(opts: Spawn, f: impl FnOnce() + 'static) -> io::Result<Rc<Task>> {
    let hub = Hub::get();
    crate::with_local(|l| l.mark_fiber_thread());
    hub.remote.register_fiber_hub();
    let body = move |_: fiber::Suspender<'_>| {
        // First of all: a fiber with TLS of its own starts with an empty
        // LOCAL, which must find the hub before anything asks.
        crate::with_local(|l| l.seed(hub));
        // The fiber's own code begins: in no hook.
        internal::set_hook_depth(0);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            let _g = internal::Guard::new();
            eprintln!("greenhook: a panic escaped a fiber; aborting");
            std::process::abort();
        }
    };
    let name = opts.name.map(String::into_boxed_str);
    let tls = if opts.shared_tls {
        fiber::Tls::Shared
    } else {
        fiber::Tls::Own
    };
    let fib = match opts.user_stack {
        Some((lo, size)) => {
            // SAFETY: the Spawn contract: the caller vouches for the memory.
            let stack = unsafe { fiber::FiberStack::foreign(lo, size)? };
            fiber::Fiber::on_stack(&hub.stacks, name, stack, tls, body)?
        }
        None => match opts.guard_size {
            Some(guard) => {
                let size = opts.stack_size.unwrap_or_else(fiber::default_stack_size);
                fiber::Fiber::on_stack(&hub.stacks, name, hub.stacks.take_guarded(size, guard)?, tls, body)?
            }
            None => fiber::Fiber::new(&hub.stacks, name, opts.stack_size, tls, body)?,
        },
    };
    let t = Rc::new(Task::new(Some(fib)));
    if let Some(f) = &t.fiber {
        crate::Local::preseed(hub, f, Rc::as_ptr(&t));
    }
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

impl Hub {
    /// `t` ended (returned, or exited): off the registry, joiners woken.
    #[cold]
    pub(crate) fn finish(&self, t: Rc<Task>) {
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
}

/// Blocks until `task` has finished. Returns at once if it has.
pub fn join(task: &Rc<Task>) {
    assert!(!Rc::ptr_eq(&Hub::get().current(), task), "a fiber cannot join itself");
    join_inner(task, None);
}

/// Like [`join`] with a deadline; returns whether the task finished.
pub fn join_until(task: &Rc<Task>, deadline: Instant) -> bool {
    join_inner(task, Some(deadline.into()))
}

fn join_inner(task: &Rc<Task>, deadline: Option<Deadline>) -> bool {
    loop {
        match join_interruptible(task, deadline) {
            Wake::Ready => return true,
            Wake::TimedOut => return false,
            Wake::Interrupted | Wake::Closed => {}
        }
    }
}

/// Waits until `task` has finished ([`Wake::Ready`], at once if it has),
/// the deadline passes ([`Wake::TimedOut`]) or the waiter is interrupted
/// ([`Task::interrupt`]: [`Wake::Interrupted`]); for a join that is a
/// cancellation point.
pub fn join_interruptible(task: &Rc<Task>, deadline: Option<Deadline>) -> Wake {
    let hub = Hub::get();
    while !task.is_finished() {
        let cur = hub.current();
        let w = hub.prepare(&cur, Waiting::Join(task.id()));
        internal::bookkeeping(|| task.joiners.borrow_mut().push(w));
        let why = hub.block(&cur, deadline);
        if why != Wake::Ready {
            task.joiners.borrow_mut().retain(|w| !Rc::ptr_eq(&w.task, &cur));
            if !task.is_finished() {
                return why;
            }
        }
    }
    Wake::Ready
}

/// Ends the calling fiber now, without unwinding its stack (its frames may
/// be C frames that cannot unwind; whatever they own is leaked). Joiners are
/// woken as if the fiber had returned.
///
/// # Panics
/// When called from the root context (there is no fiber to end).
pub fn exit_current() -> ! {
    run_tls_destructors();
    {
        let cur = Hub::get().current();
        assert!(!cur.is_root(), "hub::exit_current called outside a fiber");
        cur.exiting.set(true);
    }
    let p = crate::current_ptr();
    // SAFETY: the running task, a fiber (asserted above).
    unsafe { (*p).suspend() };
    unreachable!("an exited fiber was resumed")
}

/// Runs the calling fiber's thread-local destructors (C++ `thread_local`,
/// Rust `thread_local!`) now, in its context, if it has TLS of its own;
/// else does nothing. A fiber's return runs them anyway; this is for a
/// fiber that ends otherwise (`pthread_exit`, cancellation), in the order
/// glibc's thread exit keeps (after cleanup handlers, before key
/// destructors). Idempotent.
pub fn run_tls_destructors() {
    let own = with_current_fiber(|f| f.is_some_and(|f| f.has_own_tls()));
    // SAFETY: we run on the current fiber's stack; `own` is its TLS.
    unsafe { fiber::tls::run_destructors(own) };
}

/// Runs `f` with the OS thread's own thread pointer installed when the
/// caller is a fiber with TLS of its own: for glibc calls that act on the
/// calling thread's descriptor and must find the thread's, not a fiber's
/// block. `fork`: glibc's child bookkeeping (its list of thread
/// descriptors, the robust list, the stack cache) then never links a
/// fiber's block into its lists, and the fiber's block gets the thread's
/// new `tid` and `errno`; `atfork` handlers see the thread's TLS. glibc's
/// own `pthread_create`: it marks the thread's descriptor as having
/// company, and the new thread inherits the thread's scheduling.
pub fn on_thread_tls<R>(f: impl FnOnce() -> R) -> R {
    let own = with_current_fiber(|f| f.is_some_and(|f| f.has_own_tls()));
    match Hub::existing() {
        // SAFETY: root_local's address is inside the thread's own static
        // TLS block, whose thread pointer the pool recorded; f does not
        // switch fibers (a fork, or glibc's pthread_create).
        Some(hub) if own => unsafe { fiber::tls::with_thread_pointer(hub.stacks.thread_pointer(), f) },
        _ => f(),
    }
}

/// The thread pointer of the OS thread's own TLS while the caller is a
/// fiber with TLS of its own (whose thread pointer is its own block's);
/// None elsewhere, where the caller's thread pointer is the thread's.
pub fn home_thread_pointer() -> Option<usize> {
    let own = with_current_fiber(|f| f.is_some_and(|f| f.has_own_tls()));
    Hub::existing().filter(|_| own).map(|h| h.stacks.thread_pointer())
}

/// Fibers alive on this thread's hub (0 when it has none).
pub fn live_fibers() -> usize {
    Hub::existing().map_or(0, |h| h.tasks.borrow().len())
}

/// Runs `f` for each live fiber of this thread's hub.
pub fn for_each_task(mut f: impl FnMut(&Rc<Task>)) {
    let hub = Hub::get();
    let tasks: Vec<_> = hub.tasks.borrow().clone();
    for t in &tasks {
        f(t);
    }
}
