//! pthreads as fibers: `pthread_create` spawns a fiber on the caller's hub.
//!
//! When [`crate::threads_as_fibers`] is true (the preload default) a
//! `pthread_t` made by us is the address of a heap [`Record`] kept in a
//! per-OS-thread registry; any `pthread_t` not in the registry (the root's
//! own, or a real thread's) goes to the real function. Otherwise every hook
//! here passes through.
//!
//! - `pthread_exit` in a fiber stores the value, runs the cleanup handlers
//!   pushed with `pthread_cleanup_push` (we keep each fiber's chain by
//!   hooking `__pthread_register_cancel`/`__pthread_unregister_cancel`/
//!   `__pthread_unwind_next`, and reach each handler with `longjmp`, the way
//!   glibc's own unwinder does for C code), then key destructors, then ends
//!   the fiber without unwinding. In the root it waits until no fiber is
//!   left (after running the root's key destructors) and calls `exit(0)`.
//! - Cancellation is deferred: `pthread_cancel` sets a pending flag and
//!   interrupts the fiber's wait; [`testcancel`], called by the hooks at
//!   cancellation points, ends the fiber with `PTHREAD_CANCELED`. The
//!   asynchronous type is accepted and treated as deferred.
//! - Keys are the real glibc keys (so they work in the root and in
//!   pass-through mode); inside a fiber their values live in the fiber's
//!   slots (`Fiber::local`), and the destructors recorded at
//!   `pthread_key_create` run at fiber exit.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::Instant;

use libc::{
    c_char, c_int, c_void, clockid_t, pthread_attr_t, pthread_key_t, pthread_once_t, pthread_t, size_t, timespec,
};

/// A C thread start routine.
type Start = extern "C" fn(*mut c_void) -> *mut c_void;
/// A key destructor.
type Dtor = unsafe extern "C" fn(*mut c_void);

mod next {
    use crate::real::real;
    use libc::{
        c_char, c_int, c_void, clockid_t, pthread_attr_t, pthread_key_t, pthread_once_t, pthread_t, size_t, timespec,
    };
    real! {
        fn pthread_create(t: *mut pthread_t, a: *const pthread_attr_t, f: super::Start, arg: *mut c_void) -> c_int;
        fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int;
        fn pthread_tryjoin_np(t: pthread_t, r: *mut *mut c_void) -> c_int;
        fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int;
        fn pthread_clockjoin_np(t: pthread_t, r: *mut *mut c_void, c: clockid_t, ts: *const timespec) -> c_int;
        fn pthread_detach(t: pthread_t) -> c_int;
        fn pthread_exit(v: *mut c_void) -> ();
        fn pthread_self() -> pthread_t;
        fn pthread_equal(a: pthread_t, b: pthread_t) -> c_int;
        fn pthread_setname_np(t: pthread_t, name: *const c_char) -> c_int;
        fn pthread_getname_np(t: pthread_t, buf: *mut c_char, len: size_t) -> c_int;
        fn pthread_getattr_np(t: pthread_t, a: *mut pthread_attr_t) -> c_int;
        fn pthread_cancel(t: pthread_t) -> c_int;
        fn pthread_kill(t: pthread_t, sig: c_int) -> c_int;
        fn pthread_testcancel() -> ();
        fn pthread_setcancelstate(s: c_int, old: *mut c_int) -> c_int;
        fn pthread_setcanceltype(s: c_int, old: *mut c_int) -> c_int;
        fn pthread_key_create(k: *mut pthread_key_t, d: Option<super::Dtor>) -> c_int;
        fn pthread_key_delete(k: pthread_key_t) -> c_int;
        fn pthread_getspecific(k: pthread_key_t) -> *mut c_void;
        fn pthread_setspecific(k: pthread_key_t, v: *const c_void) -> c_int;
        fn pthread_once(o: *mut pthread_once_t, f: extern "C" fn()) -> c_int;
        fn __pthread_register_cancel(buf: *mut c_void) -> ();
        fn __pthread_unregister_cancel(buf: *mut c_void) -> ();
        fn __pthread_unwind_next(buf: *mut c_void) -> ();
    }
}

