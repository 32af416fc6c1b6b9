//! Marks code that belongs to greenhook's own machinery.
//!
//! The interposer's hooks pass straight through to libc when
//! [`is_internal`] is true: in the offload pool's worker threads (for their
//! whole life), while the hub spawns those threads, while it prints
//! reports, and around every piece of its bookkeeping that may allocate
//! ([`bookkeeping`]). That keeps the hub's own work from being turned into
//! fiber operations, and the hub from being re-entered half-way through an
//! update.
//!
//! It is also where the layer above hands the hub what only it knows, for
//! reports: owners of objects waited on, names of tasks, and extra stats
//! rows.

use std::cell::Cell;
use std::sync::OnceLock;

use crate::with_local;

/// The calling OS thread's kernel thread id, by the system call itself:
/// not through libc's `gettid`, which under the preload is the hook that
/// answers a fiber's own id.
#[cfg(target_os = "linux")]
pub fn os_tid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// Whether the caller is greenhook machinery (hooks must pass through).
#[inline]
pub fn is_internal() -> bool {
    with_local(|l| l.depth.get()) >= crate::MACHINERY
}

pub use crate::task::lean_owner_id;

/// Allows the lock hooks' fast paths (see the interposer's `hook!`) on
/// the OS thread that runs fibers: the layer above emulates pthread
/// objects there and counts no calls. Once, before `main`.
pub fn allow_lean() {
    crate::LEAN_ALLOWED.store(true, std::sync::atomic::Ordering::Relaxed);
    if crate::is_fiber_thread() {
        with_local(|l| l.mark_fiber_thread());
    }
}

/// For the fast paths of lock hooks: they are allowed ([`allow_lean`]),
/// and the caller is on the OS thread that runs fibers, already known as
/// such, and is not greenhook machinery. One compare.
#[inline(always)]
pub fn lean_here() -> bool {
    crate::local_field::depth() == crate::LEAN
}

/// For the fast paths of lock hooks whose stores a signal handler must
/// not come between: when [`lean_here`], marks the thread as machinery (a
/// signal that arrives is held, as inside a hook, see [`in_greenhook`])
/// until the returned [`Shield`] is lifted; `None` otherwise. The mark is
/// this thread-local's alone: no look at the running task, so the fast
/// path's loads do not wait on one another.
#[inline(always)]
pub fn shield() -> Option<Shield> {
    if !lean_here() {
        return None;
    }
    crate::local_field::set_depth(crate::LEAN + crate::MACHINERY);
    // The mark before the fast path's own loads and stores, as a handler
    // on this thread sees them (a compiler barrier only).
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    Some(Shield(()))
}

/// See [`shield`].
#[derive(Debug)]
#[must_use]
pub struct Shield(());

impl Shield {
    /// Lifts the mark.
    ///
    /// # Safety
    /// In the context that made it, which has not switched since (a fast
    /// path does not).
    #[inline(always)]
    pub unsafe fn lift(self) {
        // After the fast path's loads and stores (see `shield`).
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        crate::local_field::set_depth(crate::LEAN);
    }
}

/// While alive, the thread counts as greenhook machinery.
pub struct Guard(());

impl Guard {
    /// Enters internal mode (nests).
    pub fn new() -> Guard {
        with_local(|l| l.depth.set(l.depth.get() + crate::MACHINERY));
        Guard(())
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        with_local(|l| l.depth.set(l.depth.get() - crate::MACHINERY));
    }
}

/// Starts one of greenhook's own OS threads (the offload pool's, the stall
/// monitor's, a process-shared waiter's) from `builder`: as machinery, so
/// our `pthread_create` hook makes a real thread, and keeping the program's
/// `dlerror()` message, which the `dlsym` std makes at its first spawn
/// (`__pthread_get_minstack`) would otherwise free (see
/// [`fiber::tls::keeping_dlerror`]).
pub fn spawn_thread<F, T>(builder: std::thread::Builder, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let _g = Guard::new();
    fiber::tls::keeping_dlerror(|| builder.spawn(f))
}

