//! libgcc_s's unwinder (a dependency of every Rust cdylib, and the one a
//! C++ program's `throw` and glibc's `pthread_exit` use), as greenhook
//! calls it: the preemption's walks of a context's frames
//! (`_Unwind_Backtrace`), and the forced unwind of a pthread fiber's stack
//! when it exits or is cancelled (`_Unwind_ForcedUnwind`, see
//! `thread::exit`).

use libc::{c_int, c_void};

#[repr(C)]
pub(crate) struct UnwindContext {
    _opaque: [u8; 0],
}

pub(crate) type Trace = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;
pub(crate) const URC_NO_REASON: c_int = 0;
pub(crate) const URC_NORMAL_STOP: c_int = 4;
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const URC_END_OF_STACK: c_int = 5;
/// `_UA_END_OF_STACK`: the frame a stop function is given is past the last.
pub(crate) const UA_END_OF_STACK: c_int = 16;

/// `struct _Unwind_Exception` (`unwind.h`): the exception object of an
/// unwinding; the unwinder keeps its state in the two private words.
#[repr(C, align(16))]
pub(crate) struct Exception {
    pub(crate) class: u64,
    /// Called when a handler ends the unwinding without resuming it (a
    /// C++ `catch (...)` that does not rethrow).
    pub(crate) cleanup: Option<extern "C" fn(reason: c_int, exc: *mut Exception)>,
    private: [usize; 2],
}

impl Exception {
    pub(crate) const fn new(class: u64, cleanup: extern "C" fn(c_int, *mut Exception)) -> Exception {
        Exception {
            class,
            cleanup: Some(cleanup),
            private: [0; 2],
        }
    }
}

/// A forced unwind's stop function (`_Unwind_Stop_Fn`), asked before each
/// frame is unwound: `URC_NO_REASON` goes on.
pub(crate) type Stop = extern "C" fn(
    version: c_int,
    actions: c_int,
    class: u64,
    exc: *mut Exception,
    ctx: *mut UnwindContext,
    arg: *mut c_void,
) -> c_int;

extern "C" {
    pub(crate) fn _Unwind_Backtrace(trace: Trace, arg: *mut c_void) -> c_int;
    pub(crate) fn _Unwind_GetIPInfo(ctx: *mut UnwindContext, ip_before_insn: *mut c_int) -> usize;
    pub(crate) fn _Unwind_GetCFA(ctx: *mut UnwindContext) -> usize;
}

/// Where in its code the frame `ctx` is: the call it made (a return
/// address points just after its call), or the instruction a signal
/// interrupted. None past the outermost frame (its `%rip` undefined).
///
/// # Safety
/// `ctx` is the unwinder's context for a frame, given to a callback of a
/// walk or an unwinding under way.
pub(crate) unsafe fn frame_pc(ctx: *mut UnwindContext) -> Option<usize> {
    let mut before: c_int = 0;
    // SAFETY: per the contract.
    let ip = unsafe { _Unwind_GetIPInfo(ctx, &mut before) };
    (ip != 0).then(|| if before != 0 { ip } else { ip - 1 })
}

extern "C-unwind" {
    /// Unwinds the caller's frames, running their cleanups (C++
    /// destructors, `catch (...)` blocks, Rust drops), asking `stop` before
    /// each; returns only if it could not start or go on.
    pub(crate) fn _Unwind_ForcedUnwind(exc: *mut Exception, stop: Stop, arg: *mut c_void) -> c_int;
}