extern "C" {
    fn pthread_attr_getdetachstate(a: *const pthread_attr_t, ds: *mut c_int) -> c_int;
    /// The top of a caller-provided stack, or null when none was set.
    fn pthread_attr_getstackaddr(a: *const pthread_attr_t, addr: *mut *mut c_void) -> c_int;
    fn longjmp(env: *mut c_void, val: c_int) -> !;
}

const PTHREAD_CANCEL_ENABLE: c_int = 0;
const PTHREAD_CANCEL_DISABLE: c_int = 1;
const PTHREAD_CANCEL_DEFERRED: c_int = 0;
const PTHREAD_CANCEL_ASYNCHRONOUS: c_int = 1;
const PTHREAD_CANCELED: *mut c_void = usize::MAX as *mut c_void;
const KEYS_MAX: usize = 1024;
const DESTRUCTOR_ITERATIONS: usize = 4;

/// Our side of a `pthread_t` made by `pthread_create`.
pub(crate) struct Record {
    task: RefCell<Option<Rc<hub::Task>>>,
    retval: Cell<*mut c_void>,
    detached: Cell<bool>,
    joining: Cell<bool>,
    name: RefCell<[u8; 16]>,
    cancel_pending: Cell<bool>,
    cancel_disabled: Cell<bool>,
    cancel_async: Cell<bool>,
    exiting: Cell<bool>,
    /// `pthread_cleanup_push` buffers, innermost last.
    cleanup: RefCell<Vec<usize>>,
    stack_top: Cell<usize>,
    stack_size: Cell<usize>,
}

thread_local! {
    static REGISTRY: RefCell<HashMap<usize, Rc<Record>>> = RefCell::new(HashMap::new());
}

/// Destructors by key (0: none).
static DTORS: [AtomicUsize; KEYS_MAX] = [const { AtomicUsize::new(0) }; KEYS_MAX];
/// Cancellations requested and not yet acted on (fast path for testcancel).
static CANCELS: AtomicUsize = AtomicUsize::new(0);

fn lookup(t: pthread_t) -> Option<Rc<Record>> {
    REGISTRY.with(|r| r.borrow().get(&(t as usize)).cloned())
}

fn unregister(t: usize) {
    let rec = REGISTRY.with(|r| r.borrow_mut().remove(&t));
    drop(rec);
}

/// The record of the calling fiber, if it is one of our pthreads.
/// The running fiber's pthread name for the stall monitor: called in a
/// signal handler on the hub thread, so it only reads (`try_with`,
/// `try_borrow`), never allocates.
pub(crate) fn name_for_monitor(buf: &mut [u8; 64]) -> usize {
    let Some(key) = fiber_task_user() else { return 0 };
    REGISTRY
        .try_with(|r| {
            let Ok(r) = r.try_borrow() else { return 0 };
            let Some(rec) = r.get(&key) else { return 0 };
            let Ok(name) = rec.name.try_borrow() else { return 0 };
            let n = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            buf[..n].copy_from_slice(&name[..n]);
            n
        })
        .unwrap_or(0)
}

/// The pthread name of the fiber whose record is `key` (deadlock reports).
pub(crate) fn name_of(key: usize) -> Option<String> {
    let rec = lookup(key as pthread_t)?;
    let name = rec.name.borrow();
    let n = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..n]).into_owned())
}

/// The running task's user word, without touching reference counts.
fn fiber_task_user() -> Option<usize> {
    if !hub::in_fiber() {
        return None;
    }
    hub::current_user().filter(|&u| u != 0)
}

fn current_record() -> Option<Rc<Record>> {
    if !hub::in_fiber() {
        return None;
    }
    let u = hub::current().user();
    if u == 0 {
        return None;
    }
    lookup(u as pthread_t)
}

fn task_of(rec: &Record) -> Rc<hub::Task> {
    rec.task
        .borrow()
        .clone()
        .expect("greenhook: pthread record without a task")
}

/// The default stack size glibc reports for a fresh attribute object.
fn default_attr_stack() -> usize {
    static DEFAULT: AtomicUsize = AtomicUsize::new(0);
    let d = DEFAULT.load(Ordering::Relaxed);
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
    DEFAULT.store(d, Ordering::Relaxed);
    d
}

