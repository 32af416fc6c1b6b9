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
