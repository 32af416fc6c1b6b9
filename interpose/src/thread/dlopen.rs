//! `dlopen` and `dlmopen`: a library loaded while fibers with TLS of their
//! own exist gets its static TLS initialised in their blocks too, as glibc
//! initialises it in its threads' (see `fiber::tls::loaded`).
//!
//! And one load or unload at a time among fibers (`dlclose` too), as among
//! threads. glibc's loader lock (`dl_load_lock`), held through the
//! constructors a `dlopen` runs and the destructors of a `dlclose`, is
//! recursive by thread id, which every fiber of an OS thread shares: it let
//! a second fiber's `dlopen` in while the first one's constructor waited
//! (on a sleep, on I/O), so constructors that natively run one library at
//! a time ran interleaved. [`LOADER`] is that lock among fibers, taken
//! around the real call and recursive per fiber (a constructor may load).
//!
//! ## Decision: the hook is a trampoline that keeps the caller's address
//! glibc's `dlopen` reads its own return address to find the calling
//! object: its `DT_RUNPATH`, the `$ORIGIN` of a relative name, its link-map
//! namespace. A hook that called the real `dlopen` would make every
//! program's `dlopen` look as if greenhook had made it, and a plugin found
//! through the program's `RUNPATH` would no longer be found. So the hook
//! is a few instructions of assembly that ask [`before`] what to do and then
//! jump to the real function with the caller's stack as it was, except that
//! when fibers must be told about the load, the real function returns
//! through a `ret` instruction found in the *caller's* object (so glibc
//! sees the caller) to a stub that runs [`after`] and returns to the
//! caller. Where there is nothing to do (no fiber has TLS of its own, or
//! the hooks are off) it is a plain tail jump.
//!
//! Limits: a `dlopen` made from code in no object (JIT code) is not held
//! back by [`LOADER`] (its return cannot be borrowed); the calling fiber's
//! copy of the library's thread-locals reads
//! zeros in the library's constructors (glibc would have initialised it
//! first; the rest of the fiber's copy is right afterwards); a C++
//! exception thrown through `dlopen` by a constructor cannot be unwound
//! past the borrowed `ret` (it terminates the program); glibc's own
//! `dlopen`s (NSS, iconv modules) are not seen; fibers of other OS
//! threads' hubs (the Rust API, not the preload) are not initialised.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use fiber::tls::loaded::Before;
use libc::c_int;

use crate::hook::hook;

/// The loader lock among the fibers of an OS thread (see the module docs):
/// its holder's task id (the root's is 0) and how many times it holds it.
#[derive(Default)]
struct Loader {
    holder: Cell<u64>,
    depth: Cell<u32>,
}

/// Per OS thread: see `hub::PerThread`.
static LOADER: hub::PerThread<Loader> = hub::PerThread::new(Loader::default);

/// Takes [`LOADER`] for the calling fiber (or root), waiting on the hub
/// while another holds it. Not a cancellation point, as glibc's lock is
/// not; a signal's handler runs and the wait goes on.
fn enter_loader() {
    let me = hub::current_id();
    loop {
        let free = LOADER.with(|l| {
            let mine = l.depth.get() == 0 || l.holder.get() == me;
            if mine {
                l.holder.set(me);
                l.depth.set(l.depth.get() + 1);
            }
            mine
        });
        if free {
            return;
        }
        let held = || LOADER.with(|l| l.depth.get() != 0);
        if hub::park_object("loader lock", loader_key(), 0, None, held) == hub::Park::Interrupted {
            crate::async_cancel_point();
        }
    }
}

/// Lets go of [`LOADER`] once, waking a fiber waiting for it when free.
fn leave_loader() {
    let free = LOADER.with(|l| {
        let d = l.depth.get() - 1;
        l.depth.set(d);
        if d == 0 {
            l.holder.set(0);
        }
        d == 0
    });
    if free {
        hub::unpark(loader_key(), 1);
    }
}

/// The key fibers waiting for [`LOADER`] park on.
fn loader_key() -> usize {
    &LOADER as *const _ as usize
}

/// Whether a load or unload here takes [`LOADER`]: pthreads are fibers,
/// the caller is on their OS thread, and there are fibers to keep out.
fn loader_lock_here() -> bool {
    crate::gate::emulating() && hub::live_fibers() > 0
}

