//! pthreads as fibers: `pthread_create` spawns a fiber on the caller's hub.
//!
//! When [`crate::threads_as_fibers`] is true (the preload default) a
//! `pthread_t` made by us is a handle ([`handle`]: a tagged serial number,
//! never an address, never reused) that names a [`Record`] in a
//! per-OS-thread registry. Every function taking a `pthread_t` first sorts
//! it ([`resolve`]): a live record of ours; a handle of ours whose thread
//! is gone (answered as glibc 2.36 answers the stale handle of a joined or
//! detached thread); a value of glibc's (the root's own, a real thread's),
//! which goes to the real function; or garbage, which gets `ESRCH` where
//! glibc would crash. Otherwise (threads not fibers) every hook here passes
//! through.
//!
//! The registry is the fibers' OS thread's. Another OS thread (one a
//! library made with libc's own `pthread_create`, a `SIGEV_THREAD`
//! notification's) holding a fiber's handle can signal or cancel it: the
//! call is carried to the fibers' thread, which makes it at its hub's next
//! turn ([`to_fibers_thread`]), and answered as for a live thread (0, or
//! `ESRCH` for a handle never issued; `pthread_sigqueue` to a fiber that
//! ended answers 0 there, where glibc says `ESRCH`). Its other calls on a
//! fiber's handle (join, detach, names, attributes, scheduling, affinity)
//! answer as for a joined thread: they would have to wait for the fibers'
//! thread, which may itself be waiting for the caller.
//!
//! This file holds the record and the registry, and a thread's life from
//! the outside: create, join (with joiner cycles answered `EDEADLK`, and
//! the root joinable by its fibers), detach, `pthread_self`, attributes,
//! affinity, and `pthread_kill`/`pthread_sigqueue` (handed to
//! [`crate::signal`]). The rest, one idea a file:
//! - [`handle`]: what a `pthread_t` is, judged without dereferencing it;
//! - [`exit`]: how a pthread fiber ends: `pthread_exit`, cleanup handlers,
//!   key destructors, robust mutexes it still holds; `pthread_exit` in the
//!   root;
//! - [`cancel`]: deferred and asynchronous cancellation, which every hook
//!   reaches through [`crate::cancel_point`];
//! - [`keys`]: thread-specific data;
//! - [`names`]: thread names, also for the stall monitor and deadlock reports;
//! - [`native`]: the threads that stay OS threads (OpenMP's, whose waits no
//!   hook sees);
//! - [`once`]: the `pthread_once` of fibers;
//! - [`sched`]: scheduling policy and priority, per fiber;
//! - [`tid`]: thread ids of their own, and the calls that take one;
//! - [`cputime`]: thread CPU-time clocks, per fiber;
//! - [`plain`]: pass-throughs, hooked to be points where a time slice may
//!   end;
//! - `dlopen`: a library loaded while fibers exist gets its static TLS
//!   initialised in their blocks (x86-64).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void, clockid_t, cpu_set_t, pthread_attr_t, pthread_t, size_t, timespec};

use crate::gate::emulating;
use crate::hook::hook;
use handle::Gone;

pub mod c11;
pub mod cancel;
pub mod cputime;
#[cfg(all(target_arch = "x86_64", target_env = "gnu", not(greenhook_table)))]
mod dlopen;
#[cfg(all(target_arch = "x86_64", target_env = "gnu", not(greenhook_table)))]
pub(crate) use dlopen::after_fork_child as dlopen_after_fork_child;
pub mod exit;
mod handle;
pub mod keys;
pub mod names;
mod native;
pub mod once;
mod plain;
pub mod sched;
pub(crate) mod tid;

pub(crate) use names::{name_for_monitor, name_of};

/// Reads this module's environment variables, as the preload loads (see
/// `native`).
pub(crate) fn read_settings() {
    native::read_settings();
}

/// glibc's `__register_atfork`, for greenhook's own handler.
///
/// # Safety
/// As glibc's.
pub(crate) unsafe fn register_atfork(
    prepare: Option<unsafe extern "C" fn()>,
    parent: Option<unsafe extern "C" fn()>,
    child: Option<unsafe extern "C" fn()>,
) -> c_int {
    // SAFETY: per the contract; no object handle, as glibc's own
    // compatibility `pthread_atfork` passes.
    unsafe { plain::__register_atfork::real(prepare, parent, child, std::ptr::null_mut()) }
}

/// Whether the program's executable was made by Go's linker, whose
/// runtime's threads cannot be fibers (see `native`).
pub(crate) fn main_program_is_go() -> bool {
    native::main_program_is_go()
}

/// A C thread start routine.
type Start = extern "C" fn(*mut c_void) -> *mut c_void;

extern "C" {
    fn pthread_attr_getdetachstate(a: *const pthread_attr_t, ds: *mut c_int) -> c_int;
    /// The top of a caller-provided stack, or null when none was set.
    fn pthread_attr_getstackaddr(a: *const pthread_attr_t, addr: *mut *mut c_void) -> c_int;
}

/// The join bookkeeping's name for the root context (handles are tagged,
/// so never this).
const ROOT_ID: usize = 1;
/// ... and for a fiber not made by `pthread_create` (nobody can join it).
const UNTRACKED: usize = 2;

/// Our side of a `pthread_t` made by `pthread_create`.
pub(crate) struct Record {
    /// The `pthread_t` ([`handle`]).
    handle: usize,
    task: Rc<hub::Task>,
    retval: Cell<*mut c_void>,
    detached: Cell<bool>,
    /// Who joins this thread now (0: nobody; a handle, [`ROOT_ID`] or
    /// [`UNTRACKED`]).
    joined_by: Cell<usize>,
    /// Whom this thread is joining now (0: nobody), to find joiner cycles.
    joins: Cell<usize>,
    name: RefCell<[u8; 16]>,
    cancel: cancel::State,
    /// Its exit has begun (cleanup handlers, destructors).
    exiting: Cell<bool>,
    /// Its exit is complete: only a join or detach is left to happen.
    ended: Cell<bool>,
    /// What its exit undoes, and unwinds with.
    cleanup: Chain,
    stack_top: Cell<usize>,
    stack_size: Cell<usize>,
    /// Its guard as `pthread_getattr_np` reports it: what its attribute
    /// asked for in whole pages (0 on the caller's own stack), as glibc's.
    guard: usize,
    sched: sched::Sched,
    /// A CPU set given with `pthread_setaffinity_np` (bytes as given).
    affinity: RefCell<Option<Vec<u8>>>,
    /// A nice value given with `setpriority`/`nice` (see `sched`).
    nice: Cell<Option<c_int>>,
    /// Its thread id ([`tid`]).
    id: tid::Id,
}

