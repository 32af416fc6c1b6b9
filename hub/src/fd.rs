//! Waiting for fd readiness.
//!
//! The hub keeps one slot per fd number: whether the fd is registered with
//! the [`reactor`](crate::reactor) (once, edge-triggered, on its first wait)
//! and who waits to read or write it. Each loop turn's readiness events
//! wake a slot's readers or writers; [`forget_fd`] drops the registration
//! before the fd number can be reused, and wakes its waiters with `EBADF`.

use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Instant;

use crate::stats::bump;
use crate::task::Waiter;
use crate::{Deadline, Hub, Waiting, Wake};

/// Direction of fd readiness.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Interest {
    /// Readable (or hung up, or in error).
    Readable,
    /// Writable (or hung up, or in error).
    Writable,
}

/// What the hub knows of one fd number.
#[derive(Default)]
pub(crate) struct FdSlot {
    registered: bool,
    readers: Vec<Waiter>,
    writers: Vec<Waiter>,
}

impl Hub {
    fn fd_slot<R>(&self, fd: RawFd, f: impl FnOnce(&mut FdSlot) -> R) -> R {
        let mut fds = self.fds.borrow_mut();
        let i = fd as usize;
        if fds.len() <= i {
            crate::internal::bookkeeping(|| fds.resize_with(i + 1, FdSlot::default));
        }
        f(&mut fds[i])
    }

    /// Wakes the waiters of a loop turn's readiness events: `(fd, readable,
    /// writable)`.
    pub(crate) fn wake_ready_fds(&self, events: &[(RawFd, bool, bool)]) {
        let mut fds = self.fds.borrow_mut();
        for &(fd, r, w) in events {
            if let Some(slot) = fds.get_mut(fd as usize) {
                if r {
                    for w in slot.readers.drain(..) {
                        self.wake(&w, Wake::Ready);
                    }
                }
                if w {
                    for w in slot.writers.drain(..) {
                        self.wake(&w, Wake::Ready);
                    }
                }
            }
        }
    }
}

/// Waits until `fd` may be ready for `interest`, or the deadline passes.
///
/// Edge-triggered: call it only after an operation on `fd` returned
/// `EAGAIN`/`EWOULDBLOCK`, then retry the operation (wake-ups may be
/// spurious). Errors: `TimedOut` when the deadline passed; `EBADF` when the
/// fd was closed through [`forget_fd`] while waiting; `Interrupted` on
/// [`Task::interrupt`](crate::Task::interrupt); whatever the kernel says
/// when the fd cannot be polled at all (`EPERM` for regular files: they are
/// always ready).
pub fn wait_fd(fd: RawFd, interest: Interest, deadline: Option<Instant>) -> io::Result<()> {
    wait_fds(&[(fd, interest)], deadline)
}

/// Waits until any of `fds` may be ready for its interest, or the deadline
/// passes (the building block of `poll`, `select` and `epoll_wait`). Same
/// contract and errors as [`wait_fd`]; an fd that cannot be polled
/// (`EPERM`) makes the call return that error at once.
pub fn wait_fds(fds: &[(RawFd, Interest)], deadline: Option<Instant>) -> io::Result<()> {
    let hub = Hub::get();
    for &(fd, _) in fds {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if !hub.fd_slot(fd, |s| s.registered) {
            hub.reactor.register(fd)?;
            hub.fd_slot(fd, |s| s.registered = true);
        }
    }
    let cur = hub.current();
    let what = fds.first().map_or(Waiting::Sleep, |&(fd, i)| Waiting::Fd(fd, i));
    let w = hub.prepare(&cur, what);
    for &(fd, interest) in fds {
        let w = w.clone();
        hub.fd_slot(fd, |s| {
            let v = match interest {
                Interest::Readable => &mut s.readers,
                Interest::Writable => &mut s.writers,
            };
            if v.len() == v.capacity() {
                let more = v.len().max(4);
                crate::internal::bookkeeping(|| v.reserve(more));
            }
            v.push(w)
        });
    }
    bump(&hub.counters.fd_waits);
    hub.fd_waiting.set(hub.fd_waiting.get() + 1);
    let r = hub.block(&cur, deadline.map(Deadline::from));
    hub.fd_waiting.set(hub.fd_waiting.get() - 1);
    if r != Wake::Ready || fds.len() > 1 {
        for &(fd, _) in fds {
            hub.fd_slot(fd, |s| {
                s.readers.retain(|w| !Rc::ptr_eq(&w.task, &cur));
                s.writers.retain(|w| !Rc::ptr_eq(&w.task, &cur));
            });
        }
    }
    match r {
        Wake::Ready => Ok(()),
        Wake::TimedOut => Err(io::ErrorKind::TimedOut.into()),
        Wake::Closed => Err(io::Error::from_raw_os_error(libc::EBADF)),
        Wake::Interrupted => Err(io::ErrorKind::Interrupted.into()),
    }
}

/// Wakes this hub's tasks waiting on `fd` to read (`readable`) or to
/// write (`writable`), as a readiness event does: they try their call
/// again (a wake-up may be spurious). For a change of an fd's state for
/// which the kernel ends its blocked calls but epoll reports nothing: a
/// Unix stream socket's own `shutdown(SHUT_WR)` fails a blocked write
/// with `EPIPE`, yet never makes the socket `EPOLLOUT`.
pub fn wake_fd(fd: RawFd, readable: bool, writable: bool) {
    if fd < 0 {
        return;
    }
    if let Some(hub) = Hub::existing() {
        hub.wake_ready_fds(&[(fd, readable, writable)]);
    }
}

/// Forgets `fd` before it is closed (or replaced by `dup2`): drops its
/// registration and wakes every task waiting on it with `EBADF`.
pub fn forget_fd(fd: RawFd) {
    let Some(hub) = Hub::existing() else { return };
    if fd < 0 || crate::internal::in_shared_child() {
        // A child sharing our memory closes its own fd, not ours.
        return;
    }
    let waiters = crate::internal::bookkeeping(|| {
        let mut fds = hub.fds.borrow_mut();
        let slot = fds.get_mut(fd as usize)?;
        if !slot.registered {
            return None;
        }
        slot.registered = false;
        let mut v = std::mem::take(&mut slot.readers);
        v.append(&mut slot.writers);
        Some(v)
    });
    let Some(waiters) = waiters else { return };
    hub.reactor.deregister(fd);
    for w in waiters {
        hub.wake(&w, Wake::Closed);
    }
}

/// One past the highest fd this thread's hub has a slot for (0 without a
/// hub): bulk closes need not look further.
pub fn registered_high() -> usize {
    Hub::existing().map_or(0, |h| h.fds.borrow().len())
}