/// `pthread_create`: a fiber on the caller's hub.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_create")]
pub unsafe extern "C" fn pthread_create(
    t: *mut pthread_t,
    attr: *const pthread_attr_t,
    f: Start,
    arg: *mut c_void,
) -> c_int {
    crate::real::guard("pthread_create", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_create(t, attr, f, arg) };
        }
        let mut opts = hub::Spawn::default();
        let mut detached = false;
        let mut size = 0;
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
            }
        }
        // No size asked for: GREENHOOK_STACK_SIZE if set, else what glibc would
        // give the thread (RLIMIT_STACK, usually 8 MiB). It is address space
        // only: an idle fiber still touches one page.
        opts.stack_size = Some(if size != 0 {
            size
        } else {
            fiber::stack::env_stack_size().unwrap_or_else(default_attr_stack)
        });
        // A new thread starts with its creator's name (Linux copies `comm`):
        // a fiber's own, else the OS thread's.
        let name = match current_record() {
            Some(me) => *me.name.borrow(),
            None => {
                let mut name = [0u8; 16];
                // SAFETY: a 16-byte buffer for the creator's real thread name.
                unsafe { next::pthread_getname_np(next::pthread_self(), name.as_mut_ptr().cast(), 16) };
                name
            }
        };
        let rec = Rc::new(Record {
            task: RefCell::new(None),
            retval: Cell::new(std::ptr::null_mut()),
            detached: Cell::new(detached),
            joining: Cell::new(false),
            name: RefCell::new(name),
            cancel_pending: Cell::new(false),
            cancel_disabled: Cell::new(false),
            cancel_async: Cell::new(false),
            exiting: Cell::new(false),
            cleanup: RefCell::new(Vec::new()),
            stack_top: Cell::new(0),
            stack_size: Cell::new(0),
        });
        let key = Rc::as_ptr(&rec) as usize;
        let arg = arg as usize;
        let user_stack = opts.user_stack;
        match hub::spawn(opts, move || fiber_main(key, f, arg, user_stack)) {
            Ok(task) => {
                task.set_user(key);
                if detached {
                    task.set_detached();
                }
                *rec.task.borrow_mut() = Some(task);
                REGISTRY.with(|r| r.borrow_mut().insert(key, rec));
                // SAFETY: the caller's out pointer.
                unsafe { *t = key as pthread_t };
                0
            }
            Err(_) => libc::EAGAIN,
        }
    })
}

fn fiber_main(key: usize, f: Start, arg: usize, user_stack: Option<(usize, usize)>) {
    if let Some(rec) = lookup(key as pthread_t) {
        // Report exactly what the caller gave, else the fiber's usable range.
        let (lo, hi) = match user_stack {
            Some((lo, len)) => (lo, lo + len),
            None => hub::with_current_fiber(|f| f.map_or((0, 0), |f| f.stack_bounds())),
        };
        rec.stack_top.set(hi);
        rec.stack_size.set(hi - lo);
    }
    let r = f(arg as *mut c_void);
    finish(key, r);
}

/// Stores the result, runs key destructors, and forgets a detached thread.
fn finish(key: usize, r: *mut c_void) {
    if let Some(rec) = lookup(key as pthread_t) {
        rec.retval.set(r);
        rec.exiting.set(true);
        if rec.cancel_pending.get() {
            rec.cancel_pending.set(false);
            CANCELS.fetch_sub(1, Ordering::Relaxed);
        }
    }
    run_fiber_destructors();
    crate::sync::owner_died();
    let detached = lookup(key as pthread_t).is_some_and(|r| r.detached.get());
    if detached {
        unregister(key);
    }
}

fn run_fiber_destructors() {
    for _ in 0..DESTRUCTOR_ITERATIONS {
        let vals = hub::with_current_fiber(|f| f.map(|f| f.take_locals()).unwrap_or_default());
        let mut ran = false;
        for (k, v) in vals.into_iter().enumerate() {
            let d = DTORS.get(k).map_or(0, |d| d.load(Ordering::Relaxed));
            if v != 0 && d != 0 {
                ran = true;
                // SAFETY: `d` was registered as this key's destructor.
                let d: Dtor = unsafe { std::mem::transmute::<usize, Dtor>(d) };
                // SAFETY: called with the value the thread stored, as POSIX says.
                unsafe { d(v as *mut c_void) };
            }
        }
        if !ran {
            break;
        }
    }
}

