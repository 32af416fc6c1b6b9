//! glibc's `_FORTIFY_SOURCE` entry points.
//!
//! A program compiled with `-D_FORTIFY_SOURCE` (the default of Ubuntu's gcc
//! at `-O1` and above, and of most distribution packages) calls
//! `__read_chk(fd, buf, n, buflen)` instead of `read(fd, buf, n)` whenever
//! the compiler knows the buffer's size but not that `n` fits. glibc then
//! checks `n <= buflen` and calls its *internal* `read`, which no `read`
//! hook sees: on a managed fd (non-blocking underneath) the program got
//! `EAGAIN` where it expected to block. Measured before this module: a
//! fortified `read` on an empty socketpair returned -1 at once.
//!
//! Each hook here repeats glibc's check as its gate and, when it passes,
//! runs our hook of the plain function (so the call is counted under its
//! family twice, as the `_chk` and as the plain call); when it fails the
//! gate calls glibc's own `_chk`, which reports `*** buffer overflow
//! detected ***` and aborts exactly as unpatched. `__fgets_chk` is the one
//! whose check depends on what is read (it fails only if a line would
//! overflow): it takes our path only when `n` fits the buffer, where the
//! check cannot fail.

use libc::{
    c_char, c_int, c_void, nfds_t, off64_t, off_t, pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec,
    FILE,
};

use crate::hook::hook;

/// Whether an array of `len` bytes holds `n` pollfds (glibc's check).
fn pollfds_fit(n: nfds_t, len: size_t) -> bool {
    len / std::mem::size_of::<pollfd>() >= n as usize
}

/// Whether `size * n` bytes fit `plen` (glibc's check, overflow included).
fn fread_fits(plen: size_t, size: size_t, n: size_t) -> bool {
    size.checked_mul(n).is_some_and(|bytes| bytes <= plen)
}

/// Whether `fgets` of `n` bytes takes our path: when `n` fits the buffer
/// glibc's check cannot fail (`n <= 0` fgets rejects itself); otherwise it
/// fails only if a line would overflow, and glibc's own path decides.
fn fgets_fits(size: size_t, n: c_int) -> bool {
    n <= 0 || n as size_t <= size
}

// Each gate is glibc's check: where it fails, glibc's `_chk` reports the
// overflow and aborts, as unpatched.
hook! {
    /// `__read_chk`: `read` into a buffer of `buflen` bytes.
    #[cancel_point]
    #[gate(n <= buflen)]
    [io] fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t {
        // SAFETY: the caller's buffer holds `n` bytes (the gate).
        unsafe { crate::io::read(fd, buf, n) }
    }

    /// `__pread_chk`: `pread` into a buffer of `buflen` bytes.
    #[cancel_point]
    #[gate(n <= buflen)]
    [file] fn __pread_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t {
        // SAFETY: as in __read_chk.
        unsafe { crate::file::pread(fd, buf, n, off) }
    }

    /// `__pread64_chk`: `pread64` into a buffer of `buflen` bytes.
    #[cancel_point]
    #[gate(n <= buflen)]
    [file] fn __pread64_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off64_t, buflen: size_t) -> ssize_t {
        // SAFETY: as in __read_chk.
        unsafe { crate::file::pread64(fd, buf, n, off) }
    }

    /// `__recv_chk`: `recv` into a buffer of `buflen` bytes.
    #[cancel_point]
    #[gate(n <= buflen)]
    [io] fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t {
        // SAFETY: as in __read_chk.
        unsafe { crate::io::recv(fd, buf, n, flags) }
    }

    /// `__recvfrom_chk`: `recvfrom` into a buffer of `buflen` bytes.
    #[cancel_point]
    #[gate(n <= buflen)]
    [io] fn __recvfrom_chk(
        fd: c_int,
        buf: *mut c_void,
        n: size_t,
        buflen: size_t,
        flags: c_int,
        addr: *mut sockaddr,
        alen: *mut socklen_t,
    ) -> ssize_t {
        // SAFETY: as in __read_chk.
        unsafe { crate::io::recvfrom(fd, buf, n, flags, addr, alen) }
    }

    /// `__poll_chk`: `poll` on an array of `fdslen` bytes.
    #[cancel_point]
    #[gate(pollfds_fit(n, fdslen))]
    [poll] fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int {
        // SAFETY: the array holds `n` entries (the gate).
        unsafe { crate::poll::poll(fds, n, timeout) }
    }

    /// `__ppoll_chk`: `ppoll` on an array of `fdslen` bytes.
    #[cancel_point]
    #[gate(pollfds_fit(n, fdslen))]
    [poll] fn __ppoll_chk(
        fds: *mut pollfd,
        n: nfds_t,
        t: *const timespec,
        mask: *const sigset_t,
        fdslen: size_t,
    ) -> c_int {
        // SAFETY: as in __poll_chk.
        unsafe { crate::poll::ppoll(fds, n, t, mask) }
    }

    /// `__fgets_chk`: `fgets` into a buffer of `size` bytes.
    #[gate(fgets_fits(size, n))]
    [stdio] fn __fgets_chk(s: *mut c_char, size: size_t, n: c_int, f: *mut FILE) -> *mut c_char {
        // SAFETY: the buffer holds `n` bytes (or n <= 0, which fgets rejects).
        unsafe { crate::stdio::fgets(s, n, f) }
    }

    /// `__fgets_unlocked_chk`: `fgets_unlocked` into a buffer of `size` bytes.
    #[gate(fgets_fits(size, n))]
    [stdio] fn __fgets_unlocked_chk(s: *mut c_char, size: size_t, n: c_int, f: *mut FILE) -> *mut c_char {
        // SAFETY: as in __fgets_chk.
        unsafe { crate::stdio::fgets_unlocked(s, n, f) }
    }

    /// `__fread_chk`: `fread` into a buffer of `plen` bytes.
    #[gate(fread_fits(plen, size, n))]
    [stdio] fn __fread_chk(p: *mut c_void, plen: size_t, size: size_t, n: size_t, f: *mut FILE) -> size_t {
        // SAFETY: the buffer holds size * n bytes (the gate).
        unsafe { crate::stdio::fread(p, size, n, f) }
    }

    /// `__fread_unlocked_chk`: `fread_unlocked` into a buffer of `plen` bytes.
    #[gate(fread_fits(plen, size, n))]
    [stdio] fn __fread_unlocked_chk(p: *mut c_void, plen: size_t, size: size_t, n: size_t, f: *mut FILE) -> size_t {
        // SAFETY: as in __fread_chk.
        unsafe { crate::stdio::fread_unlocked(p, size, n, f) }
    }
}