/// The registry's hasher: keys are handles, distinct serial numbers, so a
/// multiply spreads them well (no SipHash on every look-up). Fiber ids are
/// serial numbers too (the signal state's map).
#[derive(Default)]
pub(crate) struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Registry = HashMap<usize, Rc<Record>, BuildHasherDefault<HandleHasher>>;

/// The root context's side of joins: the root can be joined by its fibers
/// (it ends with `pthread_exit`) and can join them.
#[derive(Default)]
struct Root {
    joins: Cell<usize>,
    joined_by: Cell<usize>,
    /// The value of the root's `pthread_exit`, once it was called.
    exited: Cell<Option<usize>>,
    /// A fiber has joined the root.
    joined: Cell<bool>,
    /// The value of the root's `pthread_exit`, from its start ([`exit`]).
    exiting: Cell<Option<usize>>,
    /// What its exit undoes, and unwinds with.
    cleanup: Chain,
}

// Per OS thread, not `thread_local!`: see `hub::PerThread`.
static REGISTRY: hub::PerThread<RefCell<Registry>> = hub::PerThread::new(|| RefCell::new(Registry::default()));
static ROOT: hub::PerThread<Root> = hub::PerThread::new(Root::default);

/// Whether the root context (main, on the fibers' OS thread) has begun its
/// `pthread_exit`: the kernel gives an exiting thread no signal. Allocates
/// nothing (a signal's placing asks it).
pub(crate) fn root_exiting() -> bool {
    ROOT.with_existing(|r| r.exiting.get().is_some()).unwrap_or(false)
}

fn lookup(t: pthread_t) -> Option<Rc<Record>> {
    REGISTRY.with(|r| r.borrow().get(&(t as usize)).cloned())
}

/// Forgets a record (joined, or detached and ended).
fn unregister(h: usize, fate: Gone) {
    let rec = REGISTRY.with(|r| r.borrow_mut().remove(&h));
    if fate == Gone::Detached {
        handle::ended_detached(h);
    }
    drop(rec);
}

/// An entry of a fiber's cleanup chain: what an exit undoes (a
/// `pthread_cleanup_push` buffer's address, or a marker: [`once`]'s with
/// bit 0 set, a held stream's with bit 1), and where on the stack the
/// frame that pushed it is. An exit's unwinding undoes it just before it
/// leaves that frame, as glibc's does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cleanup {
    pub(super) what: usize,
    pub(super) at: usize,
}

impl Cleanup {
    /// An entry for `what`, pushed by the caller's frame.
    #[inline(always)]
    fn here(what: usize) -> Cleanup {
        let anchor = 0u8;
        // The anchor is a local of the caller (this is inlined into it):
        // its address is below the caller's CFA and above every frame the
        // caller calls.
        let at = std::hint::black_box(&anchor) as *const u8 as usize;
        Cleanup { what, at }
    }
}

/// A context's cleanup chain (a pthread fiber's or the root's): the
/// `pthread_cleanup_push` buffers, [`once`]'s markers for init routines
/// in progress and streams held, innermost last; and the exception object
/// of its exit's unwinding, made when the exit begins ([`exit`]).
#[derive(Default)]
pub(crate) struct Chain {
    entries: RefCell<Vec<Cleanup>>,
    unwinding: std::cell::OnceCell<Box<crate::unwind::Exception>>,
}

impl Chain {
    fn push(&self, e: Cleanup) {
        self.entries.borrow_mut().push(e);
    }

    /// Removes the innermost entry for `what`; whether there was one.
    fn remove(&self, what: usize) -> bool {
        let mut c = self.entries.borrow_mut();
        c.iter().rposition(|e| e.what == what).map(|i| c.remove(i)).is_some()
    }

    /// Removes the innermost entry for `what` and every one inside it (a
    /// `pthread_cleanup_pop`); whether there was one.
    fn truncate(&self, what: usize) -> bool {
        let mut c = self.entries.borrow_mut();
        c.iter().rposition(|e| e.what == what).map(|i| c.truncate(i)).is_some()
    }

    /// Takes the innermost entry if it was pushed below `cfa`.
    fn pop_below(&self, cfa: usize) -> Option<Cleanup> {
        let mut c = self.entries.borrow_mut();
        c.pop_if(|e| e.at < cfa)
    }
}

/// Notes in the calling pthread fiber's cleanup chain that it holds the
/// lock of the stdio stream at `f` (a hook's hold, around a wait): an
/// exit or cancellation meanwhile lets it go, as glibc's stdio does in a
/// cleanup handler. A marker with bit 1 set (a `FILE` is 8-aligned; see
/// [`once`] for bit 0). None outside a pthread fiber.
#[inline(always)] // the entry's place is the caller's frame
pub(crate) fn hold_stream(f: usize) -> Option<StreamHold> {
    let r = current_record()?;
    r.cleanup.push(Cleanup::here(f | 2));
    Some(StreamHold(r, f | 2))
}

/// A hold [`hold_stream`] noted, until [`StreamHold::let_go`].
pub(crate) struct StreamHold(Rc<Record>, usize);

impl StreamHold {
    /// The hold is over: its marker leaves the chain.
    pub(crate) fn let_go(self) {
        self.0.cleanup.remove(self.1);
    }
}

