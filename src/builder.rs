//! [`spawn`], [`Builder`] and [`JoinHandle`].
//!
//! A fiber's result travels in a [`Packet`] that the fiber and its handle
//! own together, as in std, and that whichever of the two lets go second
//! frees. Instead of an `Arc`'s count, one atomic word says who has let go
//! and which joiner waits: a spawn and join costs a single atomic
//! read-modify-write (the fiber's hand-over), which matters at a fiber's
//! scale (a spawn and join is ~100 ns).
//!
//! Joining on the fiber's own OS thread waits through the hub
//! ([`hub::join`], which the deadlock report understands); a handle sent to
//! another OS thread leaves its joiner's [`Thread`] in the packet's word and
//! parks until the fiber unparks it.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::scoped::ScopeData;
use crate::thread::{self, current, LazyThread, Thread};

/// The result of joining a fiber: its return value, or `Err` with the
/// payload of its panic. The same type as `std::thread::Result`.
pub type Result<T> = std::result::Result<T, Box<dyn Any + Send + 'static>>;

/// Spawns a fiber running `f` and returns a handle to join it, like
/// `std::thread::spawn`.
///
/// The fiber runs on this OS thread's hub and starts when the caller next
/// blocks, sleeps, yields or joins. Unlike std's, `f` and its result need
/// not be `Send`: they never leave this OS thread (the handle is `Send` only
/// when the result is).
///
/// # Panics
/// If the fiber cannot be created (no memory for its stack); use
/// [`Builder::spawn`] to handle that as an error.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T,
    F: 'static,
    T: 'static,
{
    Builder::new().spawn(f).expect("greenhook: failed to spawn a fiber")
}

/// Fiber factory, mirroring `std::thread::Builder`: a name and a stack size,
/// and (greenhook's own) whether the fiber shares its OS thread's TLS.
#[must_use = "must eventually spawn the fiber"]
#[derive(Debug, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    shared_tls: bool,
}

impl Builder {
    /// A builder with no name and the default stack size.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the fiber: [`Thread::name`] returns it, and greenhook's stall,
    /// deadlock and overflow reports show it. Like std's, it must not
    /// contain NUL bytes.
    pub fn name(mut self, name: String) -> Builder {
        self.name = Some(name);
        self
    }

    /// Sets the usable stack size in bytes (rounded up to whole pages, at
    /// least 16 KiB). The default is 256 KiB or `GREENHOOK_STACK_SIZE`;
    /// std's `RUST_MIN_STACK` does not apply to fibers.
    pub fn stack_size(mut self, size: usize) -> Builder {
        self.stack_size = Some(size);
        self
    }

    /// Runs the fiber on its OS thread's thread-local storage instead of
    /// its own (greenhook's extension; std threads always have their own).
    ///
    /// By default every fiber has its own TLS, like a thread: its
    /// `thread_local!`s, `std::thread::current()`, `errno` and the TLS of C
    /// code it calls are its own, and thread-local destructors run when it
    /// ends. That costs about 4 KiB of each fiber's stack (one more touched
    /// page: an idle fiber's RSS roughly doubles) and a thread-pointer write
    /// at every switch. A fiber that shares its thread's TLS costs neither,
    /// but sees and changes the thread's thread-locals, and
    /// `std::sync::mpsc` or `std::thread::park` between two such fibers of
    /// one thread do not work. `GREENHOOK_TLS=shared` makes every fiber
    /// share (see the README).
    pub fn shared_tls(mut self, shared: bool) -> Builder {
        self.shared_tls = shared;
        self
    }

    /// Spawns the fiber, like `std::thread::Builder::spawn` (without its
    /// `Send` bounds, as [`spawn`]).
    ///
    /// # Errors
    /// When no stack can be had (address space or memory exhausted).
    ///
    /// # Panics
    /// If the name contains a NUL byte, as std does.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T,
        F: 'static,
        T: 'static,
    {
        let (fiber, handle) = Packet::shares(None);
        Ok(JoinHandle(self.launch(fiber_main(f, fiber), handle)?))
    }

