//! The System V and BSD signal calls: `sighold`, `sigrelse`, `sigignore`,
//! `sigset`, `sigpause`, `siginterrupt`, `sigblock`, `sigsetmask`,
//! `siggetmask`, and the aliases `gsignal` (of `raise`) and `ssignal` (of
//! `signal`).
//!
//! glibc builds each of them on its internal `sigaction`, `sigprocmask`
//! and `sigsuspend`, which no hook sees. Unhooked, `sighold` blocked the
//! signal in the OS thread's mask but not in the calling thread's, so its
//! handler still ran; `siginterrupt` changed `SA_RESTART` in the kernel's
//! action but not in the program's, so a `read` it should end with
//! `EINTR` went on waiting; `sigset` installed the program's handler in the
//! kernel, bypassing the trampoline, and `sigpause` blocked every fiber of
//! the hub in the kernel. Here each is glibc's own sequence of calls
//! (`sysdeps/posix/`), made to the hooked functions, so they get the same
//! answers and the same errors (`sigaddset`'s `EINVAL` for a bad or
//! internal signal) as the program's own calls would.

use libc::{c_int, sighandler_t, sigset_t};

use super::{bits_to_set, set_to_bits, sigaction, signal_with, sigprocmask, sigsuspend, SigAction};
use crate::hook::hook;

/// glibc's `SIG_HOLD` (`<signal.h>`, with `__USE_XOPEN_EXTENDED`).
const SIG_HOLD: sighandler_t = 2;

/// The set of `sig` alone, or `None` (errno set by `sigaddset`, as glibc's
/// callers leave it) for a signal `sigaddset` refuses.
fn only(sig: c_int) -> Option<sigset_t> {
    // SAFETY: a zeroed sigset is valid to fill; `sigaddset` checks `sig`.
    unsafe {
        let mut set: sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        (libc::sigaddset(&mut set, sig) == 0).then_some(set)
    }
}

/// Whether `sig` is in `set` (which holds only valid signals).
fn has(set: &sigset_t, sig: c_int) -> bool {
    // SAFETY: a valid set; `sig` was accepted by `sigaddset`.
    unsafe { libc::sigismember(set, sig) == 1 }
}

/// A BSD mask (`sigmask(n)` bits, signals 1–32) as a set, as glibc's
/// `sigset_set_old_mask`.
fn from_old_mask(mask: c_int) -> sigset_t {
    // SAFETY: a zeroed sigset is valid; filled below.
    let mut set: sigset_t = unsafe { std::mem::zeroed() };
    bits_to_set(u64::from(mask as u32), &mut set);
    set
}

/// `sigprocmask` with a BSD mask in and out (`sigblock`, `sigsetmask`).
fn old_mask_call(how: c_int, mask: c_int) -> c_int {
    let set = from_old_mask(mask);
    // SAFETY: a zeroed sigset is a valid out buffer.
    let mut old: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sets.
    if unsafe { sigprocmask(how, &set, &mut old) } < 0 {
        return -1;
    }
    set_to_bits(&old) as u32 as c_int
}

/// `sigsuspend` on the caller's mask less `sig` (`__sigpause(sig, 1)`).
fn pause_unblocking(sig: c_int) -> c_int {
    // SAFETY: a zeroed sigset is a valid out buffer.
    let mut set: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a query of the caller's mask; `sigdelset` checks `sig`.
    unsafe {
        if sigprocmask(libc::SIG_SETMASK, std::ptr::null(), &mut set) < 0 || libc::sigdelset(&mut set, sig) < 0 {
            return -1;
        }
        sigsuspend(&set)
    }
}

