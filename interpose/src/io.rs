//! fd I/O on sockets, pipes, FIFOs, ttys and eventfds: `read`, `write`,
//! `readv`, `writev`, `preadv2`, `pwritev2`, `recv*`, `send*`, `sendfile`, `splice`, `tee`,
//! `vmsplice`, `connect`, `accept`, `accept4`.
//!
//! Each hook: gate (patched, not machinery, fd managed, user did not ask for
//! `O_NONBLOCK` and did not pass `MSG_DONTWAIT`) → try the call without
//! waiting (a pipe or listener is non-blocking underneath; a data socket
//! stays blocking and the try asks for no wait itself, see
//! [`crate::nowait`]) → on `EAGAIN` wait on the hub, until the
//! socket's `SO_RCVTIMEO`/`SO_SNDTIMEO` if set (then `EAGAIN`, like the
//! kernel) → retry; errno set last. The classifying and the waiting are
//! `crate::fdwait`'s.
//!
//! Writes keep blocking semantics: a blocking `write` of n bytes to a stream
//! socket or pipe writes all n (or fails before writing anything), so
//! partial writes are continued. The `pread`/`pwrite` family needs no hook
//! here: on sockets and pipes the kernel answers `ESPIPE` at once.

use std::time::Instant;

use hub::Interest;
use libc::{c_int, c_uint, c_void, iovec, mmsghdr, msghdr, off_t, size_t, sockaddr, socklen_t, ssize_t, timespec};

use crate::errno;
use crate::fdtable::{self, Fd};
use crate::fdwait::{
    all, asked_not_to_wait, deadline, once, pass, pass_all, path, polled, polled_all, ready_now, wait,
    wait_until_ready, would_block, Path,
};
use crate::gate::patched;
use crate::hook::hook;
use crate::nowait;

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

