//! fd I/O on sockets, pipes, FIFOs, ttys and eventfds: `read`, `write`,
//! `readv`, `writev`, `recv*`, `send*`, `sendfile`, `connect`, `accept`,
//! `accept4`.
//!
//! Each hook: gate (patched, not machinery, fd managed, user did not ask for
//! `O_NONBLOCK` and did not pass `MSG_DONTWAIT`) → try the real call (the fd
//! is non-blocking underneath) → on `EAGAIN` wait on the hub, until the
//! socket's `SO_RCVTIMEO`/`SO_SNDTIMEO` if set (then `EAGAIN`, like the
//! kernel) → retry; errno set last.
//!
//! Writes keep blocking semantics: a blocking `write` of n bytes to a stream
//! socket or pipe writes all n (or fails before writing anything), so
//! partial writes are continued. The `pread`/`pwrite` family needs no hook
//! here: on sockets and pipes the kernel answers `ESPIPE` at once.

use std::time::Instant;

use hub::Interest;
use libc::{c_int, c_uint, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use crate::errno;
use crate::fdtable::{self, Timeout};

mod next {
    use libc::{c_int, c_uint, c_void, iovec, mmsghdr, msghdr, size_t, sockaddr, socklen_t, ssize_t, timespec};
    crate::real::real! {
        fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
        fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
        fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
        fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
        fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t;
        fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
        fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
        fn recvmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int, t: *mut timespec) -> c_int;
        fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t;
        fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
        fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
        fn sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int;
        fn sendfile(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t;
        fn splice(inp: c_int, off_in: *mut libc::loff_t, out: c_int, off_out: *mut libc::loff_t, n: size_t, flags: c_uint) -> ssize_t;
        fn tee(inp: c_int, out: c_int, n: size_t, flags: c_uint) -> ssize_t;
        fn vmsplice(fd: c_int, iov: *const iovec, cnt: libc::size_t, flags: c_uint) -> ssize_t;
        fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
        fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
        fn getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
        fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
        fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int;
    }
}

/// How a call on an fd is handled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// Straight to the real call.
    Pass,
    /// Managed: non-blocking underneath; try, wait on EAGAIN, retry.
    Managed,
    /// An fd we did not create (inherited pipe or tty, a FIFO opened with
    /// `open`…), blocking, used in a cooperative context: wait until
    /// `poll` says it is ready, then make the (now non-blocking) real call.
    /// Its `O_NONBLOCK` is left alone: the description may be shared with
    /// other processes (a tty with the shell).
    Polled,
    /// A regular file: page cache without blocking, else the offload pool.
    File,
}

#[inline]
pub(crate) fn path(fd: c_int) -> Path {
    if !crate::is_patched() {
        return Path::Pass;
    }
    // Managed first, without the machinery check (a thread-local read, which
    // in a shared library costs a __tls_get_addr call): a greenhook worker
    // that touches a managed fd is not in a cooperative context, so it waits
    // in the kernel like the blocking call would, which is correct there too.
    let f = fdtable::flags(fd);
    if f & fdtable::MANAGED != 0 {
        return if f & fdtable::USER_NONBLOCK == 0 {
            Path::Managed
        } else {
            Path::Pass
        };
    }
    if !crate::gate::patched() || !crate::gate::can_yield() {
        return Path::Pass;
    }
    let f = if f & fdtable::KNOWN == 0 { examine(fd) } else { f };
    if f & fdtable::KNOWN == 0 || f & fdtable::USER_NONBLOCK != 0 {
        Path::Pass
    } else if f & fdtable::FILE != 0 {
        Path::File
    } else {
        Path::Polled
    }
}

/// First cooperative use of a foreign fd: is it non-blocking? (Kept up to
/// date afterwards by the fcntl/ioctl hooks.)
#[cold]
fn examine(fd: c_int) -> u32 {
    // SAFETY: F_GETFL only reads the status flags.
    let fl = unsafe { next::fcntl(fd, libc::F_GETFL, 0) };
    if fl < 0 {
        return 0; // not an open fd: the real call will say so
    }
    // SAFETY: an all-zero stat is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`.
    let regular = unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG;
    fdtable::set_known(fd, fl & libc::O_NONBLOCK != 0, regular);
    fdtable::flags(fd)
}

