//! Portable backend on the `polling` crate (kqueue on macOS/BSD; epoll on
//! Linux when forced with `--cfg greenhook_force_polling`, so that CI tests
//! this path too). Registrations are edge-triggered, made once per fd.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::Duration;

use polling::{Event, Events, PollMode, Poller};

/// The current poller. A forked child gets a new one (the inherited one
/// shares its kernel object with the parent); pollers are leaked rather
/// than freed, so a notifier on another thread can never see a dangling
/// one. At most one leaks per fork.
struct Current(AtomicPtr<Poller>);

impl Current {
    fn new(p: Poller) -> Current {
        Current(AtomicPtr::new(Box::into_raw(Box::new(p))))
    }

    fn get(&self) -> &Poller {
        // SAFETY: always a leaked, never-freed Box<Poller> (see above).
        unsafe { &*self.0.load(Ordering::Acquire) }
    }
}

pub(crate) struct Reactor {
    poller: Arc<Current>,
    events: std::cell::RefCell<Events>,
    /// The wall-clock watch (Linux), once a wall deadline asked for it.
    #[cfg(target_os = "linux")]
    wall: super::wall_watch::Watch,
}

/// The key of the wall-clock watch's events (no fd has it).
#[cfg(target_os = "linux")]
const WALL: usize = usize::MAX - 1;

/// Cross-thread wake-up through `Poller::notify`.
#[derive(Clone)]
pub(crate) struct Notifier {
    poller: Arc<Current>,
}

impl Notifier {
    pub(crate) fn notify(&self) {
        let _ = self.poller.get().notify();
    }
}

fn borrowed(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: used only for the duration of one registration call, while the
    // caller keeps the fd open.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

impl Reactor {
    /// Whether the kernel gives a wait's timeout the thread's timer slack:
    /// not here (on Linux `polling` times its waits with a timerfd, which
    /// fires on time), so the hub waits for the slack's end itself (see
    /// `timer.rs`).
    pub(crate) const WAIT_HAS_SLACK: bool = false;

    pub(crate) fn new() -> io::Result<Reactor> {
        Ok(Reactor {
            poller: Arc::new(Current::new(Poller::new()?)),
            events: std::cell::RefCell::new(Events::new()),
            #[cfg(target_os = "linux")]
            wall: Default::default(),
        })
    }

    /// In a forked child: a fresh poller, so that the child never touches
    /// the parent's kernel object (an epoll set is shared across fork; a
    /// kqueue is not inherited at all). Registrations start over.
    pub(crate) fn reset_after_fork(&self) -> io::Result<()> {
        let fresh = Box::into_raw(Box::new(Poller::new()?));
        self.poller.0.store(fresh, Ordering::Release);
        #[cfg(target_os = "linux")]
        self.wall.reset_after_fork();
        Ok(())
    }

    /// Makes a set of the wall clock end the next `wait`, or the one in
    /// progress (see `wall_watch`).
    #[cfg(target_os = "linux")]
    pub(crate) fn watch_wall_clock(&self) {
        use std::os::fd::AsRawFd;
        self.wall.start(|fd| {
            // SAFETY: the fd stays open, owned by `self.wall`, until a
            // fork's reset drops it, after the poller it was added to was
            // replaced.
            unsafe {
                self.poller
                    .get()
                    .add_with_mode(fd.as_raw_fd(), Event::readable(WALL), PollMode::Level)
            }
        });
    }

    /// Elsewhere a set of the wall clock is followed at the hub's turns
    /// only: kqueue cannot report one.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn watch_wall_clock(&self) {}

    pub(crate) fn notifier(&self) -> Notifier {
        Notifier {
            poller: self.poller.clone(),
        }
    }

    /// Makes a wait in progress (or the next one) return.
    pub(crate) fn notify(&self) {
        let _ = self.poller.get().notify();
    }

    pub(crate) fn register(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: the hub deregisters every fd before it is closed
        // (Hub::forget_fd is called by the close hooks), as `add` requires.
        let r = unsafe {
            self.poller
                .get()
                .add_with_mode(fd, Event::all(fd as usize), PollMode::Edge)
        };
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
            r => r,
        }
    }

    pub(crate) fn deregister(&self, fd: RawFd) {
        let _ = self.poller.get().delete(borrowed(fd));
    }

    pub(crate) fn wait(&self, timeout: Option<Duration>, out: &mut Vec<(RawFd, bool, bool)>) -> io::Result<()> {
        let mut events = self.events.borrow_mut();
        events.clear();
        match self.poller.get().wait(&mut events, timeout) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        for ev in events.iter() {
            #[cfg(target_os = "linux")]
            if ev.key == WALL {
                self.wall.fired();
                continue;
            }
            out.push((ev.key as RawFd, ev.readable, ev.writable));
        }
        Ok(())
    }
}
