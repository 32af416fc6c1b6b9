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
    /// Whether the kernel gives a wait's timeout the thread's timer slack
    /// (`epoll_pwait2` and `epoll_wait` do: see `timer.rs`).
    pub(crate) const WAIT_HAS_SLACK: bool = true;

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
        let waited = match ts.as_ref().filter(|t| t.tv_nsec % 1_000_000 != 0) {
            Some(t) => fine::wait(self.epfd.as_fd(), &mut buf, t),
            None => None,
        };
        match waited.unwrap_or_else(|| epoll::wait(&self.epfd, rustix::buffer::spare_capacity(&mut *buf), ts.as_ref()))
        {
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

/// Timeouts finer than a millisecond: `epoll_pwait2` (Linux 5.11), which
/// takes a `timespec`. rustix calls it only when built for 5.11 and later
/// (where it needs nothing else); otherwise `epoll_pwait` takes whole
/// milliseconds and rounds up, so a program's 20 µs `nanosleep`, its
/// sub-millisecond timed waits, took 1 ms whenever no other fiber could
/// run meanwhile (natively: the time asked plus the timer slack, ~50 µs).
/// Tried when a timeout has a part finer than a millisecond; a kernel
/// without the call (`ENOSYS`), or a seccomp filter that refuses it
/// (`EPERM`), turns it off for good and the millisecond wait goes on.
mod fine {
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    use rustix::event::epoll::Event;
    use rustix::event::Timespec;

    static MISSING: AtomicBool = AtomicBool::new(false);

    /// Waits on `epfd` until `timeout` for as many events as `buf` has
    /// room for, appended to it; `None` where the call is missing (the
    /// caller waits the millisecond way).
    pub(super) fn wait(
        epfd: BorrowedFd<'_>,
        buf: &mut Vec<Event>,
        timeout: &Timespec,
    ) -> Option<rustix::io::Result<usize>> {
        if MISSING.load(Relaxed) {
            return None;
        }
        let room = buf.capacity() - buf.len();
        // SAFETY: the kernel writes at most `room` events into the spare
        // capacity of `buf` (`Event` is the kernel's `epoll_event`) and
        // reads the timespec; no signal mask is passed.
        let r = unsafe { pwait2(epfd.as_raw_fd(), buf.as_mut_ptr().add(buf.len()), room, timeout) };
        match r {
            n if n >= 0 => {
                // SAFETY: the kernel initialised `n` ≤ `room` events there.
                unsafe { buf.set_len(buf.len() + n as usize) };
                Some(Ok(n as usize))
            }
            e if e == -(libc::ENOSYS as isize) || e == -(libc::EPERM as isize) => {
                MISSING.store(true, Relaxed);
                None
            }
            e => Some(Err(rustix::io::Errno::from_raw_os_error(-e as i32))),
        }
    }

    /// The system call itself, by its instruction: libc's `syscall` is a
    /// hook of the layer above under the preload, and glibc's own wrapper
    /// is only in 2.35 and later.
    ///
    /// # Safety
    /// `events` has room for `max` events; `timeout` is valid.
    #[cfg(target_arch = "x86_64")]
    unsafe fn pwait2(epfd: i32, events: *mut Event, max: usize, timeout: &Timespec) -> isize {
        let r: isize;
        // SAFETY: per the contract; the instruction clobbers rcx and r11.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_epoll_pwait2 as isize => r,
                in("rdi") epfd as isize,
                in("rsi") events,
                in("rdx") max.min(i32::MAX as usize),
                in("r10") timeout as *const Timespec,
                in("r8") 0usize,
                in("r9") 0usize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            )
        };
        r
    }

    /// See the x86-64 one.
    ///
    /// # Safety
    /// `events` has room for `max` events; `timeout` is valid.
    #[cfg(target_arch = "aarch64")]
    unsafe fn pwait2(epfd: i32, events: *mut Event, max: usize, timeout: &Timespec) -> isize {
        let r: isize;
        // SAFETY: per the contract.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") libc::SYS_epoll_pwait2 as isize,
                inlateout("x0") epfd as isize => r,
                in("x1") events,
                in("x2") max.min(i32::MAX as usize),
                in("x3") timeout as *const Timespec,
                in("x4") 0usize,
                in("x5") 0usize,
                options(nostack),
            )
        };
        r
    }

    /// Elsewhere: missing (the millisecond wait).
    ///
    /// # Safety
    /// None needed.
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    unsafe fn pwait2(_: i32, _: *mut Event, _: usize, _: &Timespec) -> isize {
        -(libc::ENOSYS as isize)
    }
}
