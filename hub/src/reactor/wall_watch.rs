//! The wall-clock watch (Linux): a timer fd on `CLOCK_REALTIME`, armed with
//! `TFD_TIMER_CANCEL_ON_SET` at a time that never comes, so that it turns
//! readable only when the wall clock is set. In the poller's set it ends a
//! wait at such a set, and the hub moves its wall deadlines (see `clock`).

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::OwnedFd;

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec,
};

/// A reactor's watch, made at its hub's first wall deadline.
#[derive(Default)]
pub(crate) struct Watch {
    fd: RefCell<Option<OwnedFd>>,
    /// Whether it was asked for (and made, or failed) since the last fork.
    tried: Cell<bool>,
}

impl Watch {
    /// Makes the watch, once, and hands it to `register` for the poller's
    /// set. Without it (no fd left, a failed registration) a hub asleep
    /// follows a set of the wall clock only when it wakes.
    pub(crate) fn start(&self, register: impl FnOnce(&OwnedFd) -> io::Result<()>) {
        if self.tried.replace(true) {
            return;
        }
        let fd = create().and_then(|fd| register(&fd).map(|()| fd));
        *self.fd.borrow_mut() = fd.ok();
    }

    /// Its event came: the wall clock was set.
    pub(crate) fn fired(&self) {
        if let Some(fd) = &*self.fd.borrow() {
            rearm(fd);
        }
    }

    /// In a forked child: the watch is the parent's open timer (arming it
    /// would arm theirs). Closes our copy; the next wall deadline makes one.
    pub(crate) fn reset_after_fork(&self) {
        if let Some(fd) = self.fd.borrow_mut().take() {
            super::own::release(std::os::fd::AsRawFd::as_raw_fd(&fd));
        }
        self.tried.set(false);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.get_mut() {
            super::own::release(std::os::fd::AsRawFd::as_raw_fd(fd));
        }
    }
}

/// A new watch, armed.
fn create() -> io::Result<OwnedFd> {
    let fd = super::own::adopt(timerfd_create(
        TimerfdClockId::Realtime,
        TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
    )?);
    arm(&fd)?;
    Ok(fd)
}

/// Far in the future, cancelled by a set.
fn arm(fd: &OwnedFd) -> io::Result<()> {
    let never = Itimerspec {
        it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: Timespec {
            tv_sec: 1 << 40, // some 35,000 years after 1970
            tv_nsec: 0,
        },
    };
    timerfd_settime(
        fd,
        TimerfdTimerFlags::ABSTIME | TimerfdTimerFlags::CANCEL_ON_SET,
        &never,
    )?;
    Ok(())
}

/// After a set: the read fails with `ECANCELED` (which clears the fd's
/// readiness), and the timer must be armed again to report the next set.
fn rearm(fd: &OwnedFd) {
    let mut b = [0u8; 8];
    let _ = rustix::io::read(fd, &mut b);
    let _ = arm(fd);
}
