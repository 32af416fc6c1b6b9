//! `siglongjmp` out of a signal handler (the classic timeout: `alarm`,
//! then a handler that jumps back to a `sigsetjmp` made before the call).
//!
//! glibc's `siglongjmp` restores the mask `sigsetjmp` saved with its
//! internal `sigprocmask`, which no hook sees: the fiber's virtual mask
//! kept the handler's (its signal blocked, so the next `alarm` never
//! reached a handler), and the OS thread's real mask, which greenhook keeps
//! as the intersection of every context's, was set to a stale one. And the
//! mask `sigsetjmp` saved was that real mask, not the fiber's.
//!
//! So, where masks are virtual:
//! - `__sigsetjmp` (what the `sigsetjmp` macro calls) goes through a stub
//!   that first writes the calling context's virtual mask into the spare
//!   end of the buffer's `__saved_mask` (glibc's `sigprocmask` fills only
//!   the kernel's 8 bytes of it, and x86-64's shadow-stack pointer lives
//!   in its first 32), then jumps on to glibc's. x86-64 only; elsewhere the
//!   real mask glibc saved stands in.
//! - `siglongjmp`, `longjmp`, `_longjmp` (one function in glibc) and
//!   `__longjmp_chk` (their fortified form), when the buffer saved a mask,
//!   set the virtual mask to it as the `sigprocmask` hook does, set the
//!   real mask to the intersection again (a handler the kernel ran, a
//!   fault's or one the trampoline ran at once, left it with the handler's
//!   signal blocked: the next fault killed the process), run what that
//!   unblocked (the kernel delivers it inside `siglongjmp`'s
//!   `sigprocmask`), then jump with a copy of the buffer that says no mask
//!   was saved, so glibc leaves the real mask alone.

use libc::{c_int, c_ulong, sigset_t};

use crate::hook::hook;

/// glibc's `struct __jmp_buf_tag` (`jmp_buf` and `sigjmp_buf` are arrays
/// of one).
#[repr(C)]
pub(crate) struct JmpBufTag {
    regs: [c_ulong; REGS],
    mask_was_saved: c_int,
    saved_mask: sigset_t,
}

/// The words of `__jmp_buf`.
#[cfg(target_arch = "x86_64")]
const REGS: usize = 8;
#[cfg(target_arch = "aarch64")]
const REGS: usize = 22;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const REGS: usize = 64; // unused: the stub and the jumps' layout are per target

/// What marks our record in a buffer: "greenhoo", then "k" and the mask.
const MAGIC: u64 = 0x6f6f_686e_6565_7267;

/// Where in `__saved_mask` our record goes: its last two words, past the
/// kernel's sigset and the shadow-stack pointer glibc may keep there.
const RECORD: usize = 14;

// The record fits, and where glibc's 8 bytes and pad end is before it.
const _: () = assert!(std::mem::size_of::<sigset_t>() >= (RECORD + 2) * std::mem::size_of::<u64>());
const _: () = assert!(RECORD * std::mem::size_of::<u64>() >= 32);

/// The `__val` words of a sigset (glibc's `__sigset_t`, 16 longs of 64
/// bits on the targets greenhook hooks).
fn words(s: &mut sigset_t) -> &mut [u64; 16] {
    // SAFETY: glibc's sigset_t is `struct { unsigned long __val[16]; }`
    // (checked by the assertion above), any bit pattern valid.
    unsafe { &mut *(s as *mut sigset_t).cast::<[u64; 16]>() }
}

/// Where a mask is to be saved (`savemask` non-zero): writes the calling
/// context's virtual mask into `env`'s record, or clears the record where
/// masks are not virtual. With `savemask` 0 nothing is written: glibc
/// saves no mask and the jump reads none, and the buffer may be smaller
/// than a `sigjmp_buf` (`pthread_cleanup_push` passes its 104-byte
/// `__pthread_unwind_buf_t`, whose record words would lie 80 bytes past
/// its end, in the caller's frame: Boehm GC's threads crashed there).
///
/// # Safety
/// `env` points at a `struct __jmp_buf_tag` the caller may write, a whole
/// one (with its `__saved_mask`) where `savemask` is non-zero.
#[cfg_attr(not(all(target_arch = "x86_64", not(greenhook_table))), allow(dead_code))]
unsafe fn note(env: *mut JmpBufTag, savemask: c_int) {
    if savemask == 0 {
        return;
    }
    // SAFETY: per the contract; only the two record words are touched.
    let w = words(unsafe { &mut (*env).saved_mask });
    if super::virtual_masks() {
        w[RECORD] = MAGIC;
        w[RECORD + 1] = super::virtual_mask();
    } else {
        w[RECORD] = 0;
    }
}

