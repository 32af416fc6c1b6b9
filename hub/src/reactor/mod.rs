//! Readiness backends.
//!
//! Every backend provides the same small surface, used only by the hub:
//!
//! - `Reactor::new()` creates the kernel object (an epoll or kqueue fd).
//! - `register(fd)` registers `fd` **once**, edge-triggered, for both
//!   directions. Errors come back unchanged (`EPERM` for regular files, which
//!   the caller treats as "always ready").
//! - `deregister(fd)` drops the registration; called before the fd is closed.
//! - `wait(timeout, out)` blocks at most `timeout` (None = forever) and
//!   appends `(fd, readable, writable)` for each event. It never reports the
//!   notifier itself; a wake-up through the notifier just makes it return.
//! - `watch_wall_clock()` makes a set of the wall clock end a `wait` from
//!   then on (Linux, both backends: `wall_watch`; kqueue cannot, and there
//!   the hub notices a set at its next turn).
//! - `notifier()` gives a `Send + Sync` handle whose `notify()` makes a
//!   concurrent or future `wait` return, from any thread; `notify()` on the
//!   reactor itself does the same without the handle (the Linux backend's
//!   is one `write`, safe in a signal handler).
//!
//! The Linux backend talks to epoll directly through rustix's raw system
//! calls (so the hub's own I/O can never re-enter greenhook's libc hooks):
//! one `epoll_wait` per loop turn and no re-arming. Elsewhere, or on Linux
//! with `--cfg greenhook_force_polling`, the `polling` crate (kqueue, epoll,
//! event ports) is used, in edge mode.

#[cfg(all(target_os = "linux", not(greenhook_force_polling)))]
mod epoll;
#[cfg(target_os = "linux")]
mod wall_watch;
#[cfg(all(target_os = "linux", not(greenhook_force_polling)))]
pub(crate) use epoll::{Notifier, Reactor};

#[cfg(any(not(target_os = "linux"), greenhook_force_polling))]
mod portable;
#[cfg(any(not(target_os = "linux"), greenhook_force_polling))]
pub(crate) use portable::{Notifier, Reactor};

/// The name of the backend in use, for diagnostics and benchmarks.
pub fn backend_name() -> &'static str {
    #[cfg(all(target_os = "linux", not(greenhook_force_polling)))]
    return "epoll (direct)";
    #[cfg(any(not(target_os = "linux"), greenhook_force_polling))]
    return "polling crate";
}

/// The fds the hub's own machinery holds: each hub's epoll set and
/// notifier, and the wall-clock watch. They live high in the fd table
/// (from half the soft `RLIMIT_NOFILE` up, at most 4096), away from the
/// small numbers programs give to `dup2` and expect from `open`, and
/// [`is_own`] lets interpose's close hooks pass them by: a program that
/// closed every fd from 3 up (`closefrom`, `close_range`, a loop of
/// `close`), as daemons and children before an exec do, closed the hub's
/// epoll set, and the next wait aborted the process.
#[cfg(target_os = "linux")]
pub(crate) mod own {
    use std::os::fd::{AsRawFd, OwnedFd, RawFd};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// One bit per fd below 65,536.
    static OWN: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];

    fn slot(fd: RawFd) -> Option<(&'static AtomicU64, u64)> {
        let i = usize::try_from(fd).ok()?;
        Some((OWN.get(i / 64)?, 1 << (i % 64)))
    }

    /// Whether `fd` is one of the hub's own.
    pub fn is_own(fd: RawFd) -> bool {
        slot(fd).is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
    }

    /// The hub's own fds within `[first, last]`, in order.
    pub fn own_in(first: u32, last: u32) -> Vec<RawFd> {
        let mut out = Vec::new();
        for (i, w) in OWN.iter().enumerate() {
            let mut bits = w.load(Ordering::Relaxed);
            while bits != 0 {
                let fd = (i * 64 + bits.trailing_zeros() as usize) as u32;
                bits &= bits - 1;
                if (first..=last).contains(&fd) {
                    out.push(fd as RawFd);
                }
            }
        }
        out
    }

    /// The lowest number an own fd is moved to.
    fn base() -> u32 {
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(1024);
        (soft / 2).clamp(3, 4096) as u32
    }

    /// Takes `fd` as the hub's own: moved high (close-on-exec), and
    /// marked. Where it cannot move (a low `RLIMIT_NOFILE`), it stays and
    /// is marked where it is.
    pub(crate) fn adopt(fd: OwnedFd) -> OwnedFd {
        let fd = match rustix::io::fcntl_dupfd_cloexec(&fd, base() as RawFd) {
            Ok(high) => high,
            Err(_) => fd,
        };
        mark(fd.as_raw_fd());
        fd
    }

    /// Marks `fd` as the hub's own where it is.
    pub(crate) fn mark(fd: RawFd) {
        if let Some((w, b)) = slot(fd) {
            w.fetch_or(b, Ordering::Relaxed);
        }
    }

    /// `fd` is no longer the hub's (about to be closed).
    pub(crate) fn release(fd: RawFd) {
        if let Some((w, b)) = slot(fd) {
            w.fetch_and(!b, Ordering::Relaxed);
        }
    }
}

/// Whether `fd` is one of the hub's own (see [`own`]); never elsewhere.
#[cfg(not(target_os = "linux"))]
pub mod own {
    /// Always false: the other backends keep no fds a program could close.
    pub fn is_own(_fd: std::os::fd::RawFd) -> bool {
        false
    }

    /// None.
    pub fn own_in(_first: u32, _last: u32) -> Vec<std::os::fd::RawFd> {
        Vec::new()
    }
}

pub use own::{is_own, own_in};