/// Level readiness of a foreign fd, without blocking. Errors and
/// `POLLNVAL` count as ready: the real call then reports them.
fn ready_now(fd: c_int, interest: Interest) -> bool {
    let events = match interest {
        Interest::Readable => libc::POLLIN,
        Interest::Writable => libc::POLLOUT,
    };
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { next::poll(&mut p, 1, 0) != 0 }
}

/// Waits until a foreign fd is level-ready for `interest` (until the fd's
/// socket timeout, then `EAGAIN`): on the hub in a cooperative context, else
/// in the kernel. Returns the errno to report on failure.
pub(crate) fn wait_until_ready(fd: c_int, interest: Interest) -> Result<(), c_int> {
    let which = match interest {
        Interest::Readable => Timeout::Recv,
        Interest::Writable => Timeout::Send,
    };
    let dl = deadline(fd, which);
    while !ready_now(fd, interest) {
        wait(fd, interest, dl)?;
    }
    Ok(())
}

/// The [`Path::Polled`] form of an operation: wait for level readiness,
/// then call.
fn polled(fd: c_int, interest: Interest, op: impl FnOnce() -> ssize_t) -> ssize_t {
    crate::cancel_point();
    match wait_until_ready(fd, interest) {
        Ok(()) => op(),
        Err(e) => errno::fail(e),
    }
}

/// A write of `total` bytes to a foreign blocking fd, in pieces of at most
/// `PIPE_BUF` (a pipe that polls writable takes that much without
/// blocking); `op(done, len)` writes `len` bytes from offset `done`.
fn polled_all(fd: c_int, total: usize, mut op: impl FnMut(usize, usize) -> ssize_t) -> ssize_t {
    let mut done = 0usize;
    while done < total {
        let len = (total - done).min(libc::PIPE_BUF);
        let r = polled(fd, Interest::Writable, || op(done, len));
        if r <= 0 {
            return if done > 0 { done as ssize_t } else { r };
        }
        done += r as usize;
    }
    done as ssize_t
}

/// Waits for `fd` after an `EAGAIN`; on failure returns the errno to report.
///
/// In a cooperative context the hub parks the fiber. Anywhere else (a real
/// thread, or a root context with no fibers) nothing else could run, so the
/// thread blocks in the kernel like the blocking call would have: one
/// `poll` on this fd, which, like a blocked `read`, keeps the file alive if
/// another thread closes the fd meanwhile.
fn wait(fd: c_int, interest: Interest, deadline: Option<Instant>) -> Result<(), c_int> {
    if !crate::gate::can_yield() {
        return wait_in_kernel(fd, interest, deadline);
    }
    match hub::wait_fd(fd, interest, deadline) {
        Ok(()) => Ok(()),
        Err(e) => Err(match e.kind() {
            std::io::ErrorKind::TimedOut => libc::EAGAIN,
            std::io::ErrorKind::Interrupted => {
                crate::cancel_point();
                libc::EINTR
            }
            _ => e.raw_os_error().unwrap_or(libc::EIO),
        }),
    }
}

fn wait_in_kernel(fd: c_int, interest: Interest, deadline: Option<Instant>) -> Result<(), c_int> {
    let events = match interest {
        Interest::Readable => libc::POLLIN,
        Interest::Writable => libc::POLLOUT,
    };
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(libc::EAGAIN);
                }
                // Round up: never wake before the deadline.
                left.as_micros().div_ceil(1000).min(c_int::MAX as u128) as c_int
            }
        };
        let mut p = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: one valid pollfd.
        let r = unsafe { next::poll(&mut p, 1, ms) };
        if r > 0 {
            return Ok(());
        }
        // r == 0: loop to re-check the deadline; EINTR: the blocking call
        // would have been restarted (SA_RESTART) — see docs/DESIGN.md.
        if r < 0 && errno::get() != libc::EINTR {
            return Err(errno::get());
        }
    }
}