/// Ends the calling pthread fiber with `v` (runs cleanup handlers first).
fn exit_fiber(rec: Rc<Record>, v: *mut c_void) -> ! {
    rec.retval.set(v);
    rec.exiting.set(true);
    drop(rec);
    continue_exit()
}

/// Runs the next cleanup handler, or finishes the exit.
fn continue_exit() -> ! {
    let (key, buf) = {
        let rec = current_record().expect("greenhook: exiting fiber without a record");
        let buf = rec.cleanup.borrow_mut().pop();
        (Rc::as_ptr(&rec) as usize, buf)
    };
    if let Some(b) = buf {
        // SAFETY: `b` is a live __pthread_unwind_buf_t of a frame further up
        // this fiber's stack, set with __sigsetjmp; the handler it leads to
        // calls __pthread_unwind_next, which comes back here. No Rust value
        // with a destructor is alive in the frames we skip.
        unsafe { longjmp(b as *mut c_void, 1) };
    }
    let r = lookup(key as pthread_t).map_or(std::ptr::null_mut(), |r| r.retval.get());
    finish(key, r);
    hub::exit_current()
}

/// Acts on a pending cancellation: ends the calling fiber with
/// `PTHREAD_CANCELED` when cancellation is pending and enabled. Hooks call
/// it at cancellation points (before blocking and after an interrupted wait).
/// Whether any deferred cancellation is pending in the process (one atomic
/// load: the cheap test before [`testcancel`]).
#[inline]
pub(crate) fn cancels_pending() -> bool {
    CANCELS.load(Ordering::Relaxed) != 0
}

pub(crate) fn testcancel() {
    if CANCELS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Some(rec) = current_record() else { return };
    if rec.cancel_pending.get() && !rec.cancel_disabled.get() && !rec.exiting.get() {
        rec.cancel_pending.set(false);
        CANCELS.fetch_sub(1, Ordering::Relaxed);
        exit_fiber(rec, PTHREAD_CANCELED);
    }
}

/// `pthread_exit`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_exit")]
pub unsafe extern "C" fn pthread_exit(v: *mut c_void) -> ! {
    crate::real::guard("pthread_exit", || {
        if crate::gate::emulating() {
            if let Some(rec) = current_record() {
                exit_fiber(rec, v);
            }
            if hub::in_fiber() {
                hub::exit_current();
            }
            exit_root();
        }
        // SAFETY: pass-through.
        unsafe { next::pthread_exit(v) };
    });
    std::process::abort()
}

/// `pthread_exit` in the root: run the root's key destructors (the main
/// thread is gone from here on), wait for every fiber, then `exit(0)`.
fn exit_root() -> ! {
    for _ in 0..DESTRUCTOR_ITERATIONS {
        let mut ran = false;
        for (k, d) in DTORS.iter().enumerate() {
            let d = d.load(Ordering::Relaxed);
            if d == 0 {
                continue;
            }
            // SAFETY: a key that has a destructor was created by pthread_key_create.
            let v = unsafe { next::pthread_getspecific(k as pthread_key_t) };
            if !v.is_null() {
                ran = true;
                // SAFETY: clearing our own value before calling the destructor.
                unsafe { next::pthread_setspecific(k as pthread_key_t, std::ptr::null()) };
                // SAFETY: `d` was registered as this key's destructor.
                let d: Dtor = unsafe { std::mem::transmute::<usize, Dtor>(d) };
                // SAFETY: called with the stored value, as POSIX says.
                unsafe { d(v) };
            }
        }
        if !ran {
            break;
        }
    }
    while hub::live_fibers() > 0 {
        let mut tasks = Vec::new();
        hub::for_each_task(|t| tasks.push(t.clone()));
        for t in &tasks {
            hub::join(t);
        }
    }
    // SAFETY: exit runs atexit handlers and flushes stdio, as POSIX asks.
    unsafe { libc::exit(0) }
}