    /// Spawns a fiber whose closure and result may borrow from the caller,
    /// like `std::thread::Builder::spawn_unchecked`.
    ///
    /// # Errors
    /// As [`Builder::spawn`].
    ///
    /// # Panics
    /// As [`Builder::spawn`].
    ///
    /// # Safety
    /// The fiber must not outlive anything `f` or its result borrows: join
    /// it before that data goes away. ([`scope`](crate::scope) ensures this
    /// safely.)
    pub unsafe fn spawn_unchecked<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T,
    {
        // SAFETY: the caller's contract.
        Ok(JoinHandle(unsafe { self.spawn_unchecked_(f, None) }?))
    }

    /// [`Builder::spawn_unchecked`], with the scope the fiber belongs to.
    ///
    /// # Safety
    /// As [`Builder::spawn_unchecked`].
    pub(crate) unsafe fn spawn_unchecked_<'scope, F, T>(
        self,
        f: F,
        scope: Option<Arc<ScopeData>>,
    ) -> io::Result<JoinInner<'scope, T>>
    where
        F: FnOnce() -> T,
    {
        let (fiber, handle) = Packet::shares(scope);
        let main: Box<dyn FnOnce() + '_> = Box::new(fiber_main(f, fiber));
        // SAFETY: only the lifetime changes (same layout). The hub wants a
        // 'static closure because it cannot know when the fiber ends; the
        // caller guarantees the fiber is joined before what `f` borrows goes
        // away, and the closure touches nothing of `f`'s after handing the
        // result over (see `fiber_main`).
        let main: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(main) };
        self.launch(main, handle)
    }

    /// Creates the fiber and its handle.
    fn launch<'scope, T>(
        self,
        main: impl FnOnce() + 'static,
        handle: JoinInner<'scope, T>,
    ) -> io::Result<JoinInner<'scope, T>> {
        let Builder {
            name,
            stack_size,
            shared_tls,
        } = self;
        if name.as_deref().is_some_and(|n| n.contains('\0')) {
            panic!("thread name may not contain interior null bytes");
        }
        let thread_name = name.as_deref().map(Arc::from);
        let opts = hub::Spawn {
            name,
            stack_size,
            user_stack: None,
            guard_size: None,
            shared_tls,
        };
        // On failure the hub drops `main`, and with it the fiber's share of
        // the packet; the handle's goes on return (a scope counts the fiber
        // out).
        let task = hub::spawn(opts, main)?;
        let p = handle.packet();
        // SAFETY: the fiber's share keeps the packet, and so its handle, until
        // after the fiber unregisters (`FiberShare::let_go`).
        unsafe { thread::register(task.id(), &p.thread, thread_name) };
        // SAFETY: the invariant of `task`: we are on its home thread, and the
        // fiber has not run yet.
        unsafe { *p.task.get() = Some(task) };
        Ok(handle)
    }
}

/// What a fiber runs: `f`, then the hand-over of its result.
fn fiber_main<'a, F, T>(f: F, share: FiberShare<'a, T>) -> impl FnOnce() + 'a
where
    F: FnOnce() -> T + 'a,
    T: 'a,
{
    let f = MaybeDangling::new(f);
    move || {
        let r = catch_unwind(AssertUnwindSafe(f.into_inner()));
        // The fiber's thread-local destructors run before its result is
        // handed over, as a std thread's run before its join returns.
        hub::run_tls_destructors();
        let share = ManuallyDrop::new(share);
        // SAFETY: `share` is not used again (nor dropped).
        unsafe { share.let_go(Some(r)) };
    }
}

