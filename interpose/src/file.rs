//! Regular files and other never-ready fds.
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
//! A file opened `O_DIRECT` (nginx's `directio`, databases) bypasses the
//! page cache: every read and write waits for the device, and
//! `RWF_NOWAIT` does not change that (it only refuses to wait for locks),
//! so both go straight to the pool. The fd table learns `O_DIRECT` from the
//! `F_GETFL` it makes anyway when it first examines an fd, and from
//! `fcntl(F_SETFL)`.
//!
//! Only fds in a cooperative context take this path (elsewhere nothing could
//! run meanwhile); the fd table remembers which fds are regular files.

use libc::{c_int, c_uint, c_void, iovec, off64_t, off_t, size_t, ssize_t};

use crate::errno;
use crate::fdtable::Fd;
use crate::gate::cooperative;
use crate::hook::hook;
use crate::offload;
use hub::Lane;

/// libc's `preadv2` and `pwritev2` (not our hooks): the regular-file
/// reads here and the no-wait socket tries ([`crate::nowait`]).
pub(crate) mod next {
    use libc::{c_int, iovec, off_t, ssize_t};
    crate::real::real! {
        fn preadv2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t;
        fn pwritev2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t;
    }
}

/// Whether `fd` is a regular file used where fibers could run meanwhile.
#[inline]
fn offloadable(fd: c_int) -> bool {
    cooperative() && crate::fdwait::known(Fd::of(fd)).is_regular_file()
}

/// A read of a regular file at `off` (-1: the file offset, which the read
/// advances): from the page cache if it can be had without blocking, else on
/// the offload pool.
///
/// # Safety
/// `iov` points at `cnt` iovecs describing writable memory.
pub(crate) unsafe fn read_at(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // A cancellation point, as glibc's reads are.
    crate::cancel_point();
    if Fd::of(fd).is_direct() {
        return offload_read(fd, iov, cnt, off);
    }
    // SAFETY: caller's contract.
    match unsafe { try_cached(fd, iov, cnt, off) } {
        // SAFETY: caller's contract; `got` bytes of it were read.
        Some(got) if got > 0 => unsafe { read_rest(fd, iov, cnt, off, got as usize) },
        Some(r) => r,
        None => offload_read(fd, iov, cnt, off),
    }
}

/// After a read from the page cache that had `got` bytes: the rest of the
/// request, as the blocking read would have had it. `RWF_NOWAIT` stops at
/// the first page not in the cache, and returns what it read before it; a
/// blocking read of a regular file is short only at the end of the file
/// (or when a signal ends it). Returned as is, the short count reached
/// programs that read a file in one call and do not look again: the JVM
/// read class files from its `modules` image so, and failed with
/// `ClassFormatError` (zeros past the short count) in half the runs.
///
/// # Safety
/// As for [`read_at`], and `got` is at most the iovecs' total length.
unsafe fn read_rest(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, got: usize) -> ssize_t {
    // SAFETY: caller's contract (cnt was accepted by the kernel, so >= 0).
    let iovs = unsafe { std::slice::from_raw_parts(iov, cnt.max(0) as usize) };
    let saved = errno::get();
    let mut done = got;
    let mut skip = got;
    for v in iovs {
        if skip >= v.iov_len {
            skip -= v.iov_len;
            continue;
        }
        // The part of this iovec not yet filled, read until it is full or
        // the file ends.
        while skip < v.iov_len {
            let part = iovec {
                // SAFETY: within the caller's iovec.
                iov_base: unsafe { v.iov_base.cast::<u8>().add(skip) }.cast(),
                iov_len: v.iov_len - skip,
            };
            let at = if off < 0 { -1 } else { off + done as off_t };
            // SAFETY: one writable piece of the caller's buffers.
            let r = unsafe { try_cached(fd, &part, 1, at) }.unwrap_or_else(|| offload_read(fd, &part, 1, at));
            if r <= 0 {
                // The end of the file, or an error after some bytes: the
                // bytes read are the answer, as the kernel's.
                errno::set(saved);
                return done as ssize_t;
            }
            done += r as usize;
            skip += r as usize;
        }
        skip = 0;
    }
    done as ssize_t
}

