//! [`scope`]: fibers that borrow from the caller's stack, like
//! `std::thread::scope`.
//!
//! Soundness rests on one rule: `scope` does not return (nor unwind) before
//! every fiber spawned in it has finished and dropped its result, so nothing
//! a scoped fiber borrows can go away under it. Each fiber's packet counts
//! the fiber in when made and out when freed (after the result it holds),
//! and `scope` parks until the count is zero. While it waits, the caller's
//! context is suspended, not gone: a root context runs the hub's loop in
//! frames deeper than those that own the borrowed data, which stay
//! untouched; a fiber's stack stays allocated until the fiber finishes,
//! which it cannot do before `scope` returns. (A context ended without unwinding, by
//! `pthread_exit` under the preload, would break this, exactly as it breaks
//! `std::thread::scope` on a real thread.)

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::builder::{JoinInner, Result};
use crate::thread::{current, Thread};
use crate::Builder;

/// A scope to spawn scoped fibers in; see [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    /// Invariance over `'scope`, so that it cannot shrink (std's reasoning:
    /// a scoped fiber could otherwise spawn another that borrows its
    /// locals).
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// The bookkeeping a scope shares with its fibers' packets.
pub(crate) struct ScopeData {
    running: AtomicUsize,
    a_fiber_panicked: AtomicBool,
    owner: Thread,
}

impl ScopeData {
    pub(crate) fn increment(&self) {
        // Far from overflow, so that the count can never wrap to zero (only
        // forgetting handles by the billion gets here).
        if self.running.fetch_add(1, Ordering::Relaxed) > usize::MAX / 2 {
            self.decrement(false);
            panic!("too many running threads in thread scope");
        }
    }

    pub(crate) fn decrement(&self, panicked: bool) {
        if panicked {
            self.a_fiber_panicked.store(true, Ordering::Relaxed);
        }
        if self.running.fetch_sub(1, Ordering::Release) == 1 {
            self.owner.unpark();
        }
    }
}

/// Runs `f` with a [`Scope`] in which fibers that borrow non-`'static` data
/// can be spawned, and returns once all of them have finished, like
/// `std::thread::scope`.
///
/// Fibers not joined by hand are joined before `scope` returns. If one of
/// them panicked, `scope` then panics ("a scoped thread panicked", std's
/// message); join a fiber to handle its panic instead. If `f` panics,
/// `scope` waits for the fibers, then resumes that panic.
///
/// ```
/// let mut data = vec![1, 2, 3];
/// let mut sum = 0;
/// greenhook::scope(|s| {
///     s.spawn(|| println!("borrowed: {data:?}"));
///     s.spawn(|| sum = data.iter().sum());
/// });
/// data.push(4); // the fibers are done: no borrow is left
/// assert_eq!(sum, 6);
/// ```
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        data: Arc::new(ScopeData {
            running: AtomicUsize::new(0),
            a_fiber_panicked: AtomicBool::new(false),
            owner: current(),
        }),
        env: PhantomData,
        scope: PhantomData,
    };
    // Even if `f` panics, its fibers are waited for before anything unwinds
    // past this frame.
    let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    while scope.data.running.load(Ordering::Acquire) != 0 {
        crate::park();
    }
    match result {
        Err(e) => resume_unwind(e),
        Ok(_) if scope.data.a_fiber_panicked.load(Ordering::Relaxed) => panic!("a scoped thread panicked"),
        Ok(r) => r,
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Spawns a fiber that may borrow from outside the scope, like
    /// `std::thread::Scope::spawn` (without its `Send` bounds: the fiber
    /// runs on the calling OS thread's hub).
    ///
    /// # Panics
    /// If the fiber cannot be created; use [`Builder::spawn_scoped`] to
    /// handle that as an error.
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T,
        F: 'scope,
        T: 'scope,
    {
        Builder::new()
            .spawn_scoped(self, f)
            .expect("greenhook: failed to spawn a fiber")
    }
}

impl Builder {
    /// Spawns a scoped fiber with this builder's name and stack size, like
    /// `std::thread::Builder::spawn_scoped`.
    ///
    /// # Errors
    /// As [`Builder::spawn`].
    ///
    /// # Panics
    /// As [`Builder::spawn`].
    pub fn spawn_scoped<'scope, 'env, F, T>(
        self,
        scope: &'scope Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T,
        F: 'scope,
        T: 'scope,
    {
        // SAFETY: the fiber is counted in the scope, and `scope` returns
        // only after it finished and dropped its result (module doc).
        Ok(ScopedJoinHandle(unsafe {
            self.spawn_unchecked_(f, Some(scope.data.clone()))
        }?))
    }
}

/// An owned permission to join a scoped fiber, like
/// `std::thread::ScopedJoinHandle`.
pub struct ScopedJoinHandle<'scope, T>(JoinInner<'scope, T>);

impl<T> ScopedJoinHandle<'_, T> {
    /// The fiber's handle.
    pub fn thread(&self) -> &Thread {
        self.0.thread()
    }

    /// Waits for the fiber to finish and returns its result, or `Err` with
    /// its panic payload (which `scope` then does not re-raise).
    pub fn join(self) -> Result<T> {
        self.0.join()
    }

    /// Whether the fiber's closure has returned (or panicked).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("num_running_threads", &self.data.running.load(Ordering::Relaxed))
            .field("a_thread_panicked", &self.data.a_fiber_panicked.load(Ordering::Relaxed))
            .field("main_thread", &self.data.owner)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedJoinHandle").finish_non_exhaustive()
    }
}