/// What the x86-64 stub calls before glibc's `__sigsetjmp`: records the
/// mask ([`note`]) and returns glibc's function, to jump to. Never
/// unwinds (the stub has no unwind information for a call).
#[cfg(all(target_arch = "x86_64", not(greenhook_table)))]
extern "C" fn sigsetjmp_prepare(env: *mut JmpBufTag, savemask: c_int) -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let r = std::panic::catch_unwind(|| {
        let depth = hub::internal::enter_hook();
        // SAFETY: the program's buffer, passed to sigsetjmp to fill.
        unsafe { note(env, savemask) };
        // SAFETY: made just above, in this context, left once. A signal
        // that came meanwhile waits for the program's next hook.
        unsafe { depth.leave() };
    });
    if r.is_err() {
        crate::hook::abort_in("__sigsetjmp");
    }
    match REAL.load(Relaxed) {
        0 => {
            let p = crate::real::resolve(b"__sigsetjmp\0") as usize;
            REAL.store(p, Relaxed);
            p
        }
        p => p,
    }
}

/// `__sigsetjmp`: records the mask, then glibc's by a jump, so that the
/// frame glibc saves is the caller's (a wrapper's frame would be gone when
/// the buffer is jumped to).
#[cfg(all(target_arch = "x86_64", not(greenhook_table)))]
#[unsafe(naked)]
#[unsafe(export_name = "__sigsetjmp")]
unsafe extern "C" fn sigsetjmp_stub(env: *mut JmpBufTag, savemask: c_int) -> c_int {
    std::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {prepare}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        prepare = sym sigsetjmp_prepare,
    )
}

/// The mask `env` saved, as bits: our record where it has one, else the
/// real mask glibc saved.
fn saved(env: &JmpBufTag) -> u64 {
    let mut m = env.saved_mask;
    let w = *words(&mut m);
    if w[RECORD] == MAGIC {
        w[RECORD + 1]
    } else {
        super::set_to_bits(&env.saved_mask)
    }
}

/// A jump by `real` (glibc's `siglongjmp` or `__longjmp_chk`) to `env`,
/// with the virtual mask restored where it saved one (see the module docs).
///
/// # Safety
/// `env` is a buffer `sigsetjmp`/`setjmp` filled, whose frame is live.
unsafe fn jump(env: *mut JmpBufTag, val: c_int, real: unsafe fn(*mut JmpBufTag, c_int)) -> ! {
    // A byte copy of the buffer (parts of it may never have been written),
    // saying no mask was saved: in this frame, alive until the jump.
    let mut copy = std::mem::MaybeUninit::<JmpBufTag>::uninit();
    // SAFETY: per the contract; glibc always writes the flag.
    let target = if unsafe { (*env).mask_was_saved } != 0 {
        // SAFETY: per the contract: a mask was saved, so `sigsetjmp` wrote
        // the kernel's word of it, and our stub the record.
        let bits = saved(unsafe { &*env });
        // SAFETY: a zeroed sigset is valid; bits_to_set initialises it.
        let mut set: sigset_t = unsafe { std::mem::zeroed() };
        super::bits_to_set(bits, &mut set);
        super::change_mask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        // The jump may leave a handler the kernel ran (a fault's, or one
        // run from the trampoline at once): the real mask is still the
        // one it ran under.
        super::state::with(|st| st.reapply_real());
        // What the mask unblocked runs now, before the jump.
        super::run_pending();
        // SAFETY: `env` is a whole buffer, `copy` as large; then the
        // copy's flag, a plain int, is written through its pointer.
        unsafe {
            std::ptr::copy_nonoverlapping(env, copy.as_mut_ptr(), 1);
            (&raw mut (*copy.as_mut_ptr()).mask_was_saved).write(0);
        }
        copy.as_mut_ptr()
    } else {
        env
    };
    // Back in the program's code, at depth 0, once it lands.
    // SAFETY: per the contract; the copy (in this frame) is read before
    // the jump leaves it.
    crate::hook::program(|| unsafe { real(target, val) });
    std::process::abort()
}

hook! {
    /// `siglongjmp(3)`.
    #[gate(super::virtual_masks())]
    [signal] fn siglongjmp(env: *mut JmpBufTag, val: c_int) {
        // SAFETY: the caller's buffer.
        unsafe { jump(env, val, siglongjmp::real) }
    }

    /// `longjmp(3)` (glibc's `siglongjmp`: it restores a mask `sigsetjmp`
    /// saved).
    #[gate(super::virtual_masks())]
    [signal] fn longjmp(env: *mut JmpBufTag, val: c_int) {
        // SAFETY: the caller's buffer.
        unsafe { jump(env, val, longjmp::real) }
    }

    /// `_longjmp(3)` (the same function in glibc).
    #[gate(super::virtual_masks())]
    [signal] fn _longjmp(env: *mut JmpBufTag, val: c_int) {
        // SAFETY: the caller's buffer.
        unsafe { jump(env, val, _longjmp::real) }
    }

    /// `__longjmp_chk`: what `longjmp` and `siglongjmp` compile to under
    /// `_FORTIFY_SOURCE` (glibc checks the jump goes up the stack).
    #[gate(super::virtual_masks())]
    [signal] fn __longjmp_chk(env: *mut JmpBufTag, val: c_int) {
        // SAFETY: the caller's buffer.
        unsafe { jump(env, val, __longjmp_chk::real) }
    }
}
