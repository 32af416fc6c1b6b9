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
//! the program (rustc's jemalloc) cannot be told from the program's code
//! ([`code`]), so every hook return counts as inside it: no slice ends at
//! one and the signal's preemption stays off. Such a program's fibers
//! switch only where they wait, as before time slices existed.

use std::sync::OnceLock;

use libc::{c_int, c_void};

use crate::unwind::*;

/// The executable segments of the allocator's library: empty for glibc's
/// `malloc`; None when `malloc` is the program's own or was not found.
static CODE: OnceLock<Option<Vec<(usize, usize)>>> = OnceLock::new();

/// The allocator's code (see [`CODE`]), found once: None when it cannot
/// be told from the program's (`malloc` linked into the program).
pub(super) fn code() -> Option<&'static [(usize, usize)]> {
    CODE.get_or_init(|| match fiber::tls::allocator() {
        fiber::tls::Allocator::Glibc => Some(Vec::new()),
        fiber::tls::Allocator::Library { malloc } => Some(super::code::executable(&[malloc]).0),
        fiber::tls::Allocator::Program | fiber::tls::Allocator::Unknown => None,
    })
    .as_deref()
}

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
    // SAFETY: the unwinder's context for this frame.
    let pc = unsafe { frame_pc(ctx) };
    w.frames += 1;
    let Some(pc) = pc.filter(|_| w.frames <= FRAMES) else {
        return URC_NORMAL_STOP;
    };
    if let Some((lo, hi)) = w.stack {
        // SAFETY: as above.
        let cfa = unsafe { _Unwind_GetCFA(ctx) };
        if !(lo..=hi).contains(&cfa) {
            // The frames beyond are whoever resumed this fiber.
            return URC_NORMAL_STOP;
        }
    }
    if w.code.iter().any(|&(lo, hi)| (lo..hi).contains(&pc)) {
        w.inside = true;
        return URC_NORMAL_STOP;
    }
    URC_NO_REASON
}

/// Whether the running context is inside the allocator: a frame of its
/// library is on the stack (a walk of it: for the rare moments a switch
/// is due). False for glibc's; true wherever that cannot be told (see
/// [`code`]).
pub(super) fn inside() -> bool {
    let Some(code) = code() else { return true };
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