/// Clears glibc's `__libc_single_threaded` (2.32 on), as glibc's own
/// `pthread_create` does, for good. libstdc++ reads it: while set, a
/// function-local static's guard, `shared_ptr`'s counts and
/// `std::stop_callback`'s hand-over take their single-threaded paths, and
/// two fibers in them at once met a `recursive_init_error` or waited for
/// ever.
fn not_single_threaded() {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if DONE.swap(true, Ordering::Relaxed) {
        return;
    }
    // SAFETY: RTLD_DEFAULT searches every object.
    let p = unsafe { fiber::tls::dlsym_quietly(libc::RTLD_DEFAULT, c"__libc_single_threaded") } as *mut u8;
    // SAFETY: glibc's `char` variable, which only ever goes from 1 to 0.
    if p.is_null() || unsafe { p.read_volatile() } == 0 {
        return;
    }
    // glibc's own first `pthread_create` does more than clear the flag: it
    // installs the handlers of its internal signals (`SIGCANCEL`, and
    // `SIGSETXID`, which `setuid` and its kin send every other real thread
    // to make the call there), keyed on that flag in 2.34-2.36. Cleared
    // by us alone, the flag kept those handlers out for good, and the
    // first `setuid` after greenhook had started a worker thread killed
    // the process with signal 33 (`tests/c/creds_in_thread.c`). So glibc
    // makes one thread of its own that ends at once, and does both.
    extern "C" fn first_glibc_thread(probe: *mut c_void) -> *mut c_void {
        // SAFETY: the calling thread is glibc's own; `probe` is the
        // creator's, which waits in the join meanwhile.
        unsafe { note_stack_block(&*(probe as *const StackProbe)) };
        std::ptr::null_mut()
    }
    // Looked up here: the thread may not `dlsym`, since its creator may
    // hold the loader's lock (a library's constructor, under `dlopen`,
    // making the first thread: OpenBLAS's) while it waits for it.
    let probe = StackProbe {
        tcb: fiber::tls::descriptor_size().unwrap_or(0),
        // SAFETY: glibc's function of that name and signature (or null).
        getattr: unsafe {
            std::mem::transmute::<*mut c_void, Option<GetAttr>>(crate::real::resolve(b"pthread_getattr_np\0"))
        },
    };
    // It starts with every signal blocked, so that none sent to the
    // process meanwhile is taken by it.
    hub::on_thread_tls(|| {
        // SAFETY: a zeroed sigset is valid to fill.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::sigfillset(&mut all) };
        let _blocked = crate::signal::KernelMask::set(&all);
        let mut t: pthread_t = 0;
        // SAFETY: a valid out pointer, default attributes, a start
        // routine that returns at once; joined once, as it was made.
        unsafe {
            let arg = (&raw const probe).cast_mut().cast();
            if pthread_create::real(&mut t, std::ptr::null(), first_glibc_thread, arg) == 0 {
                pthread_join::real(t, std::ptr::null_mut());
            }
        }
    });
    // SAFETY: as above; in case glibc did not (no thread could be made).
    unsafe { p.write_volatile(0) };
}

/// glibc's `pthread_getattr_np`.
type GetAttr = unsafe extern "C" fn(pthread_t, *mut pthread_attr_t) -> c_int;

/// What [`note_stack_block`] needs, looked up by the thread that makes the
/// one it runs in. (Unread in the interpose-table build, which has no
/// probe.)
#[cfg_attr(greenhook_table, allow(dead_code))]
struct StackProbe {
    /// The size of glibc's `struct pthread` (0: unknown).
    tcb: usize,
    getattr: Option<GetAttr>,
}

/// Shows the fiber layer where glibc keeps a thread's stack block in its
/// descriptor (see [`fiber::tls::note_stack_block`]), from this thread's
/// own descriptor and what glibc's `pthread_getattr_np` says of it. Takes
/// no lock of the loader's (see `not_single_threaded`).
///
/// # Safety
/// The calling thread is one glibc made (its thread pointer is its
/// descriptor).
unsafe fn note_stack_block(probe: &StackProbe) {
    #[cfg(greenhook_table)]
    let _ = probe;
    #[cfg(all(target_arch = "x86_64", target_env = "gnu", not(greenhook_table)))]
    // SAFETY: glibc's thread, whose descriptor starts at its thread
    // pointer (`THREAD_SELF` is the word at 16); the attribute object is
    // initialised by the call and destroyed here.
    unsafe {
        let Some(getattr) = probe.getattr.filter(|_| probe.tcb != 0) else {
            return;
        };
        let me: usize;
        std::arch::asm!("mov {}, qword ptr fs:[16]", out(reg) me, options(nostack, readonly, preserves_flags));
        let mut a: pthread_attr_t = std::mem::zeroed();
        if getattr(me as pthread_t, &mut a) != 0 {
            return;
        }
        let (mut lo, mut size, mut guard) = (std::ptr::null_mut(), 0, 0);
        let ok = libc::pthread_attr_getstack(&a, &mut lo, &mut size) == 0
            && libc::pthread_attr_getguardsize(&a, &mut guard) == 0;
        libc::pthread_attr_destroy(&mut a);
        // glibc reports the stack as its block past the guard.
        if ok && !lo.is_null() {
            fiber::tls::note_stack_block(me, probe.tcb, lo as usize - guard, size + guard);
        }
    }
}

/// The record of the calling fiber, if it is one of our pthreads.
fn current_record() -> Option<Rc<Record>> {
    if !hub::in_fiber() {
        return None;
    }
    match hub::current_user() {
        Some(u) if u != 0 => lookup(u as pthread_t),
        _ => None,
    }
}

/// The caller, as the join bookkeeping names it.
fn self_id() -> usize {
    if !hub::in_fiber() {
        return ROOT_ID;
    }
    match hub::current_user() {
        Some(u) if u != 0 => u,
        _ => UNTRACKED,
    }
}

/// Whom `id` is joining now (0: nobody).
fn joins_of(id: usize) -> usize {
    match id {
        ROOT_ID => ROOT.with(|r| r.joins.get()),
        UNTRACKED => 0,
        h => lookup(h as pthread_t).map_or(0, |r| r.joins.get()),
    }
}

fn set_joins(id: usize, target: usize) {
    match id {
        ROOT_ID => ROOT.with(|r| r.joins.set(target)),
        UNTRACKED => {}
        h => {
            if let Some(r) = lookup(h as pthread_t) {
                r.joins.set(target)
            }
        }
    }
}

/// Whether `target` is (through a chain of joiners) waiting for `me`: a
/// join of `target` by `me` would never end.
fn waits_for(target: usize, me: usize) -> bool {
    let mut x = target;
    // A chain is at most as long as the number of threads; the bound only
    // guards against a cycle that does not include `me`, which cannot form.
    for _ in 0..1_000_000 {
        x = joins_of(x);
        if x == 0 {
            return false;
        }
        if x == me {
            return true;
        }
    }
    false
}

/// What a `pthread_t` given to us names (see the module docs).
enum Target {
    /// One of our threads, in the registry (it may have ended, unjoined).
    Fiber(Rc<Record>),
    /// One of our handles whose thread is gone, or garbage.
    Gone(Gone),
    /// glibc's: for the real function.
    Real,
}

