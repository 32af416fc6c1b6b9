//! # greenhook
//!
//! User-mode threads for native code. Stackful fibers run on one
//! single-threaded **hub** per OS thread (an epoll loop with timers); a
//! blocking call in a fiber becomes a yield to the hub, like gevent for
//! Python. `libgreenhook.so`, loaded with `LD_PRELOAD`, does the same for
//! unmodified C programs (see the README).
//!
//! The Rust API mirrors `std::thread`:
//!
//! ```
//! use std::time::{Duration, Instant};
//!
//! let t0 = Instant::now();
//! let handles: Vec<_> = (0..3)
//!     .map(|i| {
//!         greenhook::spawn(move || {
//!             greenhook::sleep(Duration::from_millis(100));
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
//! hub's loop while it waits.
//!
//! ## Caveats
//! - **N:1.** All fibers of a thread share one core. A fiber that computes
//!   without blocking stalls every other fiber: there is no preemption.
//! - **Only hooked calls yield.** A blocking call the hub does not know
//!   (a raw `syscall`, a C library doing its own I/O) blocks the whole hub.
//! - **Thread-locals are per OS thread**, shared by all its fibers.
//! - **Fixed stacks** (default 256 KiB of address space, one page touched
//!   when idle; `GREENHOOK_STACK_SIZE` or [`Builder::stack_size`]). An
//!   overflow is reported by name and aborts.
//! - Handles are `!Send`: a fiber lives on the OS thread that spawned it.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

pub use fiber::DEFAULT_STACK_SIZE;
pub use hub::Stats;

/// Spawns a fiber running `f` and returns a handle to join it.
///
/// Like `std::thread::spawn`, but the fiber runs on this thread's hub. It
/// starts running when the caller next blocks, sleeps or yields.
///
/// # Panics
/// If the fiber cannot be created (no memory for its stack); use
/// [`Builder::spawn`] to handle that as an error.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    Builder::new().spawn(f).expect("greenhook: failed to spawn a fiber")
}

/// Fiber factory, mirroring `std::thread::Builder`.
#[derive(Debug, Default)]
pub struct Builder {
    opts: hub::Spawn,
}

impl Builder {
    /// A builder with the default name (none) and stack size.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the fiber (shown in stall, deadlock and overflow reports).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.opts.name = Some(name.into());
        self
    }

    /// Sets the usable stack size in bytes (rounded up to whole pages, at
    /// least 16 KiB).
    pub fn stack_size(mut self, size: usize) -> Builder {
        self.opts.stack_size = Some(size);
        self
    }

    /// Spawns the fiber.
    ///
    /// # Errors
    /// When no stack can be had (address space or memory exhausted).
    pub fn spawn<F, T>(self, f: F) -> std::io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let packet: Rc<RefCell<Option<std::thread::Result<T>>>> = Rc::new(RefCell::new(None));
        let p2 = packet.clone();
        let task = hub::spawn(self.opts, move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            *p2.borrow_mut() = Some(r);
        })?;
        Ok(JoinHandle { task, packet })
    }
}

/// An owned permission to join a fiber (block until it finishes).
pub struct JoinHandle<T> {
    task: Rc<hub::Task>,
    packet: Rc<RefCell<Option<std::thread::Result<T>>>>,
}

impl<T> JoinHandle<T> {
    /// Waits for the fiber to finish and returns its result: `Err` with the
    /// panic payload if it panicked, like `std::thread::JoinHandle::join`.
    pub fn join(self) -> std::thread::Result<T> {
        hub::join(&self.task);
        self.packet
            .borrow_mut()
            .take()
            .expect("greenhook: a finished fiber left no result")
    }

    /// Whether the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// The fiber's identity.
    pub fn fiber(&self) -> Fiber {
        Fiber::of(&self.task)
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("fiber", &self.fiber()).finish()
    }
}

/// A fiber's identity: its id and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fiber {
    id: u64,
    name: Option<String>,
    _not_send: PhantomData<Rc<()>>,
}

impl Fiber {
    fn of(t: &hub::Task) -> Fiber {
        Fiber {
            id: t.id(),
            name: t.name().map(str::to_owned),
            _not_send: PhantomData,
        }
    }

    /// Process-unique id; 0 is the thread's root context (e.g. `main`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The name given to [`Builder::name`], if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// The fiber running now (id 0 when called outside any fiber).
pub fn current() -> Fiber {
    Fiber::of(&hub::current())
}

/// Puts the current fiber (or the root, running the others meanwhile) to
/// sleep for at least `dur`.
pub fn sleep(dur: Duration) {
    hub::sleep(dur)
}

/// Lets every other runnable fiber run once.
#[inline]
pub fn yield_now() {
    hub::yield_now()
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