hook! {
    /// `sighold(3)`: blocks `sig` in the calling thread.
    [signal] fn sighold(sig: c_int) -> c_int {
        match only(sig) {
            // SAFETY: a valid set.
            Some(set) => unsafe { sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) },
            None => -1,
        }
    }

    /// `sigrelse(3)`: unblocks `sig` in the calling thread.
    [signal] fn sigrelse(sig: c_int) -> c_int {
        match only(sig) {
            // SAFETY: a valid set.
            Some(set) => unsafe { sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) },
            None => -1,
        }
    }

    /// `sigignore(3)`: `SIG_IGN`, an empty mask, no flags.
    [signal] fn sigignore(sig: c_int) -> c_int {
        // SAFETY: a zeroed sigaction is SIG_DFL, an empty mask, no flags.
        let mut act: SigAction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = libc::SIG_IGN;
        // SAFETY: valid pointers.
        unsafe { sigaction(sig, &act, std::ptr::null_mut()) }
    }

    /// `sigset(3)`: `SIG_HOLD` blocks `sig`; any other disposition is
    /// installed (no flags, an empty mask) and `sig` unblocked. The answer
    /// is `SIG_HOLD` when `sig` was blocked, else the previous handler.
    [signal] fn sigset(sig: c_int, disp: sighandler_t) -> sighandler_t {
        let Some(set) = only(sig) else { return libc::SIG_ERR };
        // SAFETY: zeroed sigsets and sigactions are valid out buffers.
        let (mut was, mut old): (sigset_t, SigAction) = unsafe { std::mem::zeroed() };
        if disp == SIG_HOLD {
            // SAFETY: valid sets.
            if unsafe { sigprocmask(libc::SIG_BLOCK, &set, &mut was) } < 0 {
                return libc::SIG_ERR;
            }
            if has(&was, sig) {
                return SIG_HOLD;
            }
            // SAFETY: a query into a valid buffer.
            if unsafe { sigaction(sig, std::ptr::null(), &mut old) } < 0 {
                return libc::SIG_ERR;
            }
            return old.sa_sigaction;
        }
        // SAFETY: as above; filled below.
        let mut act: SigAction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = disp;
        // SAFETY: valid pointers and sets.
        unsafe {
            if sigaction(sig, &act, &mut old) < 0 || sigprocmask(libc::SIG_UNBLOCK, &set, &mut was) < 0 {
                return libc::SIG_ERR;
            }
        }
        if has(&was, sig) { SIG_HOLD } else { old.sa_sigaction }
    }

    /// `siginterrupt(3)`: clears (`interrupt` non-zero) or sets the
    /// handler's `SA_RESTART`.
    [signal] fn siginterrupt(sig: c_int, interrupt: c_int) -> c_int {
        // SAFETY: a zeroed sigaction is a valid out buffer.
        let mut act: SigAction = unsafe { std::mem::zeroed() };
        // SAFETY: a query into a valid buffer, then the same action back.
        unsafe {
            if sigaction(sig, std::ptr::null(), &mut act) < 0 {
                return -1;
            }
            if interrupt != 0 {
                act.sa_flags &= !libc::SA_RESTART;
            } else {
                act.sa_flags |= libc::SA_RESTART;
            }
            if sigaction(sig, &act, std::ptr::null_mut()) < 0 {
                return -1;
            }
        }
        0
    }

    /// `sigpause(3)`, glibc's default (BSD) one: waits for a handler with
    /// the BSD `mask` as the thread's mask.
    [signal] fn sigpause(mask: c_int) -> c_int {
        let set = from_old_mask(mask);
        // SAFETY: a valid set.
        unsafe { sigsuspend(&set) }
    }

    /// `__xpg_sigpause`, the X/Open `sigpause` that `<signal.h>` names
    /// under `_XOPEN_SOURCE`/`_GNU_SOURCE`: waits with `sig` unblocked.
    [signal] fn __xpg_sigpause(sig: c_int) -> c_int {
        pause_unblocking(sig)
    }

    /// `__sigpause(sig_or_mask, is_sig)`, behind both `sigpause`s.
    [signal] fn __sigpause(sig_or_mask: c_int, is_sig: c_int) -> c_int {
        if is_sig != 0 {
            return pause_unblocking(sig_or_mask);
        }
        let set = from_old_mask(sig_or_mask);
        // SAFETY: a valid set.
        unsafe { sigsuspend(&set) }
    }

    /// `sigblock(3)`: adds a BSD mask; the previous one back.
    [signal] fn sigblock(mask: c_int) -> c_int {
        old_mask_call(libc::SIG_BLOCK, mask)
    }

    /// `sigsetmask(3)`: sets a BSD mask; the previous one back.
    [signal] fn sigsetmask(mask: c_int) -> c_int {
        old_mask_call(libc::SIG_SETMASK, mask)
    }

    /// `siggetmask(3)`: the BSD mask (`sigblock(0)`).
    [signal] fn siggetmask() -> c_int {
        old_mask_call(libc::SIG_BLOCK, 0)
    }

    /// `gsignal(3)`: glibc's alias of `raise`.
    [signal] fn gsignal(sig: c_int) -> c_int {
        // SAFETY: plain integer argument.
        unsafe { super::raise(sig) }
    }

    /// `ssignal(3)`: glibc's alias of `signal`.
    [signal] fn ssignal(sig: c_int, h: sighandler_t) -> sighandler_t {
        signal_with(sig, h, libc::SA_RESTART)
    }
}