/// Whether `t` is one of our handles, given by an OS thread that is not the
/// fibers' own (one a library made with libc's own `pthread_create`, a
/// `SIGEV_THREAD` notification's). The registry is the fibers' thread's:
/// what `pthread_kill`, `pthread_sigqueue` and `pthread_cancel` do to the
/// fiber is carried there ([`to_fibers_thread`]); the other calls on a
/// `pthread_t` answer as for a joined thread (see the module docs).
fn from_elsewhere(t: pthread_t) -> bool {
    handle::is_ours(t) && !hub::is_fiber_thread()
}

/// Has the fibers' thread run `f` on the live fiber whose handle is `t`,
/// at its hub's next turn (see [`from_elsewhere`]); a fiber that ended
/// meanwhile gets nothing. Returns the answer of a call that a live
/// thread's handle gets, 0, or `ESRCH` for a handle never issued. The
/// caller does not wait for `f`: it is a signal or a cancellation, which
/// reaches its thread later anyway, and the fibers' thread may be blocked
/// until the caller goes on.
fn to_fibers_thread(t: pthread_t, f: impl FnOnce(&Record) + Send + 'static) -> c_int {
    if !handle::issued(t as usize) {
        return libc::ESRCH;
    }
    hub::call_on_fiber_hub(Box::new(move || {
        if let Target::Fiber(rec) = resolve(t) {
            if !rec.ended.get() {
                f(&rec);
            }
        }
    }));
    0
}

fn resolve(t: pthread_t) -> Target {
    if handle::is_ours(t) {
        return match lookup(t) {
            Some(rec) => Target::Fiber(rec),
            None => Target::Gone(handle::gone(t as usize)),
        };
    }
    if !emulating() || handle::foreign_valid(t) {
        Target::Real
    } else {
        Target::Gone(Gone::Never)
    }
}

/// Joins a real thread (one glibc made: a library's that bypassed our
/// `pthread_create`) with glibc's `join`: where fibers could run meanwhile
/// it waits on the offload pool, since the real call would block the only
/// OS thread (and with it the fibers the joined thread may wait for). A
/// thread joining its own OS thread gets glibc's answer (`EDEADLK`) at once.
fn join_real(t: pthread_t, join: impl FnOnce() -> c_int) -> c_int {
    let me = os_thread_self();
    if t == me || !crate::gate::cooperative() {
        // Blocks in the kernel: a handler may run there, as without us.
        return crate::hook::program(join);
    }
    let job = crate::AssertSend(join);
    crate::offload(hub::Lane::Wait, move || job.call())
}

/// [`default_attr_stack`]'s answer, 0 until asked or after the default
/// changed.
static DEFAULT_STACK: AtomicUsize = AtomicUsize::new(0);

/// The default stack size glibc reports for a fresh attribute object: its
/// default attribute's, set from RLIMIT_STACK at start-up and changed only
/// by `pthread_setattr_default_np` (whose hook calls
/// [`default_attr_changed`]).
fn default_attr_stack() -> usize {
    let d = DEFAULT_STACK.load(Ordering::Relaxed);
    if d != 0 {
        return d;
    }
    // SAFETY: a local attribute object, initialised and destroyed here.
    let d = unsafe {
        let mut a: pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut a);
        let mut s = 0;
        libc::pthread_attr_getstacksize(&a, &mut s);
        libc::pthread_attr_destroy(&mut a);
        s
    };
    DEFAULT_STACK.store(d, Ordering::Relaxed);
    d
}

/// glibc's default thread attribute changed: a thread made without an
/// attribute gets the stack size set there, as glibc's do (it was the one
/// seen first, for good: a program that set 3 MiB under `ulimit -s 1000`
/// got 1,000 KiB stacks).
pub(super) fn default_attr_changed() {
    DEFAULT_STACK.store(0, Ordering::Relaxed);
}

fn fiber_main(h: usize, f: Start, arg: usize, user_stack: Option<(usize, usize)>) {
    // A new fiber starts at hook depth 0; what runs here around the start
    // routine is greenhook's, as in a hook.
    let _ = hub::internal::enter_hook();
    if let Some(rec) = lookup(h as pthread_t) {
        // Report exactly what the caller gave, else the fiber's usable range.
        let (lo, hi) = match user_stack {
            Some((lo, len)) => (lo, lo + len),
            None => hub::with_current_fiber(|f| f.map_or((0, 0), |f| f.stack_bounds())),
        };
        rec.stack_top.set(hi);
        rec.stack_size.set(hi - lo);
    }
    let r = crate::hook::program(|| crate::preempt::call_start(f, arg as *mut c_void));
    // Signals already placed on this thread run before it ends: natively
    // they would have been delivered to it while it ran (a process-directed
    // one left pending here would be nobody's if every other thread masks it).
    crate::signal::run_pending();
    exit::finish(h, r);
}

/// How long a join may wait.
enum JoinMode {
    /// `pthread_join`: until the thread ends.
    Block,
    /// `pthread_tryjoin_np`: not at all.
    Try,
    /// `pthread_timedjoin_np`/`pthread_clockjoin_np`: until this time,
    /// read only if there is a wait.
    Until(clockid_t, *const timespec),
}

impl JoinMode {
    /// The deadline of a join that has to wait.
    fn deadline(&self) -> Result<Option<hub::Deadline>, c_int> {
        match *self {
            JoinMode::Until(clock, ts) => crate::deadline::absolute(clock, ts),
            _ => Ok(None),
        }
    }
}

/// Waits, as `me`, until `target` ended, with `wait` (a join of a fiber,
/// or of the root). Marks the join for cycle detection meanwhile and
/// is a cancellation point: an interrupted wait acts on a pending cancel
/// (with the marks cleared, so a cancelled joiner leaves no trace) and
/// otherwise waits on. `Ok` when it ended, `Err(ETIMEDOUT)` when the time
/// passed.
fn wait_joined(
    me: usize,
    target: usize,
    mode: &JoinMode,
    wait: impl Fn(Option<hub::Deadline>) -> hub::Wake,
) -> Result<(), c_int> {
    let deadline = mode.deadline()?;
    crate::cancel_point();
    loop {
        set_joins(me, target);
        let why = wait(deadline);
        set_joins(me, 0);
        match why {
            hub::Wake::Ready => return Ok(()),
            hub::Wake::TimedOut => return Err(libc::ETIMEDOUT),
            hub::Wake::Interrupted | hub::Wake::Closed => {
                crate::cancel_point();
                // A signal for this thread: its handler runs, the join goes on.
                crate::signal::run_pending();
            }
        }
    }
}

