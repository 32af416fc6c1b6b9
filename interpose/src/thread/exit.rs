//! How a pthread fiber ends, by returning from its start routine, by
//! `pthread_exit` or by cancellation: the value is stored, the cleanup
//! handlers pushed with `pthread_cleanup_push` run (innermost first), then
//! the key destructors, then the robust mutexes it still holds become
//! "owner died"; the fiber ends without unwinding its stack.
//!
//! We keep each fiber's cleanup chain by hooking
//! `__pthread_register_cancel`/`__pthread_unregister_cancel` (what the
//! `pthread_cleanup_push`/`pop` macros call) and reach each handler with
//! `longjmp` into the buffer the macro set up, the way glibc's own unwinder
//! does for C code; the handler ends in `__pthread_unwind_next`, which comes
//! back here for the next one.
//!
//! `pthread_exit` in the root runs the root's key destructors, waits until
//! no fiber is left, and calls `exit(0)`.

use std::rc::Rc;

use libc::{c_int, c_void, pthread_t};

use super::{current_record, keys, lookup, unregister, Record};
use crate::gate::emulating;
use crate::hook::hook;

extern "C" {
    fn longjmp(env: *mut c_void, val: c_int) -> !;
}

/// Stores the result, runs key destructors, releases robust mutexes, and
/// forgets a detached thread: the end of every pthread fiber.
pub(super) fn finish(key: usize, r: *mut c_void) {
    if let Some(rec) = lookup(key as pthread_t) {
        rec.retval.set(r);
        rec.exiting.set(true);
        rec.cancel.take();
    }
    keys::run_fiber_destructors();
    crate::sync::owner_died();
    let detached = lookup(key as pthread_t).is_some_and(|r| r.detached.get());
    if detached {
        unregister(key);
    }
}

/// Ends the calling pthread fiber with `v` (runs cleanup handlers first).
pub(super) fn exit_fiber(rec: Rc<Record>, v: *mut c_void) -> ! {
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
        // calls __pthread_unwind_next, which comes back here. The frames we
        // skip hold no Rust value whose destructor matters: the hooks' entry
        // guards, whose drop only looks for a panic, are skipped as if
        // forgotten.
        unsafe { longjmp(b as *mut c_void, 1) };
    }
    let r = lookup(key as pthread_t).map_or(std::ptr::null_mut(), |r| r.retval.get());
    finish(key, r);
    hub::exit_current()
}

/// `pthread_exit` in the root: run the root's key destructors (the main
/// thread is gone from here on), wait for every fiber, then `exit(0)`.
fn exit_root() -> ! {
    keys::run_root_destructors();
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

hook! {
    /// `pthread_exit`: never returns (declared without `-> !`, which the
    /// hook shape does not take; the C caller cannot tell).
    #[gate(emulating())]
    [thread] fn pthread_exit(v: *mut c_void) {
        if let Some(rec) = current_record() {
            exit_fiber(rec, v);
        }
        if hub::in_fiber() {
            hub::exit_current();
        }
        exit_root()
    }

    /// `__pthread_register_cancel` (from the `pthread_cleanup_push` macro).
    [thread] fn __pthread_register_cancel(buf: *mut c_void) {
        match current_record() {
            Some(rec) if emulating() => rec.cleanup.borrow_mut().push(buf as usize),
            // SAFETY: not one of our fibers: forwarded unchanged.
            _ => unsafe { __pthread_register_cancel::real(buf) },
        }
    }

    /// `__pthread_unregister_cancel` (from `pthread_cleanup_pop`).
    [thread] fn __pthread_unregister_cancel(buf: *mut c_void) {
        match current_record() {
            Some(rec) if emulating() => {
                let mut c = rec.cleanup.borrow_mut();
                if let Some(i) = c.iter().rposition(|&b| b == buf as usize) {
                    c.truncate(i);
                }
            }
            // SAFETY: not one of our fibers: forwarded unchanged.
            _ => unsafe { __pthread_unregister_cancel::real(buf) },
        }
    }

    /// `__pthread_unwind_next`: a cleanup handler ran during our exit; go
    /// on. Never returns, like `pthread_exit`.
    #[gate(emulating() && current_record().is_some_and(|r| r.exiting.get()))]
    [thread] fn __pthread_unwind_next(buf: *mut c_void) {
        continue_exit()
    }
}