enum JoinMode {
    Block,
    Try,
    Until(Option<Instant>),
}

/// The joins, in glibc's order of answers: `pthread_tryjoin_np` on a thread
/// still running is `EBUSY` before anything else; then a detached thread is
/// `EINVAL`, joining oneself `EDEADLK` (even while another thread joins
/// us), and a second joiner `EINVAL`. (Two threads joining each other
/// wait forever, as with glibc 2.36, unless the hub finds that nothing at
/// all can run: then the deadlock report.)
fn join_rec(rec: Rc<Record>, t: pthread_t, r: *mut *mut c_void, mode: JoinMode) -> c_int {
    let task = task_of(&rec);
    if matches!(mode, JoinMode::Try) && !task.is_finished() {
        return libc::EBUSY;
    }
    if rec.detached.get() {
        return libc::EINVAL;
    }
    if current_record().is_some_and(|me| Rc::ptr_eq(&me, &rec)) {
        return libc::EDEADLK;
    }
    if rec.joining.get() {
        return libc::EINVAL;
    }
    match mode {
        JoinMode::Try => {}
        JoinMode::Block => {
            testcancel();
            rec.joining.set(true);
            hub::join(&task);
        }
        JoinMode::Until(d) => {
            rec.joining.set(true);
            let done = match d {
                Some(d) => hub::join_until(&task, d),
                None => {
                    hub::join(&task);
                    true
                }
            };
            if !done {
                rec.joining.set(false);
                return libc::ETIMEDOUT;
            }
        }
    }
    if !r.is_null() {
        // SAFETY: the caller's out pointer.
        unsafe { *r = rec.retval.get() };
    }
    unregister(t as usize);
    0
}

/// `pthread_join`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_join")]
pub unsafe extern "C" fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int {
    crate::real::guard("pthread_join", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => join_rec(rec, t, r, JoinMode::Block),
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_join(t, r) },
    })
}

/// `pthread_tryjoin_np`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_tryjoin_np")]
pub unsafe extern "C" fn pthread_tryjoin_np(t: pthread_t, r: *mut *mut c_void) -> c_int {
    crate::real::guard("pthread_tryjoin_np", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => join_rec(rec, t, r, JoinMode::Try),
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_tryjoin_np(t, r) },
    })
}

fn timed_join(rec: Rc<Record>, t: pthread_t, r: *mut *mut c_void, clock: clockid_t, ts: *const timespec) -> c_int {
    if task_of(&rec).is_finished() {
        return join_rec(rec, t, r, JoinMode::Try);
    }
    match crate::deadline::absolute(clock, ts) {
        Ok(d) => join_rec(rec, t, r, JoinMode::Until(d)),
        Err(e) => e,
    }
}

/// `pthread_timedjoin_np` (CLOCK_REALTIME).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_timedjoin_np")]
pub unsafe extern "C" fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int {
    crate::real::guard("pthread_timedjoin_np", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => timed_join(rec, t, r, libc::CLOCK_REALTIME, ts),
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_timedjoin_np(t, r, ts) },
    })
}

/// `pthread_clockjoin_np`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_clockjoin_np")]
pub unsafe extern "C" fn pthread_clockjoin_np(
    t: pthread_t,
    r: *mut *mut c_void,
    c: clockid_t,
    ts: *const timespec,
) -> c_int {
    crate::real::guard("pthread_clockjoin_np", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => timed_join(rec, t, r, c, ts),
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_clockjoin_np(t, r, c, ts) },
    })
}

/// `pthread_detach`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_detach")]
pub unsafe extern "C" fn pthread_detach(t: pthread_t) -> c_int {
    crate::real::guard("pthread_detach", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => {
            if rec.detached.get() {
                return libc::EINVAL;
            }
            rec.detached.set(true);
            let task = task_of(&rec);
            task.set_detached();
            if task.is_finished() {
                unregister(t as usize);
            }
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_detach(t) },
    })
}