/// The joins of a fiber, in glibc's order of answers: `pthread_tryjoin_np`
/// on a thread still running is `EBUSY` before anything else; then a
/// detached thread is `EINVAL`; joining oneself, or a thread that is
/// (through others) joining us, `EDEADLK` (glibc 2.36 detects only the
/// first and hangs in a cycle); and a second joiner `EINVAL`.
fn join_fiber(rec: Rc<Record>, r: *mut *mut c_void, mode: JoinMode) -> c_int {
    if matches!(mode, JoinMode::Try) && !rec.ended.get() {
        return libc::EBUSY;
    }
    if rec.detached.get() {
        return libc::EINVAL;
    }
    let me = self_id();
    if me == rec.handle || waits_for(rec.handle, me) {
        return libc::EDEADLK;
    }
    if rec.joined_by.get() != 0 {
        return libc::EINVAL;
    }
    let h = rec.handle;
    if !rec.ended.get() {
        // Only the handle is held across the wait's cancellation points:
        // a cancelled joiner's frames are never unwound, and a reference
        // kept there would leak the record and the fiber's stack.
        drop(rec);
        let waited = wait_joined(me, h, &mode, |d| {
            let Some(task) = lookup(h as pthread_t).map(|rec| {
                rec.joined_by.set(me);
                rec.task.clone()
            }) else {
                return hub::Wake::Ready;
            };
            let w = hub::join_interruptible(&task, d);
            // A cancelled joiner is no longer joining (glibc's cleanup
            // handler does the same).
            if let Some(rec) = lookup(h as pthread_t) {
                rec.joined_by.set(0);
            }
            w
        });
        if let Err(e) = waited {
            return e;
        }
    }
    let Some(rec) = lookup(h as pthread_t) else {
        return libc::ESRCH;
    };
    if !r.is_null() {
        // SAFETY: the caller's out pointer.
        unsafe { *r = rec.retval.get() };
    }
    unregister(h, Gone::Joined);
    0
}

/// A fiber joins its hub's root, which ends with `pthread_exit` (its
/// value is the join's). Same order of answers as [`join_fiber`]; a root
/// already joined is gone (`ESRCH`).
fn join_root(r: *mut *mut c_void, mode: JoinMode) -> c_int {
    let (exited, joined, joined_by) = ROOT.with(|s| (s.exited.get(), s.joined.get(), s.joined_by.get()));
    if joined {
        return libc::ESRCH;
    }
    if matches!(mode, JoinMode::Try) && exited.is_none() {
        return libc::EBUSY;
    }
    let me = self_id();
    if waits_for(ROOT_ID, me) {
        return libc::EDEADLK;
    }
    if joined_by != 0 {
        return libc::EINVAL;
    }
    let key = ROOT.with(|s| s as *const Root as usize);
    let waited = wait_joined(me, ROOT_ID, &mode, |d| {
        ROOT.with(|s| s.joined_by.set(me));
        let w = loop {
            match hub::park(key, d, || ROOT.with(|s| s.exited.get().is_none())) {
                hub::Park::Invalid => break hub::Wake::Ready,
                hub::Park::Unparked => {}
                hub::Park::TimedOut => break hub::Wake::TimedOut,
                hub::Park::Interrupted => break hub::Wake::Interrupted,
            }
        };
        ROOT.with(|s| s.joined_by.set(0));
        w
    });
    if let Err(e) = waited {
        return e;
    }
    let v = ROOT.with(|s| {
        s.joined.set(true);
        s.exited.get().unwrap_or(0)
    });
    if !r.is_null() {
        // SAFETY: the caller's out pointer.
        unsafe { *r = v as *mut c_void };
    }
    0
}

/// Records the root's `pthread_exit` value and wakes a fiber joining it
/// (for [`exit`]).
fn root_exited(v: *mut c_void) {
    let key = ROOT.with(|s| {
        s.exited.set(Some(v as usize));
        s as *const Root as usize
    });
    hub::unpark(key, usize::MAX);
}

/// Whether `t` is the root of this hub, joined from one of its fibers.
fn is_own_root(t: pthread_t) -> bool {
    hub::in_fiber() && t == os_thread_self()
}

/// The calling OS thread's own `pthread_t`, also inside a fiber with TLS
/// of its own, whose real `pthread_self` names the fiber's block (glibc's
/// `pthread_t` is the thread pointer on x86-64, the one platform where
/// fibers have TLS of their own).
pub(crate) fn os_thread_self() -> pthread_t {
    match hub::home_thread_pointer() {
        Some(tp) => tp as pthread_t,
        // SAFETY: no arguments.
        None => unsafe { pthread_self::real() },
    }
}

/// The body of every join: by what `t` names.
fn join(t: pthread_t, r: *mut *mut c_void, mode: JoinMode) -> Option<c_int> {
    match resolve(t) {
        Target::Fiber(rec) => Some(join_fiber(rec, r, mode)),
        Target::Gone(g) => Some(match (g, &mode) {
            // glibc's stale descriptor of a joined thread still reads
            // "running" to tryjoin.
            (Gone::Joined, JoinMode::Try) => libc::EBUSY,
            (Gone::Detached, _) => libc::EINVAL,
            _ => libc::ESRCH,
        }),
        Target::Real if emulating() && is_own_root(t) => Some(join_root(r, mode)),
        Target::Real => None,
    }
}

