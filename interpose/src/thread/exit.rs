//! How a pthread fiber ends, by returning from its start routine, by
//! `pthread_exit` or by cancellation: the value is stored; `pthread_exit`
//! and cancellation unwind the fiber's stack as glibc unwinds a thread's
//! (C++ destructors and `catch (...)` blocks, cleanup handlers, innermost
//! first); then its thread-local destructors (C++ `thread_local`, with TLS
//! of its own), then the key destructors, as glibc's thread exit orders
//! them; then the robust mutexes it still holds become "owner died".
//!
//! The unwinding is libgcc's forced unwind, whose stop function undoes the
//! context's cleanup chain frame by frame. We keep that chain by hooking
//! `__pthread_register_cancel`/`__pthread_unregister_cancel` (what the
//! `pthread_cleanup_push`/`pop` macros of C without exceptions call) and
//! reach each handler with `longjmp` into the buffer the macro set up, the
//! way glibc's own stop function does; the handler ends in
//! `__pthread_unwind_next`, which comes back here for the rest.
//!
//! An init routine of `pthread_once` that the exit leaves is undone on the
//! way ([`once`]'s marker in the cleanup chain), as glibc's own cleanup
//! handler does: the next caller runs it again.
//!
//! `pthread_exit` in the root unwinds the root's stack the same way (down
//! to `_start`), then undoes the root's `pthread_once` in progress, runs the
//! root's key destructors, hands its value to a fiber joining the root,
//! waits until no fiber is left, and calls `exit(0)`.

use std::rc::Rc;

use libc::{c_int, c_void, pthread_t};

use super::handle::Gone;
use super::{current_record, keys, lookup, once, root_exited, unregister, Chain, Cleanup, Record, ROOT};
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

/// Ends the calling pthread fiber with `v`: unwinds its stack (below),
/// then [`finish`]es.
pub(super) fn exit_fiber(rec: Rc<Record>, v: *mut c_void) -> ! {
    rec.retval.set(v);
    rec.exiting.set(true);
    drop(rec);
    continue_exit()
}

/// `pthread_exit(v)` in the root: unwinds its stack (below), then
/// [`finish_root`].
fn exit_root(v: *mut c_void) -> ! {
    ROOT.with(|r| r.exiting.set(Some(v as usize)));
    continue_exit()
}

/// Whether the calling context is a pthread fiber or the root whose exit
/// has begun.
fn exiting() -> bool {
    match current_record() {
        Some(rec) => rec.exiting.get(),
        None => !hub::in_fiber() && ROOT.with(|r| r.exiting.get().is_some()),
    }
}

/// Runs `f` on the calling context's cleanup chain: its record's in a
/// pthread fiber, else the root's. None in a fiber that is no pthread.
fn with_chain<R>(f: impl FnOnce(&Chain) -> R) -> Option<R> {
    match current_record() {
        Some(rec) => Some(f(&rec.cleanup)),
        None if !hub::in_fiber() => Some(ROOT.with(|r| f(&r.cleanup))),
        None => None,
    }
}

/// Unwinds the calling context's stack from here to its start, as glibc's
/// `pthread_exit` unwinds a thread's: a forced unwind
/// (`_Unwind_ForcedUnwind`) runs each frame's cleanups on the way (C++
/// destructors and `catch (...)` blocks, which must rethrow; C
/// `__attribute__((cleanup))`; greenhook's own frames' drops), and its
/// stop function ([`stop`]) reaches each `pthread_cleanup_push` handler
/// of C code without exceptions by `longjmp` into its buffer just before
/// the unwinding leaves the frame that pushed it. Such a handler ends in
/// `__pthread_unwind_next`, which comes back here: a new unwinding from
/// its frame. The unwinding ends at a fiber's start routine's call (its
/// stub's CFI marks the stack's end) or the root's `_start`, or earlier at
/// a frame without unwind tables (a JIT's): then the remaining handlers
/// run innermost first, as glibc runs them there, and the exit finishes.
fn continue_exit() -> ! {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::unwind::{_Unwind_ForcedUnwind, Exception};
        let new = || Box::new(Exception::new(0, not_rethrown));
        let exc = with_chain(|c| &**c.unwinding.get_or_init(new) as *const Exception)
            .expect("greenhook: an exit outside a pthread fiber or the root");
        // SAFETY: `exc` is the record's or the root's, alive until
        // `finish` forgets a detached record, after which nothing returns
        // to the unwinder; `stop` never lets the unwinding past a start
        // routine's stub (into `fiber_main`, which it must not reach).
        unsafe { _Unwind_ForcedUnwind(exc.cast_mut(), stop, std::ptr::null_mut()) };
        // It could not start: a frame here it cannot unwind.
    }
    undo_rest_and_finish()
}

