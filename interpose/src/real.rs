//! The next definitions of the functions we hook, resolved once with
//! `dlsym(RTLD_NEXT, …)` and cached, plus the panic guard every hook uses.
//!
//! `real!` declares a function in this module with the libc signature; its
//! first call resolves the symbol and stores the pointer in an atomic.
//! Variadic libc functions (`fcntl`, `ioctl`, `open`, `syscall`) are declared
//! with fixed trailing word-sized arguments: on the System V x86-64 and
//! AAPCS64 Linux ABIs variadic integer and pointer arguments travel in the
//! same registers as fixed ones, so forwarding them as words is exact.
//! (Apple's arm64 ABI passes variadics on the stack: the macOS port must
//! declare those differently.)

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Resolves `name` (NUL-terminated) in the objects after ours.
pub(crate) fn resolve(name: &'static [u8]) -> *mut libc::c_void {
    // SAFETY: `name` is a NUL-terminated literal (checked by the macro).
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    if p.is_null() {
        let n = String::from_utf8_lossy(&name[..name.len() - 1]);
        let _g = hub::internal::Guard::new();
        eprintln!("greenhook: cannot find the next definition of {n}");
        std::process::abort();
    }
    p
}

/// Declares cached pointers to the real libc functions.
macro_rules! real {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(
        /// The real libc function (next definition after ours).
        ///
        /// # Safety
        /// Same contract as the libc function of the same name.
        #[allow(clippy::too_many_arguments, dead_code)]
        #[inline]
        pub(crate) unsafe fn $name($($arg: $ty),*) -> $ret {
            use std::sync::atomic::{AtomicPtr, Ordering};
            static PTR: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
            let mut p = PTR.load(Ordering::Relaxed);
            if p.is_null() {
                p = $crate::real::resolve(concat!(stringify!($name), "\0").as_bytes());
                PTR.store(p, Ordering::Relaxed);
            }
            // SAFETY: `p` is the address of the libc function of this name,
            // whose C signature is the one declared here.
            let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(p) };
            // SAFETY: forwarded under the caller's contract.
            unsafe { f($($arg),*) }
        }
    )*};
}
pub(crate) use real;

/// Runs a hook body; a panic never crosses `extern "C"`: it aborts the
/// process with the hook's name.
#[inline]
pub(crate) fn guard<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => abort_in(name),
    }
}

#[cold]
fn abort_in(name: &'static str) -> ! {
    let _g = hub::internal::Guard::new();
    eprintln!("greenhook: panic inside the {name} hook; aborting");
    std::process::abort()
}