/// A value the compiler must not assume valid for the whole of the closure
/// that holds it: the fiber's closure lives on (in the hub) a moment after
/// `'scope` ends, and `F` may hold references that dangle by then. The same
/// device as std's (rust-lang/rust#101983).
struct MaybeDangling<T>(MaybeUninit<T>);

impl<T> MaybeDangling<T> {
    fn new(x: T) -> Self {
        MaybeDangling(MaybeUninit::new(x))
    }

    fn into_inner(self) -> T {
        let this = ManuallyDrop::new(self);
        // SAFETY: always initialised (`new`), and `this` is never dropped,
        // so the value is read out exactly once.
        unsafe { this.0.assume_init_read() }
    }
}

impl<T> Drop for MaybeDangling<T> {
    fn drop(&mut self) {
        // SAFETY: always initialised; dropped only if never taken out.
        unsafe { self.0.assume_init_drop() }
    }
}

/// The fiber has let go of the packet.
const FIBER_DONE: usize = 1;
/// The handle has let go of the packet (dropped unjoined).
const HANDLE_GONE: usize = 2;
/// `result` holds a value.
const HAS_RESULT: usize = 4;
/// The bits above; the rest of the word is a joiner's address.
const FLAGS: usize = FIBER_DONE | HANDLE_GONE | HAS_RESULT;

/// A fiber's result, owned by the fiber and its handle together (each
/// through its share: [`FiberShare`], [`JoinInner`]). Every fiber carries
/// one, so it is kept small (56 bytes for a `()` result).
pub(crate) struct Packet<'scope, T> {
    /// [`FIBER_DONE`], [`HANDLE_GONE`] and [`HAS_RESULT`], or'ed with the
    /// address of a `Box<Thread>` leaked by a joiner on another OS thread
    /// (8-aligned, so its low bits are free), which the fiber unparks and
    /// frees when it lets go.
    state: AtomicUsize,
    /// # Invariant
    /// Initialised when `HAS_RESULT` is set: by the fiber, in the same
    /// `fetch_or` that sets `FIBER_DONE`; after that only the side that owns
    /// the packet alone touches it (the joiner, or whoever frees it).
    result: UnsafeCell<MaybeUninit<Result<T>>>,
    /// The fiber's task while it runs, for joining through the hub.
    ///
    /// # Invariant
    /// Touched only on the fiber's own OS thread: set by `launch`, cloned
    /// by joiners there, taken by the fiber when it lets go.
    task: UnsafeCell<Option<Rc<hub::Task>>>,
    /// The fiber's handle.
    thread: LazyThread,
    /// The scope the fiber belongs to, counted out when the packet is freed.
    scope: Option<Arc<ScopeData>>,
    _scope: PhantomData<Option<&'scope ScopeData>>,
}

impl<'scope, T> Packet<'scope, T> {
    /// A packet and the two shares of it.
    fn shares(scope: Option<Arc<ScopeData>>) -> (FiberShare<'scope, T>, JoinInner<'scope, T>) {
        if let Some(s) = &scope {
            s.increment();
        }
        let p = NonNull::from(Box::leak(Box::new(Packet {
            state: AtomicUsize::new(0),
            result: UnsafeCell::new(MaybeUninit::uninit()),
            task: UnsafeCell::new(None),
            thread: LazyThread::new(),
            scope,
            _scope: PhantomData,
        })));
        (FiberShare(p), JoinInner { packet: p })
    }

    /// Frees a packet both shares have let go of.
    ///
    /// # Safety
    /// Both have; the caller is the second, and nothing uses `p` after.
    unsafe fn free(p: NonNull<Self>) {
        // SAFETY: allocated by `shares` as a Box; the caller's contract makes
        // this the one owner.
        drop(unsafe { Box::from_raw(p.as_ptr()) });
    }
}