/// `pthread_self`: our record inside a pthread fiber, the real one elsewhere.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_self")]
pub unsafe extern "C" fn pthread_self() -> pthread_t {
    crate::real::guard("pthread_self", || {
        if crate::is_patched() && crate::threads_as_fibers() && hub::in_fiber() {
            let u = hub::current().user();
            if u != 0 {
                return u as pthread_t;
            }
        }
        // SAFETY: pass-through.
        unsafe { next::pthread_self() }
    })
}

/// `pthread_equal`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_equal")]
pub unsafe extern "C" fn pthread_equal(a: pthread_t, b: pthread_t) -> c_int {
    (a == b) as c_int
}

/// `pthread_setname_np`: ERANGE for names of 16 bytes or more, like glibc.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_setname_np")]
pub unsafe extern "C" fn pthread_setname_np(t: pthread_t, name: *const c_char) -> c_int {
    crate::real::guard("pthread_setname_np", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => {
            // SAFETY: the caller's NUL-terminated name.
            let n = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
            if n.len() >= 16 {
                return libc::ERANGE;
            }
            let mut buf = [0u8; 16];
            buf[..n.len()].copy_from_slice(n);
            *rec.name.borrow_mut() = buf;
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_setname_np(t, name) },
    })
}

/// `pthread_getname_np`: ERANGE when `len` < 16, like glibc.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_getname_np")]
pub unsafe extern "C" fn pthread_getname_np(t: pthread_t, buf: *mut c_char, len: size_t) -> c_int {
    crate::real::guard("pthread_getname_np", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => {
            if len < 16 {
                return libc::ERANGE;
            }
            let name = *rec.name.borrow();
            // SAFETY: the caller's buffer holds at least 16 bytes.
            unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), buf.cast(), 16) };
            // SAFETY: as above; the last byte terminates.
            unsafe { *buf.add(15) = 0 };
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_getname_np(t, buf, len) },
    })
}

/// `pthread_getattr_np`: the fiber's stack, guard and detach state.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_getattr_np")]
pub unsafe extern "C" fn pthread_getattr_np(t: pthread_t, a: *mut pthread_attr_t) -> c_int {
    crate::real::guard("pthread_getattr_np", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => {
            // SAFETY: the caller's attribute object, initialised here as glibc does.
            unsafe {
                libc::pthread_attr_init(a);
                let size = rec.stack_size.get();
                let top = rec.stack_top.get();
                if size != 0 && top != 0 {
                    libc::pthread_attr_setstack(a, (top - size) as *mut c_void, size);
                }
                libc::pthread_attr_setguardsize(a, libc::sysconf(libc::_SC_PAGESIZE) as usize);
                let ds = if rec.detached.get() {
                    libc::PTHREAD_CREATE_DETACHED
                } else {
                    libc::PTHREAD_CREATE_JOINABLE
                };
                libc::pthread_attr_setdetachstate(a, ds);
            }
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_getattr_np(t, a) },
    })
}

/// `pthread_kill`: signal 0 checks existence; others go to the OS thread.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_kill")]
pub unsafe extern "C" fn pthread_kill(t: pthread_t, sig: c_int) -> c_int {
    crate::real::guard("pthread_kill", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => {
            if sig == 0 {
                0
            } else {
                crate::signal::kill_fiber(&task_of(&rec), sig)
            }
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_kill(t, sig) },
    })
}

/// `pthread_cancel`: deferred; interrupts the fiber's current wait.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_cancel")]
pub unsafe extern "C" fn pthread_cancel(t: pthread_t) -> c_int {
    crate::real::guard("pthread_cancel", || match lookup(t) {
        Some(rec) if crate::gate::emulating() => {
            let task = task_of(&rec);
            if task.is_finished() || rec.exiting.get() {
                return 0;
            }
            if !rec.cancel_pending.replace(true) {
                CANCELS.fetch_add(1, Ordering::Relaxed);
            }
            if !rec.cancel_disabled.get() {
                let is_self = current_record().is_some_and(|c| Rc::ptr_eq(&c, &rec));
                if is_self {
                    if rec.cancel_async.get() {
                        drop(task);
                        testcancel();
                    }
                } else {
                    task.interrupt();
                }
            }
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_cancel(t) },
    })
}