/// The read from the page cache, if it can be had without blocking: its
/// result, or None when it must go to the pool.
///
/// # Safety
/// As for [`read_at`].
unsafe fn try_cached(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> Option<ssize_t> {
    // SAFETY: caller's contract.
    let r = unsafe { next::preadv2(fd, iov, cnt, off, libc::RWF_NOWAIT) };
    if r >= 0 {
        return Some(r);
    }
    match errno::get() {
        // Not in the page cache, or a filesystem/kernel without RWF_NOWAIT.
        libc::EAGAIN | libc::EOPNOTSUPP | libc::ENOSYS => None,
        // EINVAL may also mean "flag unsupported" (old kernels): the plain
        // call, on the pool, gives the true answer. Anything else is the
        // answer.
        libc::EINVAL => None,
        _ => Some(r),
    }
}

/// A vectored call of `fd` on the offload pool while the fiber waits: at
/// the file offset (`at_offset`, `off` -1) or at `off` (`at`). One real
/// call, whose result is the caller's.
fn on_pool(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    at_offset: unsafe fn(c_int, *const iovec, c_int) -> ssize_t,
    at: unsafe fn(c_int, *const iovec, c_int, off64_t) -> ssize_t,
) -> ssize_t {
    let iov = iov as usize;
    offload(Lane::Work, move || {
        let iov = iov as *const iovec;
        // SAFETY: the caller's buffers stay valid: offload does not return
        // before this closure has finished.
        unsafe {
            if off < 0 {
                at_offset(fd, iov, cnt)
            } else {
                at(fd, iov, cnt, off)
            }
        }
    })
}

/// `call`, a call on the pool that glibc makes a cancellation point, with
/// a cancellation acting before it and after it: one requested meanwhile
/// acts when it returns, its result lost, as glibc's cancellation signal
/// acts when the system call returns.
fn cancellation_point_around<R>(call: impl FnOnce() -> R) -> R {
    crate::cancel_point();
    let r = call();
    crate::cancel_point();
    r
}

/// The read on the offload pool while the fiber waits ([`read_at`] was
/// the cancellation point before it): one requested meanwhile acts when it
/// returns.
fn offload_read(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    let r = on_pool(fd, iov, cnt, off, crate::io::readv::real, preadv64::real);
    crate::cancel_point();
    r
}

/// A write to an `O_DIRECT` file (`off` -1: at the file offset), on the
/// offload pool while the fiber waits; a cancellation point.
pub(crate) fn write_direct(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    cancellation_point_around(|| on_pool(fd, iov, cnt, off, crate::io::writev::real, pwritev64::real))
}

/// A positioned write to a regular file (`pwrite` and its forms): on the
/// pool (`direct`) for an `O_DIRECT` file, else `real` (into the page
/// cache), after the cancellation point glibc's write is.
fn write_at(fd: c_int, direct: impl FnOnce() -> ssize_t, real: impl FnOnce() -> ssize_t) -> ssize_t {
    if Fd::of(fd).is_direct() {
        return direct();
    }
    crate::cancel_point();
    real()
}

/// [`write_direct`] of one buffer.
pub(crate) fn write_one_direct(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    let iov = iovec {
        iov_base: buf as *mut c_void,
        iov_len: n,
    };
    write_direct(fd, &iov, 1, off)
}

/// `read` on a regular file.
///
/// # Safety
/// `buf` is valid for `n` bytes of writes.
pub(crate) unsafe fn read(fd: c_int, buf: *mut c_void, n: usize) -> ssize_t {
    // SAFETY: caller's contract.
    unsafe { read_one_at(fd, buf, n, -1) }
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

hook! {
    /// `fsync(2)`: on the offload pool when fibers could run meanwhile.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn fsync(fd: c_int) -> c_int {
        // SAFETY: forwarded unchanged, on another thread; plain values.
        cancellation_point_around(|| offload(Lane::Work, move || unsafe { fsync::real(fd) }))
    }

    /// `fdatasync(2)`: on the offload pool when fibers could run meanwhile.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn fdatasync(fd: c_int) -> c_int {
        // SAFETY: forwarded unchanged, on another thread; plain values.
        cancellation_point_around(|| offload(Lane::Work, move || unsafe { fdatasync::real(fd) }))
    }

    /// `syncfs(2)`: on the offload pool when fibers could run meanwhile.
    #[gate(cooperative())]
    [file] fn syncfs(fd: c_int) -> c_int {
        // SAFETY: forwarded unchanged, on another thread; plain values.
        offload(Lane::Work, move || unsafe { syncfs::real(fd) })
    }

    /// `sync_file_range(2)`: on the offload pool when fibers could run
    /// meanwhile.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn sync_file_range(fd: c_int, off: off64_t, n: off64_t, flags: c_uint) -> c_int {
        // SAFETY: forwarded unchanged, on another thread; plain values.
        cancellation_point_around(|| offload(Lane::Work, move || unsafe { sync_file_range::real(fd, off, n, flags) }))
    }

    /// `pread(2)`: regular files are read without stalling the hub.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
        // SAFETY: the caller's buffer of n bytes.
        unsafe { read_one_at(fd, buf, n, off) }
    }

    /// `pread64(2)`: the same call on 64-bit glibc.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off64_t) -> ssize_t {
        // SAFETY: the caller's buffer of n bytes.
        unsafe { read_one_at(fd, buf, n, off) }
    }

    /// `preadv(2)`.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn preadv(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
        // SAFETY: the caller's iovecs.
        unsafe { read_at(fd, iov, cnt, off) }
    }

    /// `pwrite(2)`: on the offload pool for an `O_DIRECT` file; a
    /// cancellation point for any regular file, as glibc's.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
        // SAFETY: forwarded unchanged.
        write_at(fd, || write_one_direct(fd, buf, n, off), || unsafe { pwrite::real(fd, buf, n, off) })
    }

    /// `pwrite64(2)`: the same call on 64-bit glibc.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off64_t) -> ssize_t {
        // SAFETY: forwarded unchanged.
        write_at(fd, || write_one_direct(fd, buf, n, off), || unsafe { pwrite64::real(fd, buf, n, off) })
    }

    /// `pwritev(2)`: on the offload pool for an `O_DIRECT` file; a
    /// cancellation point for any regular file, as glibc's.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn pwritev(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
        // SAFETY: forwarded unchanged.
        write_at(fd, || write_direct(fd, iov, cnt, off), || unsafe { pwritev::real(fd, iov, cnt, off) })
    }

    /// `pwritev64(2)`: the same call on 64-bit glibc.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn pwritev64(fd: c_int, iov: *const iovec, cnt: c_int, off: off64_t) -> ssize_t {
        // SAFETY: forwarded unchanged.
        write_at(fd, || write_direct(fd, iov, cnt, off), || unsafe { pwritev64::real(fd, iov, cnt, off) })
    }

    /// `preadv64(2)`: the same call on 64-bit glibc.
    #[cancel_point]
    #[gate(offloadable(fd) && off >= 0)]
    [file] fn preadv64(fd: c_int, iov: *const iovec, cnt: c_int, off: off64_t) -> ssize_t {
        // SAFETY: the caller's iovecs.
        unsafe { read_at(fd, iov, cnt, off) }
    }
}