/// In a forked child: the other fibers, which held or waited for
/// [`LOADER`], are gone; the forking one keeps its hold (a constructor
/// that forks, as `system` does, returns through its `dlopen` there too).
pub(crate) fn after_fork_child() {
    let me = hub::current_id();
    LOADER.with(|l| {
        if l.holder.get() != me {
            l.holder.set(0);
            l.depth.set(0);
        }
    });
}

hook! {
    /// `dlclose`: one at a time among fibers, as `dlopen` (see the module
    /// docs); the destructors it runs are the program's.
    [thread] fn dlclose(h: *mut c_void) -> c_int {
        if !loader_lock_here() {
            // SAFETY: forwarded unchanged.
            return unsafe { dlclose::real(h) };
        }
        enter_loader();
        // SAFETY: forwarded unchanged.
        let r = crate::hook::program(|| unsafe { dlclose::real(h) });
        leave_loader();
        r
    }
}

/// The real `dlopen` and `dlmopen` (the next definitions), resolved by the
/// first [`before`] call.
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);
static REAL_DLMOPEN: AtomicUsize = AtomicUsize::new(0);

/// What [`before`] tells the trampoline: a `ret` instruction in the
/// caller's object to return through and the state to hand to [`after`],
/// or zeros for a plain jump to the real function.
#[repr(C)]
struct Plan {
    gadget: usize,
    state: *mut State,
}

/// What [`before`] hands to [`after`] through the stack.
struct State {
    /// Fibers with TLS of their own to tell of the load: what the TLS
    /// looked like before it, and the newest fiber that existed then
    /// (fiber ids only grow, and a fiber a constructor makes gets its
    /// block with the library's image already in it).
    tls: Option<(Before, u64)>,
    /// [`LOADER`] was taken for the call.
    locked: bool,
}

/// Resolves `real` (`name` is NUL-terminated) once.
fn resolve(real: &AtomicUsize, name: &'static [u8]) {
    if real.load(Ordering::Relaxed) == 0 {
        real.store(crate::real::resolve(name) as usize, Ordering::Relaxed);
    }
}

/// Called by the trampoline with the caller's return address: resolves the
/// real function, and decides whether fibers must hear of this load.
extern "C" fn before<const M: bool>(ret: usize) -> Plan {
    let errno = fiber::errno::get();
    let nothing = Plan {
        gadget: 0,
        state: std::ptr::null_mut(),
    };
    // Never unwind into the trampoline (see `after`).
    let plan = std::panic::catch_unwind(|| {
        fiber::tls::loaded_objects_changed();
        if M {
            resolve(&REAL_DLMOPEN, b"dlmopen\0");
        } else {
            resolve(&REAL_DLOPEN, b"dlopen\0");
        }
        let lock = loader_lock_here();
        let tls = crate::gate::patched() && hub::live_fibers() > 0 && fiber::tls::enabled();
        if !lock && !tls {
            return nothing;
        }
        let gadget = {
            let _g = hub::internal::Guard::new();
            ret_in_object_of(ret)
        };
        let Some(gadget) = gadget else {
            return nothing;
        };
        if lock {
            enter_loader();
        }
        let _g = hub::internal::Guard::new();
        let tls = tls.then(|| {
            let caller_tp = hub::with_current_fiber(|f| f.filter(|f| f.has_own_tls()).map(|f| f.thread_pointer()));
            let mut newest = 0;
            hub::for_each_task(|t| newest = newest.max(t.id()));
            (Before::take(caller_tp), newest)
        });
        Plan {
            gadget,
            state: Box::into_raw(Box::new(State { tls, locked: lock })),
        }
    });
    let plan = plan.unwrap_or_else(|_| abort_in::<M>());
    fiber::errno::set(errno);
    plan
}