hook! {
    /// `read(2)`.
    #[cancel_point]
    [io] fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move || unsafe { read::real(fd, buf, n) };
        match path(fd) {
            Path::Pass => pass(fd, Interest::Readable, op),
            // SAFETY: as `op`.
            Path::Managed(on) if on.nowait() => once(on, Interest::Readable, || unsafe { nowait::read(fd, buf, n) }),
            Path::Managed(fd) => once(fd, Interest::Readable, op),
            Path::Polled(fd) => polled(fd, Interest::Readable, op),
            // SAFETY: the caller's buffer of n bytes.
            Path::File(_) => unsafe { crate::file::read(fd, buf, n) },
        }
    }

    /// `write(2)`: all n bytes, as a blocking write.
    #[cancel_point]
    #[gate(n != 0)]
    [io] fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
        // SAFETY: `len` bytes from offset `done`, within the caller's
        // buffer of n bytes.
        let from =
            move |done: usize, len: usize| unsafe { write::real(fd, buf.cast::<u8>().add(done).cast(), len) };
        match path(fd) {
            Path::File(f) if f.is_direct() => crate::file::write_one_direct(fd, buf, n, -1),
            Path::Pass => pass_all(fd, n, from),
            Path::File(_) => {
                crate::cancel_point();
                from(0, n)
            }
            // SAFETY: as `from`.
            Path::Managed(on) if on.nowait() => all(on, || n, |done| unsafe {
                nowait::write(fd, buf.cast::<u8>().add(done).cast(), n - done)
            }),
            Path::Managed(fd) => all(fd, || n, |done| from(done, n - done)),
            Path::Polled(fd) => polled_all(fd, n, from),
        }
    }

    /// `readv(2)`.
    #[cancel_point]
    [io] fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move || unsafe { readv::real(fd, iov, cnt) };
        match path(fd) {
            Path::Pass => pass(fd, Interest::Readable, op),
            // SAFETY: as `op`.
            Path::Managed(on) if on.nowait() => once(on, Interest::Readable, || unsafe { nowait::readv(fd, iov, cnt) }),
            Path::Managed(fd) => once(fd, Interest::Readable, op),
            Path::Polled(fd) => polled(fd, Interest::Readable, op),
            // SAFETY: the caller's iovecs.
            Path::File(_) => unsafe { crate::file::readv(fd, iov, cnt) },
        }
    }

    /// `writev(2)`: all the bytes, as a blocking write.
    #[cancel_point]
    [io] fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
        // SAFETY: forwarded unchanged.
        let op = move || unsafe { writev::real(fd, iov, cnt) };
        let fd = match path(fd) {
            Path::File(f) if f.is_direct() => return crate::file::write_direct(fd, iov, cnt, -1),
            Path::Pass => return pass(fd, Interest::Writable, op),
            Path::File(_) => {
                crate::cancel_point();
                return op();
            }
            Path::Polled(fd) => return polled(fd, Interest::Writable, op),
            Path::Managed(fd) => fd,
        };
        let nowait = fd.nowait();
        // SAFETY: the caller's iovecs, or the rest of them.
        let write = move |iov: *const iovec, cnt: c_int| unsafe {
            if nowait {
                nowait::writev(fd.raw(), iov, cnt)
            } else {
                writev::real(fd.raw(), iov, cnt)
            }
        };
        // SAFETY: the caller's iovecs.
        unsafe { writev_all(fd, iov, cnt, write) }
    }

    /// `preadv2(2)`: see [`read_with_flags`].
    #[cancel_point]
    [io] fn preadv2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t {
        // SAFETY: the caller's arguments.
        unsafe { read_with_flags(preadv2::real, fd, iov, cnt, off, flags) }
    }

    /// `preadv64v2`: the same function on 64-bit targets.
    #[cancel_point]
    [io] fn preadv64v2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t {
        // SAFETY: the caller's arguments.
        unsafe { read_with_flags(preadv64v2::real, fd, iov, cnt, off, flags) }
    }

    /// `pwritev2(2)`: see [`write_with_flags`].
    #[cancel_point]
    [io] fn pwritev2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t {
        // SAFETY: the caller's arguments.
        unsafe { write_with_flags(pwritev2::real, fd, iov, cnt, off, flags) }
    }

    /// `pwritev64v2`: the same function on 64-bit targets.
    #[cancel_point]
    [io] fn pwritev64v2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t {
        // SAFETY: the caller's arguments.
        unsafe { write_with_flags(pwritev64v2::real, fd, iov, cnt, off, flags) }
    }

    /// `recv(2)`; `MSG_WAITALL` keeps its meaning, `MSG_DONTWAIT` passes
    /// through (its `EAGAIN` counts as finding nothing: see
    /// `preempt::found_nothing`).
    #[cancel_point]
    [io] fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move |more: c_int| move || unsafe { recv::real(fd, buf, n, flags | more) };
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(op(0));
        }
        match path(fd) {
            Path::Pass => pass(fd, Interest::Readable, op(0)),
            Path::File(_) => op(0)(),
            Path::Polled(fd) | Path::Managed(fd) if flags & libc::MSG_WAITALL != 0 && n > 0 => {
                recv_all(fd, buf, n, flags | dontwait(fd))
            }
            Path::Polled(fd) | Path::Managed(fd) => once(fd, Interest::Readable, op(dontwait(fd))),
        }
    }

    /// `recvfrom(2)`, as `recv`.
    #[cancel_point]
    [io] fn recvfrom(
        fd: c_int,
        buf: *mut c_void,
        n: size_t,
        flags: c_int,
        addr: *mut sockaddr,
        len: *mut socklen_t,
    ) -> ssize_t {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move |more: c_int| move || unsafe { recvfrom::real(fd, buf, n, flags | more, addr, len) };
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(op(0));
        }
        match path(fd) {
            Path::Pass => pass(fd, Interest::Readable, op(0)),
            Path::File(_) => op(0)(),
            Path::Polled(fd) | Path::Managed(fd) if flags & libc::MSG_WAITALL != 0 && addr.is_null() && n > 0 => {
                recv_all(fd, buf, n, flags | dontwait(fd))
            }
            Path::Polled(fd) | Path::Managed(fd) => once(fd, Interest::Readable, op(dontwait(fd))),
        }
    }

    /// `recvmsg(2)`, as `recv`.
    #[cancel_point]
    [io] fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move |more: c_int| move || unsafe { recvmsg::real(fd, msg, flags | more) };
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(op(0));
        }
        match path(fd) {
            Path::Pass => pass(fd, Interest::Readable, op(0)),
            Path::File(_) => op(0)(),
            Path::Polled(fd) | Path::Managed(fd) => once(fd, Interest::Readable, op(dontwait(fd))),
        }
    }

    /// `recvmmsg(2)`: waits for the first message, then, like a blocking
    /// socket, keeps filling the vector unless `MSG_WAITFORONE` was given or
    /// the timeout (checked after each message, as the kernel does) has
    /// passed.
    /// With `MSG_DONTWAIT`, or on the program's own non-blocking socket,
    /// it is made as it is (its `EAGAIN` counts as finding nothing, as in
    /// `recv`).
    #[cancel_point]
    #[gate(n != 0)]
    [io] fn recvmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int, t: *mut timespec) -> c_int {
        // SAFETY: forwarded unchanged.
        let op = move || unsafe { recvmmsg::real(fd, v, n, flags, t) } as ssize_t;
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(op) as c_int;
        }
        let on = match path(fd) {
            Path::Managed(on) | Path::Polled(on) => on,
            Path::Pass => return pass(fd, Interest::Readable, op) as c_int,
            Path::File(_) => return op() as c_int,
        };
        let limit = match crate::deadline::relative(t) {
            Ok(l) => l,
            Err(e) => return errno::fail(e),
        };
        let mut got = 0u32;
        while got < n {
            // SAFETY: `v + got` stays within the caller's vector of n entries.
            let r = once(on, Interest::Readable, || unsafe {
                recvmmsg::real(
                    fd,
                    v.add(got as usize),
                    n - got,
                    (flags & !libc::MSG_WAITFORONE) | dontwait(on),
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
    }

    /// `send(2)`: all n bytes, as a blocking send; with `MSG_DONTWAIT`
    /// made as it is (its `EAGAIN` counts as finding nothing, as in
    /// `recv`).
    #[cancel_point]
    #[gate(n != 0)]
    [io] fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
        // `more`: the flags our try adds (`MSG_DONTWAIT` on a socket that
        // stays blocking underneath).
        let from = move |more: c_int| {
            // SAFETY: `len` bytes from offset `done`, within the caller's
            // buffer of n bytes.
            move |done: usize, len: usize| unsafe {
                send::real(fd, buf.cast::<u8>().add(done).cast(), len, flags | more)
            }
        };
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(|| from(0)(0, n));
        }
        match path(fd) {
            Path::Pass => pass_all(fd, n, from(0)),
            Path::File(_) => from(0)(0, n),
            Path::Polled(fd) | Path::Managed(fd) => {
                let from = from(dontwait(fd));
                all(fd, || n, |done| from(done, n - done))
            }
        }
    }

    /// `sendto(2)`, as `send`.
    #[cancel_point]
    #[gate(n != 0)]
    [io] fn sendto(
        fd: c_int,
        buf: *const c_void,
        n: size_t,
        flags: c_int,
        addr: *const sockaddr,
        len: socklen_t,
    ) -> ssize_t {
        // `more`: as in `send`.
        let from = move |more: c_int| {
            // SAFETY: from offset `done` to the end of the caller's buffer
            // of n bytes.
            move |done: usize| unsafe {
                sendto::real(fd, buf.cast::<u8>().add(done).cast(), n - done, flags | more, addr, len)
            }
        };
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(|| from(0)(0));
        }
        match path(fd) {
            Path::Polled(fd) | Path::Managed(fd) => all(fd, || n, from(dontwait(fd))),
            Path::Pass => pass_all(fd, n, |done, _| from(0)(done)),
            Path::File(_) => from(0)(0),
        }
    }

    /// `sendmsg(2)`: continued after a partial send on stream sockets,
    /// without sending ancillary data twice; pipes passed with
    /// `SCM_RIGHTS` go as blocking descriptions
    /// ([`crate::fd::blocking_rights`]).
    #[cancel_point]
    #[gate(patched() && !msg.is_null())]
    [io] fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
        // SAFETY: the caller's message, not yet read by anyone.
        let rights = unsafe { crate::fd::blocking_rights(msg) };
        let msg = rights.as_ref().map_or(msg, crate::fd::BlockingRights::msg);
        // SAFETY: forwarded unchanged, or the same message with other fds.
        let op = move |more: c_int| move || unsafe { sendmsg::real(fd, msg, flags | more) };
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(op(0));
        }
        let on = match path(fd) {
            Path::Polled(on) | Path::Managed(on) => on,
            Path::Pass => return pass(fd, Interest::Writable, op(0)),
            Path::File(_) => return op(0)(),
        };
        let more = dontwait(on);
        // SAFETY: read only after the kernel accepted the msghdr and its
        // iovecs on the first call (see `all`).
        let total = || unsafe { iov_total((*msg).msg_iov, (*msg).msg_iovlen as c_int) }.max(1);
        all(on, total, |done| {
            if done == 0 {
                return op(more)();
            }
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
            unsafe { sendmsg::real(fd, &m2, flags | more) }
        })
    }

    /// `sendmmsg(2)`: waits until at least one message is sent; with
    /// `MSG_DONTWAIT` made as it is (as `send`).
    #[cancel_point]
    [io] fn sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
        // SAFETY: forwarded unchanged, possibly several times.
        let op = move |more: c_int| move || unsafe { sendmmsg::real(fd, v, n, flags | more) } as ssize_t;
        if flags & libc::MSG_DONTWAIT != 0 {
            return asked_not_to_wait(op(0)) as c_int;
        }
        match path(fd) {
            Path::Polled(fd) | Path::Managed(fd) => once(fd, Interest::Writable, op(dontwait(fd))) as c_int,
            Path::Pass => pass(fd, Interest::Writable, op(0)) as c_int,
            Path::File(_) => op(0)() as c_int,
        }
    }

    /// `shutdown(2)`, then the fibers waiting to use the socket try again,
    /// as the kernel's blocked calls do: a Unix stream socket's own
    /// `SHUT_WR` fails a write blocked on it with `EPIPE`, but never makes
    /// it writable for epoll, so such a writer waited for ever.
    #[gate(crate::gate::cooperative())]
    [io] fn shutdown(fd: c_int, how: c_int) -> c_int {
        // SAFETY: forwarded unchanged.
        let r = unsafe { shutdown::real(fd, how) };
        if r == 0 {
            hub::wake_fd(fd, how != libc::SHUT_WR, how != libc::SHUT_RD);
        }
        r
    }

    /// `sendfile(2)` to a managed socket or pipe.
    #[gate(n != 0)]
    [io] fn sendfile(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
        send_file(out, inp, off, n)
    }

    /// `sendfile64(2)`: the same call on 64-bit glibc.
    #[gate(n != 0)]
    [io] fn sendfile64(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
        send_file(out, inp, off, n)
    }

    /// `connect(2)`: `EINPROGRESS` → wait writable (until `SO_SNDTIMEO`, then
    /// `EINPROGRESS` like the kernel) → the result from calling `connect`
    /// again.
    ///
    /// Why not `SO_ERROR`: it returns the error but leaves the kernel's
    /// socket "connecting", so a second `connect` on it (a retry after
    /// `ECONNREFUSED`) fails with `ECONNABORTED`, where a blocking `connect`
    /// would have tried again. Calling `connect` again finishes the attempt
    /// the way the blocking call does: 0 once connected, `EALREADY` while
    /// still in progress, else the error, with the socket reset for a new
    /// attempt.
    #[cancel_point]
    [io] fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
        // SAFETY: forwarded unchanged, possibly several times.
        let call = move || unsafe { connect::real(fd, addr, len) };
        let (Path::Managed(on) | Path::Polled(on)) = path(fd) else {
            return call();
        };
        // A socket that stays blocking underneath, ours or one greenhook
        // did not create, is made non-blocking for each call.
        let op = || {
            if blocking_underneath(on) {
                nowait::toggled(fd, call)
            } else {
                call()
            }
        };
        crate::cancel_point();
        // A successful connect leaves errno alone, however many tries it took.
        let caller_errno = errno::get();
        let dl = deadline(on, Interest::Writable);
        loop {
            let r = op();
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
            match wait(on, Interest::Writable, dl) {
                Ok(()) => {}
                Err(libc::EAGAIN) => return errno::fail(libc::EINPROGRESS),
                Err(e) => return errno::fail(e),
            }
            let r = op();
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
    }

    /// `accept4(2)`. Accepted sockets are managed while patched.
    #[cancel_point]
    #[gate(patched())]
    [io] fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
        accepted(fd, addr, len, flags)
    }

    /// `accept(2)`: `accept4` without flags.
    #[cancel_point]
    #[gate(patched())]
    [io] fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
        accepted(fd, addr, len, 0)
    }

    /// `splice(2)`.
    #[cancel_point]
    #[gate(flags & libc::SPLICE_F_NONBLOCK == 0)]
    [io] fn splice(
        inp: c_int,
        off_in: *mut libc::loff_t,
        out: c_int,
        off_out: *mut libc::loff_t,
        n: size_t,
        flags: c_uint,
    ) -> ssize_t {
        // SAFETY: forwarded unchanged (the kernel advances the offsets).
        two_sided(inp, out, flags, |f| unsafe { splice::real(inp, off_in, out, off_out, n, f) })
    }

    /// `tee(2)`.
    #[cancel_point]
    #[gate(flags & libc::SPLICE_F_NONBLOCK == 0)]
    [io] fn tee(inp: c_int, out: c_int, n: size_t, flags: c_uint) -> ssize_t {
        // SAFETY: forwarded unchanged.
        two_sided(inp, out, flags, |f| unsafe { tee::real(inp, out, n, f) })
    }

    /// `vmsplice(2)`: user memory into a pipe (or, from a read end, out of it).
    #[cancel_point]
    #[gate(flags & libc::SPLICE_F_NONBLOCK == 0)]
    [io] fn vmsplice(fd: c_int, iov: *const iovec, cnt: size_t, flags: c_uint) -> ssize_t {
        let (Path::Managed(on) | Path::Polled(on)) = path(fd) else {
            // SAFETY: forwarded unchanged.
            return unsafe { vmsplice::real(fd, iov, cnt, flags) };
        };
        // SAFETY: F_GETFL only reads the status flags.
        let reading = unsafe { crate::fd::fcntl::real(fd, libc::F_GETFL, 0) } & libc::O_ACCMODE == libc::O_RDONLY;
        let interest = if reading {
            Interest::Readable
        } else {
            Interest::Writable
        };
        // vmsplice sleeps on a full (or empty) pipe unless asked not to,
        // whatever the pipe's O_NONBLOCK: ask, and wait here instead.
        // SAFETY: the caller's arguments, not waiting.
        once(on, interest, || unsafe { vmsplice::real(fd, iov, cnt, flags | libc::SPLICE_F_NONBLOCK) })
    }
}

