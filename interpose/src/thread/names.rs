//! Thread names: a pthread fiber's name lives in its record (16 bytes, NUL
//! padded, like the kernel's `comm`), so that `pthread_setname_np` and
//! `prctl(PR_SET_NAME)` name the fiber rather than the OS thread it shares;
//! the stall monitor and deadlock reports print it.

use libc::{c_char, c_int, pthread_t, size_t};

use super::handle::Gone;
use super::{current_record, lookup, resolve, Target, REGISTRY};
use crate::hook::hook;

/// The name a new thread starts with: its creator's (Linux copies `comm`),
/// a fiber's own, else the OS thread's.
pub(super) fn inherited() -> [u8; 16] {
    match current_record() {
        Some(me) => *me.name.borrow(),
        None => {
            let mut name = [0u8; 16];
            // SAFETY: a 16-byte buffer for the creator's real thread name.
            unsafe { pthread_getname_np::real(super::os_thread_self(), name.as_mut_ptr().cast(), 16) };
            name
        }
    }
}

/// The running task's user word, without touching reference counts.
fn fiber_task_user() -> Option<usize> {
    if !hub::in_fiber() {
        return None;
    }
    hub::current_user().filter(|&u| u != 0)
}

/// The running fiber's pthread name for the stall monitor: called in a
/// signal handler on the hub thread, so it only reads (`with_existing`,
/// `try_borrow`), never allocates.
pub(crate) fn name_for_monitor(buf: &mut [u8; 64]) -> usize {
    let Some(key) = fiber_task_user() else { return 0 };
    REGISTRY
        .with_existing(|r| {
            let Ok(r) = r.try_borrow() else { return 0 };
            let Some(rec) = r.get(&key) else { return 0 };
            let Ok(name) = rec.name.try_borrow() else { return 0 };
            let n = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            buf[..n].copy_from_slice(&name[..n]);
            n
        })
        .unwrap_or(0)
}

/// The pthread name of the fiber whose record is `key` (deadlock reports).
pub(crate) fn name_of(key: usize) -> Option<String> {
    let rec = lookup(key as pthread_t)?;
    let name = rec.name.borrow();
    let n = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..n]).into_owned())
}

/// The NUL-terminated name at `p` as the kernel's `PR_SET_NAME` takes it:
/// at most 15 bytes, NUL padded; `EFAULT` if its first byte cannot be
/// read.
fn name_at(p: *const u8) -> Result<[u8; 16], c_int> {
    let mut name = [0u8; 16];
    if crate::user::read_bytes(p, &mut name).is_err() {
        // Near the end of a mapping: byte by byte, up to the NUL.
        name = [0u8; 16];
        for (i, b) in name.iter_mut().enumerate().take(15) {
            // SAFETY: within the caller's string, up to its NUL.
            match crate::user::read_bytes(unsafe { p.add(i) }, std::slice::from_mut(b)) {
                Ok(()) if *b == 0 => break,
                Ok(()) => {}
                Err(e) if i == 0 => return Err(e),
                Err(_) => break,
            }
        }
    }
    if let Some(end) = name.iter().position(|&b| b == 0) {
        name[end..].fill(0);
    }
    name[15] = 0;
    Ok(name)
}

hook! {
    /// `prctl(2)`: in a pthread fiber, `PR_SET_NAME` and `PR_GET_NAME` name
    /// the fiber, as `pthread_setname_np` does (they named the OS thread
    /// the fibers share: the last fiber to name itself named them all, main
    /// included); every other option, and every other caller, goes to the
    /// kernel. `PR_SET_TIMERSLACK` sets the OS thread's, and the hub's
    /// timers follow it (`hub::timer_slack_changed`). Variadic in glibc:
    /// the four words after the option travel as words.
    [thread] fn prctl(option: c_int, a2: libc::c_ulong, a3: libc::c_ulong, a4: libc::c_ulong, a5: libc::c_ulong) -> c_int {
        let me = match option {
            libc::PR_SET_NAME | libc::PR_GET_NAME => current_record().filter(|_| crate::gate::emulating()),
            _ => None,
        };
        let Some(me) = me else {
            // SAFETY: forwarded unchanged.
            let r = unsafe { prctl::real(option, a2, a3, a4, a5) };
            if option == libc::PR_SET_TIMERSLACK && r == 0 {
                hub::timer_slack_changed();
            }
            return r;
        };
        if option == libc::PR_SET_NAME {
            match name_at(a2 as *const u8) {
                Ok(name) => *me.name.borrow_mut() = name,
                Err(e) => return crate::errno::fail(e),
            }
        } else {
            let name = *me.name.borrow();
            if let Err(e) = crate::user::write(a2 as *mut [u8; 16], name) {
                return crate::errno::fail(e);
            }
        }
        0
    }

    /// `pthread_setname_np`: `ERANGE` for names of 16 bytes or more, like
    /// glibc, before anything else; a thread that ended is `ENOENT` (glibc
    /// finds no `/proc/self/task/<tid>/comm` for it).
    [thread] fn pthread_setname_np(t: pthread_t, name: *const c_char) -> c_int {
        let rec = match resolve(t) {
            Target::Real => {
                // SAFETY: not ours: forwarded unchanged.
                return unsafe { pthread_setname_np::real(t, name) };
            }
            target => target,
        };
        // SAFETY: the caller's NUL-terminated name.
        let n = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
        if n.len() >= 16 {
            return libc::ERANGE;
        }
        match rec {
            Target::Fiber(rec) if !rec.ended.get() => {
                let mut buf = [0u8; 16];
                buf[..n.len()].copy_from_slice(n);
                *rec.name.borrow_mut() = buf;
                0
            }
            Target::Gone(Gone::Never) => libc::ESRCH,
            _ => libc::ENOENT,
        }
    }

    /// `pthread_getname_np`: `ERANGE` when `len` < 16, like glibc, before
    /// anything else; a thread that ended is `ENOENT`.
    [thread] fn pthread_getname_np(t: pthread_t, buf: *mut c_char, len: size_t) -> c_int {
        let rec = match resolve(t) {
            Target::Real => {
                // SAFETY: not ours: forwarded unchanged.
                return unsafe { pthread_getname_np::real(t, buf, len) };
            }
            target => target,
        };
        if len < 16 {
            return libc::ERANGE;
        }
        match rec {
            Target::Fiber(rec) if !rec.ended.get() => {
                let name = *rec.name.borrow();
                // SAFETY: the caller's buffer holds at least 16 bytes.
                unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), buf.cast(), 16) };
                // SAFETY: as above; the last byte terminates.
                unsafe { *buf.add(15) = 0 };
                0
            }
            Target::Gone(Gone::Never) => libc::ESRCH,
            _ => libc::ENOENT,
        }
    }
}
