//! The return from greenhook's own signal handlers (x86-64 Linux).
//!
//! The kernel starts a signal frame with the handler's return address,
//! the action's `sa_restorer`, which glibc's `sigaction` always sets to
//! its own `__restore_rt`. Preemption looks for that word on a stack where
//! its walk ran out in code without unwind tables: there it means a signal
//! handler's frame, a handler that may have interrupted a lock's holder
//! (`crate::preempt`'s scan). But a stack word is not a frame: every
//! signal frame leaves its word behind, below the interrupted `%rsp`, and a
//! later frame that never writes that slot (libuv's `uv__io_poll` keeps
//! 1,024 `epoll_event`s on its stack and fills a few) keeps it as long as
//! it lives. greenhook's own handlers made most of those: the preemption
//! tick fires every millisecond of CPU time, and the trampoline in front
//! of the program's handlers takes all of the program's signals (but
//! faults). node's main thread,
//! spinning in JavaScript for a worker's store, had the scan find such a
//! word in `uv__io_poll`'s frame at each tick, refuse every switch, and
//! hang for good (9 runs of 40 of the compat `node` row).
//!
//! So those two are installed with a restorer of greenhook's own: the same
//! two instructions as glibc's, with the same unwind tables (unwinders and
//! debuggers go through its frames as through glibc's). A `__restore_rt`
//! on a stack is then left by a handler greenhook does not run (a fault's,
//! installed unchanged); the handlers greenhook runs are counted instead
//! (`hook::program`).

use libc::{c_int, c_ulong, sigaction as SigAction};

/// Tells the kernel that `sa_restorer` is set (x86-64's `<asm/signal.h>`).
const SA_RESTORER: c_ulong = 0x0400_0000;

extern "C" {
    /// See the `global_asm!` below.
    fn __greenhook_sigaction_restorer();
}

/// The address greenhook's handlers return to.
pub(crate) fn address() -> usize {
    __greenhook_sigaction_restorer as *const () as usize
}

// `__greenhook_sigaction_restorer`: `rt_sigreturn`, as glibc's
// `__restore_rt`, the very bytes (`movq $15, %rax; syscall`) by which
// unwinders without tables for it (libgcc's fallback, gdb's) know a signal
// frame. Its unwind tables are glibc's too: the frame's registers are in
// the `ucontext` at `%rsp` (the kernel's `rt_sigframe` less its return
// address), the CFA is the interrupted `%rsp`, and it is a signal frame
// (the interrupted `%rip` is not a return address). They begin one byte
// early, at a `nop`: an unwinder looks up a return address less one.
// Offsets: `uc_mcontext.gregs` is at 40, `REG_R8`..`REG_RIP` are 0..16;
// DWARF numbers x86-64's registers rax, rdx, rcx, rbx, rsi, rdi, rbp,
// rsp, r8..r15, rip as 0..16. 0x0f: DW_CFA_def_cfa_expression; 0x10:
// DW_CFA_expression; 0x77: DW_OP_breg7 (%rsp plus an SLEB128); 0x06:
// DW_OP_deref.
std::arch::global_asm!(
    ".pushsection .text.greenhook_sigaction_restorer,\"ax\",@progbits",
    ".p2align 4",
    ".cfi_startproc simple",
    ".cfi_signal_frame",
    // CFA = *(%rsp + 160): the interrupted %rsp (REG_RSP).
    ".cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06",
    ".cfi_escape 0x10, 0x08, 0x02, 0x77, 0x28",       // r8 at 40
    ".cfi_escape 0x10, 0x09, 0x02, 0x77, 0x30",       // r9 at 48
    ".cfi_escape 0x10, 0x0a, 0x02, 0x77, 0x38",       // r10 at 56
    ".cfi_escape 0x10, 0x0b, 0x03, 0x77, 0xc0, 0x00", // r11 at 64
    ".cfi_escape 0x10, 0x0c, 0x03, 0x77, 0xc8, 0x00", // r12 at 72
    ".cfi_escape 0x10, 0x0d, 0x03, 0x77, 0xd0, 0x00", // r13 at 80
    ".cfi_escape 0x10, 0x0e, 0x03, 0x77, 0xd8, 0x00", // r14 at 88
    ".cfi_escape 0x10, 0x0f, 0x03, 0x77, 0xe0, 0x00", // r15 at 96
    ".cfi_escape 0x10, 0x05, 0x03, 0x77, 0xe8, 0x00", // rdi at 104
    ".cfi_escape 0x10, 0x04, 0x03, 0x77, 0xf0, 0x00", // rsi at 112
    ".cfi_escape 0x10, 0x06, 0x03, 0x77, 0xf8, 0x00", // rbp at 120
    ".cfi_escape 0x10, 0x03, 0x03, 0x77, 0x80, 0x01", // rbx at 128
    ".cfi_escape 0x10, 0x01, 0x03, 0x77, 0x88, 0x01", // rdx at 136
    ".cfi_escape 0x10, 0x00, 0x03, 0x77, 0x90, 0x01", // rax at 144
    ".cfi_escape 0x10, 0x02, 0x03, 0x77, 0x98, 0x01", // rcx at 152
    ".cfi_escape 0x10, 0x07, 0x03, 0x77, 0xa0, 0x01", // rsp at 160
    ".cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01", // rip at 168
    "nop",
    ".globl __greenhook_sigaction_restorer",
    ".hidden __greenhook_sigaction_restorer",
    ".type __greenhook_sigaction_restorer,@function",
    "__greenhook_sigaction_restorer:",
    // movq $15, %rax (rt_sigreturn); syscall
    ".byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00",
    ".byte 0x0f, 0x05",
    ".size __greenhook_sigaction_restorer, . - __greenhook_sigaction_restorer",
    ".cfi_endproc",
    ".popsection",
);

