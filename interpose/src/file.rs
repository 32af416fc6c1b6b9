//! Regular files and other never-ready fds (issue 4).
//!
//! epoll cannot wait on a regular file: it always polls "ready", yet a read
//! that misses the page cache blocks the thread, and with it every fiber.
//! So a read first tries `preadv2(…, RWF_NOWAIT)`, which the kernel serves
//! from the page cache without blocking (one system call, like the plain
//! read) or refuses with `EAGAIN`; only then does the call go to the hub's
//! offload pool while the fiber waits. `fsync`, `fdatasync`,
//! `sync_file_range` and `syncfs`, which can block for a long time on the
//! disk, always go to the pool.
//!
//! Plain writes to regular files pass through: they land in the page cache
//! and return without waiting for the disk (the kernel throttles a writer
//! only when dirty memory is far over its limits), and making every write an
//! offload round trip would cost far more than it saves.
//!
//! Only fds in a cooperative context take this path (elsewhere nothing could
//! run meanwhile); the fd table remembers which fds are regular files.

use libc::{c_int, c_void, iovec, off_t, ssize_t};

use crate::errno;

mod next {
    use libc::{c_int, c_uint, c_void, iovec, off64_t, off_t, size_t, ssize_t};
    crate::real::real! {
        fn preadv2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t;
        fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
        fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off64_t) -> ssize_t;
        fn preadv64(fd: c_int, iov: *const iovec, cnt: c_int, off: off64_t) -> ssize_t;
        fn fsync(fd: c_int) -> c_int;
        fn fdatasync(fd: c_int) -> c_int;
        fn syncfs(fd: c_int) -> c_int;
        fn sync_file_range(fd: c_int, off: off64_t, n: off64_t, flags: c_uint) -> c_int;
    }
}

/// Whether `fd` is a regular file used where fibers could run meanwhile.
#[inline]
pub(crate) fn offloadable(fd: c_int) -> bool {
    crate::gate::cooperative() && crate::fdtable::is_regular_file(fd)
}

use crate::offload;

/// A read of a regular file at `off` (-1: the file offset, which the read
/// advances): from the page cache if it can be had without blocking, else on
/// the offload pool.
///
/// # Safety
/// `iov` points at `cnt` iovecs describing writable memory.
pub(crate) unsafe fn read_at(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: caller's contract.
    let r = unsafe { next::preadv2(fd, iov, cnt, off, libc::RWF_NOWAIT) };
    if r >= 0 {
        return r;
    }
    match errno::get() {
        // Not in the page cache, or a filesystem/kernel without RWF_NOWAIT.
        libc::EAGAIN | libc::EOPNOTSUPP | libc::ENOSYS => {}
        // EINVAL may also mean "flag unsupported" (old kernels): retry below,
        // the plain call gives the true answer. Anything else is the answer.
        libc::EINVAL => {}
        _ => return r,
    }
    let (iov, fd) = (iov as usize, fd);
    offload(move || {
        let iov = iov as *const iovec;
        // SAFETY: the caller's buffers stay valid: offload does not return
        // before this closure has finished.
        unsafe {
            if off < 0 {
                next::readv(fd, iov, cnt)
            } else {
                next::preadv64(fd, iov, cnt, off)
            }
        }
    })
}

/// `read` on a regular file.
///
/// # Safety
/// `buf` is valid for `n` bytes of writes.
pub(crate) unsafe fn read(fd: c_int, buf: *mut c_void, n: usize) -> ssize_t {
    let iov = iovec {
        iov_base: buf,
        iov_len: n,
    };
    // SAFETY: one iovec over the caller's buffer.
    unsafe { read_at(fd, &iov, 1, -1) }
}

macro_rules! offloaded {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(2)`: on the offload pool when fibers could run meanwhile.")]
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            crate::real::guard(stringify!($name), || {
                if !crate::gate::cooperative() {
                    // SAFETY: forwarded unchanged.
                    return unsafe { next::$name($($arg),*) };
                }
                // SAFETY: forwarded unchanged, on another thread; plain values.
                offload(move || unsafe { next::$name($($arg),*) })
            })
        }
        crate::real::interpose!($name);
    )*};
}

offloaded! {
    fn fsync(fd: c_int) -> c_int;
    fn fdatasync(fd: c_int) -> c_int;
    fn syncfs(fd: c_int) -> c_int;
    fn sync_file_range(fd: c_int, off: libc::off64_t, n: libc::off64_t, flags: libc::c_uint) -> c_int;
}

/// `pread(2)`: regular files are read without stalling the hub.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pread")]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: libc::size_t, off: off_t) -> ssize_t {
    crate::real::guard("pread", || {
        if !offloadable(fd) || off < 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::pread64(fd, buf, n, off) };
        }
        let iov = iovec {
            iov_base: buf,
            iov_len: n,
        };
        // SAFETY: one iovec over the caller's buffer.
        unsafe { read_at(fd, &iov, 1, off) }
    })
}

/// `pread64` is the same call on 64-bit glibc.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pread64")]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: libc::size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pread(fd, buf, n, off) }
}

/// `preadv(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_preadv")]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    crate::real::guard("preadv", || {
        if !offloadable(fd) || off < 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::preadv64(fd, iov, cnt, off) };
        }
        // SAFETY: the caller's iovecs.
        unsafe { read_at(fd, iov, cnt, off) }
    })
}

/// `preadv64` is the same call on 64-bit glibc.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_preadv64")]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { preadv(fd, iov, cnt, off) }
}

/// `readv` on a regular file.
///
/// # Safety
/// `iov` points at `cnt` iovecs over writable memory (or the kernel says
/// EFAULT/EINVAL).
pub(crate) unsafe fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: caller's contract.
    unsafe { read_at(fd, iov, cnt, -1) }
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    pread,
    pread64,
    preadv,
    preadv64,
}