hook! {
    /// `pthread_create`: a fiber on the caller's hub, or glibc's OS thread
    /// for a start routine in a library whose threads stay native
    /// ([`native`]).
    #[gate(emulating())]
    [thread] fn pthread_create(t: *mut pthread_t, attr: *const pthread_attr_t, f: Start, arg: *mut c_void) -> c_int {
        if native::stays_native(f) {
            // SAFETY: the caller's arguments, unchanged.
            return unsafe { native::create(t, attr, f, arg) };
        }
        let mut opts = hub::Spawn::default();
        let mut detached = false;
        let mut size = 0;
        // SAFETY: no arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut guard = page;
        if !attr.is_null() {
            let (mut ds, mut top) = (0, std::ptr::null_mut());
            // SAFETY: the caller's initialised attribute object.
            unsafe {
                if libc::pthread_attr_getstacksize(attr, &mut size) != 0 || size == default_attr_stack() {
                    size = 0;
                }
                if pthread_attr_getstackaddr(attr, &mut top) == 0 && !top.is_null() {
                    // pthread_attr_setstack: run on the caller's memory.
                    let len = if size == 0 { default_attr_stack() } else { size };
                    opts.user_stack = Some((top as usize - len, len));
                }
                if pthread_attr_getdetachstate(attr, &mut ds) == 0 {
                    detached = ds == libc::PTHREAD_CREATE_DETACHED;
                }
                // glibc rounds the guard up to whole pages and gives none
                // to a stack of the caller's. Ours is never less than a
                // page (a guard of 0 is reported, a page installed).
                if opts.user_stack.is_some() {
                    guard = 0;
                } else if libc::pthread_attr_getguardsize(attr, &mut guard) == 0 {
                    guard = guard.div_ceil(page).saturating_mul(page);
                    if guard > page {
                        opts.guard_size = Some(guard);
                    }
                } else {
                    guard = page;
                }
            }
        }
        // What a new thread inherits of its creator's (a fiber's record).
        let creator = current_record();
        let sched = match sched::at_create(attr, creator.as_deref()) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let affinity = match affinity_at_create(attr, creator.as_deref()) {
            Ok(a) => a,
            Err(e) => return e,
        };
        // No size asked for: GREENHOOK_STACK_SIZE if set, else what glibc would
        // give the thread (RLIMIT_STACK, usually 8 MiB). It is address space
        // only: an idle fiber still touches one page.
        opts.stack_size = Some(if size != 0 {
            size
        } else {
            fiber::stack::env_stack_size().unwrap_or_else(default_attr_stack)
        });
        // Before the first fiber's block is made: see `first_glibc_thread`.
        not_single_threaded();
        let h = handle::new_handle();
        let arg = arg as usize;
        let user_stack = opts.user_stack;
        let task = match hub::spawn(opts, move || fiber_main(h, f, arg, user_stack)) {
            Ok(task) => task,
            Err(_) => return libc::EAGAIN,
        };
        task.set_user(h);
        if detached {
            task.set_detached();
        }
        crate::signal::inherit_mask(&task);
        crate::preempt::arm();
        let rec = Rc::new(Record {
            handle: h,
            task,
            retval: Cell::new(std::ptr::null_mut()),
            detached: Cell::new(detached),
            joined_by: Cell::new(0),
            joins: Cell::new(0),
            name: RefCell::new(names::inherited()),
            cancel: cancel::State::default(),
            exiting: Cell::new(false),
            ended: Cell::new(false),
            cleanup: Chain::default(),
            stack_top: Cell::new(0),
            stack_size: Cell::new(0),
            guard,
            sched,
            affinity: RefCell::new(affinity),
            nice: Cell::new(creator.as_ref().and_then(|r| r.nice.get())),
            id: tid::Id::for_serial(handle::serial(h)),
        });
        // glibc's thread starts at its creator's priority and is then moved
        // to its own: one lower than its creator's goes first among those
        // of its priority (the kernel's rule for a lowered thread), one
        // higher goes last and, outranking the creator, runs at this
        // hook's return.
        if hub::internal::priorities_differ() {
            hub::set_priority(&rec.task, hub::current().priority());
        }
        hub::set_priority(&rec.task, rec.sched.task_priority());
        {
            // The map may grow: an allocator's lock taken meanwhile must
            // not come back into these hooks and park this fiber with the
            // registry borrowed (rustc's jemalloc once did, and the next
            // thread's creation found it so).
            let _g = hub::internal::Guard::new();
            REGISTRY.with(|r| r.borrow_mut().insert(h, rec));
        }
        // SAFETY: the caller's out pointer.
        unsafe { *t = h as pthread_t };
        0
    }

    /// `pthread_join`.
    [thread] fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int {
        // SAFETY: not ours: forwarded unchanged (see `join_real`).
        join(t, r, JoinMode::Block).unwrap_or_else(|| join_real(t, move || unsafe { pthread_join::real(t, r) }))
    }

    /// `pthread_tryjoin_np`.
    [thread] fn pthread_tryjoin_np(t: pthread_t, r: *mut *mut c_void) -> c_int {
        // SAFETY: not ours: forwarded unchanged.
        join(t, r, JoinMode::Try).unwrap_or_else(|| unsafe { pthread_tryjoin_np::real(t, r) })
    }

    /// `pthread_timedjoin_np` (CLOCK_REALTIME).
    [thread] fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int {
        join(t, r, JoinMode::Until(libc::CLOCK_REALTIME, ts))
            // SAFETY: not ours: forwarded unchanged (see `join_real`).
            .unwrap_or_else(|| join_real(t, move || unsafe { pthread_timedjoin_np::real(t, r, ts) }))
    }

    /// `pthread_clockjoin_np`.
    [thread] fn pthread_clockjoin_np(t: pthread_t, r: *mut *mut c_void, c: clockid_t, ts: *const timespec) -> c_int {
        join(t, r, JoinMode::Until(c, ts))
            // SAFETY: not ours: forwarded unchanged (see `join_real`).
            .unwrap_or_else(|| join_real(t, move || unsafe { pthread_clockjoin_np::real(t, r, c, ts) }))
    }

    /// `pthread_detach`. As in glibc, a thread someone is joining stays
    /// joinable (and the answer is 0).
    [thread] fn pthread_detach(t: pthread_t) -> c_int {
        match resolve(t) {
            Target::Fiber(rec) => {
                if rec.detached.get() {
                    return libc::EINVAL;
                }
                if rec.joined_by.get() != 0 {
                    return 0;
                }
                rec.detached.set(true);
                rec.task.set_detached();
                if rec.ended.get() {
                    unregister(rec.handle, Gone::Detached);
                }
                0
            }
            Target::Gone(Gone::Detached) => libc::EINVAL,
            Target::Gone(_) => libc::ESRCH,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => unsafe { pthread_detach::real(t) },
        }
    }

    /// `pthread_self`: our handle inside a pthread fiber, the real one elsewhere.
    #[gate(crate::gate::in_fiber_thread())]
    [thread] fn pthread_self() -> pthread_t {
        match hub::current_user() {
            Some(u) if u != 0 => u as pthread_t,
            // A fiber not made by pthread_create (the Rust API's): its OS
            // thread's.
            _ => os_thread_self(),
        }
    }

    /// `pthread_equal`: the values (a handle is never reused, so an ended
    /// thread's equals no other).
    [thread] fn pthread_equal(a: pthread_t, b: pthread_t) -> c_int {
        (a == b) as c_int
    }

    /// `pthread_getattr_np`: the fiber's stack, guard, detach state and
    /// scheduling; a detached thread that ended gets a fresh detached
    /// attribute object (glibc reads its stale descriptor), a joined one
    /// `ESRCH`.
    [thread] fn pthread_getattr_np(t: pthread_t, a: *mut pthread_attr_t) -> c_int {
        let rec = match resolve(t) {
            Target::Fiber(rec) => rec,
            Target::Gone(Gone::Detached) => {
                // SAFETY: the caller's attribute object, initialised here as glibc does.
                unsafe {
                    libc::pthread_attr_init(a);
                    libc::pthread_attr_setdetachstate(a, libc::PTHREAD_CREATE_DETACHED);
                }
                return 0;
            }
            Target::Gone(_) => return libc::ESRCH,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => return unsafe { pthread_getattr_np::real(t, a) },
        };
        // SAFETY: the caller's attribute object, initialised here as glibc does.
        unsafe {
            libc::pthread_attr_init(a);
            let size = rec.stack_size.get();
            let top = rec.stack_top.get();
            if size != 0 && top != 0 {
                libc::pthread_attr_setstack(a, (top - size) as *mut c_void, size);
            }
            libc::pthread_attr_setguardsize(a, rec.guard);
            let ds = if rec.detached.get() {
                libc::PTHREAD_CREATE_DETACHED
            } else {
                libc::PTHREAD_CREATE_JOINABLE
            };
            libc::pthread_attr_setdetachstate(a, ds);
        }
        sched::fill_attr(&rec, a);
        0
    }

    /// `pthread_kill`: signal 0 checks existence; others are held for the
    /// thread and its handler runs in it ([`crate::signal::send_to`]), be it
    /// a fiber or the root (this OS thread's own handle). A thread that
    /// ended gets nothing and the answer is 0, as glibc's.
    [signal] fn pthread_kill(t: pthread_t, sig: c_int) -> c_int {
        if from_elsewhere(t) {
            // In glibc's order: the internal signals, the handle, the
            // signal number (the kernel's, for a live thread).
            if internal_signal(sig) {
                return libc::EINVAL;
            }
            if handle::issued(t as usize) && sig != 0 && !crate::signal::valid(sig) {
                return libc::EINVAL;
            }
            return to_fibers_thread(t, move |rec| {
                if sig != 0 {
                    crate::signal::send_to(rec.task.id(), sig, None);
                }
            });
        }
        match resolve(t) {
            Target::Real if sig != 0 && own_root(t) => {
                if internal_signal(sig) {
                    libc::EINVAL
                } else {
                    crate::signal::send_to(crate::signal::ROOT, sig, None)
                }
            }
            Target::Real => {
                // SAFETY: not ours: forwarded unchanged.
                unsafe { pthread_kill::real(t, sig) }
            }
            _ if internal_signal(sig) => libc::EINVAL,
            Target::Fiber(rec) if !rec.ended.get() => {
                if sig == 0 {
                    0
                } else {
                    crate::signal::send_to(rec.task.id(), sig, None)
                }
            }
            Target::Fiber(_) | Target::Gone(Gone::Joined | Gone::Detached) => 0,
            Target::Gone(Gone::Never) => libc::ESRCH,
        }
    }

    /// `pthread_sigqueue`: to a live fiber (or the root), held for it with
    /// its value, as for [`pthread_kill`]; a thread that ended is `ESRCH`,
    /// before the signal is looked at, as in glibc.
    [signal] fn pthread_sigqueue(t: pthread_t, sig: c_int, v: libc::sigval) -> c_int {
        if from_elsewhere(t) {
            // In glibc's order: the handle, the internal signals, the
            // signal number (the kernel's).
            if handle::issued(t as usize) && (internal_signal(sig) || sig != 0 && !crate::signal::valid(sig)) {
                return libc::EINVAL;
            }
            // The value is the caller's word, carried as a number.
            let value = v.sival_ptr as usize;
            return to_fibers_thread(t, move |rec| {
                if sig != 0 {
                    let v = libc::sigval { sival_ptr: value as *mut c_void };
                    crate::signal::send_to(rec.task.id(), sig, Some(v));
                }
            });
        }
        match resolve(t) {
            Target::Fiber(rec) if !rec.ended.get() => {
                if internal_signal(sig) {
                    libc::EINVAL
                } else if sig == 0 {
                    0 // the kernel's check that the thread exists
                } else {
                    crate::signal::send_to(rec.task.id(), sig, Some(v))
                }
            }
            Target::Fiber(_) | Target::Gone(_) => libc::ESRCH,
            Target::Real if own_root(t) && !internal_signal(sig) && sig != 0 => {
                crate::signal::send_to(crate::signal::ROOT, sig, Some(v))
            }
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => unsafe { pthread_sigqueue::real(t, sig, v) },
        }
    }

    /// `pthread_getaffinity_np`: the set given to the fiber, else its OS
    /// thread's. glibc asks the kernel about a thread that ended with tid 0
    /// (the caller: an answer) or, once joined, -1 (`ESRCH`); so do we.
    [thread] fn pthread_getaffinity_np(t: pthread_t, n: size_t, set: *mut cpu_set_t) -> c_int {
        let given = match resolve(t) {
            Target::Fiber(rec) => rec.affinity.borrow().clone(),
            Target::Gone(Gone::Detached) => None,
            Target::Gone(_) => return libc::ESRCH,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => return unsafe { pthread_getaffinity_np::real(t, n, set) },
        };
        // The kernel's checks of the caller's buffer, and the OS thread's set.
        // SAFETY: our own OS thread's real handle; the caller's buffer.
        let r = unsafe { pthread_getaffinity_np::real(os_thread_self(), n, set) };
        if let (0, Some(g)) = (r, given) {
            // SAFETY: the caller's buffer holds `n` bytes (the kernel
            // wrote it).
            unsafe { copy_affinity(&g, set, n) };
        }
        r
    }

    /// `pthread_setaffinity_np`: kept per fiber (all fibers of a hub run on
    /// its one OS thread, whose own affinity is left alone); `EINVAL` for a
    /// set with no CPU the OS thread may use, as the kernel answers.
    [thread] fn pthread_setaffinity_np(t: pthread_t, n: size_t, set: *const cpu_set_t) -> c_int {
        let rec = match resolve(t) {
            Target::Fiber(rec) => rec,
            Target::Gone(Gone::Detached) => return 0,
            Target::Gone(_) => return libc::ESRCH,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => return unsafe { pthread_setaffinity_np::real(t, n, set) },
        };
        if set.is_null() {
            return libc::EFAULT;
        }
        // SAFETY: the caller's set of `n` bytes.
        set_affinity(&rec, unsafe { std::slice::from_raw_parts(set.cast::<u8>(), n) }).err().unwrap_or(0)
    }

    /// `sched_setaffinity(2)` of a pthread fiber (pid 0 in one, or its id:
    /// see `sched::named_fiber`): its own, as `pthread_setaffinity_np`
    /// keeps it (before, it pinned the OS thread, which every other thread
    /// then shared: one that pinned itself to a CPU pinned them all).
    [thread] fn sched_setaffinity(pid: libc::pid_t, n: size_t, set: *const cpu_set_t) -> c_int {
        let Some(rec) = sched::named_fiber(pid) else {
            // SAFETY: not a fiber's own: forwarded unchanged.
            return unsafe { sched_setaffinity::real(pid, n, set) };
        };
        if set.is_null() {
            return crate::errno::fail(libc::EFAULT);
        }
        // SAFETY: the caller's set of `n` bytes.
        match set_affinity(&rec, unsafe { std::slice::from_raw_parts(set.cast::<u8>(), n) }) {
            Ok(()) => 0,
            Err(e) => crate::errno::fail(e),
        }
    }

    /// `sched_getaffinity(2)` of a pthread fiber (as `sched_setaffinity`
    /// names one): its own set, if it has one (else the OS thread's, which
    /// it inherited).
    [thread] fn sched_getaffinity(pid: libc::pid_t, n: size_t, set: *mut cpu_set_t) -> c_int {
        // SAFETY: the caller's arguments, to the kernel's checks (size,
        // buffer) and the OS thread's set.
        let r = unsafe { sched_getaffinity::real(tid::for_kernel(pid), n, set) };
        if r != 0 {
            return r;
        }
        if let Some(g) = sched::named_fiber(pid).and_then(|rec| rec.affinity.borrow().clone()) {
            // SAFETY: the caller's buffer holds `n` bytes (the kernel
            // wrote it).
            unsafe { copy_affinity(&g, set, n) };
        }
        0
    }
}