/// `pthread_testcancel`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_testcancel")]
pub unsafe extern "C" fn pthread_testcancel() {
    crate::real::guard("pthread_testcancel", || {
        if crate::gate::emulating() && hub::in_fiber() {
            testcancel();
        } else {
            // SAFETY: pass-through.
            unsafe { next::pthread_testcancel() }
        }
    })
}

/// `pthread_setcancelstate`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_setcancelstate")]
pub unsafe extern "C" fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int {
    crate::real::guard("pthread_setcancelstate", || match current_record() {
        Some(rec) if crate::gate::emulating() => {
            if state != PTHREAD_CANCEL_ENABLE && state != PTHREAD_CANCEL_DISABLE {
                return libc::EINVAL;
            }
            if !old.is_null() {
                let was = if rec.cancel_disabled.get() {
                    PTHREAD_CANCEL_DISABLE
                } else {
                    PTHREAD_CANCEL_ENABLE
                };
                // SAFETY: the caller's out pointer.
                unsafe { *old = was };
            }
            rec.cancel_disabled.set(state == PTHREAD_CANCEL_DISABLE);
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_setcancelstate(state, old) },
    })
}

/// `pthread_setcanceltype` (asynchronous is treated as deferred).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_setcanceltype")]
pub unsafe extern "C" fn pthread_setcanceltype(ty: c_int, old: *mut c_int) -> c_int {
    crate::real::guard("pthread_setcanceltype", || match current_record() {
        Some(rec) if crate::gate::emulating() => {
            if ty != PTHREAD_CANCEL_DEFERRED && ty != PTHREAD_CANCEL_ASYNCHRONOUS {
                return libc::EINVAL;
            }
            if !old.is_null() {
                let was = if rec.cancel_async.get() {
                    PTHREAD_CANCEL_ASYNCHRONOUS
                } else {
                    PTHREAD_CANCEL_DEFERRED
                };
                // SAFETY: the caller's out pointer.
                unsafe { *old = was };
            }
            rec.cancel_async.set(ty == PTHREAD_CANCEL_ASYNCHRONOUS);
            0
        }
        // SAFETY: pass-through.
        _ => unsafe { next::pthread_setcanceltype(ty, old) },
    })
}

/// `__pthread_register_cancel` (from the `pthread_cleanup_push` macro).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___pthread_register_cancel")]
pub unsafe extern "C" fn __pthread_register_cancel(buf: *mut c_void) {
    crate::real::guard("__pthread_register_cancel", || match current_record() {
        Some(rec) if crate::gate::emulating() => rec.cleanup.borrow_mut().push(buf as usize),
        // SAFETY: pass-through.
        _ => unsafe { next::__pthread_register_cancel(buf) },
    })
}

/// `__pthread_unregister_cancel` (from `pthread_cleanup_pop`).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___pthread_unregister_cancel")]
pub unsafe extern "C" fn __pthread_unregister_cancel(buf: *mut c_void) {
    crate::real::guard("__pthread_unregister_cancel", || match current_record() {
        Some(rec) if crate::gate::emulating() => {
            let mut c = rec.cleanup.borrow_mut();
            if let Some(i) = c.iter().rposition(|&b| b == buf as usize) {
                c.truncate(i);
            }
        }
        // SAFETY: pass-through.
        _ => unsafe { next::__pthread_unregister_cancel(buf) },
    })
}

/// `__pthread_unwind_next`: a cleanup handler ran during our exit; go on.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___pthread_unwind_next")]
pub unsafe extern "C" fn __pthread_unwind_next(buf: *mut c_void) -> ! {
    crate::real::guard("__pthread_unwind_next", || {
        if crate::gate::emulating() && current_record().is_some_and(|r| r.exiting.get()) {
            continue_exit();
        }
        // SAFETY: pass-through.
        unsafe { next::__pthread_unwind_next(buf) };
    });
    std::process::abort()
}

// ---------- keys ----------

fn fiber_keys() -> bool {
    crate::is_patched() && crate::threads_as_fibers() && hub::in_fiber()
}

