//! The next definitions of libc functions, resolved once with
//! `dlsym(RTLD_NEXT, …)` and cached; and the interpose table.
//!
//! `real_fn!` defines a function with the libc signature whose first call
//! resolves the symbol and stores the pointer in an atomic: [`hook!`](crate::hook::hook)
//! uses it for `<hook>::real`, and `real!` for the functions greenhook
//! calls without hooking them.
//! Variadic libc functions (`fcntl`, `ioctl`, `open`, `syscall`) are declared
//! with fixed trailing word-sized arguments: on the System V x86-64 and
//! AAPCS64 Linux ABIs variadic integer and pointer arguments travel in the
//! same registers as fixed ones, so forwarding them as words is exact.
//! (Apple's arm64 ABI passes variadics on the stack: the macOS port must
//! declare those differently.)

/// Resolves `name` (NUL-terminated) in the objects after ours.
pub(crate) fn resolve(name: &'static [u8]) -> *mut libc::c_void {
    let c = std::ffi::CStr::from_bytes_with_nul(name).expect("a NUL-terminated name");
    // SAFETY: RTLD_NEXT.
    let p = unsafe { fiber::tls::dlsym_quietly(libc::RTLD_NEXT, c) };
    if p.is_null() {
        let n = String::from_utf8_lossy(&name[..name.len() - 1]);
        let _g = hub::internal::Guard::new();
        eprintln!("greenhook: cannot find the next definition of {n}");
        std::process::abort();
    }
    p
}

/// Defines `unsafe fn $alias(..)`, a call to the next definition of the
/// libc function `$name`: resolved on first use and cached in an atomic.
/// Declared `extern "C-unwind"`: glibc's forced unwinding (thread exit,
/// cancellation) may come out of it and go on through our frames.
macro_rules! real_fn {
    ($alias:ident = $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?) => {
        /// The real libc function (next definition after ours).
        ///
        /// # Safety
        /// Same contract as the libc function of the same name.
        #[allow(clippy::too_many_arguments, dead_code)]
        #[inline]
        pub(crate) unsafe fn $alias($($arg: $ty),*) $(-> $ret)? {
            use std::sync::atomic::{AtomicPtr, Ordering};
            static PTR: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
            let mut p = PTR.load(Ordering::Relaxed);
            if p.is_null() {
                p = $crate::real::resolve(concat!(stringify!($name), "\0").as_bytes());
                PTR.store(p, Ordering::Relaxed);
            }
            // SAFETY: `p` is the address of the libc function of this name,
            // whose C signature is the one declared here.
            let f: unsafe extern "C-unwind" fn($($ty),*) $(-> $ret)? = unsafe { std::mem::transmute(p) };
            // SAFETY: forwarded under the caller's contract.
            unsafe { f($($arg),*) }
        }
    };
}
pub(crate) use real_fn;

/// Declares cached pointers to libc functions that are not hooked (a hooked
/// function's next definition is `<hook>::real`, from [`hook!`](crate::hook::hook)).
#[cfg_attr(not(greenhook_linux_hooks), allow(unused_macros))]
macro_rules! real {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {$(
        $crate::real::real_fn!($name = $name($($arg: $ty),*) $(-> $ret)?);
    )*};
}
#[cfg_attr(not(greenhook_linux_hooks), allow(unused_imports))]
pub(crate) use real;

/// One entry of an interpose table: dyld's `struct interpose` from
/// `<mach-o/dyld-interposing.h>`, two code addresses.
#[cfg(greenhook_table)]
#[repr(C)]
pub struct Interpose {
    /// Our hook (`greenhook_<name>`).
    pub replacement: *const (),
    /// The libc function it stands in for.
    pub replacee: *const (),
}

// SAFETY: two immutable code addresses.
#[cfg(greenhook_table)]
unsafe impl Sync for Interpose {}

/// Lists hooks in the image's interpose table (compiled only with
/// `cfg(greenhook_table)`: on macOS, or on Linux with
/// `--cfg greenhook_interpose_table` so that a test can check the table).
///
/// On macOS `DYLD_INSERT_LIBRARIES` cannot rely on symbol order the way
/// `LD_PRELOAD` does: dyld reads the `__DATA,__interpose` section of an
/// inserted image, pairs of (replacement, replacee), and binds every other
/// image's references to the replacee to the replacement. Our own image is
/// exempt, which is why the hooks are then exported as `greenhook_<name>`
/// (so the replacee below names libc's function, not ours) and why the
/// `real!` lookups still reach libc.
macro_rules! interpose {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(greenhook_table)]
        const _: () = {
            extern "C" {
                #[link_name = stringify!($name)]
                fn replacee();
            }
            #[used]
            #[cfg_attr(target_os = "macos", link_section = "__DATA,__interpose")]
            #[cfg_attr(not(target_os = "macos"), link_section = "greenhook_interpose")]
            static ENTRY: $crate::real::Interpose = $crate::real::Interpose {
                replacement: $name as *const (),
                replacee: replacee as *const (),
            };
        };
    )*};
}
pub(crate) use interpose;

/// The interpose table of this image (Linux check build only: the
/// `greenhook_interpose` section, bounded by the linker's `__start_`/
/// `__stop_` symbols).
#[cfg(all(greenhook_table, not(target_os = "macos")))]
pub fn interpose_table() -> &'static [Interpose] {
    extern "C" {
        static __start_greenhook_interpose: Interpose;
        static __stop_greenhook_interpose: Interpose;
    }
    let (a, b) = (
        &raw const __start_greenhook_interpose,
        &raw const __stop_greenhook_interpose,
    );
    // SAFETY: the linker bounds the section with these two symbols; it holds
    // only `Interpose` statics (all of this crate's `interpose!` entries).
    unsafe { std::slice::from_raw_parts(a, b.offset_from(a) as usize) }
}
