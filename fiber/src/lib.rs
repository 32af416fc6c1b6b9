//! Stackful fibers for greenhook.
//!
//! A [`Fiber`] runs a closure on its own stack and can suspend itself back
//! to whoever called [`Fiber::resume`]. This crate knows stacks and
//! switching and nothing of I/O or scheduling; the `hub` crate builds the
//! scheduler on top. In particular it keeps no notion of "the fiber running
//! now": that is scheduling state, kept once, by the scheduler (which tells
//! the overflow handler through [`set_running_hook`]), instead of a second
//! thread-local that every switch would have to keep in step.
//!
//! - Stacks come from a per-thread [`StackPool`] carved out of large reserved
//!   regions (see [`stack`]): spawning on a pooled stack makes no system call,
//!   and the number of kernel mappings does not grow with the number of
//!   fibers. The scheduler owns the pool, so this crate keeps no
//!   thread-locals at all.
//! - Each stack has a guard page where the kernel allows, else a canary that
//!   is checked at every switch. A stack overflow is reported by name:
//!   `greenhook: fiber 7 'worker' overflowed its 256 KiB stack`.
//! - A fiber made with [`Tls::Own`] runs with a thread pointer of its own:
//!   a TCB and static TLS block at the top of its stack, made as glibc
//!   makes a thread's (see [`tls`]), so `__thread`, `thread_local!`,
//!   `errno` and glibc's per-thread state are its own. One made with
//!   [`Tls::Shared`] runs on its OS thread's TLS, with its own `errno`
//!   saved and restored at every switch.
//! - Key/value slots for `pthread_key_*` emulation.
//! - A suspended fiber is never unwound: dropping one abandons its frames
//!   (they may belong to C code that cannot unwind) and recycles its stack.
//!
//! ```
//! use fiber::{Fiber, StackPool};
//! let pool = StackPool::leak();
//! let f = Fiber::new(pool, None, None, fiber::Tls::Shared, |s| {
//!     println!("one");
//!     s.suspend();
//!     println!("two");
//! })
//! .unwrap();
//! assert!(!f.resume()); // prints "one", then suspends
//! assert!(f.resume()); // prints "two", then finishes
//! ```

pub mod stack;
pub mod tls;

mod overflow;

use std::cell::{Cell, OnceCell, RefCell, UnsafeCell};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use corosensei::{Coroutine, CoroutineResult, Yielder};

pub use overflow::{replaced_action as overflow_replaced_action, set_running_hook};
pub use stack::{default_stack_size, FiberStack, StackPool, DEFAULT_STACK_SIZE};

/// Whose thread-local storage a fiber runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tls {
    /// Its OS thread's (the `errno` is still the fiber's own, swapped at
    /// every switch). Costs nothing; thread-locals are shared by the
    /// thread's fibers.
    #[default]
    Shared,
    /// A block of its own (see [`tls`]): about 4 KiB at the top of the
    /// stack, one more touched page per fiber, and a thread-pointer write
    /// at every switch. Falls back to `Shared` where [`tls::enabled`] is
    /// false.
    Own,
}

/// An OS thread's own TLS, where fibers that share it run: its thread
/// pointer and `errno` slot, looked up once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Home {
    pub(crate) tp: usize,
    errno: *mut i32,
}

impl Home {
    /// The calling context's.
    pub(crate) fn current() -> Home {
        Home {
            tp: tls::arch::thread_pointer(),
            errno: errno::location(),
        }
    }
}

/// A fiber's coroutine. Each resume passes the fiber's own address, which
/// the first one needs (see [`Fiber::first_resume`]) and the others ignore.
type Co = Coroutine<*const Fiber, (), (), FiberStack>;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a fiber's closure is given to suspend itself with.
pub struct Suspender<'a> {
    y: &'a Yielder<*const Fiber, ()>,
}

impl Suspender<'_> {
    /// Suspends the fiber, returning to whoever resumed it; returns when it
    /// is resumed again.
    #[inline]
    pub fn suspend(&self) {
        self.y.suspend(());
    }
}