fn deadline(fd: c_int, which: Timeout) -> Option<Instant> {
    fdtable::timeout(fd, which).and_then(|d| Instant::now().checked_add(d))
}

#[inline]
fn would_block(e: c_int) -> bool {
    e == libc::EAGAIN || e == libc::EWOULDBLOCK
}

/// One operation that returns as soon as anything is transferred.
///
/// The first attempt is inlined and looks at nothing else: on a ready fd
/// (the common case, and the whole cost of a hook over the raw call) the
/// socket timeout is not even read. It starts counting at the first
/// `EAGAIN`, where the kernel's would start waiting.
#[inline]
fn once(fd: c_int, interest: Interest, which: Timeout, mut op: impl FnMut() -> ssize_t) -> ssize_t {
    crate::cancel_point();
    // A call that succeeds leaves errno as it was, even if an attempt on
    // the way met EAGAIN.
    let caller_errno = errno::get();
    let r = op();
    if r >= 0 {
        return r;
    }
    once_waiting(fd, interest, which, caller_errno, op)
}

/// [`once`] after an attempt failed: wait and retry while it would block.
#[cold]
#[inline(never)]
fn once_waiting(
    fd: c_int,
    interest: Interest,
    which: Timeout,
    caller_errno: c_int,
    mut op: impl FnMut() -> ssize_t,
) -> ssize_t {
    let dl = deadline(fd, which);
    loop {
        let e = errno::get();
        if !would_block(e) {
            return -1;
        }
        if let Err(e) = wait(fd, interest, dl) {
            return errno::fail(e);
        }
        let r = op();
        if r >= 0 {
            errno::set(caller_errno);
            return r;
        }
    }
}

/// A write-like operation continued until `total()` bytes are through.
/// `op(done)` transfers from offset `done`. Returns the total, or the
/// partial count if an error or timeout comes after some progress.
///
/// `total` is asked only once the kernel has accepted the first attempt
/// (it transferred something, or would block): for `writev` and `sendmsg`
/// it reads the caller's arrays, which only then are known to be valid.
///
/// As in [`once`], the first attempt is inlined; the rest, and the socket
/// timeout, wait for a short or failed one.
#[inline]
fn all(fd: c_int, total: impl FnOnce() -> usize, mut op: impl FnMut(usize) -> ssize_t) -> ssize_t {
    crate::cancel_point();
    // As in once: a count returned leaves errno as it was.
    let caller_errno = errno::get();
    let r = op(0);
    if r < 0 && !would_block(errno::get()) {
        return r;
    }
    let total = total();
    if r >= 0 && r as usize >= total {
        return r;
    }
    all_waiting(fd, total, r, caller_errno, op)
}

/// [`all`] after a first attempt `first` that did not finish.
#[cold]
#[inline(never)]
fn all_waiting(
    fd: c_int,
    total: usize,
    first: ssize_t,
    caller_errno: c_int,
    mut op: impl FnMut(usize) -> ssize_t,
) -> ssize_t {
    let dl = deadline(fd, Timeout::Send);
    let mut done = 0usize;
    let mut r = first;
    let count = |done: usize| {
        errno::set(caller_errno);
        done as ssize_t
    };
    loop {
        if r > 0 {
            done += r as usize;
            if done >= total {
                return count(done);
            }
        } else if r == 0 {
            return count(done);
        } else {
            let e = errno::get();
            if !would_block(e) {
                return if done > 0 { count(done) } else { r };
            }
            if let Err(e) = wait(fd, Interest::Writable, dl) {
                return if done > 0 { count(done) } else { errno::fail(e) };
            }
        }
        r = op(done);
    }
}