/// The kernel's `struct sigaction` (x86-64: `rt_sigaction` takes this).
#[repr(C)]
struct KernelAction {
    handler: usize,
    flags: c_ulong,
    restorer: usize,
    /// Signals 1 to 64, as the first word of glibc's `sigset_t`.
    mask: u64,
}

/// `sigaction(sig, act, old)` as glibc's, but with greenhook's restorer
/// (see the module docs): for greenhook's own handlers only. `old`, when
/// not null, gets the previous action as glibc reports it (its
/// `sa_restorer` is whichever the kernel had: applications do not use it).
/// Returns 0, or -1 with `errno` set.
///
/// # Safety
/// `act.sa_sigaction` is a handler for `sig` with `act.sa_flags`; `old` is
/// null or valid for writes.
pub(crate) unsafe fn install(sig: c_int, act: &SigAction, old: *mut SigAction) -> c_int {
    // SAFETY: glibc's sigset_t begins with the word of signals 1 to 64.
    let mask = unsafe { (&act.sa_mask as *const libc::sigset_t).cast::<u64>().read() };
    let k = KernelAction {
        handler: act.sa_sigaction,
        flags: act.sa_flags as c_ulong | SA_RESTORER,
        restorer: address(),
        mask,
    };
    let mut was = KernelAction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: valid kernel actions and the kernel's sigset size; a raw
    // system call, as glibc's sigaction makes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &k as *const KernelAction,
            &mut was as *mut KernelAction,
            std::mem::size_of::<u64>(),
        )
    };
    if r != 0 {
        return -1;
    }
    if !old.is_null() {
        // SAFETY: a zeroed sigaction is valid (an empty mask, no restorer).
        let mut o: SigAction = unsafe { std::mem::zeroed() };
        o.sa_sigaction = was.handler;
        o.sa_flags = was.flags as c_int;
        // SAFETY: as above, the first word of the zeroed sigset.
        unsafe { (&mut o.sa_mask as *mut libc::sigset_t).cast::<u64>().write(was.mask) };
        // SAFETY: the kernel's restorer, a function address or 0 (None).
        o.sa_restorer = unsafe { std::mem::transmute::<usize, Option<extern "C" fn()>>(was.restorer) };
        // SAFETY: the caller's out pointer.
        unsafe { *old = o };
    }
    0
}
