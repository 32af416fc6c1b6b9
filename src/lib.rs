//! # greenhook
//!
//! User-mode threads for native code. Stackful fibers run on one
//! single-threaded **hub** per OS thread (an epoll loop with timers); a
//! blocking call in a fiber becomes a yield to the hub, like gevent for
//! Python. `libgreenhook.so`, loaded with `LD_PRELOAD`, does the same for
//! unmodified C programs (see the README).
//!
//! The Rust API has `std::thread`'s signatures, so code written for std
//! compiles unchanged with `use greenhook as thread;`, and its threads
//! become fibers:
//!
//! ```
//! use greenhook as thread; // instead of `use std::thread;`
//! use std::time::{Duration, Instant};
//!
//! let t0 = Instant::now();
//! let handles: Vec<_> = (0..3)
//!     .map(|i| {
//!         thread::spawn(move || {
//!             thread::sleep(Duration::from_millis(100));
//!             i * 10
//!         })
//!     })
//!     .collect();
//! let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(sum, 30);
//! // The three sleeps overlapped: about 100 ms in all, not 300.
//! assert!(t0.elapsed() < Duration::from_millis(290));
//! ```
//!
//! Calling these from `main` (the root context) works: the root runs the
//! hub's loop while it waits. [`scope`] spawns fibers that borrow from the
//! caller's stack; [`park`] and [`Thread::unpark`] work between fibers and
//! across OS threads.
//!
//! ## Caveats
//! - **N:1.** All fibers of a thread share one core. A fiber that computes
//!   without blocking stalls every other fiber: there is no preemption.
//! - **Only hooked calls yield.** A blocking call the hub does not know
//!   (a raw `syscall`, a C library doing its own I/O) blocks the whole hub.
//! - **Fibers run while their thread waits.** A fiber runs when the running
//!   context joins, sleeps, parks, yields or blocks in a hooked call; one
//!   that nobody waits for may never run (an OS thread that ends leaves its
//!   fibers suspended for good).
//! - **Thread-locals are per fiber** (x86-64 Linux with glibc's malloc):
//!   each fiber has TLS of its own, so `thread_local!`, `errno` and
//!   `std::thread::current()` are its own and its thread-local destructors
//!   run when it ends. That costs a page of RSS and a thread-pointer write
//!   at each switch: [`Builder::shared_tls`] or `GREENHOOK_TLS=shared`
//!   makes fibers share their OS thread's TLS instead (as they always do
//!   elsewhere).
//! - **Fixed stacks** (default 256 KiB of address space, two pages touched
//!   when idle, one with shared TLS; `GREENHOOK_STACK_SIZE` or
//!   [`Builder::stack_size`]). An overflow is reported by name and aborts.
//! - A fiber lives on the OS thread that spawned it; its [`Thread`] and
//!   [`JoinHandle`] may go to other threads, to unpark or join it.
//!
//! ## Differences from `std::thread`
//! Code that compiles against std's stable `std::thread` compiles against
//! greenhook (the types have std's auto traits too); where greenhook
//! differs, it accepts more or means something else:
//! - [`spawn`], [`Builder::spawn`], [`Scope::spawn`] do not require `Send`:
//!   the closure and its result never leave the OS thread. A
//!   [`JoinHandle`] is `Send` and `Sync` when the result is `Send` (always,
//!   for code written for std).
//! - [`park`] uses greenhook's token, one per fiber; `std::thread::park`
//!   works between fibers too (each has its own std identity), except
//!   between fibers sharing their thread's TLS.
//! - [`LocalKey`] is std's, re-exported; [`panicking`] is std's and tells
//!   about the fiber (the OS thread, with shared TLS); std's panic messages
//!   name `<unnamed>` for a fiber.
//! - [`available_parallelism`] is the machine's, as std says: not how many
//!   fibers run at once (one).
//! - [`ThreadId`]s of fibers are their fiber ids (as in greenhook's
//!   reports); a root context's prints as `ThreadId(root N)`.
//! - [`sleep_until`] is offered, though std's is still unstable; std's
//!   `JoinHandleExt` (a `pthread_t`) has no counterpart: a fiber has none.

mod builder;
mod parker;
mod scoped;
mod thread;

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