impl<'scope, T> Packet<'scope, T> {
    /// Takes the result out, if there is one.
    fn take_result(&mut self) -> Option<Result<T>> {
        let state = self.state.get_mut();
        if *state & HAS_RESULT == 0 {
            return None;
        }
        *state &= !HAS_RESULT;
        // SAFETY: the invariant of `result`: HAS_RESULT was set, and `&mut
        // self` is the packet's one owner; the flag is cleared, so the value
        // is read out once.
        Some(unsafe { self.result.get_mut().assume_init_read() })
    }
}

impl<T> Drop for Packet<'_, T> {
    fn drop(&mut self) {
        // Only the fiber's thread may touch an `Rc`; the fiber takes it when
        // it lets go, so one is left only if it never did (then we leak it).
        if let Some(task) = self.task.get_mut().take() {
            std::mem::forget(task);
        }
        let result = self.take_result();
        // A panic nobody joined makes the scope panic (std's rule).
        let unhandled_panic = matches!(result, Some(Err(_)));
        // The result may borrow from the scope: dropped before it is told.
        if catch_unwind(AssertUnwindSafe(|| drop(result))).is_err() {
            eprintln!("greenhook: a fiber's result panicked on drop; aborting");
            std::process::abort();
        }
        if let Some(s) = &self.scope {
            s.decrement(unhandled_panic);
        }
    }
}

/// The fiber's share of its packet, in the fiber's closure. If the closure
/// is dropped without running (the hub could not make the fiber), dropping
/// the share lets go without a result.
struct FiberShare<'scope, T>(NonNull<Packet<'scope, T>>);

impl<T> FiberShare<'_, T> {
    /// Hands `r` over and lets go of the packet.
    ///
    /// # Safety
    /// Called once, on the fiber's OS thread; the share is not used after.
    unsafe fn let_go(&self, r: Option<Result<T>>) {
        let p = self.0.as_ptr();
        let mut flags = FIBER_DONE;
        // SAFETY: our share keeps the packet alive until the `fetch_or`
        // below; `result` is ours to write until then (its invariant), and
        // `task` is touched only on its own thread, which this is.
        let task = unsafe {
            if let Some(r) = r {
                (*(*p).result.get()).write(r);
                flags |= HAS_RESULT;
            }
            (*(*p).task.get()).take()
        };
        // SAFETY: as above: the packet is alive until the `fetch_or`.
        thread::unregister(unsafe { (*p).thread.fiber_id() });
        // Release: the result (and everything the fiber did) to whoever sees
        // FIBER_DONE. Acquire: the handle's last use, if it let go first.
        // SAFETY: as above.
        let prev = unsafe { (*p).state.fetch_or(flags, Ordering::AcqRel) };
        // From here on the handle may free the packet at any time, unless it
        // has let go already: then it is ours to free.
        if prev & HANDLE_GONE != 0 {
            // SAFETY: both have let go, we second; `p` is not used below.
            unsafe { Packet::free(self.0) };
        }
        let joiner = prev & !FLAGS;
        if joiner != 0 {
            // SAFETY: a `Box<Thread>` published by `JoinInner::wait_remote`,
            // which leaves it to us once it is in the word.
            unsafe { Box::from_raw(joiner as *mut Thread) }.unpark();
        }
        drop(task);
    }
}

impl<T> Drop for FiberShare<'_, T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, with its closure, on the fiber's OS thread.
        unsafe { self.let_go(None) }
    }
}

/// The handle's share of a packet: the common part of [`JoinHandle`] and
/// [`ScopedJoinHandle`](crate::ScopedJoinHandle).
pub(crate) struct JoinInner<'scope, T> {
    /// # Invariant
    /// Our share: the packet lives at least as long as `self`.
    packet: NonNull<Packet<'scope, T>>,
}

// SAFETY: a handle can move to another OS thread with what it owns: the
// fiber's result, a `T` (hence `T: Send`), and a share of the packet, whose
// other parts are Send + Sync (`Thread`, the atomic word) or touched only
// on the fiber's own thread (`task`).
unsafe impl<T: Send> Send for JoinInner<'_, T> {}
// SAFETY: through `&self` a handle only reads the atomic word and the
// `Thread` (Send + Sync); the result is reached only by value (`join`).
unsafe impl<T: Send> Sync for JoinInner<'_, T> {}