/// Called by the trampoline's stub once the real function returned
/// `handle`, with the state [`before`] made.
extern "C" fn after<const M: bool>(state: *mut State, handle: *mut c_void) {
    let errno = fiber::errno::get();
    let r = std::panic::catch_unwind(|| {
        // SAFETY: `before` made it with Box::into_raw, for this call only.
        let State { tls, locked } = *unsafe { Box::from_raw(state) };
        fiber::tls::loaded_objects_changed();
        if locked {
            leave_loader();
        }
        let Some((before, newest)) = tls.filter(|_| !handle.is_null()) else {
            return;
        };
        let _g = hub::internal::Guard::new();
        let loaded = before.loaded();
        if loaded.is_empty() {
            return;
        }
        hub::for_each_task(|t| {
            if t.id() > newest {
                return;
            }
            if let Some(f) = t.fiber().filter(|f| f.has_own_tls()) {
                // SAFETY: a live fiber of this hub (so of this OS thread,
                // which is here): its block was made before the load.
                unsafe { loaded.init(f.thread_pointer()) };
            }
        });
    });
    if r.is_err() {
        abort_in::<M>()
    }
    fiber::errno::set(errno);
}

/// Aborts for a panic in [`before`] or [`after`], with the hook's name.
fn abort_in<const M: bool>() -> ! {
    crate::hook::abort_in(if M { "dlmopen" } else { "dlopen" })
}

/// A `ret` instruction (a 0xc3 byte in an executable segment) of the object
/// whose code holds `addr`: glibc takes any address in the object for the
/// caller. None for an address in no object (JIT code), where the load is
/// left to the real function alone.
fn ret_in_object_of(addr: usize) -> Option<usize> {
    struct Search {
        addr: usize,
        found: Option<usize>,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info; `data` is our Search.
        unsafe {
            let info = &*info;
            let s = &mut *(data as *mut Search);
            let base = info.dlpi_addr as usize;
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
            let holds = |p: &libc::Elf64_Phdr| {
                (base + p.p_vaddr as usize..base + (p.p_vaddr + p.p_memsz) as usize).contains(&s.addr)
            };
            if !loads().any(holds) {
                return 0;
            }
            for p in loads().filter(|p| p.p_flags & libc::PF_X != 0) {
                // The segment's file bytes, mapped readable and executable.
                let code = std::slice::from_raw_parts((base + p.p_vaddr as usize) as *const u8, p.p_filesz as usize);
                if let Some(i) = code.iter().position(|&b| b == 0xc3) {
                    s.found = Some(code.as_ptr() as usize + i);
                    break;
                }
            }
            1
        }
    }
    let mut s = Search { addr, found: None };
    // SAFETY: the callback only reads what the loader passes and writes `s`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut s).cast()) };
    s.found
}

/// The trampoline of `$name` (`$m`: whether it is `dlmopen`, whose three
/// arguments are `rdi`, `rsi`, `rdx`; `dlopen` has two). The stack at the
/// real function's entry, when fibers must hear of the load (`S` is the
/// stack pointer at the hook's entry, where the caller's return address is):
/// `S-32` the `ret` found in the caller's object, `S-24` the stub `2:`,
/// `S-16` the state for `after`, `S` the caller's return address; the real
/// function returns to the borrowed `ret`, which returns to the stub.
macro_rules! trampoline {
    ($name:literal, $m:literal, $real:ident) => {
        const _: () = {
            #[unsafe(naked)]
            #[unsafe(export_name = $name)]
            unsafe extern "C" fn trampoline() {
                std::arch::naked_asm!(
                    "push rdi",
                    "push rsi",
                    "push rdx",
                    "mov rdi, [rsp + 24]",
                    "call {before}",
                    "mov r10, rdx",
                    "mov r11, rax",
                    "pop rdx",
                    "pop rsi",
                    "pop rdi",
                    "mov rax, [rip + {real}]",
                    "test r11, r11",
                    "jz 3f",
                    "mov [rsp - 16], r10",
                    "lea rcx, [rip + 2f]",
                    "mov [rsp - 24], rcx",
                    "mov [rsp - 32], r11",
                    "sub rsp, 32",
                    "3:",
                    "jmp rax",
                    "2:",
                    "mov [rsp + 8], rax",
                    "mov rdi, [rsp]",
                    "mov rsi, rax",
                    "sub rsp, 8",
                    "call {after}",
                    "add rsp, 8",
                    "mov rax, [rsp + 8]",
                    "add rsp, 16",
                    "ret",
                    before = sym before::<$m>,
                    after = sym after::<$m>,
                    real = sym $real,
                )
            }
        };
    };
}

trampoline!("dlopen", false, REAL_DLOPEN);
trampoline!("dlmopen", true, REAL_DLMOPEN);