/// The iovec array with the first `skip` bytes removed.
///
/// # Safety
/// `iov` points at `cnt` valid iovecs.
unsafe fn advance(iov: *const iovec, cnt: c_int, mut skip: usize) -> Vec<iovec> {
    // SAFETY: caller's contract.
    let src = unsafe { std::slice::from_raw_parts(iov, cnt.max(0) as usize) };
    let mut out = Vec::with_capacity(src.len());
    for v in src {
        if skip >= v.iov_len {
            skip -= v.iov_len;
            continue;
        }
        out.push(iovec {
            // SAFETY: skip < iov_len, so this stays within the caller's buffer.
            iov_base: unsafe { v.iov_base.cast::<u8>().add(skip) }.cast(),
            iov_len: v.iov_len - skip,
        });
        skip = 0;
    }
    out
}

/// Total bytes of an iovec array (saturating; the kernel rejects overflow).
///
/// # Safety
/// `iov` points at `cnt` valid iovecs, or `cnt` ≤ 0.
unsafe fn iov_total(iov: *const iovec, cnt: c_int) -> usize {
    if iov.is_null() || cnt <= 0 {
        return 0;
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(iov, cnt as usize) }
        .iter()
        .fold(0usize, |a, v| a.saturating_add(v.iov_len))
}

/// `read(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_read")]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    crate::real::guard("read", || {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move || unsafe { next::read(fd, buf, n) };
        match path(fd) {
            Path::Pass => op(),
            Path::Managed => once(fd, Interest::Readable, Timeout::Recv, op),
            Path::Polled => polled(fd, Interest::Readable, op),
            // SAFETY: the caller's buffer of n bytes.
            Path::File => unsafe { crate::file::read(fd, buf, n) },
        }
    })
}

/// `write(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_write")]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    crate::real::guard("write", || {
        let p = if n == 0 { Path::Pass } else { path(fd) };
        match p {
            // SAFETY: forwarded unchanged.
            Path::Pass | Path::File => unsafe { next::write(fd, buf, n) },
            // SAFETY: stays within the caller's buffer of n bytes.
            Path::Managed => all(
                fd,
                || n,
                move |done| unsafe { next::write(fd, buf.cast::<u8>().add(done).cast(), n - done) },
            ),
            // SAFETY: stays within the caller's buffer of n bytes.
            Path::Polled => polled_all(fd, n, |done, len| unsafe {
                next::write(fd, buf.cast::<u8>().add(done).cast(), len)
            }),
        }
    })
}

/// `readv(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_readv")]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    crate::real::guard("readv", || {
        // SAFETY: forwarded unchanged.
        let op = move || unsafe { next::readv(fd, iov, cnt) };
        match path(fd) {
            Path::Pass => op(),
            Path::Managed => once(fd, Interest::Readable, Timeout::Recv, op),
            Path::Polled => polled(fd, Interest::Readable, op),
            // SAFETY: the caller's iovecs.
            Path::File => unsafe { crate::file::readv(fd, iov, cnt) },
        }
    })
}

/// `writev(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_writev")]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    crate::real::guard("writev", || {
        match path(fd) {
            // SAFETY: forwarded unchanged.
            Path::Pass | Path::File => return unsafe { next::writev(fd, iov, cnt) },
            Path::Polled => {
                // SAFETY: forwarded unchanged once the fd polls writable.
                return polled(fd, Interest::Writable, || unsafe { next::writev(fd, iov, cnt) });
            }
            Path::Managed => {}
        }
        // SAFETY: the array is read only after the kernel accepted it on
        // the first call (see `all`).
        let total = || unsafe { iov_total(iov, cnt) };
        all(fd, total, |done| {
            if done == 0 {
                // SAFETY: forwarded unchanged.
                unsafe { next::writev(fd, iov, cnt) }
            } else {
                // SAFETY: the array was accepted by the kernel, so it is valid.
                let rest = unsafe { advance(iov, cnt, done) };
                // SAFETY: `rest` points into the caller's buffers.
                unsafe { next::writev(fd, rest.as_ptr(), rest.len() as c_int) }
            }
        })
    })
}