/// The OS thread's own CPU set (the process's, as the fibers leave it),
/// as bytes.
fn os_thread_affinity() -> Vec<u8> {
    // SAFETY: a zeroed cpu_set_t is valid; our own OS thread's handle.
    let mut allowed: cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { pthread_getaffinity_np::real(os_thread_self(), std::mem::size_of::<cpu_set_t>(), &mut allowed) };
    // SAFETY: cpu_set_t is plain bytes.
    unsafe {
        std::slice::from_raw_parts(
            (&allowed as *const cpu_set_t).cast::<u8>(),
            std::mem::size_of::<cpu_set_t>(),
        )
    }
    .to_vec()
}

/// A fiber's CPU set `want` as the kernel takes one: `EINVAL` when it has
/// no CPU the OS thread may use.
fn check_affinity(want: &[u8]) -> Result<Vec<u8>, c_int> {
    if !want.iter().zip(os_thread_affinity()).any(|(w, a)| w & a != 0) {
        return Err(libc::EINVAL);
    }
    Ok(want.to_vec())
}

/// Gives `rec` the CPU set `want`, checked as the kernel checks one.
fn set_affinity(rec: &Record, want: &[u8]) -> Result<(), c_int> {
    *rec.affinity.borrow_mut() = Some(check_affinity(want)?);
    Ok(())
}

