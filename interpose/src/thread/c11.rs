//! C11 threads (`<threads.h>`): `thrd_*`, `mtx_*`, `cnd_*`, `call_once`
//! and `tss_*`.
//!
//! glibc (2.34 on) makes each of them a call of its pthread functions by
//! their internal names, which no hook sees. Unhooked, between fibers: a
//! `mtx_lock` of a mutex another fiber held, or a `cnd_wait`, waited in the
//! kernel and the hub with it (two pthreads taking turns through a `mtx_t`
//! and a `cnd_t` hung); `thrd_create` made an OS thread; `thrd_sleep`
//! and `thrd_yield` held the hub; `thrd_current` answered the thread
//! descriptor, which is no `pthread_t` of ours. Here each is glibc's own
//! mapping (`nptl/thrd_*.c`, `mtx_*.c`, `cnd_*.c`, `call_once.c`,
//! `tss_*.c`) onto the hooked pthread functions, with glibc's translation
//! of their errors ([`result`]).

use libc::{c_int, c_void, pthread_cond_t, pthread_mutex_t, pthread_t, timespec};

use super::Start;
use crate::hook::hook;
use crate::sync::cond::{pthread_cond_broadcast, pthread_cond_signal, pthread_cond_timedwait, pthread_cond_wait};
use crate::sync::mutex::{
    pthread_mutex_destroy, pthread_mutex_lock, pthread_mutex_timedlock, pthread_mutex_trylock, pthread_mutex_unlock,
};

/// `<threads.h>`'s results.
const THRD_SUCCESS: c_int = 0;
const THRD_BUSY: c_int = 1;
const THRD_ERROR: c_int = 2;
const THRD_NOMEM: c_int = 3;
const THRD_TIMEDOUT: c_int = 4;
/// `mtx_recursive`, the bit of `mtx_init`'s type that matters.
const MTX_RECURSIVE: c_int = 1;

/// A C11 start routine.
type ThrdStart = extern "C" fn(*mut c_void) -> c_int;

/// glibc's `thrd_err_map`: a pthread error number as a C11 result.
fn result(e: c_int) -> c_int {
    match e {
        0 => THRD_SUCCESS,
        libc::ENOMEM => THRD_NOMEM,
        libc::ETIMEDOUT => THRD_TIMEDOUT,
        libc::EBUSY => THRD_BUSY,
        _ => THRD_ERROR,
    }
}

/// What a C11 thread starts with: its routine and argument.
struct C11Start {
    func: ThrdStart,
    arg: *mut c_void,
}

/// The pthread start routine of a C11 thread: its `int` result as the
/// thread's value, as glibc's `start_thread` stores it
/// (`(void *) (uintptr_t) result`).
extern "C" fn c11_start(start: *mut c_void) -> *mut c_void {
    // SAFETY: `thrd_create` boxed it for this thread alone. Freed before
    // the routine runs: a `thrd_exit` inside it leaves this frame with
    // nothing to drop.
    let C11Start { func, arg } = *unsafe { Box::from_raw(start.cast::<C11Start>()) };
    func(arg) as isize as *mut c_void
}