/// Runs hub bookkeeping that may allocate or free (a timer map's node, a
/// run queue that grows, a finished fiber's stack) as machinery: an
/// allocator that takes a lock through our `pthread_mutex_lock`, or any
/// other hook entered from inside it, then gets the real function and can
/// neither park nor switch fibers while the hub's state is half updated.
/// The rule, for every piece of the hub: nothing that may allocate runs
/// outside this while hub state is borrowed.
#[inline]
pub(crate) fn bookkeeping<R>(f: impl FnOnce() -> R) -> R {
    let _g = Guard::new();
    f()
}

/// Marks this whole thread as machinery (worker threads).
pub(crate) fn mark_thread() {
    with_local(|l| l.depth.set(l.depth.get() + 1));
}

/// Blocks every signal in the calling thread, one of greenhook's own
/// (workers, the stall monitor): signals are for the program's threads,
/// and a process-directed one taken here would neither interrupt the hub's
/// wait nor reach the fiber it was meant for.
pub(crate) fn block_signals() {
    // SAFETY: a local set, filled and applied to this thread only (through
    // libc: the hooks pass machinery threads through to the real call).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

// ---------- hook depth ----------
//
// The layer above counts how deep the running context is in its hooks, so
// that a signal handler can tell the program's code from greenhook's (see
// [`in_greenhook`]) and a hook can tell when it returns to the program. The
// count is per context: a fiber's in its task, the root's in `Local`, found
// through the current-task pointer the one thread-local already holds (a
// load, a test and a store per hook; nothing at a switch).

/// The running context's hook depth.
#[inline(always)]
fn hooks(l: &crate::Local) -> &Cell<u32> {
    let t = l.current.get();
    if t.is_null() {
        &l.root_hooks
    } else {
        // SAFETY: the current-task pointer points at the running task, which
        // the run loop keeps alive while it runs (and so while the caller,
        // running in it, uses this).
        unsafe { &(*t).hooks }
    }
}

/// The `LOCAL` (its address) of the context whose `clone` made a child
/// that shares its memory and runs while it waits; 0: none.
static SHARED_CHILD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs `f` (a `clone` with `CLONE_VM | CLONE_VFORK`) so that the child it
/// makes, which shares this memory and this context's thread-locals and
/// runs while the caller waits, touches none of greenhook's state: the
/// context is machinery (hooks pass straight through) and
/// [`in_shared_child`] holds. Then the context's depths are put back to
/// exactly what they were, since a hook that never returned in the child
/// (an `execve` that succeeded) leaves its depth behind.
pub fn as_machinery_for_shared_child<R>(f: impl FnOnce() -> R) -> R {
    use std::sync::atomic::Ordering::SeqCst;
    let (me, depth, hooks_before) = with_local(|l| (l as *const crate::Local as usize, l.depth.get(), hooks(l).get()));
    with_local(|l| l.depth.set(depth + crate::MACHINERY));
    let outer = SHARED_CHILD.swap(me, SeqCst);
    let r = f();
    SHARED_CHILD.store(outer, SeqCst);
    with_local(|l| {
        l.depth.set(depth);
        hooks(l).set(hooks_before);
    });
    r
}

/// Whether the caller is the child of [`as_machinery_for_shared_child`]'s
/// `clone` (its caller, the only other context with the same
/// thread-locals, waits meanwhile): what even machinery records of fds
/// (the fd table, the hub's registrations) must be left alone, since it is
/// the parent's. One load when there is no such child.
#[inline]
pub fn in_shared_child() -> bool {
    let c = SHARED_CHILD.load(std::sync::atomic::Ordering::Relaxed);
    c != 0 && with_local(|l| l as *const crate::Local as usize) == c
}

/// One hook call's hold on its context's depth ([`enter_hook`]). A call
/// begins and ends in the same context (a fiber that suspends inside it
/// resumes as itself), so the count it raised is the one it lowers,
/// without looking up the running context again.
#[derive(Clone, Copy, Debug)]
pub struct HookDepth(*const Cell<u32>);

impl HookDepth {
    /// Leaves the hook; returns how deep the context still is (0: back in
    /// the program's code).
    ///
    /// # Safety
    /// Called once, by the hook call that made it, in the context that made
    /// it (whose count it points at: alive as long as that context runs).
    #[inline(always)]
    pub unsafe fn leave(self) -> u32 {
        // SAFETY: the caller's contract: the context's own count, alive.
        let c = unsafe { &*self.0 };
        // Entered and left in pairs: it was at least 1.
        let d = c.get().wrapping_sub(1);
        debug_assert!(d != u32::MAX, "greenhook: a hook left more often than entered");
        c.set(d);
        d
    }
}

/// Enters a hook: the running context is in greenhook's code until the
/// returned [`HookDepth`] is left.
#[inline(always)]
pub fn enter_hook() -> HookDepth {
    with_local(|l| {
        let h = hooks(l);
        h.set(h.get() + 1);
        HookDepth(h)
    })
}

/// How deep the running context is in hooks.
#[inline(always)]
pub fn hook_depth() -> u32 {
    with_local(|l| hooks(l).get())
}

/// Sets the running context's hook depth: 0 while a hook runs the
/// program's code (a start routine, a destructor, a signal handler), then
/// back to what it was.
#[inline(always)]
pub fn set_hook_depth(d: u32) {
    with_local(|l| hooks(l).set(d));
}

/// Whether the code running now is greenhook's: a hook, machinery, or the
/// hub's loop. Reads thread-local cells only, so a signal handler may ask.
#[inline]
pub fn in_greenhook() -> bool {
    with_local(|l| hooks(l).get() != 0 || l.depth.get() >= crate::MACHINERY) || crate::in_loop()
}

/// Makes this thread's hub notice at once, if it is waiting in its poller,
/// that something happened (a signal noted for it). Async-signal-safe: one
/// `write` to the poller's eventfd, nothing if the thread has no hub.
pub fn wake_loop() {
    if let Some(h) = crate::Hub::existing() {
        h.reactor.notify();
    }
}

// The layer above registers these once it is loaded. Each is set at most
// once: the first registration wins and later ones are ignored, which is
// what every caller wants (each registers the same function whenever it
// may be the first, e.g. on its first mutex wait).

type OwnerDescriber = fn(&'static str, usize) -> Option<String>;
static OWNER: OnceLock<OwnerDescriber> = OnceLock::new();

/// Lets the layer above say who holds the object a task waits on ("fiber
/// 2", for a [`Waiting::Object`](crate::Waiting::Object) of kind "mutex") in
/// deadlock reports. The first registration wins.
pub fn set_owner_describer(f: OwnerDescriber) {
    let _ = OWNER.set(f);
}

/// " held by …" for the object, or nothing.
pub(crate) fn owner_of(kind: &'static str, addr: usize) -> String {
    OWNER
        .get()
        .and_then(|f| f(kind, addr))
        .map(|o| format!(" held by {o}"))
        .unwrap_or_default()
}

type Extra = fn() -> Vec<(&'static str, u64)>;
static EXTRA: OnceLock<Extra> = OnceLock::new();

/// Lets the layer above add rows (hooked calls by family) to the stats
/// table. The first registration wins.
pub fn set_stats_extra(f: Extra) {
    let _ = EXTRA.set(f);
}

pub(crate) fn stats_extra() -> Vec<(&'static str, u64)> {
    EXTRA.get().map_or_else(Vec::new, |f| f())
}

type NameProvider = fn(&mut [u8; 64]) -> usize;
static NAMER: OnceLock<NameProvider> = OnceLock::new();

/// Lets the layer above supply the running fiber's current name (e.g. set by
/// `pthread_setname_np`) to the stall monitor. The function runs inside a
/// signal handler on the hub thread: it must be async-signal-safe (no
/// allocation, no locks; `RefCell::try_borrow` is fine). The first
/// registration wins.
pub fn set_name_provider(f: NameProvider) {
    let _ = NAMER.set(f);
}

/// The provided name, written into `buf`; returns its length (0: none).
/// Async-signal-safe: reading a set `OnceLock` is one atomic load.
pub(crate) fn provided_name(buf: &mut [u8; 64]) -> usize {
    NAMER.get().map_or(0, |f| f(buf))
}

type UserNamer = fn(usize) -> Option<String>;
static USER_NAMER: OnceLock<UserNamer> = OnceLock::new();

/// Lets the layer above name a task from its user word (pthread names) in
/// deadlock reports. The first registration wins.
pub fn set_user_namer(f: UserNamer) {
    let _ = USER_NAMER.set(f);
}

pub(crate) fn user_name(user: usize) -> Option<String> {
    if user == 0 {
        return None;
    }
    USER_NAMER.get().and_then(|f| f(user))
}

type PriorityProvider = fn() -> u32;
static PRIORITY: OnceLock<PriorityProvider> = OnceLock::new();
static PRIORITIES_DIFFER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets the layer above say the running context's scheduling priority
/// (what lock waiters are ordered by: `SCHED_FIFO`/`SCHED_RR` priorities).
/// The first registration wins.
pub fn set_priority_provider(f: PriorityProvider) {
    let _ = PRIORITY.set(f);
}

/// Called by the layer above when a context gets a priority other than 0:
/// from then on [`priority`] asks the provider.
pub fn note_priorities_differ() {
    PRIORITIES_DIFFER.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether two contexts may have different priorities: false until the
/// layer above noted one (one atomic load, for lock waiters' fast paths).
#[inline]
pub fn priorities_differ() -> bool {
    PRIORITIES_DIFFER.load(std::sync::atomic::Ordering::Relaxed)
}

/// The running context's priority (0 until [`priorities_differ`]).
#[inline]
pub fn priority() -> u32 {
    if !priorities_differ() {
        return 0;
    }
    PRIORITY.get().map_or(0, |f| f())
}

type SignalsMayWake = fn() -> bool;
static SIGNALS_MAY_WAKE: OnceLock<SignalsMayWake> = OnceLock::new();

/// Lets the layer above say whether a signal could still wake a thread
/// whose fibers all wait (a handler is installed): then the hub does not
/// end the process as deadlocked, it reports once and waits in its poller,
/// as a deadlocked program waits natively for its alarm or its `SIGTERM`.
/// The first registration wins.
pub fn set_signals_may_wake(f: SignalsMayWake) {
    let _ = SIGNALS_MAY_WAKE.set(f);
}

/// See [`set_signals_may_wake`].
pub(crate) fn signals_may_wake() -> bool {
    SIGNALS_MAY_WAKE.get().is_some_and(|f| f())
}

type ThreadsMayWake = fn() -> bool;
static THREADS_MAY_WAKE: OnceLock<ThreadsMayWake> = OnceLock::new();

/// Lets the layer above say whether an OS thread that runs no fibers may
/// still wake a waiting fiber (from the hub's inbox: see
/// [`crate::unpark_from_elsewhere`]): then fibers that all wait are not a
/// deadlock, and the hub waits in its poller for that thread, without a
/// report. The first registration wins.
pub fn set_threads_may_wake(f: ThreadsMayWake) {
    let _ = THREADS_MAY_WAKE.set(f);
}

/// See [`set_threads_may_wake`].
pub(crate) fn threads_may_wake() -> bool {
    THREADS_MAY_WAKE.get().is_some_and(|f| f())
}

/// Reads every `GREENHOOK_*` setting of the hub and the fiber crate now
/// (`GREENHOOK_STATS`, `GREENHOOK_STALL_MS`, `GREENHOOK_POOL_SIZE`,
/// `GREENHOOK_STACK_SIZE`, `GREENHOOK_TLS`); each is kept from then on.
/// The preload calls it as it loads: read later, when first needed, a
/// setting was lost in a program that empties its environment first (nginx
/// keeps only `TZ` in its workers' before their first hooked call).
pub fn read_settings() {
    // The table is printed at exit even if no thread is ever made: a
    // single-threaded program (an event loop like lighttpd's) still shows
    // what was hooked.
    crate::stats::stats_at_load();
    crate::monitor::configured();
    crate::pool::pool_size();
    fiber::stack::env_stack_size();
    fiber::tls::read_env();
}
