//! How a pthread fiber ends, by returning from its start routine, by
//! `pthread_exit` or by cancellation: the value is stored, the cleanup
//! handlers pushed with `pthread_cleanup_push` run (innermost first), then
//! its thread-local destructors (C++ `thread_local`, with TLS of its own),
//! then the key destructors, as glibc's thread exit orders them; then the
//! robust mutexes it still holds become "owner died"; the fiber ends
//! without unwinding its stack.
//!
//! We keep each fiber's cleanup chain by hooking
//! `__pthread_register_cancel`/`__pthread_unregister_cancel` (what the
//! `pthread_cleanup_push`/`pop` macros call) and reach each handler with
//! `longjmp` into the buffer the macro set up, the way glibc's own unwinder
//! does for C code; the handler ends in `__pthread_unwind_next`, which comes
//! back here for the next one.
//!
//! An init routine of `pthread_once` that the exit leaves is undone on the
//! way ([`once`]'s marker in the cleanup chain), as glibc's own cleanup
//! handler does: the next caller runs it again.
//!
//! `pthread_exit` in the root undoes the root's `pthread_once` in
//! progress, runs the root's key destructors, hands its value to a fiber
//! joining the root, waits until no fiber is left, and calls `exit(0)`.

use std::rc::Rc;

use libc::{c_int, c_void, pthread_t};

use super::handle::Gone;
use super::{current_record, keys, lookup, once, root_exited, unregister, Record};
use crate::gate::emulating;
use crate::hook::hook;

// The interpose-table build declares every hooked name bare (`fn()`), the
// jump hooks' `longjmp` among them: one symbol, two views.
#[allow(clashing_extern_declarations)]
extern "C" {
    fn longjmp(env: *mut c_void, val: c_int) -> !;
}

/// Stores the result, runs key destructors, releases robust mutexes, and
/// forgets a detached thread: the end of every pthread fiber `h`. Its last
/// act marks the record ended (nothing runs between that and the fiber's
/// end, so a joiner that sees it finds the fiber finished).
pub(super) fn finish(h: usize, r: *mut c_void) {
    if let Some(rec) = lookup(h as pthread_t) {
        rec.retval.set(r);
        rec.exiting.set(true);
        rec.cancel.take();
    }
    hub::run_tls_destructors();
    keys::run_fiber_destructors();
    crate::sync::owner_died();
    crate::signal::thread_ended(&hub::current());
    if let Some(rec) = lookup(h as pthread_t) {
        rec.ended.set(true);
        if rec.detached.get() {
            unregister(h, Gone::Detached);
        }
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
    let h = loop {
        let (h, buf) = {
            let rec = current_record().expect("greenhook: exiting fiber without a record");
            let buf = rec.cleanup.borrow_mut().pop();
            (rec.handle, buf)
        };
        match buf {
            None => break h,
            Some(b) if once::is_marker(b) => once::abandon(b),
            // A stdio stream a hook held (see `hold_stream`).
            Some(b) if b & 3 == 2 => crate::stdio::release((b & !3) as *mut libc::FILE),
            Some(b) => {
                // The handler is the program's code, in frames the hooks
                // we skip were called from (see `hook::program`).
                hub::internal::set_hook_depth(0);
                // SAFETY: `b` is a live __pthread_unwind_buf_t of a frame
                // further up this fiber's stack, set with __sigsetjmp; the
                // handler it leads to calls __pthread_unwind_next, which
                // comes back here. The frames we skip hold no Rust value
                // whose destructor matters: the hooks' entry guards, whose
                // drop only looks for a panic, are skipped as if forgotten
                // (their hook depth with them: set above).
                unsafe { longjmp(b as *mut c_void, 1) };
            }
        }
    };
    let r = lookup(h as pthread_t).map_or(std::ptr::null_mut(), |r| r.retval.get());
    finish(h, r);
    hub::exit_current()
}

/// `pthread_exit(v)` in the root: undo its `pthread_once` in progress, run
/// the root's key destructors (the main thread is gone from here on), hand
/// `v` to a fiber joining the root, wait for every fiber, then `exit(0)`.
fn exit_root(v: *mut c_void) -> ! {
    once::abandon_root();
    keys::run_root_destructors();
    root_exited(v);
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
        // As at a start routine's return (see `fiber_main`).
        crate::signal::run_pending();
        if let Some(rec) = current_record() {
            exit_fiber(rec, v);
        }
        if hub::in_fiber() {
            hub::exit_current();
        }
        exit_root(v)
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