/// `recv(2)`; `MSG_WAITALL` keeps its meaning, `MSG_DONTWAIT` passes through.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_recv")]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    crate::real::guard("recv", || {
        let p = if flags & libc::MSG_DONTWAIT != 0 {
            Path::Pass
        } else {
            path(fd)
        };
        match p {
            // SAFETY: forwarded unchanged.
            Path::Pass | Path::File => return unsafe { next::recv(fd, buf, n, flags) },
            Path::Polled => {
                // SAFETY: forwarded unchanged once readable.
                return polled(fd, Interest::Readable, || unsafe { next::recv(fd, buf, n, flags) });
            }
            Path::Managed => {}
        }
        if flags & libc::MSG_WAITALL != 0 && n > 0 {
            return recv_all(fd, buf, n, flags);
        }
        // SAFETY: forwarded unchanged.
        once(fd, Interest::Readable, Timeout::Recv, || unsafe {
            next::recv(fd, buf, n, flags)
        })
    })
}

/// `MSG_WAITALL`: keep receiving until n bytes, EOF, or an error.
fn recv_all(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    let mut done = 0usize;
    while done < n {
        // SAFETY: stays within the caller's buffer of n bytes.
        let r = once(fd, Interest::Readable, Timeout::Recv, || unsafe {
            next::recv(
                fd,
                buf.cast::<u8>().add(done).cast(),
                n - done,
                flags & !libc::MSG_WAITALL,
            )
        });
        if r < 0 {
            return if done > 0 { done as ssize_t } else { r };
        }
        if r == 0 {
            break;
        }
        done += r as usize;
    }
    done as ssize_t
}

/// `recvfrom(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_recvfrom")]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    crate::real::guard("recvfrom", || {
        let p = if flags & libc::MSG_DONTWAIT != 0 {
            Path::Pass
        } else {
            path(fd)
        };
        match p {
            // SAFETY: forwarded unchanged.
            Path::Pass | Path::File => return unsafe { next::recvfrom(fd, buf, n, flags, addr, len) },
            Path::Polled => {
                // SAFETY: forwarded unchanged once readable.
                return polled(fd, Interest::Readable, || unsafe {
                    next::recvfrom(fd, buf, n, flags, addr, len)
                });
            }
            Path::Managed => {}
        }
        if flags & libc::MSG_WAITALL != 0 && addr.is_null() && n > 0 {
            return recv_all(fd, buf, n, flags);
        }
        // SAFETY: forwarded unchanged.
        once(fd, Interest::Readable, Timeout::Recv, || unsafe {
            next::recvfrom(fd, buf, n, flags, addr, len)
        })
    })
}

/// `recvmsg(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_recvmsg")]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    crate::real::guard("recvmsg", || {
        let p = if flags & libc::MSG_DONTWAIT != 0 {
            Path::Pass
        } else {
            path(fd)
        };
        match p {
            // SAFETY: forwarded unchanged.
            Path::Pass | Path::File => return unsafe { next::recvmsg(fd, msg, flags) },
            Path::Polled => {
                // SAFETY: forwarded unchanged once readable.
                return polled(fd, Interest::Readable, || unsafe { next::recvmsg(fd, msg, flags) });
            }
            Path::Managed => {}
        }
        // SAFETY: forwarded unchanged.
        once(fd, Interest::Readable, Timeout::Recv, || unsafe {
            next::recvmsg(fd, msg, flags)
        })
    })
}

/// `recvmmsg(2)`: waits for the first message, then, like a blocking
/// socket, keeps filling the vector unless `MSG_WAITFORONE` was given or the
/// timeout (checked after each message, as the kernel does) has passed.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_recvmmsg")]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
    t: *mut libc::timespec,
) -> c_int {
    crate::real::guard("recvmmsg", || {
        if path(fd) != Path::Managed || flags & libc::MSG_DONTWAIT != 0 || n == 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::recvmmsg(fd, v, n, flags, t) };
        }
        let limit = match crate::deadline::relative(t) {
            Ok(l) => l,
            Err(e) => return errno::fail(e),
        };
        let mut got = 0u32;
        while got < n {
            // SAFETY: `v + got` stays within the caller's vector of n entries.
            let r = once(fd, Interest::Readable, Timeout::Recv, || unsafe {
                next::recvmmsg(
                    fd,
                    v.add(got as usize),
                    n - got,
                    flags & !libc::MSG_WAITFORONE,
                    std::ptr::null_mut(),
                ) as ssize_t
            });
            if r < 0 {
                return if got > 0 { got as c_int } else { r as c_int };
            }
            got += r as u32;
            if flags & libc::MSG_WAITFORONE != 0 || limit.is_some_and(|l| Instant::now() >= l) {
                break;
            }
        }
        got as c_int
    })
}