impl<T> JoinInner<'_, T> {
    fn packet(&self) -> &Packet<'_, T> {
        // SAFETY: the invariant of `packet`.
        unsafe { self.packet.as_ref() }
    }

    pub(crate) fn thread(&self) -> &Thread {
        self.packet().thread.get()
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.packet().state.load(Ordering::Acquire) & FIBER_DONE != 0
    }

    pub(crate) fn join(self) -> Result<T> {
        if !self.is_finished() {
            let p = self.packet();
            if thread::is_registered_here(p.thread.fiber_id()) {
                // SAFETY: the invariant of `task`: a fiber registered here is
                // of this OS thread.
                let task = unsafe { (*p.task.get()).clone() };
                if let Some(task) = task {
                    hub::join(&task);
                }
            } else {
                self.wait_remote();
            }
            // The task ended without letting go: like std's join of a thread
            // that called `pthread_exit`.
            assert!(
                self.is_finished(),
                "greenhook: the fiber ended without returning (pthread_exit?)"
            );
        }
        let this = ManuallyDrop::new(self);
        // SAFETY: FIBER_DONE is set: the fiber has let go and never touches
        // the packet again; ours is the other share, so we own it alone.
        let mut packet = unsafe { Box::from_raw(this.packet.as_ptr()) };
        packet
            .take_result()
            .expect("greenhook: a finished fiber left no result")
    }

    /// Waits from another OS thread: put our handle in the word, park until
    /// the fiber lets go (it unparks us and frees the box).
    fn wait_remote(&self) {
        let me = Box::into_raw(Box::new(current()));
        let state = &self.packet().state;
        // The word is 0 while the fiber runs: no joiner but us (`join` takes
        // `self`), and we have not let go.
        if state
            .compare_exchange(0, me as usize, Ordering::Release, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: not published: still ours.
            drop(unsafe { Box::from_raw(me) });
            return;
        }
        while !self.is_finished() {
            crate::park();
        }
    }
}

impl<T> Drop for JoinInner<'_, T> {
    fn drop(&mut self) {
        // Release: our last use to whoever frees. Acquire: the fiber's
        // hand-over, if it let go first (then we free, result and all).
        let prev = self.packet().state.fetch_or(HANDLE_GONE, Ordering::AcqRel);
        if prev & FIBER_DONE != 0 {
            // SAFETY: both have let go, we second.
            unsafe { Packet::free(self.packet) };
        }
    }
}

/// An owned permission to join a fiber (block until it finishes), like
/// `std::thread::JoinHandle`. Dropping it detaches the fiber.
///
/// `Send` when the result is (so always for code written for std), so that
/// another OS thread can join; `Sync` likewise.
pub struct JoinHandle<T>(JoinInner<'static, T>);

impl<T> JoinHandle<T> {
    /// Waits for the fiber to finish and returns its result: `Err` with the
    /// panic payload if it panicked, like `std::thread::JoinHandle::join`.
    /// Everything the fiber did happens before `join` returns.
    ///
    /// # Panics
    /// When a fiber joins itself (std panics too, on Linux).
    pub fn join(self) -> Result<T> {
        self.0.join()
    }

    /// The fiber's handle.
    pub fn thread(&self) -> &Thread {
        self.0.thread()
    }

    /// Whether the fiber's closure has returned (or panicked); `join` then
    /// returns at once.
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    /// Every fiber carries a packet: its size is part of a fiber's memory
    /// (the idle-RSS budget is 4.5 KiB a fiber).
    #[test]
    fn a_packet_is_small() {
        assert_eq!(std::mem::size_of::<super::Packet<'static, ()>>(), 56);
    }
}
