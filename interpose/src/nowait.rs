//! Tries that do not wait, on a socket whose open file description stays
//! blocking ([`fdtable::NOWAIT`](crate::fdtable::NOWAIT)).
//!
//! `O_NONBLOCK` belongs to the open file description, which a fork child,
//! an exec'd program or the receiver of an `SCM_RIGHTS` message shares. A
//! data socket greenhook made non-blocking underneath would reach a
//! program without the preload (an environment cleared for a CGI script,
//! a static or setuid binary) non-blocking, and that program's blocking
//! `write` would meet `EAGAIN`. So a managed data socket keeps the
//! description the program made, and each of our tries asks the kernel
//! not to wait for this call alone:
//! - `recv*`/`send*`: `MSG_DONTWAIT`;
//! - `read`/`write`/`readv`/`writev`: `preadv2`/`pwritev2` at offset -1
//!   with `RWF_NOWAIT`, which reach the socket's own read and write paths
//!   (a zero-length read, `MSG_EOR` on a `SOCK_SEQPACKET` write, as
//!   `read`/`write` do) with the per-call no-wait flag;
//! - `connect`, `sendfile`, `splice` and `tee` have no per-call flag: the
//!   description is made non-blocking for the one call ([`nonblocking`]).
//!
//! `accept` has none either, and a listening socket is shared by design
//! (pre-forked workers): `listen` makes a managed socket non-blocking
//! underneath for good, as pipes are (see `fd::MARK` for how that reaches
//! another process).
//!
//! Kernels without `RWF_NOWAIT` on sockets (before Linux 5.x) get the
//! non-blocking description instead ([`supported`]), as does
//! `GREENHOOK_SOCKETS=nonblocking`.

use std::sync::atomic::{AtomicU8, Ordering};

use libc::{c_int, c_void, iovec, ssize_t};

use crate::errno;
use crate::file::next;

/// 0: not probed yet; 1: per-call no-wait tries; 2: non-blocking
/// descriptions.
static MODE: AtomicU8 = AtomicU8::new(0);

/// Whether new managed sockets stay blocking underneath, with per-call
/// no-wait tries: the kernel supports `RWF_NOWAIT` on sockets and
/// `GREENHOOK_SOCKETS` does not say `nonblocking`. Probed once.
#[inline]
pub(crate) fn supported() -> bool {
    match MODE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => probe(),
    }
}

#[cold]
fn probe() -> bool {
    let saved = errno::get();
    let chosen = !std::env::var("GREENHOOK_SOCKETS").is_ok_and(|v| v.trim() == "nonblocking");
    let ok = chosen && kernel_supports();
    errno::set(saved);
    MODE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
    ok
}

/// Whether `preadv2(RWF_NOWAIT)` on an empty blocking socket answers
/// `EAGAIN` (rather than `EOPNOTSUPP`, or waiting).
fn kernel_supports() -> bool {
    let mut sv = [-1 as c_int; 2];
    // SAFETY: `sv` is an int[2] for the kernel to fill.
    let made = unsafe {
        libc::syscall(
            libc::SYS_socketpair,
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    } == 0;
    if !made {
        return false;
    }
    let mut byte = 0u8;
    let v = iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: one iovec of one byte we own; the socket is empty, and with
    // RWF_NOWAIT honoured the call cannot wait.
    let r = unsafe { next::preadv2(sv[0], &v, 1, -1, libc::RWF_NOWAIT) };
    let ok = r < 0 && errno::get() == libc::EAGAIN;
    for fd in sv {
        // SAFETY: our own probe's fds.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }
    ok
}

/// `read(fd, buf, n)` that does not wait.
///
/// # Safety
/// As `read`: `buf` is writable for `n` bytes (the kernel checks it).
#[inline]
pub(crate) unsafe fn read(fd: c_int, buf: *mut c_void, n: usize) -> ssize_t {
    if n > isize::MAX as usize {
        return errno::fail(beyond_any_buffer());
    }
    let v = iovec {
        iov_base: buf,
        iov_len: n,
    };
    // SAFETY: per the contract.
    unsafe { readv(fd, &v, 1) }
}

/// The kernel's answer to a `read` or `write` whose count is past
/// `SSIZE_MAX`: no buffer reaches that far (its `access_ok` fails), so
/// `EFAULT`, where one iovec that long would get `EINVAL`.
fn beyond_any_buffer() -> c_int {
    libc::EFAULT
}

/// `readv(fd, iov, cnt)` that does not wait.
///
/// # Safety
/// As `readv` (the kernel checks the array).
#[inline]
pub(crate) unsafe fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: per the contract; offset -1 is the file position, which a
    // socket does not have, so this is the socket's read.
    unsafe { next::preadv2(fd, iov, cnt, -1, libc::RWF_NOWAIT) }
}

/// `write(fd, buf, n)` that does not wait.
///
/// # Safety
/// As `write`: `buf` is readable for `n` bytes (the kernel checks it).
#[inline]
pub(crate) unsafe fn write(fd: c_int, buf: *const c_void, n: usize) -> ssize_t {
    if n > isize::MAX as usize {
        return errno::fail(beyond_any_buffer());
    }
    let v = iovec {
        iov_base: buf.cast_mut(),
        iov_len: n,
    };
    // SAFETY: per the contract.
    unsafe { writev(fd, &v, 1) }
}

/// `writev(fd, iov, cnt)` that does not wait.
///
/// # Safety
/// As `writev` (the kernel checks the array).
#[inline]
pub(crate) unsafe fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: per the contract; see `readv`.
    unsafe { next::pwritev2(fd, iov, cnt, -1, libc::RWF_NOWAIT) }
}

/// Runs `op` (one call on `fd` that has no per-call no-wait flag) with the
/// description of `fd` non-blocking, then puts its flags back; errno is
/// `op`'s. For a fd that is not a [`NOWAIT`](crate::fdtable::NOWAIT)
/// socket, just `op`.
///
/// Another process sharing the description would see it non-blocking for
/// the length of the call; nothing of this process can run meanwhile.
pub(crate) fn nonblocking<R>(fd: crate::fdtable::Fd, op: impl FnOnce() -> R) -> R {
    if fd.nowait() {
        toggled(fd.raw(), op)
    } else {
        op()
    }
}

/// Runs `op` with the description of `fd` non-blocking (if it was not
/// already), then puts its flags back; errno is `op`'s. See
/// [`nonblocking`].
pub(crate) fn toggled<R>(fd: c_int, op: impl FnOnce() -> R) -> R {
    let before = crate::fd::set_status_flag(fd, libc::O_NONBLOCK, true);
    let r = op();
    if let Some(fl) = before {
        let e = errno::get();
        // SAFETY: the flags `fd` had before.
        unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_SETFL, fl) };
        errno::set(e);
    }
    r
}