/// `send(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_send")]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    crate::real::guard("send", || {
        let p = if flags & libc::MSG_DONTWAIT != 0 || n == 0 {
            Path::Pass
        } else {
            path(fd)
        };
        match p {
            // SAFETY: forwarded unchanged.
            Path::Pass | Path::File => return unsafe { next::send(fd, buf, n, flags) },
            Path::Polled => {
                // SAFETY: stays within the caller's buffer.
                return polled_all(fd, n, |done, len| unsafe {
                    next::send(fd, buf.cast::<u8>().add(done).cast(), len, flags)
                });
            }
            Path::Managed => {}
        }
        // SAFETY: stays within the caller's buffer.
        all(
            fd,
            || n,
            |done| unsafe { next::send(fd, buf.cast::<u8>().add(done).cast(), n - done, flags) },
        )
    })
}

/// `sendto(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sendto")]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    crate::real::guard("sendto", || {
        if path(fd) != Path::Managed || flags & libc::MSG_DONTWAIT != 0 || n == 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::sendto(fd, buf, n, flags, addr, len) };
        }
        // SAFETY: stays within the caller's buffer.
        all(
            fd,
            || n,
            |done| unsafe { next::sendto(fd, buf.cast::<u8>().add(done).cast(), n - done, flags, addr, len) },
        )
    })
}

/// `sendmsg(2)`: continued after a partial send on stream sockets, without
/// sending ancillary data twice.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sendmsg")]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    crate::real::guard("sendmsg", || {
        if path(fd) != Path::Managed || flags & libc::MSG_DONTWAIT != 0 || msg.is_null() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::sendmsg(fd, msg, flags) };
        }
        // SAFETY: read only after the kernel accepted the msghdr and its
        // iovecs on the first call (see `all`).
        let total = || unsafe { iov_total((*msg).msg_iov, (*msg).msg_iovlen as c_int) }.max(1);
        all(fd, total, |done| {
            if done == 0 {
                // SAFETY: forwarded unchanged.
                unsafe { next::sendmsg(fd, msg, flags) }
            } else {
                // SAFETY: the kernel accepted the msghdr and its array.
                let m = unsafe { *msg };
                // SAFETY: as above.
                let rest = unsafe { advance(m.msg_iov, m.msg_iovlen as c_int, done) };
                let mut m2 = m;
                m2.msg_iov = rest.as_ptr() as *mut iovec;
                m2.msg_iovlen = rest.len() as _;
                m2.msg_control = std::ptr::null_mut();
                m2.msg_controllen = 0;
                // SAFETY: m2 points into the caller's buffers.
                unsafe { next::sendmsg(fd, &m2, flags) }
            }
        })
    })
}

/// `sendmmsg(2)`: waits until at least one message is sent.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sendmmsg")]
pub unsafe extern "C" fn sendmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, flags: c_int) -> c_int {
    crate::real::guard("sendmmsg", || {
        if path(fd) != Path::Managed || flags & libc::MSG_DONTWAIT != 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::sendmmsg(fd, v, n, flags) };
        }
        // SAFETY: forwarded unchanged.
        once(fd, Interest::Writable, Timeout::Send, || unsafe {
            next::sendmmsg(fd, v, n, flags) as ssize_t
        }) as c_int
    })
}

/// `sendfile(2)` to a managed socket or pipe.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sendfile")]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
    crate::real::guard("sendfile", || {
        if path(out) != Path::Managed || n == 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::sendfile(out, inp, off, n) };
        }
        // The kernel advances `*off` (or the file offset) itself.
        // SAFETY: forwarded with the remaining count.
        all(out, || n, |done| unsafe { next::sendfile(out, inp, off, n - done) })
    })
}