/// Whether the description of `fd` (managed or [`Path::Polled`]) is
/// blocking, so a try on it must ask for no wait itself: a socket of ours
/// that stays so ([`fdtable::NOWAIT`]), or a foreign blocking fd; not a
/// managed pipe or listener, or a socket of the old way.
fn blocking_underneath(fd: Fd) -> bool {
    fd.flags() & fdtable::MANAGED == 0 || fd.nowait()
}

/// The flag a socket call's try adds on `fd`: `MSG_DONTWAIT` where the
/// description is [`blocking_underneath`]. On a foreign fd that is not a
/// socket the call fails with `ENOTSOCK` whatever its flags, as it would
/// have.
fn dontwait(fd: Fd) -> c_int {
    if blocking_underneath(fd) {
        libc::MSG_DONTWAIT
    } else {
        0
    }
}

/// `MSG_WAITALL`: keep receiving until n bytes, EOF, or an error.
fn recv_all(fd: Fd, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    // `flags` carries our `MSG_DONTWAIT` if the tries need it.
    let mut done = 0usize;
    while done < n {
        // SAFETY: stays within the caller's buffer of n bytes.
        let r = once(fd, Interest::Readable, || unsafe {
            recv::real(
                fd.raw(),
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

/// `sendfile` and `sendfile64`: to a managed socket or pipe, all n bytes.
fn send_file(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t {
    // The kernel advances `*off` (or the file offset) itself.
    // SAFETY: the caller's arguments, with the remaining count.
    let from = move |done: usize| unsafe { sendfile::real(out, inp, off, n - done) };
    match path(out) {
        Path::Managed(fd) => {
            // glibc's sendfile is no cancellation point.
            let _no = crate::thread::cancel::NotAPoint::enter();
            all(fd, || n, |done| nowait::nonblocking(fd, || from(done)))
        }
        _ => from(0),
    }
}

/// `accept4` and `accept`: waits for a connection on a listener we manage;
/// the accepted socket is managed, with the caller's flags kept aside.
fn accepted(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    let ours = crate::fd::socket_nonblock();
    // SAFETY: forwarded, with SOCK_NONBLOCK added for the new socket
    // unless it stays blocking underneath.
    let call = || unsafe { accept4::real(fd, addr, len, flags | ours) } as ssize_t;
    let r = match path(fd) {
        // A listener still blocking underneath (`listen` went past our
        // hook) is made non-blocking for the call.
        Path::Managed(l) => once(l, Interest::Readable, || nowait::nonblocking(l, call)),
        Path::Polled(l) => accept_foreign(l, call),
        _ => pass(fd, Interest::Readable, call),
    };
    if r >= 0 {
        crate::fd::managed_socket(r as c_int, flags & libc::SOCK_NONBLOCK != 0);
    }
    r as c_int
}

/// The real `preadv2` or `pwritev2` (or their `64v2` names).
type Vectored2 = unsafe fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;

/// `preadv2` at the file position (offset -1) of a socket, pipe or FIFO:
/// a blocking `readv` that passes the caller's flags on (the kernel judges
/// them), so it waits on the hub where the fd is non-blocking underneath
/// (before, it met `EAGAIN` there). With the caller's `RWF_NOWAIT`, or at
/// an offset (`ESPIPE` on those fds; a regular file's positional read), or
/// on a regular file, it is the real call.
///
/// # Safety
/// As `preadv2`: `iov` points at `cnt` iovecs of writable memory (the
/// kernel checks them).
unsafe fn read_with_flags(
    real: Vectored2,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: forwarded unchanged, possibly several times.
    let op = move || unsafe { real(fd, iov, cnt, off, flags) };
    if off != -1 || flags & libc::RWF_NOWAIT != 0 {
        return op();
    }
    match path(fd) {
        Path::Pass => pass(fd, Interest::Readable, op),
        Path::File(_) => op(),
        // SAFETY: as `op`, asking for no wait.
        Path::Managed(on) if on.nowait() => once(on, Interest::Readable, move || unsafe {
            real(fd, iov, cnt, -1, flags | libc::RWF_NOWAIT)
        }),
        Path::Managed(fd) => once(fd, Interest::Readable, op),
        Path::Polled(fd) => polled(fd, Interest::Readable, op),
    }
}

/// `pwritev2` at the file position of a socket, pipe or FIFO: all the
/// bytes, as a blocking `writev`, with the caller's flags passed on; the
/// real call otherwise, as in [`read_with_flags`].
///
/// # Safety
/// As `pwritev2`: `iov` points at `cnt` iovecs of readable memory (the
/// kernel checks them).
unsafe fn write_with_flags(
    real: Vectored2,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: forwarded unchanged.
    let op = move || unsafe { real(fd, iov, cnt, off, flags) };
    if off != -1 || flags & libc::RWF_NOWAIT != 0 {
        return op();
    }
    let fd = match path(fd) {
        Path::Pass => return pass(fd, Interest::Writable, op),
        Path::File(_) => return op(),
        Path::Polled(fd) => return polled(fd, Interest::Writable, op),
        Path::Managed(fd) => fd,
    };
    let more = if fd.nowait() { libc::RWF_NOWAIT } else { 0 };
    // SAFETY: the caller's iovecs, or the rest of them.
    let write = move |iov: *const iovec, cnt: c_int| unsafe { real(fd.raw(), iov, cnt, -1, flags | more) };
    // SAFETY: the caller's iovecs.
    unsafe { writev_all(fd, iov, cnt, write) }
}

/// A vectored write to a managed fd continued until every byte is through
/// (see [`all`]): `write(iov, cnt)` writes an array, the caller's first and
/// then what is left of it. `writev`, `pwritev2`.
///
/// # Safety
/// `iov` points at `cnt` iovecs (the kernel checks them on the first
/// write, before anything here reads them).
unsafe fn writev_all(fd: Fd, iov: *const iovec, cnt: c_int, write: impl Fn(*const iovec, c_int) -> ssize_t) -> ssize_t {
    // SAFETY: the array is read only after the kernel accepted it on the
    // first call (see `all`).
    let total = || unsafe { iov_total(iov, cnt) };
    all(fd, total, |done| {
        if done == 0 {
            return write(iov, cnt);
        }
        // SAFETY: the array was accepted by the kernel, so it is valid.
        let rest = unsafe { advance(iov, cnt, done) };
        write(rest.as_ptr(), rest.len() as c_int)
    })
}

/// `accept` on a blocking listener greenhook did not create (inherited:
/// systemd's socket activation, a supervisor's `--fd`): wait until it is
/// readable, then accept with its description non-blocking for that one
/// call, and wait again if another process took the connection meanwhile.
/// A blocking `accept` there would hold the hub until a connection came;
/// one after the wait alone, until the next connection, when a process
/// sharing the listener took this one.
fn accept_foreign(l: Fd, call: impl Fn() -> ssize_t) -> ssize_t {
    crate::cancel_point();
    let caller_errno = errno::get();
    loop {
        if let Err(e) = wait_until_ready(l, Interest::Readable) {
            return errno::fail(e);
        }
        let r = nowait::toggled(l.raw(), &call);
        if r >= 0 {
            errno::set(caller_errno);
            return r;
        }
        if !would_block(errno::get()) {
            return r;
        }
    }
}

/// A transfer between two fds (`splice`, `tee`) without
/// `SPLICE_F_NONBLOCK`. Managed fds are non-blocking underneath, so the
/// kernel answers `EAGAIN` where the caller's blocking call would wait:
/// wait for whichever side is not ready and retry. Straight through when
/// either side is not ours to wait on (a non-blocking fd of the user's, or
/// no cooperative context for a foreign one), where `EAGAIN` is the
/// kernel's own answer.
///
/// `op(flags)` makes the call with the given flags: ours add
/// `SPLICE_F_NONBLOCK`, since the kernel's pipe side looks at that flag
/// (not always at the pipe's `O_NONBLOCK`) before sleeping.
fn two_sided(inp: c_int, out: c_int, flags: c_uint, mut op: impl FnMut(c_uint) -> ssize_t) -> ssize_t {
    let (pi, po) = (path(inp), path(out));
    let ours = |p: Path| matches!(p, Path::Managed(_) | Path::Polled(_));
    let (Some(fi), Some(fo)) = (pi.fd(), po.fd()) else {
        return op(flags);
    };
    if !(ours(pi) || ours(po)) {
        return op(flags);
    }
    crate::cancel_point();
    loop {
        for (p, interest) in [(pi, Interest::Readable), (po, Interest::Writable)] {
            if let Path::Polled(fd) = p {
                if let Err(e) = wait_until_ready(fd, interest) {
                    return errno::fail(e);
                }
            }
        }
        // A socket side still blocking underneath is made non-blocking
        // for the call: the kernel's socket side looks at `O_NONBLOCK`.
        let r = nowait::nonblocking(fi, || nowait::nonblocking(fo, || op(flags | libc::SPLICE_F_NONBLOCK)));
        if r >= 0 || !would_block(errno::get()) {
            return r;
        }
        let (fd, interest) = if !ready_now(fi, Interest::Readable) {
            (fi, Interest::Readable)
        } else if !ready_now(fo, Interest::Writable) {
            (fo, Interest::Writable)
        } else {
            // Both poll ready and the kernel still said EAGAIN: pause a
            // moment (cooperatively, through the nanosleep hook) and retry.
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        };
        if let Err(e) = wait(fd, interest, deadline(fd, interest)) {
            return errno::fail(e);
        }
    }
}
