//! pthreads as fibers: `pthread_create` spawns a fiber on the caller's hub.
//!
//! When [`crate::threads_as_fibers`] is true (the preload default) a
//! `pthread_t` made by us is the address of a heap [`Record`] kept in a
//! per-OS-thread registry; any `pthread_t` not in the registry (the root's
//! own, or a real thread's) goes to the real function. Otherwise every hook
//! here passes through.
//!
//! This file holds the record and the registry, and a thread's life from
//! the outside: create, join, detach, `pthread_self`, attributes, and
//! `pthread_kill` (handed to [`crate::signal`]). The rest, one idea a file:
//! - [`exit`]: how a pthread fiber ends: `pthread_exit`, cleanup handlers,
//!   key destructors, robust mutexes it still holds; `pthread_exit` in the
//!   root;
//! - [`cancel`]: deferred cancellation, which every hook reaches through
//!   [`crate::cancel_point`];
//! - [`keys`]: thread-specific data;
//! - [`names`]: thread names, also for the stall monitor and deadlock reports;
//! - [`once`]: the `pthread_once` of fibers.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use libc::{c_int, c_void, clockid_t, pthread_attr_t, pthread_t, timespec};

use crate::gate::emulating;
use crate::hook::hook;

pub mod cancel;
pub mod exit;
pub mod keys;
pub mod names;
pub mod once;

pub(crate) use names::{name_for_monitor, name_of};

/// A C thread start routine.
type Start = extern "C" fn(*mut c_void) -> *mut c_void;

extern "C" {
    fn pthread_attr_getdetachstate(a: *const pthread_attr_t, ds: *mut c_int) -> c_int;
    /// The top of a caller-provided stack, or null when none was set.
    fn pthread_attr_getstackaddr(a: *const pthread_attr_t, addr: *mut *mut c_void) -> c_int;
}

/// Our side of a `pthread_t` made by `pthread_create`.
pub(crate) struct Record {
    task: RefCell<Option<Rc<hub::Task>>>,
    retval: Cell<*mut c_void>,
    detached: Cell<bool>,
    joining: Cell<bool>,
    name: RefCell<[u8; 16]>,
    cancel: cancel::State,
    exiting: Cell<bool>,
    /// `pthread_cleanup_push` buffers, innermost last.
    cleanup: RefCell<Vec<usize>>,
    stack_top: Cell<usize>,
    stack_size: Cell<usize>,
}

thread_local! {
    static REGISTRY: RefCell<HashMap<usize, Rc<Record>>> = RefCell::new(HashMap::new());
}

fn lookup(t: pthread_t) -> Option<Rc<Record>> {
    REGISTRY.with(|r| r.borrow().get(&(t as usize)).cloned())
}

fn unregister(t: usize) {
    let rec = REGISTRY.with(|r| r.borrow_mut().remove(&t));
    drop(rec);
}

/// The record of the calling fiber, if it is one of our pthreads.
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
    exit::finish(key, r);
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
            crate::cancel_point();
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

fn timed_join(rec: Rc<Record>, t: pthread_t, r: *mut *mut c_void, clock: clockid_t, ts: *const timespec) -> c_int {
    if task_of(&rec).is_finished() {
        return join_rec(rec, t, r, JoinMode::Try);
    }
    match crate::deadline::absolute(clock, ts) {
        Ok(d) => join_rec(rec, t, r, JoinMode::Until(d)),
        Err(e) => e,
    }
}

hook! {
    /// `pthread_create`: a fiber on the caller's hub.
    #[gate(emulating())]
    [thread] fn pthread_create(t: *mut pthread_t, attr: *const pthread_attr_t, f: Start, arg: *mut c_void) -> c_int {
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
        let rec = Rc::new(Record {
            task: RefCell::new(None),
            retval: Cell::new(std::ptr::null_mut()),
            detached: Cell::new(detached),
            joining: Cell::new(false),
            name: RefCell::new(names::inherited()),
            cancel: cancel::State::default(),
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
    }

    /// `pthread_join`.
    [thread] fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => join_rec(rec, t, r, JoinMode::Block),
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_join::real(t, r) },
        }
    }

    /// `pthread_tryjoin_np`.
    [thread] fn pthread_tryjoin_np(t: pthread_t, r: *mut *mut c_void) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => join_rec(rec, t, r, JoinMode::Try),
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_tryjoin_np::real(t, r) },
        }
    }

    /// `pthread_timedjoin_np` (CLOCK_REALTIME).
    [thread] fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => timed_join(rec, t, r, libc::CLOCK_REALTIME, ts),
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_timedjoin_np::real(t, r, ts) },
        }
    }

    /// `pthread_clockjoin_np`.
    [thread] fn pthread_clockjoin_np(t: pthread_t, r: *mut *mut c_void, c: clockid_t, ts: *const timespec) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => timed_join(rec, t, r, c, ts),
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_clockjoin_np::real(t, r, c, ts) },
        }
    }

    /// `pthread_detach`.
    [thread] fn pthread_detach(t: pthread_t) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => {
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
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_detach::real(t) },
        }
    }

    /// `pthread_self`: our record inside a pthread fiber, the real one elsewhere.
    #[gate(crate::gate::in_fiber_thread())]
    [thread] fn pthread_self() -> pthread_t {
        match hub::current().user() {
            // A fiber not made by pthread_create (the Rust API's).
            // SAFETY: no arguments.
            0 => unsafe { pthread_self::real() },
            u => u as pthread_t,
        }
    }

    /// `pthread_equal`.
    [thread] fn pthread_equal(a: pthread_t, b: pthread_t) -> c_int {
        (a == b) as c_int
    }

    /// `pthread_getattr_np`: the fiber's stack, guard and detach state.
    [thread] fn pthread_getattr_np(t: pthread_t, a: *mut pthread_attr_t) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => {
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
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_getattr_np::real(t, a) },
        }
    }

    /// `pthread_kill`: signal 0 checks existence; others go to the OS thread.
    [signal] fn pthread_kill(t: pthread_t, sig: c_int) -> c_int {
        match lookup(t) {
            Some(rec) if emulating() => {
                if sig == 0 {
                    0
                } else {
                    crate::signal::kill_fiber(&task_of(&rec), sig)
                }
            }
            // SAFETY: not ours: forwarded unchanged.
            _ => unsafe { pthread_kill::real(t, sig) },
        }
    }
}