/// `sendfile64` is the same call on 64-bit glibc.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sendfile64")]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { sendfile(out, inp, off, n) }
}

/// `connect(2)`: `EINPROGRESS` → wait writable (until `SO_SNDTIMEO`, then
/// `EINPROGRESS` like the kernel) → the result from calling `connect`
/// again.
///
/// Why not `SO_ERROR`: it returns the error but leaves the kernel's socket
/// "connecting", so a second `connect` on it (a retry after
/// `ECONNREFUSED`) fails with `ECONNABORTED`, where a blocking `connect`
/// would have tried again. Calling `connect` again finishes the attempt the
/// way the blocking call does: 0 once connected, `EALREADY` while still in
/// progress, else the error, with the socket reset for a new attempt.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_connect")]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    crate::real::guard("connect", || {
        if path(fd) != Path::Managed {
            // SAFETY: forwarded unchanged.
            return unsafe { next::connect(fd, addr, len) };
        }
        crate::cancel_point();
        // A successful connect leaves errno alone, however many tries it took.
        let caller_errno = errno::get();
        let dl = deadline(fd, Timeout::Send);
        loop {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next::connect(fd, addr, len) };
            if r == 0 {
                errno::set(caller_errno);
                return 0;
            }
            match errno::get() {
                libc::EINPROGRESS => break,
                // A full AF_UNIX backlog: a blocking connect would wait for
                // room, which epoll cannot signal; retry shortly.
                libc::EAGAIN => {
                    if dl.is_some_and(|d| Instant::now() >= d) {
                        return errno::fail(libc::EAGAIN);
                    }
                    hub::sleep(std::time::Duration::from_millis(1));
                }
                _ => return r,
            }
        }
        loop {
            match wait(fd, Interest::Writable, dl) {
                Ok(()) => {}
                Err(libc::EAGAIN) => return errno::fail(libc::EINPROGRESS),
                Err(e) => return errno::fail(e),
            }
            // SAFETY: forwarded unchanged.
            let r = unsafe { next::connect(fd, addr, len) };
            if r == 0 {
                errno::set(caller_errno);
                return 0;
            }
            match errno::get() {
                libc::EISCONN => {
                    errno::set(caller_errno);
                    return 0;
                }
                libc::EALREADY | libc::EINPROGRESS => {}
                _ => return r,
            }
        }
    })
}

/// `accept4(2)`. Accepted sockets are managed while patched.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_accept4")]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    crate::real::guard("accept4", || {
        if !crate::gate::patched() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::accept4(fd, addr, len, flags) };
        }
        let user_nb = flags & libc::SOCK_NONBLOCK != 0;
        // SAFETY: forwarded with SOCK_NONBLOCK added for the new socket.
        let op = || unsafe { next::accept4(fd, addr, len, flags | libc::SOCK_NONBLOCK) } as ssize_t;
        let r = if fdtable::waits_on_hub(fd) {
            once(fd, Interest::Readable, Timeout::Recv, op)
        } else {
            op()
        };
        if r >= 0 {
            fdtable::set_managed(r as c_int, user_nb, true);
        }
        r as c_int
    })
}

/// `accept(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_accept")]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: same contract as accept4 with no flags.
    unsafe { accept4(fd, addr, len, 0) }
}