hook! {
    /// `thrd_create(3)`: a pthread (a fiber) with default attributes.
    [thread] fn thrd_create(t: *mut pthread_t, func: ThrdStart, arg: *mut c_void) -> c_int {
        let start = Box::into_raw(Box::new(C11Start { func, arg }));
        // SAFETY: the caller's out pointer; the box goes to the new thread.
        let e = unsafe { super::pthread_create(t, std::ptr::null(), c11_start as Start, start.cast()) };
        if e != 0 {
            // SAFETY: no thread took it.
            drop(unsafe { Box::from_raw(start) });
        }
        result(e)
    }

    /// `thrd_join(3)`: the thread's `int` result in `*res` (if not null).
    [thread] fn thrd_join(t: pthread_t, res: *mut c_int) -> c_int {
        let mut v: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        let e = unsafe { super::pthread_join(t, &mut v) };
        if !res.is_null() {
            // SAFETY: the caller's out pointer.
            unsafe { *res = v as usize as c_int };
        }
        result(e)
    }

    /// `thrd_detach(3)`.
    [thread] fn thrd_detach(t: pthread_t) -> c_int {
        // SAFETY: forwarded.
        result(unsafe { super::pthread_detach(t) })
    }

    /// `thrd_exit(3)`: `pthread_exit` with the `int` result.
    [thread] fn thrd_exit(res: c_int) {
        // SAFETY: ends the calling thread.
        unsafe { super::exit::pthread_exit(res as isize as *mut c_void) }
    }

    /// `thrd_current(3)`: `pthread_self` (glibc's answers its thread
    /// descriptor, which for a fiber is not the `pthread_t` it has).
    [thread] fn thrd_current() -> pthread_t {
        // SAFETY: no arguments.
        unsafe { super::pthread_self() }
    }

    /// `thrd_sleep(3)`: a `CLOCK_REALTIME` sleep on the hub; 0, -1 when a
    /// signal interrupted it (`*rem` then holds what was left), -2 for
    /// another error.
    #[cancel_point]
    [thread] fn thrd_sleep(req: *const timespec, rem: *mut timespec) -> c_int {
        // SAFETY: the caller's timespecs, as `clock_nanosleep` takes them.
        match unsafe { crate::time::clock_nanosleep(libc::CLOCK_REALTIME, 0, req, rem) } {
            0 => 0,
            libc::EINTR => -1,
            _ => -2,
        }
    }

    /// `thrd_yield(3)`: lets the other threads of the hub run (glibc's
    /// makes the system call directly).
    [thread] fn thrd_yield() {
        // SAFETY: no arguments.
        unsafe { crate::time::sched_yield() };
    }

    /// `mtx_init(3)`: recursive or not; `mtx_timed` changes nothing.
    [sync] fn mtx_init(m: *mut pthread_mutex_t, kind: c_int) -> c_int {
        // SAFETY: a zeroed attribute is initialised at once.
        let mut attr: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
        let kind = if kind & MTX_RECURSIVE != 0 {
            libc::PTHREAD_MUTEX_RECURSIVE
        } else {
            libc::PTHREAD_MUTEX_NORMAL
        };
        // SAFETY: a local attribute; the caller's mutex.
        unsafe {
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_settype(&mut attr, kind);
            result(crate::sync::pthread_mutex_init(m, &attr))
        }
    }

    /// `mtx_lock(3)`.
    [sync] fn mtx_lock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        result(unsafe { pthread_mutex_lock(m) })
    }

    /// `mtx_trylock(3)`.
    [sync] fn mtx_trylock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        result(unsafe { pthread_mutex_trylock(m) })
    }

    /// `mtx_timedlock(3)`.
    [sync] fn mtx_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's mutex and deadline.
        result(unsafe { pthread_mutex_timedlock(m, t) })
    }

    /// `mtx_unlock(3)`.
    [sync] fn mtx_unlock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's mutex.
        result(unsafe { pthread_mutex_unlock(m) })
    }

    /// `mtx_destroy(3)`.
    [sync] fn mtx_destroy(m: *mut pthread_mutex_t) {
        // SAFETY: the caller's mutex.
        unsafe { pthread_mutex_destroy(m) };
    }

    /// `cnd_init(3)`: default attributes (glibc's own initialiser).
    [sync] fn cnd_init(c: *mut pthread_cond_t) -> c_int {
        // SAFETY: the caller's condition variable.
        result(unsafe { libc::pthread_cond_init(c, std::ptr::null()) })
    }

    /// `cnd_wait(3)`.
    [sync] fn cnd_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: the caller's objects.
        result(unsafe { pthread_cond_wait(c, m) })
    }

    /// `cnd_timedwait(3)`: `thrd_timedout` at the deadline.
    [sync] fn cnd_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's objects and deadline.
        result(unsafe { pthread_cond_timedwait(c, m, t) })
    }

    /// `cnd_signal(3)`.
    [sync] fn cnd_signal(c: *mut pthread_cond_t) -> c_int {
        // SAFETY: the caller's condition variable.
        result(unsafe { pthread_cond_signal(c) })
    }

    /// `cnd_broadcast(3)`.
    [sync] fn cnd_broadcast(c: *mut pthread_cond_t) -> c_int {
        // SAFETY: the caller's condition variable.
        result(unsafe { pthread_cond_broadcast(c) })
    }

    /// `cnd_destroy(3)`: glibc's own.
    [sync] fn cnd_destroy(c: *mut pthread_cond_t) {
        // SAFETY: the caller's condition variable.
        unsafe { libc::pthread_cond_destroy(c) };
    }

    /// `call_once(3)`: `pthread_once` (a `once_flag` is a `pthread_once_t`).
    [thread] fn call_once(flag: *mut libc::pthread_once_t, f: extern "C-unwind" fn()) {
        // SAFETY: the caller's flag and routine.
        unsafe { super::once::pthread_once(flag, f) };
    }

    /// `tss_create(3)`: a thread-specific key, per thread (per fiber).
    [thread] fn tss_create(key: *mut libc::pthread_key_t, dtor: Option<crate::thread::keys::Dtor>) -> c_int {
        // SAFETY: the caller's key and destructor.
        result(unsafe { super::keys::pthread_key_create(key, dtor) })
    }

    /// `tss_get(3)`.
    [thread] fn tss_get(key: libc::pthread_key_t) -> *mut c_void {
        // SAFETY: a key value.
        unsafe { super::keys::pthread_getspecific(key) }
    }

    /// `tss_set(3)`.
    [thread] fn tss_set(key: libc::pthread_key_t, v: *mut c_void) -> c_int {
        // SAFETY: a key value and the caller's pointer.
        result(unsafe { super::keys::pthread_setspecific(key, v) })
    }

    /// `tss_delete(3)`.
    [thread] fn tss_delete(key: libc::pthread_key_t) {
        // SAFETY: a key value.
        unsafe { super::keys::pthread_key_delete(key) };
    }
}