/// A stackful fiber.
///
/// Not `Send`: a fiber lives and dies on the OS thread that created it.
pub struct Fiber {
    co: UnsafeCell<Co>,
    /// # Invariant
    /// Null until the fiber first runs; then points at the yielder on the
    /// fiber's own stack, valid until the fiber finishes.
    yielder: Cell<*const Yielder<*const Fiber, ()>>,
    id: u64,
    /// The name and key slots, which most fibers never have: boxed apart,
    /// so that a fiber without them (and its task) is 40 bytes smaller.
    extra: OnceCell<Box<Extra>>,
    errno: Cell<i32>,
    /// The guard range `[lo, hi)`; `hi` is also the stack's lowest usable
    /// address.
    guard: (usize, usize),
    guarded: bool,
    /// The top of the stack's memory (its own TLS block included).
    top: usize,
    /// The thread pointer of the fiber's own TLS block, or 0 ([`Tls::Shared`]).
    tp: usize,
    /// Its OS thread's pool, which also knows the thread's own TLS, where a
    /// fiber with `tp` 0 runs.
    pool: &'static StackPool,
}

/// What [`Fiber`] keeps apart, for the few fibers that have it.
#[derive(Default)]
struct Extra {
    name: Option<Box<str>>,
    /// The key slots ([`Fiber::local`]).
    locals: RefCell<Vec<usize>>,
}