/// A transfer between two fds (`splice`, `tee`). Managed fds are
/// non-blocking underneath, so the kernel answers `EAGAIN` where the
/// caller's blocking call would wait: wait for whichever side is not ready
/// and retry. Straight through when the caller asked for
/// `SPLICE_F_NONBLOCK`, or when either side is not ours to wait on (a
/// non-blocking fd of the user's, or no cooperative context for a foreign
/// one), where `EAGAIN` is the kernel's own answer.
///
/// `op(flags)` makes the call with the given flags: ours add
/// `SPLICE_F_NONBLOCK`, since the kernel's pipe side looks at that flag
/// (not always at the pipe's `O_NONBLOCK`) before sleeping.
fn two_sided(inp: c_int, out: c_int, flags: c_uint, mut op: impl FnMut(c_uint) -> ssize_t) -> ssize_t {
    let (pi, po) = (path(inp), path(out));
    let ours = |p: Path| matches!(p, Path::Managed | Path::Polled);
    if flags & libc::SPLICE_F_NONBLOCK != 0 || pi == Path::Pass || po == Path::Pass || !(ours(pi) || ours(po)) {
        return op(flags);
    }
    crate::cancel_point();
    loop {
        for (fd, p, interest) in [(inp, pi, Interest::Readable), (out, po, Interest::Writable)] {
            if p == Path::Polled {
                if let Err(e) = wait_until_ready(fd, interest) {
                    return errno::fail(e);
                }
            }
        }
        let r = op(flags | libc::SPLICE_F_NONBLOCK);
        if r >= 0 || !would_block(errno::get()) {
            return r;
        }
        let (fd, interest, which) = if !ready_now(inp, Interest::Readable) {
            (inp, Interest::Readable, Timeout::Recv)
        } else if !ready_now(out, Interest::Writable) {
            (out, Interest::Writable, Timeout::Send)
        } else {
            // Both poll ready and the kernel still said EAGAIN: pause a
            // moment (cooperatively, through the nanosleep hook) and retry.
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        };
        if let Err(e) = wait(fd, interest, deadline(fd, which)) {
            return errno::fail(e);
        }
    }
}

/// `splice(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_splice")]
pub unsafe extern "C" fn splice(
    inp: c_int,
    off_in: *mut libc::loff_t,
    out: c_int,
    off_out: *mut libc::loff_t,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    crate::real::guard("splice", || {
        // SAFETY: forwarded unchanged (the kernel advances the offsets).
        two_sided(inp, out, flags, |f| unsafe {
            next::splice(inp, off_in, out, off_out, n, f)
        })
    })
}

/// `tee(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_tee")]
pub unsafe extern "C" fn tee(inp: c_int, out: c_int, n: size_t, flags: c_uint) -> ssize_t {
    crate::real::guard("tee", || {
        // SAFETY: forwarded unchanged.
        two_sided(inp, out, flags, |f| unsafe { next::tee(inp, out, n, f) })
    })
}

/// `vmsplice(2)`: user memory into a pipe (or, from a read end, out of it).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_vmsplice")]
pub unsafe extern "C" fn vmsplice(fd: c_int, iov: *const iovec, cnt: libc::size_t, flags: c_uint) -> ssize_t {
    crate::real::guard("vmsplice", || {
        let p = path(fd);
        if flags & libc::SPLICE_F_NONBLOCK != 0 || !matches!(p, Path::Managed | Path::Polled) {
            // SAFETY: forwarded unchanged.
            return unsafe { next::vmsplice(fd, iov, cnt, flags) };
        }
        // SAFETY: F_GETFL only reads the status flags.
        let reading = unsafe { next::fcntl(fd, libc::F_GETFL, 0) } & libc::O_ACCMODE == libc::O_RDONLY;
        let (interest, which) = if reading {
            (Interest::Readable, Timeout::Recv)
        } else {
            (Interest::Writable, Timeout::Send)
        };
        // vmsplice sleeps on a full (or empty) pipe unless asked not to,
        // whatever the pipe's O_NONBLOCK: ask, and wait here instead.
        // SAFETY: the caller's arguments, not waiting.
        let op = || unsafe { next::vmsplice(fd, iov, cnt, flags | libc::SPLICE_F_NONBLOCK) };
        once(fd, interest, which, op)
    })
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    splice,
    tee,
    vmsplice,
    read,
    write,
    readv,
    writev,
    recv,
    recvfrom,
    recvmsg,
    recvmmsg,
    send,
    sendto,
    sendmsg,
    sendmmsg,
    sendfile,
    sendfile64,
    connect,
    accept4,
    accept,
}
