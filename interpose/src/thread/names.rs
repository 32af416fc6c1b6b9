//! Thread names: a pthread fiber's name lives in its record (16 bytes, NUL
//! padded, like the kernel's `comm`), so that `pthread_setname_np` names
//! the fiber rather than the OS thread it shares; the stall monitor and
//! deadlock reports print it.

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

hook! {
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
