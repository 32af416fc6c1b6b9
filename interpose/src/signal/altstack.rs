//! `sigaltstack` under fibers: the kernel keeps one alternate signal stack
//! per OS thread, which the fibers of a thread share (see README's
//! caveats: a handler runs on the stack set last by any of them). What
//! must not follow from sharing is a stack outliving its thread.
//!
//! Natively a thread's alternate stack goes with the thread, so a thread
//! may free its stack as it ends without disabling it first. Under the
//! preload the OS thread goes on, and its alternate stack was then freed
//! memory: the next signal handled on it (a program's `SA_ONSTACK`
//! handler, a fault) wrote its frame into whatever the heap had put there
//! since (`tests/c/altstack_freed.c`: 3 KiB of a live block overwritten).
//! So each context's stack is noted here when it sets one, and when a
//! fiber ends, or disables its own, while the kernel's is the one it set,
//! the kernel's goes back to the root's (what main set, or greenhook's
//! own, installed with the first fiber for the overflow report), as if
//! the fiber had never set one. A query reports the kernel's, as before.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use libc::{c_int, stack_t};

use crate::gate::emulating;
use crate::hook::hook;

/// An alternate stack as `sigaltstack` takes it: base, size, flags.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Alt {
    sp: usize,
    size: usize,
    flags: c_int,
}

impl Alt {
    /// The stack `st` names, None if it disables.
    fn of(st: &stack_t) -> Option<Alt> {
        (st.ss_flags & libc::SS_DISABLE == 0).then_some(Alt {
            sp: st.ss_sp as usize,
            size: st.ss_size,
            // What the kernel reports of a stack in use is no setting.
            flags: st.ss_flags & !libc::SS_ONSTACK,
        })
    }

    /// `alt` as `sigaltstack` takes it (None: disabled).
    fn to_stack(alt: Option<Alt>) -> stack_t {
        match alt {
            Some(a) => stack_t {
                ss_sp: a.sp as *mut libc::c_void,
                ss_flags: a.flags,
                ss_size: a.size,
            },
            None => stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            },
        }
    }
}

/// The stacks each context of this OS thread set.
struct Stacks {
    /// The root's: None until known (it is what the kernel had when the
    /// root set one, or when a fiber first set one); then its stack, if any.
    root: Cell<Option<Option<Alt>>>,
    /// Each fiber's that set one, by task id.
    fibers: RefCell<HashMap<u64, Alt, BuildHasherDefault<crate::thread::HandleHasher>>>,
}

/// Per OS thread, shared by its fibers (see `hub::PerThread`).
static STACKS: hub::PerThread<Stacks> = hub::PerThread::new(|| Stacks {
    root: Cell::new(None),
    fibers: RefCell::new(HashMap::with_hasher(BuildHasherDefault::new())),
});

/// The kernel's alternate stack for this OS thread, if it has one.
fn kernel() -> Option<Alt> {
    // SAFETY: a query into a local.
    unsafe {
        let mut st: stack_t = std::mem::zeroed();
        if sigaltstack::real(std::ptr::null(), &mut st) != 0 {
            return None;
        }
        Alt::of(&st)
    }
}

/// Puts the root's stack in the kernel (a disable if it has none): a
/// fiber's own has left it (a stack in use cannot be changed: the kernel
/// says `EPERM`, and the fiber's stays, as it would have before).
fn root_back(s: &Stacks) {
    let st = Alt::to_stack(s.root.get().flatten());
    // SAFETY: a stack the root set (still its own), or a disable.
    unsafe { sigaltstack::real(&st, std::ptr::null_mut()) };
}

/// Puts the root's stack back in the kernel, if `fiber`'s is there now.
fn give_back(s: &Stacks, fiber: Alt) {
    if kernel().is_some_and(|k| k.sp == fiber.sp) {
        root_back(s);
    }
}

/// The fiber `id` has ended: its stack leaves the kernel if it is there.
pub(super) fn thread_ended(id: u64) {
    STACKS.with_existing(|s| {
        let alt = s.fibers.borrow_mut().remove(&id);
        if let Some(a) = alt {
            give_back(s, a);
        }
    });
}

hook! {
    /// `sigaltstack(2)`: the kernel's, with the stack noted for the
    /// calling context; a fiber's disable takes only its own stack out of
    /// the kernel, and gives the root's back (see the module docs).
    #[gate(emulating())]
    [signal] fn sigaltstack(ss: *const stack_t, old: *mut stack_t) -> c_int {
        let id = hub::current_id();
        // SAFETY: the caller's pointer: null, or a stack_t to read.
        let set = unsafe { ss.as_ref() }.map(Alt::of);
        // SAFETY: a zeroed stack_t is a valid out buffer.
        let mut was: stack_t = unsafe { std::mem::zeroed() };
        if id != 0 && set == Some(None) {
            // SAFETY: a query into our own buffer.
            if unsafe { sigaltstack::real(std::ptr::null(), &mut was) } != 0 {
                return -1;
            }
            let own = STACKS.with(|s| s.fibers.borrow_mut().remove(&id));
            let on_it = was.ss_flags & libc::SS_ONSTACK != 0;
            if own.is_none_or(|a| Some(a.sp) != Alt::of(&was).map(|k| k.sp)) && !on_it {
                // Not its stack in the kernel (another's, the root's, or
                // none): its own is gone, and nothing else changes.
                if !old.is_null() {
                    // SAFETY: the caller's out pointer.
                    unsafe { *old = was };
                }
                return 0;
            }
        }
        // SAFETY: the caller's `ss`, and our own out buffer.
        let r = unsafe { sigaltstack::real(ss, &mut was) };
        if r != 0 {
            return r;
        }
        if !old.is_null() {
            // SAFETY: the caller's out pointer.
            unsafe { *old = was };
        }
        let Some(set) = set else { return 0 };
        STACKS.with(|s| {
            if id == 0 {
                s.root.set(Some(set));
                return;
            }
            if s.root.get().is_none() {
                // The first a fiber sets: what it replaced was the root's.
                s.root.set(Some(Alt::of(&was)));
            }
            match set {
                Some(a) => {
                    s.fibers.borrow_mut().insert(id, a);
                }
                // Its own stack left the kernel: the root's comes back.
                None => root_back(s),
            }
        });
        0
    }
}