/// The stop function of an exit's unwinding: before each frame is left,
/// undoes the cleanup chain's entries pushed in it; at a start routine's
/// stub or the stack's end (`_start`, or a frame without unwind tables)
/// the rest, and the exit finishes.
#[cfg(target_arch = "x86_64")]
extern "C" fn stop(
    _version: c_int,
    actions: c_int,
    _class: u64,
    _exc: *mut crate::unwind::Exception,
    ctx: *mut crate::unwind::UnwindContext,
    _arg: *mut c_void,
) -> c_int {
    use crate::unwind::*;
    if actions & UA_END_OF_STACK != 0 {
        undo_rest_and_finish()
    }
    // SAFETY: the unwinder's context for the frame about to be left.
    let (cfa, pc) = unsafe { (_Unwind_GetCFA(ctx), frame_pc(ctx)) };
    if pc.is_some_and(crate::preempt::is_start_stub) {
        undo_rest_and_finish()
    }
    undo_until(cfa);
    URC_NO_REASON
}

/// The exception object's cleanup: a handler ended the unwinding without
/// rethrowing it (a C++ `catch (...)` that returns). glibc's answer.
#[cfg(target_arch = "x86_64")]
extern "C" fn not_rethrown(_reason: c_int, _exc: *mut crate::unwind::Exception) {
    const MSG: &[u8] = b"FATAL: exception not rethrown\n";
    // SAFETY: a write of a static buffer to stderr, then abort.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::abort()
    }
}

/// Undoes, innermost first, the cleanup chain's entries pushed in frames
/// below `cfa` (a frame about to be left; `usize::MAX`: all). Does not
/// return when one is a handler's buffer: its `__pthread_unwind_next`
/// comes back to [`continue_exit`].
fn undo_until(cfa: usize) {
    loop {
        let Some(Some(Cleanup { what, .. })) = with_chain(|c| c.pop_below(cfa)) else {
            return;
        };
        match what {
            b if once::is_marker(b) => once::abandon(b),
            // A stdio stream a hook held (see `hold_stream`).
            b if b & 3 == 2 => crate::stdio::release((b & !3) as *mut libc::FILE),
            b => {
                // The handler is the program's code, in frames the
                // unwinding has left or a `longjmp` skips (see
                // `hook::program`).
                hub::internal::set_hook_depth(0);
                // SAFETY: `b` is a live __pthread_unwind_buf_t of a frame
                // further up this context's stack, set with __sigsetjmp
                // and not yet left by the unwinding; the handler it leads
                // to calls __pthread_unwind_next, which comes back to
                // `continue_exit`. Frames between here and there hold no
                // Rust value: the unwinding dropped those it left, and
                // this function's own are gone (`e` is a copy).
                unsafe { longjmp(b as *mut c_void, 1) };
            }
        }
    }
}

/// Undoes what is left of the cleanup chain, then finishes the exit: a
/// fiber's [`finish`] and end, or the root's [`finish_root`].
fn undo_rest_and_finish() -> ! {
    undo_until(usize::MAX);
    // What runs from here is greenhook's, as in a hook (the unwinding
    // left the program's frames at depth 0).
    hub::internal::set_hook_depth(1);
    let Some((h, r)) = current_record().map(|rec| (rec.handle, rec.retval.get())) else {
        let v = ROOT.with(|r| r.exiting.get()).unwrap_or(0);
        finish_root(v as *mut c_void)
    };
    finish(h, r);
    hub::exit_current()
}

/// The end of the root's `pthread_exit(v)`: undo its `pthread_once` in
/// progress, run the root's key destructors (the main thread is gone from
/// here on), hand `v` to a fiber joining the root, wait for every fiber,
/// then `exit(0)`.
fn finish_root(v: *mut c_void) -> ! {
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
        let entry = Cleanup {
            what: buf as usize,
            at: buf as usize,
        };
        if !emulating() || with_chain(|c| c.push(entry)).is_none() {
            // SAFETY: not our pthread fiber nor our root: forwarded unchanged.
            unsafe { __pthread_register_cancel::real(buf) }
        }
    }

    /// `__pthread_unregister_cancel` (from `pthread_cleanup_pop`).
    [thread] fn __pthread_unregister_cancel(buf: *mut c_void) {
        let ours = emulating()
            && with_chain(|c| c.truncate(buf as usize))
            // A fiber's buffer is always in its chain; the root's is not
            // if pushed before its thread became the fibers' (glibc's then).
            .is_some_and(|found| found || current_record().is_some());
        if !ours {
            // SAFETY: not our pthread fiber nor our root's buffer:
            // forwarded unchanged.
            unsafe { __pthread_unregister_cancel::real(buf) }
        }
    }

    /// `__pthread_unwind_next`: a cleanup handler ran during our exit; go
    /// on. Never returns, like `pthread_exit`.
    #[gate(emulating() && exiting())]
    [thread] fn __pthread_unwind_next(buf: *mut c_void) {
        continue_exit()
    }
}
