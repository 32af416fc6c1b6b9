//! Where code lies, for the preemption's checks: the executable segments
//! of loaded objects, and the unwinder's one-time setup.

use libc::{c_int, c_void};

use crate::unwind;

/// The executable `PT_LOAD` segments of the loaded objects that hold any
/// of `probes` (addresses), and how many objects that is.
pub(super) fn executable(probes: &[usize]) -> (Vec<(usize, usize)>, usize) {
    struct Search<'a> {
        probes: &'a [usize],
        found: Vec<(usize, usize)>,
        hits: usize,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, arg: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes its info and our argument.
        let (info, s) = unsafe { (&*info, &mut *(arg as *mut Search<'_>)) };
        // SAFETY: the object's program headers, as ld.so describes them.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let base = info.dlpi_addr as usize;
        let segs = || {
            phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD).map(move |p| {
                (
                    base + p.p_vaddr as usize,
                    base + (p.p_vaddr + p.p_memsz) as usize,
                    p.p_flags,
                )
            })
        };
        if !segs().any(|(lo, hi, _)| s.probes.iter().any(|&a| (lo..hi).contains(&a))) {
            return 0;
        }
        s.hits += 1;
        s.found.extend(
            segs()
                .filter(|&(_, _, f)| f & libc::PF_X != 0)
                .map(|(lo, hi, _)| (lo, hi)),
        );
        0
    }
    let mut s = Search {
        probes,
        found: Vec::new(),
        hits: 0,
    };
    // SAFETY: a valid callback and argument, used only during the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut s as *mut Search<'_>).cast()) };
    (s.found, s.hits)
}

/// Walks the caller's stack once, at load time, so that the unwinder's
/// one-time setup is done before any walk that matters: libgcc runs it
/// under `pthread_once` (our hook, which may allocate), and the walks in
/// `allocator` and `tick` run inside the program's allocator or its
/// signal handler, where allocating could wait on a lock the walking
/// context holds (rustc's jemalloc hung on its own arena lock so).
pub(super) fn warm_unwinder() {
    extern "C" fn first(_: *mut unwind::UnwindContext, _: *mut c_void) -> c_int {
        unwind::URC_NORMAL_STOP
    }
    // SAFETY: a valid callback that stops at the first frame; no argument.
    unsafe { unwind::_Unwind_Backtrace(first, std::ptr::null_mut()) };
}
