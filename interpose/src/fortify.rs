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
//! Each hook here repeats glibc's check and, when it passes, runs our hook
//! of the plain function; when it fails it calls glibc's own `_chk`, which
//! reports `*** buffer overflow detected ***` and aborts exactly as
//! unpatched. `__fgets_chk` is the one whose check depends on what is read
//! (it fails only if a line would overflow): it takes our path only when `n`
//! fits the buffer, where the check cannot fail.

use libc::{
    c_char, c_int, c_void, nfds_t, off_t, pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, FILE,
};

mod next {
    use libc::{
        c_char, c_int, c_void, nfds_t, off_t, pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, FILE,
    };
    crate::real::real! {
        fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
        fn __pread_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t;
        fn __pread64_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t;
        fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t;
        fn __recvfrom_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> ssize_t;
        fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int;
        fn __ppoll_chk(fds: *mut pollfd, n: nfds_t, t: *const timespec, mask: *const sigset_t, fdslen: size_t) -> c_int;
        fn __fgets_chk(s: *mut c_char, size: size_t, n: c_int, f: *mut FILE) -> *mut c_char;
        fn __fgets_unlocked_chk(s: *mut c_char, size: size_t, n: c_int, f: *mut FILE) -> *mut c_char;
        fn __fread_chk(p: *mut c_void, plen: size_t, size: size_t, n: size_t, f: *mut FILE) -> size_t;
        fn __fread_unlocked_chk(p: *mut c_void, plen: size_t, size: size_t, n: size_t, f: *mut FILE) -> size_t;
    }
}

/// `__read_chk`: `read` into a buffer of `buflen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___read_chk")]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__read_chk(fd, buf, n, buflen) };
    }
    // SAFETY: the caller's buffer holds `n` bytes (checked above).
    unsafe { crate::io::read(fd, buf, n) }
}

/// `__pread_chk`: `pread` into a buffer of `buflen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___pread_chk")]
pub unsafe extern "C" fn __pread_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__pread_chk(fd, buf, n, off, buflen) };
    }
    // SAFETY: as in __read_chk.
    unsafe { crate::file::pread(fd, buf, n, off) }
}

/// `__pread64_chk`: `pread64` into a buffer of `buflen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___pread64_chk")]
pub unsafe extern "C" fn __pread64_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__pread64_chk(fd, buf, n, off, buflen) };
    }
    // SAFETY: as in __read_chk.
    unsafe { crate::file::pread64(fd, buf, n, off) }
}

/// `__recv_chk`: `recv` into a buffer of `buflen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___recv_chk")]
pub unsafe extern "C" fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__recv_chk(fd, buf, n, buflen, flags) };
    }
    // SAFETY: as in __read_chk.
    unsafe { crate::io::recv(fd, buf, n, flags) }
}

/// `__recvfrom_chk`: `recvfrom` into a buffer of `buflen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___recvfrom_chk")]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__recvfrom_chk(fd, buf, n, buflen, flags, addr, alen) };
    }
    // SAFETY: as in __read_chk.
    unsafe { crate::io::recvfrom(fd, buf, n, flags, addr, alen) }
}

/// Whether an array of `len` bytes holds `n` pollfds (glibc's check).
fn pollfds_fit(n: nfds_t, len: size_t) -> bool {
    len / std::mem::size_of::<pollfd>() >= n as usize
}

/// `__poll_chk`: `poll` on an array of `fdslen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___poll_chk")]
pub unsafe extern "C" fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int {
    if !pollfds_fit(n, fdslen) {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__poll_chk(fds, n, timeout, fdslen) };
    }
    // SAFETY: the array holds `n` entries (checked above).
    unsafe { crate::poll::poll(fds, n, timeout) }
}

/// `__ppoll_chk`: `ppoll` on an array of `fdslen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___ppoll_chk")]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    t: *const timespec,
    mask: *const sigset_t,
    fdslen: size_t,
) -> c_int {
    if !pollfds_fit(n, fdslen) {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__ppoll_chk(fds, n, t, mask, fdslen) };
    }
    // SAFETY: as in __poll_chk.
    unsafe { crate::poll::ppoll(fds, n, t, mask) }
}

/// `__fgets_chk`: `fgets` into a buffer of `size` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___fgets_chk")]
pub unsafe extern "C" fn __fgets_chk(s: *mut c_char, size: size_t, n: c_int, f: *mut FILE) -> *mut c_char {
    if n > 0 && n as size_t > size {
        // glibc fails only if a line would overflow: its own path decides.
        // SAFETY: forwarded unchanged.
        return unsafe { next::__fgets_chk(s, size, n, f) };
    }
    // SAFETY: the buffer holds `n` bytes (or n <= 0, which fgets rejects).
    unsafe { crate::stdio::fgets(s, n, f) }
}

/// `__fgets_unlocked_chk`: `fgets_unlocked` into a buffer of `size` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___fgets_unlocked_chk")]
pub unsafe extern "C" fn __fgets_unlocked_chk(s: *mut c_char, size: size_t, n: c_int, f: *mut FILE) -> *mut c_char {
    if n > 0 && n as size_t > size {
        // SAFETY: forwarded unchanged (see __fgets_chk).
        return unsafe { next::__fgets_unlocked_chk(s, size, n, f) };
    }
    // SAFETY: as in __fgets_chk.
    unsafe { crate::stdio::fgets_unlocked(s, n, f) }
}

/// Whether `size * n` bytes fit `plen` (glibc's check, overflow included).
fn fread_fits(plen: size_t, size: size_t, n: size_t) -> bool {
    size.checked_mul(n).is_some_and(|bytes| bytes <= plen)
}

/// `__fread_chk`: `fread` into a buffer of `plen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___fread_chk")]
pub unsafe extern "C" fn __fread_chk(p: *mut c_void, plen: size_t, size: size_t, n: size_t, f: *mut FILE) -> size_t {
    if !fread_fits(plen, size, n) {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__fread_chk(p, plen, size, n, f) };
    }
    // SAFETY: the buffer holds size * n bytes (checked above).
    unsafe { crate::stdio::fread(p, size, n, f) }
}

/// `__fread_unlocked_chk`: `fread_unlocked` into a buffer of `plen` bytes.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___fread_unlocked_chk")]
pub unsafe extern "C" fn __fread_unlocked_chk(
    p: *mut c_void,
    plen: size_t,
    size: size_t,
    n: size_t,
    f: *mut FILE,
) -> size_t {
    if !fread_fits(plen, size, n) {
        // SAFETY: glibc's check fails and aborts, as unpatched.
        return unsafe { next::__fread_unlocked_chk(p, plen, size, n, f) };
    }
    // SAFETY: as in __fread_chk.
    unsafe { crate::stdio::fread_unlocked(p, size, n, f) }
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    __read_chk,
    __pread_chk,
    __pread64_chk,
    __recv_chk,
    __recvfrom_chk,
    __poll_chk,
    __ppoll_chk,
    __fgets_chk,
    __fgets_unlocked_chk,
    __fread_chk,
    __fread_unlocked_chk,
}