impl Fiber {
    /// Creates a fiber that will run `f` when first resumed; `f` is given
    /// a [`Suspender`] to suspend itself with.
    ///
    /// The stack comes from `pool`; `stack_size` defaults to
    /// [`default_stack_size`]. With [`Tls::Own`] (and [`tls::enabled`]) the
    /// fiber gets TLS of its own, whose header is copied from the calling
    /// context's. The closure must not let a panic escape (the `hub` crate
    /// catches panics at the fiber boundary); if one does, it propagates
    /// out of [`Fiber::resume`].
    pub fn new<F>(
        pool: &'static StackPool,
        name: Option<Box<str>>,
        stack_size: Option<usize>,
        tls: Tls,
        f: F,
    ) -> io::Result<Fiber>
    where
        F: FnOnce(Suspender<'_>) + 'static,
    {
        let size = stack_size.unwrap_or_else(default_stack_size);
        if tls == Tls::Own && tls::enabled() {
            let g = tls::glibc().map_err(|_| io::Error::from_raw_os_error(libc::ENOSYS))?;
            let (stack, tp) = pool.take_tls(g, size, tls::arch::thread_pointer())?;
            return Ok(Self::make(pool, name, stack, tp, f));
        }
        Self::on_stack(pool, name, pool.take(size)?, Tls::Shared, f)
    }

    /// Creates a fiber that will run `f` on `stack` (pooled, or caller-provided
    /// through [`FiberStack::foreign`]); `pool` is its OS thread's.
    pub fn on_stack<F>(
        pool: &'static StackPool,
        name: Option<Box<str>>,
        mut stack: FiberStack,
        tls: Tls,
        f: F,
    ) -> io::Result<Fiber>
    where
        F: FnOnce(Suspender<'_>) + 'static,
    {
        let tp = match tls {
            Tls::Own if tls::enabled() => {
                let g = tls::glibc().map_err(|_| io::Error::from_raw_os_error(libc::ENOSYS))?;
                stack.carve_tls(g, tls::arch::thread_pointer())?
            }
            _ => 0,
        };
        Ok(Self::make(pool, name, stack, tp, f))
    }

    /// The fiber on `stack`, whose TLS block (if `tp` is not 0) is made.
    fn make<F>(pool: &'static StackPool, name: Option<Box<str>>, stack: FiberStack, tp: usize, f: F) -> Fiber
    where
        F: FnOnce(Suspender<'_>) + 'static,
    {
        overflow::ensure_installed();
        // The whole range, TLS block included, as glibc reports a thread's
        // stack (its descriptor and TLS are carved from the top of it).
        let top = stack.slot_top();
        let own = tp != 0;
        let guard = stack.guard_range();
        let guarded = stack.is_guarded();
        let co = Co::with_stack(stack, move |y: &Yielder<*const Fiber, ()>, me: *const Fiber| {
            // SAFETY: every resume passes the fiber itself, which outlives
            // the call.
            unsafe { (*me).yielder.set(y) };
            if own {
                // SAFETY: our own block is installed (resume did it).
                unsafe { tls::glibc().expect("made with TLS").thread_started() };
            }
            f(Suspender { y });
            // The thread-local destructors of the fiber, in its own
            // context, as a thread's exit runs them.
            // SAFETY: we run on this fiber's stack; `own` is its TLS.
            unsafe { tls::run_destructors(own) };
        });
        Fiber {
            co: UnsafeCell::new(co),
            yielder: Cell::new(std::ptr::null()),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            extra: match name {
                Some(name) => OnceCell::from(Box::new(Extra {
                    name: Some(name),
                    ..Extra::default()
                })),
                None => OnceCell::new(),
            },
            errno: Cell::new(0),
            guard,
            guarded,
            top,
            tp,
            pool,
        }
    }

    /// Runs the fiber until it suspends (returns `false`) or finishes
    /// (returns `true`).
    ///
    /// A fiber with TLS of its own runs with its thread pointer installed,
    /// and the resumer's is reinstalled when it suspends: one thread-pointer
    /// write each way. A fiber sharing its thread's TLS runs on it (switched
    /// to only if the resumer is a fiber with TLS of its own) with its own
    /// `errno` swapped in.
    ///
    /// # Panics
    /// When the fiber has finished, or is running (a fiber cannot resume
    /// itself): corosensei checks both.
    #[inline(always)]
    pub fn resume(&self) -> bool {
        let cur = tls::arch::thread_pointer();
        let r = if self.tp != 0 {
            // SAFETY: the fiber's block lives as long as the fiber; the
            // resumer's is reinstalled before anything of it is used again.
            unsafe { tls::arch::set_thread_pointer(self.tp) };
            let r = self.switch();
            // SAFETY: `cur` is the resumer's block, alive (it runs).
            unsafe { tls::arch::set_thread_pointer(cur) };
            r
        } else {
            let home = self.pool.home;
            let away = cur != home.tp;
            if away {
                // SAFETY: the OS thread's own block, alive while it runs.
                unsafe { tls::arch::set_thread_pointer(home.tp) };
            }
            // SAFETY: the thread's errno slot (Home), on this same thread.
            let saved = unsafe { home.errno.replace(self.errno.get()) };
            let r = self.switch();
            // SAFETY: as above; the fiber ran on this same thread.
            self.errno.set(unsafe { home.errno.replace(saved) });
            if away {
                // SAFETY: as in the own-TLS case.
                unsafe { tls::arch::set_thread_pointer(cur) };
            }
            r
        };
        if !self.guarded {
            self.check_canary();
        }
        matches!(r, CoroutineResult::Return(()))
    }

    /// The switch itself.
    #[inline(always)]
    fn switch(&self) -> CoroutineResult<(), ()> {
        if self.yielder.get().is_null() {
            self.first_resume()
        } else {
            // SAFETY: `co` is only touched here and in suspend's yielder,
            // never by two contexts at once: a running coroutine's resume
            // panics (corosensei checks) and only one context runs at a
            // time on a thread.
            unsafe { (*self.co.get()).resume(self) }
        }
    }

    /// The first resume, out of line: the fiber's closure records its
    /// yielder in the fiber whose address the resume passes (the fiber may
    /// have moved since it was made, so the closure cannot know it).
    #[cold]
    #[inline(never)]
    fn first_resume(&self) -> CoroutineResult<(), ()> {
        // SAFETY: as in switch.
        unsafe { (*self.co.get()).resume(self) }
    }

    #[cold]
    fn check_canary(&self) {
        // SAFETY: `co` is not running (we are outside it).
        let ok = unsafe { (*self.co.get()).done() } || self.stack_canary_ok();
        if !ok {
            overflow::report(self, "its stack canary was overwritten");
        }
    }

    fn stack_canary_ok(&self) -> bool {
        let lo = self.guard.1 as *const u64;
        // SAFETY: the canary word is the lowest usable word of this fiber's
        // stack, which stays mapped for the fiber's lifetime.
        unsafe { lo.read_volatile() == stack::CANARY }
    }

    /// Suspends this fiber, returning to whoever resumed it; returns when it
    /// is resumed again. For a scheduler that holds the fiber; the fiber's
    /// own closure has its [`Suspender`].
    ///
    /// # Safety
    /// Must be called by this fiber's own code while it runs (on its own
    /// stack): suspending another fiber, or from outside any, would switch
    /// away on the wrong stack.
    #[inline(always)]
    pub unsafe fn suspend(&self) {
        // SAFETY: we run on this fiber's stack (the caller's contract), so
        // it has started and its yielder is set and live.
        unsafe { (*self.yielder.get()).suspend(()) };
    }

    /// Whether the fiber's closure has returned.
    pub fn is_finished(&self) -> bool {
        // SAFETY: reading state while the fiber is not running; from inside
        // the fiber it trivially reads "not done".
        unsafe { (*self.co.get()).done() }
    }

    /// Whether the fiber has run at least once.
    pub fn is_started(&self) -> bool {
        // SAFETY: as in is_finished.
        unsafe { (*self.co.get()).started() }
    }

    /// Process-unique id, starting at 1 (0 is the root context).
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The name given at creation.
    pub fn name(&self) -> Option<&str> {
        self.extra.get()?.name.as_deref()
    }

    /// Usable stack bytes, as asked for (a TLS block of its own comes out
    /// of them, as a thread's does in glibc).
    pub fn stack_size(&self) -> usize {
        self.top - self.guard.1
    }

    /// The stack's memory `[lo, hi)`, as glibc reports a thread's: with
    /// the fiber's own TLS block at its top, if it has one (the stack
    /// itself starts below that block).
    pub fn stack_bounds(&self) -> (usize, usize) {
        (self.guard.1, self.top)
    }

    /// The saved `errno` of this fiber (meaningful while it is not running).
    pub fn saved_errno(&self) -> i32 {
        match tls::glibc() {
            // SAFETY: the fiber's own block, alive as long as it is.
            Ok(g) if self.tp != 0 => unsafe { g.errno_of(self.tp).read() },
            _ => self.errno.get(),
        }
    }

    /// Whether the fiber runs with TLS of its own ([`Tls::Own`], where
    /// available).
    pub fn has_own_tls(&self) -> bool {
        self.tp != 0
    }

    /// The fiber's own thread pointer (0 when it shares its thread's).
    pub fn thread_pointer(&self) -> usize {
        self.tp
    }

    /// Reads key/value slot `key` (0 if never set).
    pub fn local(&self, key: usize) -> usize {
        self.extra
            .get()
            .and_then(|e| e.locals.borrow().get(key).copied())
            .unwrap_or(0)
    }

    /// Writes key/value slot `key`.
    ///
    /// Nothing is borrowed while memory is taken or given back: an
    /// allocator that keeps per-thread state (mimalloc, tcmalloc) sets a
    /// key of its own on its first use in a thread, so the `malloc` made
    /// here may come back to this very function.
    pub fn set_local(&self, key: usize, value: usize) {
        let extra = match self.extra.get() {
            Some(e) => e,
            None if value == 0 => return,
            None => {
                let fresh = Box::default();
                // A nested call may have made one meanwhile: keep that.
                drop(self.extra.set(fresh));
                self.extra.get().expect("set just now")
            }
        };
        loop {
            let want = {
                let mut l = extra.locals.borrow_mut();
                if key < l.len() {
                    l[key] = value;
                    return;
                }
                if value == 0 {
                    return;
                }
                (key + 1).max(2 * l.len())
            };
            let mut grown = Vec::with_capacity(want);
            let old = {
                let mut l = extra.locals.borrow_mut();
                if key >= l.len() {
                    grown.extend_from_slice(&l);
                    grown.resize(key + 1, 0);
                    std::mem::replace(&mut *l, grown)
                } else {
                    grown
                }
            };
            drop(old);
        }
    }

    /// Takes all slots out, leaving none (for destructors at fiber exit).
    pub fn take_locals(&self) -> Vec<usize> {
        self.extra
            .get()
            .map(|e| std::mem::take(&mut *e.locals.borrow_mut()))
            .unwrap_or_default()
    }
}

impl Drop for Fiber {
    fn drop(&mut self) {
        let co = self.co.get_mut();
        if co.started() && !co.done() {
            // SAFETY: the fiber is suspended. Its frames may belong to C code
            // that must not be unwound, so we abandon them instead: nothing
            // refers to that stack again, and its memory goes back to the
            // pool for a new fiber to overwrite. Anything those frames owned
            // is leaked, deliberately.
            unsafe { co.force_reset() };
        }
        // The TLS block goes with the stack (FiberStack's drop), when the
        // coroutine is dropped after this.
    }
}

/// Access to the calling OS thread's `errno`.
pub mod errno {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    use libc::__errno_location as errno_slot;
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    use libc::__error as errno_slot;

    /// The calling thread's errno slot.
    #[inline]
    pub fn location() -> *mut i32 {
        // SAFETY: no preconditions; the result is valid for this thread.
        unsafe { errno_slot() }
    }

    /// Reads `errno`.
    #[inline]
    pub fn get() -> i32 {
        // SAFETY: the errno location is valid for the calling thread.
        unsafe { *location() }
    }

    /// Writes `errno`.
    #[inline]
    pub fn set(v: i32) {
        // SAFETY: as in get.
        unsafe { *location() = v }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn resume_suspend_and_finish() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let f = Fiber::new(StackPool::leak(), Some("t".into()), None, Tls::Shared, move |s| {
            l.borrow_mut().push(1);
            s.suspend();
            l.borrow_mut().push(2);
        })
        .unwrap();
        assert!(!f.is_started());
        assert!(!f.resume());
        assert_eq!(*log.borrow(), [1]);
        assert!(f.resume());
        assert!(f.is_finished());
        assert_eq!(*log.borrow(), [1, 2]);
        assert_eq!(f.name(), Some("t"));
    }

    #[test]
    fn errno_is_per_fiber() {
        errno::set(7);
        let f = Fiber::new(StackPool::leak(), None, None, Tls::Shared, |s| {
            errno::set(42);
            s.suspend();
            assert_eq!(errno::get(), 42);
        })
        .unwrap();
        f.resume();
        assert_eq!(errno::get(), 7);
        assert_eq!(f.saved_errno(), 42);
        errno::set(9);
        f.resume();
        assert_eq!(errno::get(), 9);
    }

    #[test]
    fn dropping_a_suspended_fiber_does_not_unwind() {
        struct Loud;
        impl Drop for Loud {
            fn drop(&mut self) {
                panic!("a suspended fiber was unwound");
            }
        }
        let f = Fiber::new(StackPool::leak(), None, None, Tls::Shared, |s| {
            let _l = Loud;
            s.suspend();
        })
        .unwrap();
        f.resume();
        drop(f);
    }

    /// A scheduler holds fibers by value and moves them (into a task, a
    /// queue): before the first resume and while suspended. Both the
    /// fiber's own suspender and the scheduler's `Fiber::suspend` must keep
    /// working.
    #[test]
    fn a_moved_fiber_suspends_both_ways() {
        thread_local! {
            static HELD: RefCell<Option<Box<Fiber>>> = const { RefCell::new(None) };
        }
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let f = Fiber::new(StackPool::leak(), None, None, Tls::Shared, move |s| {
            l.borrow_mut().push(1);
            s.suspend();
            l.borrow_mut().push(2);
            // The way a scheduler suspends the fiber it runs.
            let me: *const Fiber = HELD.with(|h| &**h.borrow().as_ref().unwrap() as *const Fiber);
            // SAFETY: `me` is this fiber, running on its own stack.
            unsafe { (*me).suspend() };
            l.borrow_mut().push(3);
        })
        .unwrap();
        let moved = Box::new(f);
        assert!(!moved.resume());
        let moved_again = Box::new(*moved);
        HELD.with(|h| *h.borrow_mut() = Some(moved_again));
        let me: *const Fiber = HELD.with(|h| &**h.borrow().as_ref().unwrap() as *const Fiber);
        // SAFETY: the box stays in HELD, unmoved, until the fiber finishes.
        let held = unsafe { &*me };
        assert!(!held.resume());
        assert!(held.resume());
        assert_eq!(*log.borrow(), [1, 2, 3]);
        HELD.with(|h| h.borrow_mut().take());
    }

    #[test]
    fn locals_default_to_zero() {
        let f = Fiber::new(StackPool::leak(), None, None, Tls::Shared, |_| {}).unwrap();
        assert_eq!(f.local(3), 0);
        f.set_local(3, 99);
        assert_eq!(f.local(3), 99);
        assert_eq!(f.take_locals(), vec![0, 0, 0, 99]);
    }
}
