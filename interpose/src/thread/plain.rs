//! pthread functions hooked only to pass through: each return from a hook
//! is a point where a time slice may end ([`crate::preempt`]), so a thread
//! that loops calling one of these alone still lets the others run, as
//! natively the kernel would preempt it.
//!
//! The ones here take a lock of glibc's and allocate. The pthread
//! functions glibc exports that stay unhooked work on the caller's memory
//! alone (`pthread_attr_*`, `pthread_*attr_*`, `pthread_*_init`/`_destroy`
//! of conds, rwlocks and spinlocks, `pthread_{get,set}concurrency`,
//! `pthread_mutex_{get,set}prioceiling`), never wait, and cost a few
//! nanoseconds: a loop of them alone is a pure computation, which no hook
//! can slice (README's caveats); `pthread_spin_unlock` pairs with
//! `pthread_spin_lock`, hooked already.

use libc::{c_int, c_void, pthread_attr_t};

use crate::hook::hook;

/// An `atfork` handler.
type Handler = Option<unsafe extern "C" fn()>;

hook! {
    /// `__register_atfork`: what a program's `pthread_atfork` calls (glibc
    /// links `pthread_atfork` into each program from `libc_nonshared.a`).
    [thread] fn __register_atfork(prepare: Handler, parent: Handler, child: Handler, dso: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { __register_atfork::real(prepare, parent, child, dso) }
    }

    /// `pthread_atfork`, for a caller that finds it in libc itself (glibc
    /// keeps it there only as a compatibility symbol; its body registers
    /// handlers for no object, which are never unregistered, as here).
    #[cfg(not(greenhook_table))]
    [thread] fn pthread_atfork(prepare: Handler, parent: Handler, child: Handler) -> c_int {
        // SAFETY: forwarded; a null object handle is what glibc's own
        // compatibility `pthread_atfork` passes.
        unsafe { __register_atfork::real(prepare, parent, child, std::ptr::null_mut()) }
    }

    /// `pthread_getattr_default_np`.
    [thread] fn pthread_getattr_default_np(attr: *mut pthread_attr_t) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { pthread_getattr_default_np::real(attr) }
    }

    /// `pthread_setattr_default_np`: threads made from now on without an
    /// attribute get its stack size.
    [thread] fn pthread_setattr_default_np(attr: *const pthread_attr_t) -> c_int {
        // SAFETY: forwarded unchanged.
        let r = unsafe { pthread_setattr_default_np::real(attr) };
        if r == 0 {
            super::default_attr_changed();
        }
        r
    }
}
