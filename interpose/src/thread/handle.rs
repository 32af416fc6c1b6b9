//! What a `pthread_t` is, judged without dereferencing it.
//!
//! A fiber's `pthread_t` is a number, not an address: [`TAG`] in the top
//! bits and a serial number below, never reused in the process's life (a
//! stale copy can never name a newer thread). No user-space address has
//! those top bits (non-canonical on x86-64; above every user address on
//! AArch64), so a handle tells at a glance whether it is ours, and glibc
//! never receives one.
//!
//! A handle of ours that is no longer in the registry belonged to a thread
//! that was joined, or that was detached and ended; glibc 2.36 answers the
//! two differently (it reads the stale descriptor in its stack cache), so
//! the most recent detached ends are remembered ([`DETACHED_KEPT`] of
//! them; glibc's own cache keeps fewer). Any other value is glibc's, if it
//! looks like one of its thread descriptors ([`foreign_valid`]): garbage
//! that glibc would crash on gets `ESRCH` here.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::pthread_t;

/// The top 16 bits of every fiber handle ("gh").
const TAG: usize = 0x6768 << 48;
const TAG_MASK: usize = 0xffff << 48;
/// Serial numbers sit above 4 zero bits, so handles look aligned.
const SHIFT: u32 = 4;
/// Detached threads whose end is remembered, per OS thread.
const DETACHED_KEPT: usize = 1024;

/// The next serial number (0 is never issued).
static NEXT: AtomicUsize = AtomicUsize::new(1);

/// Handles of detached threads that ended, oldest first (per OS thread:
/// see `hub::PerThread`).
static DETACHED: hub::PerThread<RefCell<VecDeque<usize>>> = hub::PerThread::new(|| RefCell::new(VecDeque::new()));

/// A new handle, unique in the process.
pub(super) fn new_handle() -> usize {
    TAG | NEXT.fetch_add(1, Ordering::Relaxed) << SHIFT
}

/// Whether `t` is one of our handles (live or not).
#[inline]
pub(super) fn is_ours(t: pthread_t) -> bool {
    t as usize & TAG_MASK == TAG
}

/// The serial number of one of our handles.
pub(super) fn serial(h: usize) -> usize {
    (h & !TAG_MASK) >> SHIFT
}

/// The handle of serial number `s`.
pub(super) fn from_serial(s: usize) -> usize {
    TAG | s << SHIFT
}

/// The serial number the next thread will get.
pub(super) fn next_serial() -> usize {
    NEXT.load(Ordering::Relaxed)
}

/// How a handle of ours that is not live now ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Gone {
    /// Joined (or lost in the past: glibc's most common answer).
    Joined,
    /// Detached, and it ended.
    Detached,
    /// Never issued, or not a thread at all: `ESRCH` to everything.
    Never,
}

/// Notes that the detached thread `h` ended.
pub(super) fn ended_detached(h: usize) {
    // The queue may grow: as machinery, so that an allocator's lock taken
    // meanwhile cannot park this fiber with the queue borrowed.
    let _g = hub::internal::Guard::new();
    DETACHED.with(|d| {
        let mut d = d.borrow_mut();
        if d.len() == DETACHED_KEPT {
            d.pop_front();
        }
        d.push_back(h);
    });
}

/// Whether our handle `h` was issued (its thread may have ended since).
pub(super) fn issued(h: usize) -> bool {
    h & ((1 << SHIFT) - 1) == 0 && serial(h) != 0 && serial(h) < next_serial()
}

/// How the thread of our handle `h`, no longer in the registry, ended.
pub(super) fn gone(h: usize) -> Gone {
    if !issued(h) {
        return Gone::Never;
    }
    if DETACHED.with(|d| d.borrow().contains(&h)) {
        Gone::Detached
    } else {
        Gone::Joined
    }
}

/// Whether `t`, not one of our handles, may be given to glibc: it points
/// at readable memory that starts like a thread descriptor. On x86-64 a
/// descriptor begins with its TCB header, whose `tcb` (first word) and
/// `self` (third word) point at itself; elsewhere only readability is
/// checked. Read with `process_vm_readv` on ourselves, which reports an
/// unmapped address as `EFAULT` instead of faulting; where that call is not
/// allowed (a seccomp filter), `t` is trusted as before.
pub(super) fn foreign_valid(t: pthread_t) -> bool {
    if t == 0 {
        return false;
    }
    let mut words = [0usize; 3];
    let local = libc::iovec {
        iov_base: words.as_mut_ptr().cast(),
        iov_len: std::mem::size_of_val(&words),
    };
    let remote = libc::iovec {
        iov_base: t as *mut libc::c_void,
        iov_len: std::mem::size_of_val(&words),
    };
    // SAFETY: reads into our own local buffer; the remote range is only
    // read by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n < 0 {
        return crate::errno::get() != libc::EFAULT;
    }
    if n as usize != std::mem::size_of_val(&words) {
        return false;
    }
    if cfg!(target_arch = "x86_64") {
        words[0] == t as usize && words[2] == t as usize
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_ours_unique_and_never_addresses() {
        let a = new_handle();
        let b = new_handle();
        assert_ne!(a, b);
        assert!(is_ours(a as pthread_t) && is_ours(b as pthread_t));
        assert_eq!(from_serial(serial(a)), a);
        let local = 0u8;
        assert!(!is_ours(&local as *const u8 as pthread_t));
        assert_eq!(gone(a), Gone::Joined);
        ended_detached(b);
        assert_eq!(gone(b), Gone::Detached);
        assert_eq!(gone(from_serial(next_serial() + 5)), Gone::Never);
        assert_eq!(gone(a | 1), Gone::Never);
    }

    #[test]
    fn garbage_is_told_from_a_thread_descriptor() {
        // SAFETY: no arguments.
        let me = unsafe { libc::pthread_self() };
        assert!(foreign_valid(me));
        assert!(!foreign_valid(0));
        assert!(!foreign_valid(0x000d_eadb_eef0));
        let buf = [0u8; 64];
        assert!(!foreign_valid(buf.as_ptr() as pthread_t) || !cfg!(target_arch = "x86_64"));
    }
}
