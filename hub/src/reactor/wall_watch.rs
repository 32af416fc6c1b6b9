//! The wall-clock watch (Linux): a timer fd on `CLOCK_REALTIME`, armed with
//! `TFD_TIMER_CANCEL_ON_SET` at a time that never comes, so that it turns
//! readable only when the wall clock is set. In the poller's set it ends a
//! wait at such a set, and the hub moves its wall deadlines (see `clock`).

use std::io;
use std::os::fd::OwnedFd;

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec,
};

/// A new watch, armed.
pub(crate) fn create() -> io::Result<OwnedFd> {
    let fd = timerfd_create(TimerfdClockId::Realtime, TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK)?;
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
pub(crate) fn rearm(fd: &OwnedFd) {
    let mut b = [0u8; 8];
    let _ = rustix::io::read(fd, &mut b);
    let _ = arm(fd);
}
