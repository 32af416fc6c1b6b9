//! Linux backend: epoll through raw system calls.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags, Timespec};

/// The data word that marks the notifier's eventfd.
const NOTIFY: u64 = u64::MAX;
/// The data word that marks the wall-clock watch.
const WALL: u64 = u64::MAX - 1;

pub(crate) struct Reactor {
    epfd: OwnedFd,
    notifier: Notifier,
    buf: std::cell::RefCell<Vec<epoll::Event>>,
    /// A timer fd the kernel cancels when the wall clock is set, once a
    /// wall deadline asked for it ([`Reactor::watch_wall_clock`]).
    wall: super::wall_watch::Watch,
}

impl Drop for Reactor {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        super::own::release(self.epfd.as_raw_fd());
        // The notifier's eventfd may outlive the reactor in a clone; its
        // number stays the hub's until the last one goes, which is when a
        // thread with a hub ends: released with the epoll set.
        super::own::release(self.notifier.efd.as_raw_fd());
    }
}

/// Cross-thread wake-up: an eventfd registered in the epoll set.
#[derive(Clone)]
pub(crate) struct Notifier {
    efd: Arc<OwnedFd>,
}

impl Notifier {
    pub(crate) fn notify(&self) {
        let _ = rustix::io::write(&*self.efd, &1u64.to_ne_bytes());
    }
}

fn borrowed(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: the fd is only used for the duration of one epoll_ctl call,
    // during which the caller (a hook about to wait on it, or about to close
    // it) keeps it open.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

impl Reactor {
    pub(crate) fn new() -> io::Result<Reactor> {
        let epfd = super::own::adopt(epoll::create(CreateFlags::CLOEXEC)?);
        let efd = super::own::adopt(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        epoll::add(&epfd, &efd, EventData::new_u64(NOTIFY), EventFlags::IN | EventFlags::ET)?;
        Ok(Reactor {
            epfd,
            notifier: Notifier { efd: Arc::new(efd) },
            buf: std::cell::RefCell::new(Vec::with_capacity(256)),
            wall: Default::default(),
        })
    }

    /// Makes a set of the wall clock end the next `wait`, or the one in
    /// progress, so the hub moves its wall deadlines (see `wall_watch`).
    pub(crate) fn watch_wall_clock(&self) {
        // Level-triggered: a set makes it readable until read.
        self.wall
            .start(|fd| Ok(epoll::add(&self.epfd, fd, EventData::new_u64(WALL), EventFlags::IN)?));
    }

    /// In a forked child: a fresh epoll set and eventfd take over the same
    /// fd numbers (`dup3`), so the child never changes the parent's set.
    pub(crate) fn reset_after_fork(&self) -> io::Result<()> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let epfd = epoll::create(CreateFlags::CLOEXEC)?;
        let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        // SAFETY: views of our own fds, kept open by `self` and never
        // closed through these (ManuallyDrop); dup3 swaps what each number
        // refers to atomically.
        let (mut old_ep, mut old_ev) = unsafe {
            (
                std::mem::ManuallyDrop::new(OwnedFd::from_raw_fd(self.epfd.as_raw_fd())),
                std::mem::ManuallyDrop::new(OwnedFd::from_raw_fd(self.notifier.efd.as_raw_fd())),
            )
        };
        rustix::io::dup3(&epfd, &mut old_ep, rustix::io::DupFlags::CLOEXEC)?;
        rustix::io::dup3(&efd, &mut old_ev, rustix::io::DupFlags::CLOEXEC)?;
        epoll::add(
            &self.epfd,
            &*self.notifier.efd,
            EventData::new_u64(NOTIFY),
            EventFlags::IN | EventFlags::ET,
        )?;
        self.wall.reset_after_fork();
        Ok(())
    }

    pub(crate) fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }

    /// Makes a wait in progress (or the next one) return: one `write` to
    /// the eventfd, so a signal handler may call it.
    pub(crate) fn notify(&self) {
        self.notifier.notify();
    }

    pub(crate) fn register(&self, fd: RawFd) -> io::Result<()> {
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        match epoll::add(&self.epfd, borrowed(fd), EventData::new_u64(fd as u64), flags) {
            Ok(()) => Ok(()),
            // Registered already (e.g. through a dup that we did not see):
            // the registration is still live and edge-triggered, keep it.
            Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) fn deregister(&self, fd: RawFd) {
        let _ = epoll::delete(&self.epfd, borrowed(fd));
    }

    pub(crate) fn wait(&self, timeout: Option<Duration>, out: &mut Vec<(RawFd, bool, bool)>) -> io::Result<()> {
        let ts = timeout.map(|d| Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: d.subsec_nanos() as _,
        });
        let mut buf = self.buf.borrow_mut();
        buf.clear();
        let cap = buf.capacity();
        match epoll::wait(&self.epfd, rustix::buffer::spare_capacity(&mut *buf), ts.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let full = buf.len() == cap;
        for ev in buf.iter() {
            let data = ev.data.u64();
            if data == NOTIFY {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(self.notifier.efd.as_fd(), &mut b);
                continue;
            }
            if data == WALL {
                self.wall.fired();
                continue;
            }
            let f = ev.flags;
            let r =
                f.intersects(EventFlags::IN | EventFlags::PRI | EventFlags::HUP | EventFlags::ERR | EventFlags::RDHUP);
            let w = f.intersects(EventFlags::OUT | EventFlags::HUP | EventFlags::ERR);
            out.push((data as RawFd, r, w));
        }
        if full {
            // Busy loop turn: let the next wait take more at once.
            buf.reserve(cap);
        }
        Ok(())
    }
}
