//! Threads that stay OS threads: those whose start routine is in the code
//! of a library whose threads cannot be fibers.
//!
//! GCC's OpenMP runtime, `libgomp`, is the case that needs it. Its team
//! threads, and the thread that starts a team, wait on futexes by the
//! `syscall` instruction itself after spinning, so no hook sees the wait.
//! As fibers on one OS thread, the first such wait blocks the OS thread in
//! the kernel, and with it the fibers that would wake it: the program
//! hangs at its first `#pragma omp parallel`. Its threads are there to use
//! the other CPUs anyway. So `pthread_create` makes them with glibc's
//! `pthread_create`, as without greenhook. The thread that starts a team
//! (a fiber, or the root) still waits for its team in the kernel: other
//! fibers of its hub stand still until the team is done, as they do while
//! a fiber computes.
//!
//! `GREENHOOK_NATIVE_THREADS_FROM` adds libraries (a colon-separated list
//! of file names or their beginnings, `libtbb.so:libopenblas`), for pools
//! whose workers spin on other CPUs and gain nothing from being fibers.
//!
//! A start routine is placed by address: the executable segments of the
//! listed libraries, found with `dl_iterate_phdr` and kept until glibc's
//! count of loaded or unloaded objects changes (one early-stopped
//! `dl_iterate_phdr`, ~17 ns here, per `pthread_create`).

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock};

use libc::{c_int, dl_phdr_info, pthread_attr_t, pthread_t, size_t};

use super::{pthread_create, Start};

/// Libraries whose threads stay OS threads whatever the environment says.
const ALWAYS: &[&str] = &["libgomp.so"];

/// Where the listed libraries' code is, for one set of loaded objects.
struct Code {
    /// glibc's counts of objects loaded and unloaded when it was found.
    adds: u64,
    subs: u64,
    /// Executable segments: [start, end).
    ranges: Vec<(usize, usize)>,
}

static CODE: Mutex<Option<Code>> = Mutex::new(None);

/// The file names (or beginnings of them) whose threads stay OS threads,
/// read as the preload loads.
static NAMES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();

/// Reads `GREENHOOK_NATIVE_THREADS_FROM` (at setup: a program may empty its
/// environment before its first thread).
pub(super) fn read_settings() {
    names();
}

/// The file names (or beginnings of them) whose threads stay OS threads.
fn names() -> &'static [Vec<u8>] {
    NAMES.get_or_init(|| {
        let extra = std::env::var_os("GREENHOOK_NATIVE_THREADS_FROM").unwrap_or_default();
        let extra = extra.as_encoded_bytes();
        ALWAYS
            .iter()
            .map(|n| n.as_bytes())
            .chain(extra.split(|&b| b == b':'))
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    })
}

/// Whether a thread starting at `f` stays an OS thread.
pub(super) fn stays_native(f: Start) -> bool {
    let at = f as usize;
    let (adds, subs) = generation();
    let mut code = CODE.lock().unwrap_or_else(|e| e.into_inner());
    if !code.as_ref().is_some_and(|c| c.adds == adds && c.subs == subs) {
        *code = Some(Code {
            adds,
            subs,
            ranges: ranges(names()),
        });
    }
    code.as_ref()
        .is_some_and(|c| c.ranges.iter().any(|&(lo, hi)| (lo..hi).contains(&at)))
}

/// glibc's counts of objects loaded and unloaded so far.
fn generation() -> (u64, u64) {
    unsafe extern "C" fn first(info: *mut dl_phdr_info, _: size_t, out: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid info; `out` is the caller's pair.
        unsafe { *(out as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs) };
        1
    }
    let mut g = (0u64, 0u64);
    // SAFETY: the callback writes only the pair, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut g as *mut _ as *mut c_void) };
    g
}

/// The executable segments of the loaded objects whose file name begins
/// with one of `names`.
fn ranges(names: &[Vec<u8>]) -> Vec<(usize, usize)> {
    struct Walk<'a> {
        names: &'a [Vec<u8>],
        ranges: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn each(info: *mut dl_phdr_info, _: size_t, walk: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid info whose name is a C string (or
        // null) and whose headers are `dlpi_phnum` entries; `walk` is the
        // caller's, alive for the call.
        unsafe {
            let (info, walk) = (&*info, &mut *(walk as *mut Walk<'_>));
            if info.dlpi_name.is_null() {
                return 0;
            }
            let path = CStr::from_ptr(info.dlpi_name).to_bytes();
            let file = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
            if !walk.names.iter().any(|n| file.starts_with(n)) {
                return 0;
            }
            for h in std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) {
                if h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0 {
                    let lo = info.dlpi_addr as usize + h.p_vaddr as usize;
                    walk.ranges.push((lo, lo + h.p_memsz as usize));
                }
            }
        }
        0
    }
    let mut walk = Walk {
        names,
        ranges: Vec::new(),
    };
    // SAFETY: the callback reads what glibc passes and writes only `walk`,
    // which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut walk as *mut Walk<'_> as *mut c_void) };
    walk.ranges
}

/// glibc's `pthread_create`, made from a fiber or the root as from the OS
/// thread itself: on the OS thread's own TLS (glibc marks the creating
/// thread's descriptor, and reads its scheduling to inherit), and with the
/// caller's signal mask (a fiber's is virtual) for the new thread to
/// inherit, as glibc's new threads inherit their creator's.
///
/// # Safety
/// The caller's `pthread_create` arguments.
pub(super) unsafe fn create(t: *mut pthread_t, attr: *const pthread_attr_t, f: Start, arg: *mut c_void) -> c_int {
    let mask = crate::signal::virtual_masks().then(crate::signal::current_mask);
    hub::on_thread_tls(|| {
        let _kernel = mask.as_ref().map(crate::signal::KernelMask::set);
        // SAFETY: the caller's arguments, unchanged, to glibc's.
        unsafe { pthread_create::real(t, attr, f, arg) }
    })
}