/// A read of `n` bytes into `buf` at `off`, as [`read_at`].
///
/// # Safety
/// `buf` is valid for `n` bytes of writes.
unsafe fn read_one_at(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    let iov = iovec {
        iov_base: buf,
        iov_len: n,
    };
    // SAFETY: one iovec over the caller's buffer.
    unsafe { read_at(fd, &iov, 1, off) }
}

hook! {
    /// `copy_file_range(2)`: the real call (it never waits for a socket or
    /// pipe: the kernel copies between files), a cancellation point as in
    /// glibc.
    #[cancel_point]
    [file] fn copy_file_range(
        fd_in: c_int,
        off_in: *mut off64_t,
        fd_out: c_int,
        off_out: *mut off64_t,
        len: size_t,
        flags: c_uint,
    ) -> ssize_t {
        // SAFETY: forwarded unchanged.
        unsafe { copy_file_range::real(fd_in, off_in, fd_out, off_out, len, flags) }
    }

    /// `fallocate(2)`: the real call, a cancellation point as in glibc.
    #[cancel_point]
    [file] fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { fallocate::real(fd, mode, off, len) }
    }

    /// `fallocate64(2)`: the same call on 64-bit glibc.
    #[cancel_point]
    [file] fn fallocate64(fd: c_int, mode: c_int, off: off64_t, len: off64_t) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { fallocate64::real(fd, mode, off, len) }
    }

    /// `getrandom(2)`: the real call, a cancellation point as in glibc
    /// (greenhook's own calls, from inside a hook, are not: see
    /// [`crate::hook::cancel_point_at_entry`]).
    #[cancel_point]
    [file] fn getrandom(buf: *mut c_void, len: size_t, flags: c_uint) -> ssize_t {
        // SAFETY: forwarded unchanged.
        unsafe { getrandom::real(buf, len, flags) }
    }
}
