//! Waiting for an fd the way a blocking call would: the engine that the
//! io, stdio and formatted-output hooks share.
//!
//! [`path`] classifies an fd for one call, with one look-up in the
//! [`fdtable`](crate::fdtable); the resulting [`Fd`] is what every wait
//! below takes, so the socket timeout is read from the same entry:
//! - [`Path::Managed`]: non-blocking underneath; try the real call, on
//!   `EAGAIN` wait on the hub (until the socket's `SO_RCVTIMEO`/
//!   `SO_SNDTIMEO`, then `EAGAIN` like the kernel), retry ([`once`],
//!   [`all`]);
//! - [`Path::Polled`]: a blocking fd we did not create; wait until `poll`
//!   says it is ready, then make the call ([`polled`], [`polled_all`],
//!   [`wait_until_ready`]);
//! - [`Path::File`]: a regular file (see [`crate::file`]);
//! - [`Path::Pass`]: straight to the real call.
//!
//! A wait parks the fiber on the hub in a cooperative context; anywhere
//! else nothing could run meanwhile, so it blocks in the kernel as the
//! blocking call would have. errno is set last; a call that succeeds leaves
//! it as the caller had it, even if an attempt on the way met `EAGAIN`.

use std::time::Instant;

use hub::Interest;
use libc::{c_int, ssize_t};

use crate::errno;
use crate::fdtable::{self, Fd, Timeout};

/// How a call on an fd is handled. Every way but `Pass` carries the fd's
/// table entry, for the waits.
#[derive(Clone, Copy)]
pub(crate) enum Path {
    /// Straight to the real call.
    Pass,
    /// Managed: non-blocking underneath; try, wait on EAGAIN, retry.
    Managed(Fd),
    /// An fd we did not create (inherited pipe or tty, a FIFO opened with
    /// `open`…), blocking, used in a cooperative context: wait until
    /// `poll` says it is ready, then make the (now non-blocking) real call.
    /// Its `O_NONBLOCK` is left alone: the description may be shared with
    /// other processes (a tty with the shell).
    Polled(Fd),
    /// A regular file: page cache without blocking, else the offload pool.
    File(Fd),
}

impl Path {
    /// The fd, unless the call passes straight through.
    pub(crate) fn fd(self) -> Option<Fd> {
        match self {
            Path::Pass => None,
            Path::Managed(fd) | Path::Polled(fd) | Path::File(fd) => Some(fd),
        }
    }
}

/// How a call on `fd` is handled.
#[inline]
pub(crate) fn path(fd: c_int) -> Path {
    if !crate::gate::on() {
        return Path::Pass;
    }
    // Managed first, without the machinery check (a thread-local read): a
    // greenhook worker that touches a managed fd is not in a cooperative
    // context, so it waits in the kernel like the blocking call would,
    // which is correct there too.
    let fd = Fd::of(fd);
    let f = fd.flags();
    if f & fdtable::MANAGED != 0 {
        return if f & fdtable::USER_NONBLOCK == 0 {
            Path::Managed(fd)
        } else {
            Path::Pass
        };
    }
    if !crate::gate::patched() || !crate::gate::can_yield() {
        return Path::Pass;
    }
    let fd = known(fd);
    let f = fd.flags();
    if f & fdtable::MANAGED != 0 {
        // A foreign socket taken as managed by `examine`: one another
        // greenhook marked, or a blocking one adopted.
        return Path::Managed(fd);
    }
    if f & fdtable::KNOWN == 0 || f & fdtable::USER_NONBLOCK != 0 {
        Path::Pass
    } else if f & fdtable::FILE != 0 {
        Path::File(fd)
    } else {
        Path::Polled(fd)
    }
}

/// The real call on an fd no wait applies to ([`Path::Pass`]). But a
/// foreign fd that meets `EAGAIN` (or a short write) outside a cooperative
/// context may be a socket greenhook made non-blocking in the process it
/// came from, which the program here knows as blocking (see `fd::MARK`):
/// looked at once ([`examine`]), and if so taken as managed and waited for
/// as the blocking call would.
pub(crate) fn pass(fd: c_int, interest: Interest, op: impl FnMut() -> ssize_t + Copy) -> ssize_t {
    let r = { op }();
    if r < 0 && errno::get() == libc::EAGAIN {
        if adopted(fd) {
            return once(Fd::of(fd), interest, op);
        }
        // The program's own non-blocking fd had nothing: a loop of these
        // waits for someone (see `preempt::found_nothing`).
        crate::preempt::found_nothing();
    }
    r
}

/// A call the program asked not to wait (`MSG_DONTWAIT`), made as it is;
/// an `EAGAIN` counts as finding nothing, as in [`pass`].
pub(crate) fn asked_not_to_wait(op: impl FnOnce() -> ssize_t) -> ssize_t {
    let r = op();
    if r < 0 && errno::get() == libc::EAGAIN {
        crate::preempt::found_nothing();
    }
    r
}