/// `pthread_key_create`: a real key; its destructor is remembered for fibers.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_key_create")]
pub unsafe extern "C" fn pthread_key_create(k: *mut pthread_key_t, d: Option<Dtor>) -> c_int {
    crate::real::guard("pthread_key_create", || {
        // SAFETY: pass-through.
        let r = unsafe { next::pthread_key_create(k, d) };
        if r == 0 {
            // SAFETY: the real call wrote the key.
            let key = unsafe { *k } as usize;
            if let Some(slot) = DTORS.get(key) {
                slot.store(d.map_or(0, |d| d as usize), Ordering::Relaxed);
            }
        }
        r
    })
}

/// `pthread_key_delete`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_key_delete")]
pub unsafe extern "C" fn pthread_key_delete(k: pthread_key_t) -> c_int {
    crate::real::guard("pthread_key_delete", || {
        // SAFETY: pass-through.
        let r = unsafe { next::pthread_key_delete(k) };
        if r == 0 {
            if let Some(slot) = DTORS.get(k as usize) {
                slot.store(0, Ordering::Relaxed);
            }
        }
        r
    })
}

/// `pthread_getspecific`: the fiber's slot inside a fiber.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_getspecific")]
pub unsafe extern "C" fn pthread_getspecific(k: pthread_key_t) -> *mut c_void {
    crate::real::guard("pthread_getspecific", || {
        if fiber_keys() {
            if (k as usize) >= KEYS_MAX {
                return std::ptr::null_mut();
            }
            return hub::with_current_fiber(|f| f.map_or(0, |f| f.local(k as usize))) as *mut c_void;
        }
        // SAFETY: pass-through.
        unsafe { next::pthread_getspecific(k) }
    })
}

/// `pthread_setspecific`: the fiber's slot inside a fiber.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_setspecific")]
pub unsafe extern "C" fn pthread_setspecific(k: pthread_key_t, v: *const c_void) -> c_int {
    crate::real::guard("pthread_setspecific", || {
        if fiber_keys() {
            if (k as usize) >= KEYS_MAX {
                return libc::EINVAL;
            }
            hub::with_current_fiber(|f| {
                if let Some(f) = f {
                    f.set_local(k as usize, v as usize)
                }
            });
            return 0;
        }
        // SAFETY: pass-through.
        unsafe { next::pthread_setspecific(k, v) }
    })
}

// ---------- once ----------

const ONCE_IN_PROGRESS: i32 = 1;
const ONCE_DONE: i32 = 2;

/// `pthread_once`: a fiber arriving while another runs the init routine
/// parks until it is done. Same states as glibc (0, 1 = running, 2 = done).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_once")]
pub unsafe extern "C" fn pthread_once(o: *mut pthread_once_t, f: extern "C" fn()) -> c_int {
    crate::real::guard("pthread_once", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_once(o, f) };
        }
        // SAFETY: pthread_once_t is a 4-aligned int.
        let w = unsafe { &*(o as *const AtomicI32) };
        loop {
            let s = w.load(Ordering::Acquire);
            if s & ONCE_DONE != 0 {
                return 0;
            }
            if s == 0 {
                if w.compare_exchange(0, ONCE_IN_PROGRESS, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    f();
                    w.store(ONCE_DONE, Ordering::Release);
                    hub::unpark(o as usize, usize::MAX);
                    return 0;
                }
                continue;
            }
            hub::park(o as usize, None, || {
                let s = w.load(Ordering::Relaxed);
                s != 0 && s & ONCE_DONE == 0
            });
        }
    })
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    pthread_create,
    pthread_exit,
    pthread_join,
    pthread_tryjoin_np,
    pthread_timedjoin_np,
    pthread_clockjoin_np,
    pthread_detach,
    pthread_self,
    pthread_equal,
    pthread_setname_np,
    pthread_getname_np,
    pthread_getattr_np,
    pthread_kill,
    pthread_cancel,
    pthread_testcancel,
    pthread_setcancelstate,
    pthread_setcanceltype,
    __pthread_register_cancel,
    __pthread_unregister_cancel,
    __pthread_unwind_next,
    pthread_key_create,
    pthread_key_delete,
    pthread_getspecific,
    pthread_setspecific,
    pthread_once,
}