/// Writes the fiber's CPU set `g` into the caller's buffer of `n` bytes,
/// zero past its end.
///
/// # Safety
/// `set` is writable for `n` bytes.
unsafe fn copy_affinity(g: &[u8], set: *mut cpu_set_t, n: size_t) {
    // SAFETY: per the contract.
    let out = unsafe { std::slice::from_raw_parts_mut(set.cast::<u8>(), n) };
    out.fill(0);
    let k = g.len().min(n);
    out[..k].copy_from_slice(&g[..k]);
}

/// A new fiber's CPU set, as a new thread's: the attribute's
/// (`pthread_attr_setaffinity_np`; `EINVAL` for one with no usable CPU,
/// as glibc's `pthread_create` answers), else its `creator`'s.
fn affinity_at_create(attr: *const pthread_attr_t, creator: Option<&Record>) -> Result<Option<Vec<u8>>, c_int> {
    if !attr.is_null() {
        // SAFETY: a zeroed cpu_set_t is a valid out buffer.
        let mut set: cpu_set_t = unsafe { std::mem::zeroed() };
        let n = std::mem::size_of::<cpu_set_t>();
        // SAFETY: the caller's initialised attribute object, our buffer.
        if unsafe { libc::pthread_attr_getaffinity_np(attr, n, &mut set) } == 0 {
            // SAFETY: cpu_set_t is plain bytes.
            let want = unsafe { std::slice::from_raw_parts((&set as *const cpu_set_t).cast::<u8>(), n) };
            // glibc reports every CPU for an attribute without a set.
            if want.iter().any(|&b| b != 0xff) {
                return check_affinity(want).map(Some);
            }
        }
    }
    Ok(creator.and_then(|r| r.affinity.borrow().clone()))
}

/// Whether `t`, one of glibc's handles, is the fibers' OS thread's own
/// (the root context's), signalled from that thread once masks are per
/// thread: its signals are held for the root as a fiber's are for the
/// fiber. (Before any fiber, the kernel's own thread-directed signal is
/// exactly right, and `signalfd` sees it.)
fn own_root(t: pthread_t) -> bool {
    crate::signal::virtual_masks() && t == os_thread_self()
}

/// glibc's internal signals (cancellation, set*id), which `pthread_kill`
/// and `pthread_sigqueue` refuse.
fn internal_signal(sig: c_int) -> bool {
    sig == 32 || sig == 33
}