/// [`pass`] for a write of `n` bytes (`from(done, len)` writes `len` bytes
/// from offset `done`).
pub(crate) fn pass_all(fd: c_int, n: usize, mut from: impl FnMut(usize, usize) -> ssize_t) -> ssize_t {
    let r = from(0, n);
    let short = if r < 0 {
        errno::get() == libc::EAGAIN
    } else {
        (r as usize) < n
    };
    if !short {
        return r;
    }
    if !adopted(fd) {
        if r < 0 {
            // Nothing written to the program's own non-blocking fd, as
            // in `pass`.
            crate::preempt::found_nothing();
        }
        return r;
    }
    let done = r.max(0) as usize;
    let rest = all(Fd::of(fd), || n - done, |d| from(done + d, n - done - d));
    match rest {
        r if r >= 0 => (done + r as usize) as ssize_t,
        r if done == 0 => r,
        _ => done as ssize_t,
    }
}

/// Whether the foreign fd `fd`, never examined, turns out to be a socket
/// another greenhook made non-blocking: then it is managed from now on.
#[cold]
fn adopted(fd: c_int) -> bool {
    let view = Fd::of(fd);
    if !crate::gate::on() || view.flags() & (fdtable::MANAGED | fdtable::KNOWN) != 0 {
        return false;
    }
    let e = errno::get();
    let managed = examine(view).flags() & fdtable::MANAGED != 0;
    errno::set(e);
    managed
}

/// First cooperative use of a foreign fd: is it non-blocking? (Kept up to
/// date afterwards by the fcntl/ioctl hooks.)
#[cold]
fn examine(fd: Fd) -> Fd {
    // SAFETY: F_GETFL only reads the status flags.
    let fl = unsafe { crate::fd::fcntl::real(fd.raw(), libc::F_GETFL, 0) };
    if fl < 0 {
        return fd; // not an open fd: the real call will say so
    }
    // SAFETY: an all-zero stat is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`.
    let stated = unsafe { libc::fstat(fd.raw(), &mut st) } == 0;
    let kind = st.st_mode & libc::S_IFMT;
    let ours = libc::O_NONBLOCK | crate::fd::MARK;
    if stated && kind == libc::S_IFSOCK && fl & ours == ours {
        // Made non-blocking by greenhook in the process it came from (see
        // `fd::MARK`): the program here knows it as the blocking socket it
        // was created as.
        fdtable::set_managed(fd.raw(), false, true);
        return Fd::of(fd.raw());
    }
    if stated
        && kind == libc::S_IFSOCK
        && fl & libc::O_NONBLOCK == 0
        && crate::nowait::supported()
        && !accepting(fd.raw())
    {
        // A blocking socket from elsewhere: its calls can try without
        // waiting as our own sockets' do, leaving its description alone.
        // (A listener cannot: `accept` has no per-call flag.)
        fdtable::adopt_nowait(fd.raw());
        return Fd::of(fd.raw());
    }
    let regular = stated && kind == libc::S_IFREG;
    fd.set_known(fl & libc::O_NONBLOCK != 0, regular, fl & libc::O_DIRECT != 0)
}

/// Whether the socket `fd` listens (`SO_ACCEPTCONN`).
fn accepting(fd: c_int) -> bool {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: an int and its length for the kernel to fill.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut v as *mut c_int).cast(),
            &mut len,
        )
    };
    r == 0 && v != 0
}

/// The fd's view, examined first if it is a foreign fd never seen: for
/// [`path`], and for the positioned file calls, which do not go through it.
pub(crate) fn known(fd: Fd) -> Fd {
    if fd.flags() & (fdtable::KNOWN | fdtable::MANAGED) == 0 {
        examine(fd)
    } else {
        fd
    }
}

