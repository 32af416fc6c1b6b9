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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static COUNTING: AtomicBool = AtomicBool::new(false);

/// The families of the stats table, in print order.
const FAMILIES: [&str; 12] = [
    "time", "io", "fd", "poll", "thread", "sync", "futex", "file", "dns", "stdio", "process", "signal",
];
static COUNTS: [AtomicU64; 12] = [const { AtomicU64::new(0) }; 12];

fn family(name: &str) -> usize {
    const SYNC: [&str; 6] = [
        "pthread_mutex",
        "pthread_cond",
        "pthread_rwlock",
        "pthread_spin",
        "pthread_barrier",
        "sem_",
    ];
    let starts = |p: &[&str]| p.iter().any(|x| name.starts_with(x));
    if starts(&SYNC) {
        5
    } else if name.starts_with("pthread_") || name.starts_with("__pthread") {
        4
    } else if starts(&["sleep", "usleep", "nanosleep", "clock_nanosleep", "sched_yield"]) {
        0
    } else if starts(&["read", "write", "recv", "send", "connect", "accept"]) {
        1
    } else if starts(&["poll", "ppoll", "select", "pselect", "epoll"]) {
        3
    } else if name == "syscall" {
        6
    } else if starts(&["pread", "fsync", "fdatasync", "syncfs", "sync_file_range"]) {
        7
    } else if starts(&["getaddrinfo", "getnameinfo", "gethostby"]) {
        8
    } else if starts(&[
        "system",
        "popen",
        "pclose",
        "wait",
        "fork",
        "vfork",
        "posix_spawn",
        "exec",
    ]) {
        10
    } else if starts(&["sig", "pause", "alarm", "setitimer", "raise", "kill"]) {
        11
    } else if starts(&["f", "get", "put", "scanf", "vscanf", "printf", "vprintf", "__isoc"]) {
        if starts(&["fcntl", "fsync", "fdatasync"]) {
            2
        } else {
            9
        }
    } else {
        2
    }
}

#[cold]
fn count(name: &'static str) {
    COUNTS[family(name)].fetch_add(1, Ordering::Relaxed);
}

/// Turns on counting when `GREENHOOK_STATS` is set, and adds the counts to
/// the hub's exit table.
pub(crate) fn init_stats() {
    if std::env::var_os("GREENHOOK_STATS").is_some_and(|v| !v.is_empty() && v != "0") {
        COUNTING.store(true, Ordering::Relaxed);
        hub::internal::set_stats_extra(|| {
            FAMILIES
                .iter()
                .zip(&COUNTS)
                .map(|(f, c)| (*f, c.load(Ordering::Relaxed)))
                .filter(|(_, n)| *n > 0)
                .collect()
        });
    }
}

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
/// process with the hook's name. With `GREENHOOK_STATS` on, the call is
/// counted by family for the table printed at exit.
#[inline]
pub(crate) fn guard<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    if COUNTING.load(Ordering::Relaxed) {
        count(name);
    }
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