pub use builder::{spawn, Builder, JoinHandle, Result};
pub use fiber::DEFAULT_STACK_SIZE;
pub use hub::Stats;
#[allow(deprecated)]
pub use parker::park_timeout_ms;
pub use parker::{park, park_timeout};
pub use scoped::{scope, Scope, ScopedJoinHandle};
/// std's thread-local keys, re-exported so that code naming
/// `thread::LocalKey` compiles. They are per fiber, like TLS in general
/// (per OS thread for fibers made with [`Builder::shared_tls`]).
pub use std::thread::{AccessError, LocalKey};
pub use thread::{current, Thread, ThreadId};

/// Puts the current fiber to sleep for at least `dur`, like
/// `std::thread::sleep`; the root context runs the other fibers meanwhile.
/// It never returns early.
pub fn sleep(dur: Duration) {
    match Instant::now().checked_add(dur) {
        Some(deadline) => sleep_until(deadline),
        None => loop {
            hub::sleep_forever()
        },
    }
}

/// Sleeps until `deadline` (never earlier), like std's unstable
/// `std::thread::sleep_until`.
pub fn sleep_until(deadline: Instant) {
    // An interrupted sleep (a signal under the preload) sleeps on, as
    // std's does after EINTR.
    while !hub::sleep_interruptible(deadline) {}
}

/// Uses [`sleep`]; mirrors std's deprecated function.
#[deprecated(since = "0.1.0", note = "replaced by `greenhook::sleep`")]
pub fn sleep_ms(ms: u32) {
    sleep(Duration::from_millis(u64::from(ms)))
}

/// Lets every other runnable fiber run once, like `std::thread::yield_now`.
#[inline]
pub fn yield_now() {
    hub::yield_now()
}

/// Whether the calling OS thread is unwinding from a panic: std's own
/// `std::thread::panicking`, which knows threads, not fibers. A fiber that
/// switches away while unwinding (a destructor that sleeps or joins) makes
/// it true in the fibers that run meanwhile.
#[inline]
pub fn panicking() -> bool {
    std::thread::panicking()
}

/// The machine's parallelism as std reports it
/// (`std::thread::available_parallelism`): what the process may use. The
/// fibers of one hub never run in parallel, whatever this says.
///
/// # Errors
/// As std's.
pub fn available_parallelism() -> std::io::Result<NonZeroUsize> {
    std::thread::available_parallelism()
}

/// This thread's scheduler counters.
pub fn stats() -> Stats {
    hub::stats()
}

/// Waiting on raw file descriptors.
pub mod io {
    use std::io;
    use std::os::fd::RawFd;
    use std::time::{Duration, Instant};

    fn deadline(timeout: Option<Duration>) -> Option<Instant> {
        timeout.and_then(|t| Instant::now().checked_add(t))
    }

    /// Waits until `fd` may be readable. Use after a non-blocking read
    /// returned `WouldBlock`, then retry the read (wake-ups can be spurious).
    ///
    /// # Errors
    /// `TimedOut` after `timeout`; `EBADF` if the fd is closed meanwhile;
    /// `EPERM` for fds that cannot be polled (regular files: always ready).
    ///
    /// ```no_run
    /// # use std::os::fd::AsRawFd;
    /// # let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// sock.set_nonblocking(true).unwrap();
    /// let mut buf = [0u8; 1500];
    /// let n = loop {
    ///     match sock.recv(&mut buf) {
    ///         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
    ///             greenhook::io::wait_readable(sock.as_raw_fd(), None).unwrap()
    ///         }
    ///         r => break r.unwrap(),
    ///     }
    /// };
    /// ```
    pub fn wait_readable(fd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        hub::wait_fd(fd, hub::Interest::Readable, deadline(timeout))
    }

    /// Waits until `fd` may be writable; see [`wait_readable`].
    pub fn wait_writable(fd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        hub::wait_fd(fd, hub::Interest::Writable, deadline(timeout))
    }
}

/// gevent-style patching for Rust programs.
pub mod monkey {
    /// Makes blocking std and libc calls cooperate inside fibers:
    /// `std::thread::sleep`, `std::net` I/O, and `std::sync` locks (through
    /// the futex). Idempotent. `std::thread::spawn` still makes real threads.
    pub fn patch_all() {
        interpose::patch_all()
    }

    /// Whether [`patch_all`] was called (or the preload library is active).
    pub fn is_patched() -> bool {
        interpose::is_patched()
    }
}

/// The README's Rust example, compiled and run with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExample;
