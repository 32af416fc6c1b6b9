//! Whether the running context is inside a `malloc` that is not glibc's.
//!
//! Such an allocator (jemalloc, tcmalloc, mimalloc) takes its locks
//! through the hooks, so a fiber that switched away inside it would hold
//! one while suspended, as a parked fiber holds a mutex. Fibers that want
//! it then wait as for any mutex, but greenhook's own bookkeeping
//! allocates too, where it cannot wait for a fiber: it would block the OS
//! thread on that lock for good. So no time slice ends at the return of a
//! hook the allocator called ([`inside`]), and the signal's preemption
//! treats the allocator's code as libc's (`tick`). An allocator linked into
//! the program cannot be told from the program's code ([`known`]): there
//! the signal's preemption stays off, as it did when such a program's
//! fibers shared their thread's TLS, and slices end at hook returns as
//! before, the allocator's included (a known gap: greenhook's bookkeeping
//! may then meet a lock a suspended fiber holds).

use std::sync::OnceLock;

use libc::{c_int, c_void};

/// The executable segments of the allocator's library: empty for glibc's
/// `malloc`; None when `malloc` is the program's own or was not found.
static CODE: OnceLock<Option<Vec<(usize, usize)>>> = OnceLock::new();

/// The allocator's code (see [`CODE`]), found once.
fn code() -> Option<&'static [(usize, usize)]> {
    CODE.get_or_init(|| match fiber::tls::allocator() {
        fiber::tls::Allocator::Glibc => Some(Vec::new()),
        fiber::tls::Allocator::Library { malloc, .. } => Some(segments_of(malloc)),
        fiber::tls::Allocator::Program | fiber::tls::Allocator::Unknown => None,
    })
    .as_deref()
}

/// Whether it can be told where the allocator's code is: `malloc` is
/// glibc's (whose locks never go through the hooks) or a library's.
pub(super) fn known() -> bool {
    code().is_some()
}

/// An address inside the allocator's library, if `malloc` is a library's
/// other than libc.
pub(super) fn library() -> Option<usize> {
    match fiber::tls::allocator() {
        fiber::tls::Allocator::Library { malloc, .. } => Some(malloc),
        _ => None,
    }
}

/// The executable `PT_LOAD` segments of the loaded object that holds `addr`.
fn segments_of(addr: usize) -> Vec<(usize, usize)> {
    struct Search {
        addr: usize,
        found: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, arg: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes its info and our argument.
        let (info, s) = unsafe { (&*info, &mut *(arg as *mut Search)) };
        // SAFETY: the object's program headers, as ld.so describes them.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let base = info.dlpi_addr as usize;
        let segs: Vec<(usize, usize, u32)> = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD)
            .map(|p| {
                (
                    base + p.p_vaddr as usize,
                    base + (p.p_vaddr + p.p_memsz) as usize,
                    p.p_flags,
                )
            })
            .collect();
        if !segs.iter().any(|&(lo, hi, _)| (lo..hi).contains(&s.addr)) {
            return 0;
        }
        s.found = segs
            .into_iter()
            .filter(|&(_, _, f)| f & libc::PF_X != 0)
            .map(|(lo, hi, _)| (lo, hi))
            .collect();
        1
    }
    let mut s = Search {
        addr,
        found: Vec::new(),
    };
    // SAFETY: a valid callback and argument, used only during the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut s as *mut Search).cast()) };
    s.found
}

/// libgcc_s's unwinder (a dependency of every Rust cdylib), for the walks
/// here and in `tick`.
pub(super) mod unwind {
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
    extern "C" {
        pub(crate) fn _Unwind_Backtrace(trace: Trace, arg: *mut c_void) -> c_int;
        pub(crate) fn _Unwind_GetIPInfo(ctx: *mut UnwindContext, ip_before_insn: *mut c_int) -> usize;
        pub(crate) fn _Unwind_GetCFA(ctx: *mut UnwindContext) -> usize;
    }
}
use unwind::*;

/// Frames looked at, at most.
const FRAMES: u32 = 256;

struct Walk {
    code: &'static [(usize, usize)],
    /// The running fiber's stack; the root's is not known.
    stack: Option<(usize, usize)>,
    frames: u32,
    inside: bool,
}

extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Walk of `inside`, alive during the walk.
    let w = unsafe { &mut *(arg as *mut Walk) };
    let mut before: c_int = 0;
    // SAFETY: the unwinder's context for this frame.
    let ip = unsafe { _Unwind_GetIPInfo(ctx, &mut before) };
    w.frames += 1;
    if ip == 0 || w.frames > FRAMES {
        return URC_NORMAL_STOP;
    }
    if let Some((lo, hi)) = w.stack {
        // SAFETY: as above.
        let cfa = unsafe { _Unwind_GetCFA(ctx) };
        if !(lo..=hi).contains(&cfa) {
            // The frames beyond are whoever resumed this fiber.
            return URC_NORMAL_STOP;
        }
    }
    // A return address points after its call.
    let pc = if before != 0 { ip } else { ip.wrapping_sub(1) };
    if w.code.iter().any(|&(lo, hi)| (lo..hi).contains(&pc)) {
        w.inside = true;
        return URC_NORMAL_STOP;
    }
    URC_NO_REASON
}

/// Whether the running context is inside the allocator: a frame of its
/// library is on the stack (a walk of it: for the rare moments a switch
/// is due). False for glibc's, and when that cannot be told (see
/// [`known`]).
pub(super) fn inside() -> bool {
    let Some(code) = code() else { return false };
    if code.is_empty() {
        return false;
    }
    let stack = hub::with_current_fiber(|f| f.map(|f| f.stack_bounds()));
    let mut w = Walk {
        code,
        stack,
        frames: 0,
        inside: false,
    };
    // SAFETY: a valid callback; `w` outlives the walk.
    unsafe { _Unwind_Backtrace(step, (&mut w as *mut Walk).cast()) };
    w.inside
}