/// Level readiness of an fd, without blocking. Errors and `POLLNVAL`
/// count as ready: the real call then reports them.
pub(crate) fn ready_now(fd: Fd, interest: Interest) -> bool {
    let mut p = libc::pollfd {
        fd: fd.raw(),
        events: events(interest),
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { crate::poll::poll::real(&mut p, 1, 0) != 0 }
}

fn events(interest: Interest) -> libc::c_short {
    match interest {
        Interest::Readable => libc::POLLIN,
        Interest::Writable => libc::POLLOUT,
    }
}

/// When a wait for `interest` on `fd` gives up: the socket's receive
/// timeout for reads, its send timeout for writes (and `connect`).
pub(crate) fn deadline(fd: Fd, interest: Interest) -> Option<Instant> {
    let which = match interest {
        Interest::Readable => Timeout::Recv,
        Interest::Writable => Timeout::Send,
    };
    fd.timeout(which).and_then(crate::deadline::after)
}

/// Waits until an fd is level-ready for `interest` (until the fd's socket
/// timeout, then `EAGAIN`): on the hub in a cooperative context, else in
/// the kernel. Returns the errno to report on failure.
pub(crate) fn wait_until_ready(fd: Fd, interest: Interest) -> Result<(), c_int> {
    let dl = deadline(fd, interest);
    while !ready_now(fd, interest) {
        wait(fd, interest, dl)?;
    }
    Ok(())
}

/// The [`Path::Polled`] form of an operation: wait for level readiness,
/// then call.
pub(crate) fn polled(fd: Fd, interest: Interest, op: impl FnOnce() -> ssize_t) -> ssize_t {
    crate::cancel_point();
    match wait_until_ready(fd, interest) {
        Ok(()) => op(),
        Err(e) => errno::fail(e),
    }
}

/// A write of `total` bytes to a foreign blocking fd, in pieces of at most
/// `PIPE_BUF` (a pipe that polls writable takes that much without
/// blocking); `op(done, len)` writes `len` bytes from offset `done`.
pub(crate) fn polled_all(fd: Fd, total: usize, mut op: impl FnMut(usize, usize) -> ssize_t) -> ssize_t {
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
///
/// A signal for this thread interrupts the wait: its handler runs here and
/// the wait goes on, or ends with `EINTR` when the handler lacks
/// `SA_RESTART`, as the kernel restarts the call or not.
pub(crate) fn wait(fd: Fd, interest: Interest, deadline: Option<Instant>) -> Result<(), c_int> {
    if !crate::gate::can_yield() {
        return wait_in_kernel(fd, interest, deadline);
    }
    loop {
        return match hub::wait_fd(fd.raw(), interest, deadline) {
            Ok(()) => Ok(()),
            Err(e) => Err(match e.kind() {
                std::io::ErrorKind::TimedOut => libc::EAGAIN,
                std::io::ErrorKind::Interrupted => {
                    crate::cancel_point();
                    if crate::signal::restart_after_interrupt() {
                        continue;
                    }
                    libc::EINTR
                }
                _ => e.raw_os_error().unwrap_or(libc::EIO),
            }),
        };
    }
}

fn wait_in_kernel(fd: Fd, interest: Interest, deadline: Option<Instant>) -> Result<(), c_int> {
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
        let mut p = libc::pollfd {
            fd: fd.raw(),
            events: events(interest),
            revents: 0,
        };
        let handled = crate::signal::interruptions();
        // A handler may run in this wait, as in the blocking call's.
        // SAFETY: one valid pollfd.
        let r = crate::hook::program(|| unsafe { crate::poll::poll::real(&mut p, 1, ms) });
        if r > 0 {
            return Ok(());
        }
        // r == 0: loop to re-check the deadline; EINTR: the blocking call
        // would have been restarted, unless the handler lacked SA_RESTART
        // (ours count it; the program's own, installed directly, are asked).
        if r < 0 {
            let e = errno::get();
            if e != libc::EINTR
                || crate::signal::interruptions() != handled
                || crate::signal::direct_handler_ends_call()
            {
                return Err(e);
            }
        }
    }
}

/// Whether errno `e` means "try again later".
#[inline]
pub(crate) fn would_block(e: c_int) -> bool {
    e == libc::EAGAIN || e == libc::EWOULDBLOCK
}

/// One operation that returns as soon as anything is transferred.
///
/// The first attempt is inlined and looks at nothing else: on a ready fd
/// (the common case, and the whole cost of a hook over the raw call) the
/// socket timeout is not even read. It starts counting at the first
/// `EAGAIN`, where the kernel's would start waiting.
#[inline]
pub(crate) fn once(fd: Fd, interest: Interest, mut op: impl FnMut() -> ssize_t) -> ssize_t {
    crate::cancel_point();
    let caller_errno = errno::get();
    let r = op();
    if r >= 0 {
        return r;
    }
    once_waiting(fd, interest, caller_errno, op)
}

/// [`once`] after an attempt failed: wait and retry while it would block.
#[cold]
#[inline(never)]
fn once_waiting(fd: Fd, interest: Interest, caller_errno: c_int, mut op: impl FnMut() -> ssize_t) -> ssize_t {
    let dl = deadline(fd, interest);
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
pub(crate) fn all(fd: Fd, total: impl FnOnce() -> usize, mut op: impl FnMut(usize) -> ssize_t) -> ssize_t {
    crate::cancel_point();
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
    fd: Fd,
    total: usize,
    first: ssize_t,
    caller_errno: c_int,
    mut op: impl FnMut(usize) -> ssize_t,
) -> ssize_t {
    let dl = deadline(fd, Interest::Writable);
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
