//! The libc ABI layer: hooks that turn blocking calls and pthreads into
//! fiber operations on the hub.
//!
//! Organised like gevent's `monkey`: one module per area, a [`real`] module
//! that resolves and caches the next definitions, and every hook written in
//! one shape:
//!
//! 1. **gate**: pass straight through when not patched, when the caller is
//!    greenhook's own machinery, when the fd is not one we manage or the user
//!    asked for `O_NONBLOCK`, or (for sleeps) when no fiber could run anyway;
//! 2. **try** the real call (managed fds are non-blocking underneath);
//! 3. on `EAGAIN`, **wait** on the hub for readiness, with the fd's timeout;
//! 4. **retry**; and set `errno` **last**, just before returning.
//!
//! A panic inside a hook never crosses `extern "C"`: it aborts the process
//! with the hook's name.
//!
//! Two ways in:
//! - `libgreenhook.so` under `LD_PRELOAD` patches at load time (a `ctor`);
//!   pthreads become fibers unless `GREENHOOK_THREADS=native`.
//! - A Rust program that links `greenhook` gets the same symbols in its
//!   executable; they pass straight through until [`patch_all`] is called.
//!   Its `std::thread`s stay real threads.

#![allow(clippy::missing_safety_doc)] // hooks are libc functions: libc's contracts apply

pub(crate) mod deadline;
pub mod fdtable;
pub(crate) mod hook;
pub(crate) mod real;
#[cfg(all(greenhook_table, not(target_os = "macos")))]
pub use real::{interpose_table, Interpose};

// The platform split: the hooks below are written against Linux and glibc
// (epoll, pidfd, signalfd, preadv2, glibc's FILE and pthread layouts, and
// variadic arguments passed in registers). On macOS the same hooks would be
// exported through a `__DATA,__interpose` section for
// DYLD_INSERT_LIBRARIES, under names distinct from libc's, with Apple's
// arm64 variadic convention (arguments on the stack) for fcntl/ioctl/
// syscall/scanf: not written yet, and nothing here can build or run macOS.
// Elsewhere `patch_all` is a no-op and the Rust fiber API works unpatched.
#[cfg(greenhook_linux_hooks)]
pub mod blocking;
#[cfg(greenhook_linux_hooks)]
pub mod creds;
#[cfg(greenhook_linux_hooks)]
pub mod dns;
#[cfg(greenhook_linux_hooks)]
pub mod fd;
#[cfg(greenhook_linux_hooks)]
pub(crate) mod fdwait;
#[cfg(greenhook_linux_hooks)]
pub mod fifo;
#[cfg(greenhook_linux_hooks)]
pub mod file;
#[cfg(greenhook_linux_hooks)]
pub mod fortify;
#[cfg(greenhook_linux_hooks)]
pub mod futex;
#[cfg(greenhook_linux_hooks)]
pub mod io;
#[cfg(greenhook_linux_hooks)]
pub mod notify;
#[cfg(greenhook_linux_hooks)]
pub(crate) mod nowait;
#[cfg(greenhook_linux_hooks)]
pub mod poll;
#[cfg(greenhook_linux_hooks)]
pub(crate) mod preempt;
#[cfg(greenhook_linux_hooks)]
pub mod process;
#[cfg(greenhook_linux_hooks)]
pub mod signal;
#[cfg(greenhook_linux_hooks)]
pub mod stdio;
#[cfg(greenhook_linux_hooks)]
pub mod sync;
#[cfg(greenhook_linux_hooks)]
pub mod system;
#[cfg(greenhook_linux_hooks)]
pub mod thread;
pub mod time;
#[cfg(greenhook_linux_hooks)]
pub(crate) mod unwind;
// liburing is no libc: its functions have no place in the interpose table
// (the table build would need liburing to link), and macOS has no io_uring.
#[cfg(all(greenhook_linux_hooks, not(greenhook_table)))]
pub mod uring;

use std::sync::atomic::{AtomicBool, Ordering};

static PATCHED: AtomicBool = AtomicBool::new(false);
static THREADS_AS_FIBERS: AtomicBool = AtomicBool::new(false);
static PRELOADED: AtomicBool = AtomicBool::new(false);
/// [`is_patched`] and [`threads_as_fibers`] in one word, for the gate of
/// every pthread object hook ([`gate::emulating_objects`]). Both are set
/// once, before `main`, and never cleared.
static PATCHED_FIBERS: AtomicBool = AtomicBool::new(false);

/// Activates every hook in this process, like gevent's `patch_all()`:
/// afterwards `std::thread::sleep`, `std::net` and `std::sync` cooperate
/// inside fibers. Threads spawned with `std::thread` stay real threads.
pub fn patch_all() {
    setup();
    PATCHED.store(true, Ordering::SeqCst);
}

/// What both ways in (preload, patch_all) set up before patching.
fn setup() {
    hub::internal::read_settings();
    hook::init_stats();
    #[cfg(greenhook_linux_hooks)]
    {
        preempt::init();
        thread::read_settings();
        hub::internal::set_name_provider(thread::name_for_monitor);
        hub::internal::set_priority_provider(thread::sched::current_priority);
        hub::internal::set_user_namer(thread::name_of);
        hub::internal::set_owner_describer(sync::owner_of);
        // A thread that is not a fiber wakes fibers through the hub's
        // inbox: with one, fibers that all wait are waiting for it.
        hub::internal::set_threads_may_wake(gate::foreign_threads);
        thread::cputime::resolve_early();
        process::register_fork_handler();
    }
}

/// Whether the hooks are active.
#[inline]
pub fn is_patched() -> bool {
    PATCHED.load(Ordering::Relaxed)
}

/// Whether `pthread_create` makes fibers (the preload default).
#[inline]
pub fn threads_as_fibers() -> bool {
    THREADS_AS_FIBERS.load(Ordering::Relaxed)
}

/// Whether this copy of the hooks was loaded as `libgreenhook.so`.
pub fn is_preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

/// The gate every hook asks first, in one vocabulary. Each answer is
/// cheap (atomics and one thread-local read) and may change between calls.
#[cfg_attr(not(greenhook_linux_hooks), allow(dead_code))] // portable build: sleeps only
pub(crate) mod gate {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The hooks are on, whoever calls: what must follow every change made
    /// through a hook, greenhook's own machinery included (the fd table
    /// tracking `fcntl`, `dup2`, `close`), asks only this.
    #[inline]
    pub(crate) fn on() -> bool {
        // Not in a child that shares our memory (a `clone` with
        // `CLONE_VM | CLONE_VFORK`): the fd table is the parent's.
        crate::is_patched() && !hub::internal::in_shared_child()
    }

    /// The hooks are on (`LD_PRELOAD`, or after [`patch_all`](crate::patch_all))
    /// and the caller is not greenhook's own machinery (the offload pool,
    /// reports): otherwise a hook is its real function.
    #[inline]
    pub(crate) fn patched() -> bool {
        crate::is_patched() && !hub::internal::is_internal()
    }

    /// [`patched`], pthreads are fibers (the preload default, not
    /// `GREENHOOK_THREADS=native`), and the caller's OS thread is the one
    /// that runs them: threads, mutexes, condition variables, rwlocks,
    /// barriers and thread-directed signals are emulated. Another OS thread
    /// (one a library made without our `pthread_create`, such as jemalloc's
    /// background thread) uses glibc's own.
    #[inline]
    pub(crate) fn emulating() -> bool {
        patched() && crate::threads_as_fibers() && hub::is_fiber_thread()
    }

    /// [`emulating`], for the hooks of pthread objects (mutexes, condvars,
    /// rwlocks, barriers): a thread that is not the fibers' own using one
    /// is noted, since objects it shares with fibers must then also serve
    /// waiters glibc parked in the kernel (see [`foreign_threads`]).
    #[inline]
    pub(crate) fn emulating_objects() -> bool {
        objects_caller() == ObjectsCaller::Fibers
    }

    /// Who calls a hook of pthread objects (see [`objects_caller`]).
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub(crate) enum ObjectsCaller {
        /// The fibers' OS thread, while objects are emulated.
        Fibers,
        /// Another OS thread while they are (noted: [`foreign_thread`]).
        /// The rwlock and barrier hooks serve it on the emulated words,
        /// whose meaning glibc's functions do not know (see
        /// `sync::rwlock`); the other objects keep glibc's words.
        Beside,
        /// Objects are not emulated, or greenhook's own code calls.
        Neither,
    }

    /// Who calls a hook of pthread objects: [`emulating_objects`], told
    /// apart from the other OS threads of a process whose fibers emulate
    /// them, each of which is noted.
    #[inline]
    pub(crate) fn objects_caller() -> ObjectsCaller {
        if !crate::PATCHED_FIBERS.load(Ordering::Relaxed) || hub::internal::is_internal() {
            return ObjectsCaller::Neither;
        }
        if hub::is_fiber_thread() {
            return ObjectsCaller::Fibers;
        }
        foreign_thread();
        ObjectsCaller::Beside
    }

    /// An OS thread other than the fibers' own has used a pthread object
    /// through the hooks, or will (see [`foreign_thread`]): the fibers'
    /// sequences of plain instructions on an object's words give way
    /// ([`plain`]).
    static FOREIGN: AtomicBool = AtomicBool::new(false);
    /// [`FOREIGN`], and the fibers' thread is known to have seen it: no
    /// sequence of plain instructions begun before it is still under way.
    /// Until then a thread that is not the fibers' own waits
    /// ([`foreign_thread`]).
    static FENCED: AtomicBool = AtomicBool::new(false);
    /// The fibers' thread is in a sequence of plain instructions on a
    /// pthread object's words ([`plain`]). Only that thread writes it.
    static PLAIN: AtomicBool = AtomicBool::new(false);

    /// Notes that an OS thread other than the fibers' own uses, or will
    /// use, pthread objects: one glibc makes for a `SIGEV_THREAD`
    /// notification, before it has run (see `notify`), or the caller.
    /// Returns once it is safe for such a thread to touch an object the
    /// fibers use (see [`plain`]).
    #[inline]
    pub(crate) fn foreign_thread() {
        if !FENCED.load(Ordering::Acquire) {
            first_foreign_thread();
        }
    }

    /// The first note of [`foreign_thread`], and every note made before
    /// the first has finished: a handshake with the fibers' thread.
    ///
    /// A fiber frees a mutex nobody waits for, or an rwlock, or arrives at
    /// a barrier, by plain loads and stores on the object's words, since no
    /// other fiber can come between them ([`plain`]). A thread on another
    /// CPU can, with an atomic instruction on the same words, and one of
    /// the two updates would be lost (a lock held twice, a lost wake-up).
    /// So the first note sets [`FOREIGN`], from which on the fibers use
    /// atomic instructions; then makes the fibers' thread run a full
    /// memory barrier and waits until it has (`sync::fence_fibers`); then
    /// waits for [`PLAIN`] to be clear. A sequence that looked at
    /// [`FOREIGN`] before the barrier had set [`PLAIN`] before its look,
    /// and the barrier made that store visible here; one that looks after
    /// it sees [`FOREIGN`] and does not start. Other notes made meanwhile
    /// wait for the first to finish ([`FENCED`]).
    #[cold]
    #[inline(never)]
    fn first_foreign_thread() {
        if !FOREIGN.swap(true, Ordering::SeqCst) {
            #[cfg(greenhook_linux_hooks)]
            crate::sync::fence_fibers();
            // A sequence is a few instructions, but the fibers' thread may
            // be descheduled in one.
            while PLAIN.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            FENCED.store(true, Ordering::Release);
        }
        while !FENCED.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    /// Runs `f`, a sequence of plain loads and stores on a pthread object's
    /// words made by the fibers' thread, unless an OS thread other than
    /// the fibers' own has been noted ([`foreign_thread`]): then `None`,
    /// without running it, and the caller takes its atomic path. The
    /// sequence may not block, switch fibers or let a signal handler run
    /// (a hook depth or `hook::lean`'s shield is held), and `None` from
    /// `f` also sends the caller to its other path.
    ///
    /// Between the first note and the end of its handshake, a sequence
    /// under way is waited for (see [`first_foreign_thread`]); after it,
    /// none starts. This costs the fibers two plain stores to one global.
    #[inline(always)]
    pub(crate) fn plain<R>(f: impl FnOnce() -> Option<R>) -> Option<R> {
        PLAIN.store(true, Ordering::Relaxed);
        // The look at FOREIGN after the store, in the code; on the CPU it
        // may pass it, which the first note's barrier covers.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        let r = if FOREIGN.load(Ordering::Relaxed) { None } else { f() };
        PLAIN.store(false, Ordering::Release);
        r
    }

    /// Whether an OS thread other than the fibers' own has used a pthread
    /// object through glibc: a fiber's wait on such an object then re-checks
    /// now and then, since glibc's wake-ups reach the kernel, not the hub.
    #[inline]
    pub(crate) fn foreign_threads() -> bool {
        FOREIGN.load(Ordering::Relaxed)
    }

    /// In a forked child, where the forking thread is the only one and is
    /// in no sequence: a handshake the parent left half done is done, and
    /// a sequence the parent's fibers' thread was in is over.
    pub(crate) fn after_fork_child() {
        PLAIN.store(false, Ordering::Relaxed);
        if FOREIGN.load(Ordering::Relaxed) {
            FENCED.store(true, Ordering::Release);
        }
    }

    /// A wait here can let a fiber run: the caller is a fiber, or a root
    /// context whose hub has fibers. Asked after [`patched`] or
    /// [`emulating`]; elsewhere a wait blocks in the kernel, as the real
    /// call would.
    #[inline]
    pub(crate) fn can_yield() -> bool {
        hub::in_fiber() || hub::live_fibers() > 0
    }

    /// Pthreads are fibers and the caller is one: what `pthread_self` and
    /// thread-specific keys belong to. Unlike [`emulating`] this holds for
    /// greenhook's own code running in a fiber too (a report's), since that
    /// code still runs as that fiber.
    #[inline]
    pub(crate) fn in_fiber_thread() -> bool {
        crate::is_patched() && crate::threads_as_fibers() && hub::in_fiber()
    }

    /// [`patched`] and [`can_yield`]: a blocking call here waits on the hub.
    #[inline]
    pub(crate) fn cooperative() -> bool {
        patched() && can_yield()
    }
}

/// A cancellation point: ends the calling fiber if a deferred
/// `pthread_cancel` is pending and enabled.
#[inline]
pub(crate) fn cancel_point() {
    #[cfg(greenhook_linux_hooks)]
    if thread::cancel::any_pending() {
        thread::cancel::act()
    }
}

/// Where a fiber resumes from a suspension that is not a cancellation
/// point (`sched_yield`, an interrupted lock, condvar, rwlock, barrier or
/// semaphore wait): ends it if an asynchronous `pthread_cancel` is pending
/// and enabled (see `thread::cancel`), and runs the signal handlers due for
/// it (see `signal`): the wait goes on after them.
#[inline]
pub(crate) fn async_cancel_point() {
    #[cfg(greenhook_linux_hooks)]
    {
        if thread::cancel::any_pending() {
            thread::cancel::async_point()
        }
        signal::run_pending();
    }
}

/// Runs a blocking libc call on the hub's offload pool, in `lane`, while
/// the caller waits, and carries the worker's errno back (set last, as
/// every hook does). The call may borrow the caller's memory: offload does
/// not return before it has finished.
#[cfg(greenhook_linux_hooks)]
pub(crate) fn offload<R: Send>(lane: hub::Lane, f: impl FnOnce() -> R + Send) -> R {
    let (r, e) = hub::offload(lane, move || {
        let r = f();
        (r, errno::get())
    });
    errno::set(e);
    r
}

/// A closure over the caller's raw pointers, to run on an offload worker
/// (raw pointers are not `Send`).
#[cfg(greenhook_linux_hooks)]
pub(crate) struct AssertSend<F>(pub(crate) F);

// SAFETY: used only with `offload`/`hub::offload`, which keep the caller
// (and so every pointer the closure holds) blocked until the closure has
// returned; the functions called are thread-safe libc functions.
#[cfg(greenhook_linux_hooks)]
unsafe impl<F> Send for AssertSend<F> {}

#[cfg(greenhook_linux_hooks)]
impl<F> AssertSend<F> {
    /// Runs the closure (consuming the wrapper, so closures capture it whole).
    pub(crate) fn call<R>(self) -> R
    where
        F: FnOnce() -> R,
    {
        (self.0)()
    }
}

/// Load-time setup: patch when we are `libgreenhook.so` in LD_PRELOAD.
#[ctor::ctor(unsafe)]
fn init() {
    // Before any lookup of ours (see `fiber::tls::dlsym_quietly`).
    fiber::tls::note_dlerror_slot();
    if !loaded_as_shared_library() {
        return;
    }
    PRELOADED.store(true, Ordering::SeqCst);
    let native = std::env::var_os("GREENHOOK_THREADS").is_some_and(|v| v == "native") || go_program();
    THREADS_AS_FIBERS.store(!native, Ordering::SeqCst);
    setup();
    PATCHED.store(true, Ordering::SeqCst);
    PATCHED_FIBERS.store(!native, Ordering::SeqCst);
    if !native && !hook::counting() {
        // The lock hooks' fast paths (see `hook!`'s `#[fast_path]`) ask
        // this instead of `gate::emulating_objects`, and count nothing.
        hub::internal::allow_lean();
    }
}

/// Whether the program is Go's: its threads are its runtime's, which wait
/// in the kernel by the `syscall` instruction, so they stay threads
/// (`thread::native`).
fn go_program() -> bool {
    #[cfg(greenhook_linux_hooks)]
    {
        thread::main_program_is_go()
    }
    #[cfg(not(greenhook_linux_hooks))]
    {
        false
    }
}

/// Whether this code lives in a shared object the program was given to
/// patch it: one named `libgreenhook*.so`, or one listed by name in
/// `LD_PRELOAD` or `/etc/ld.so.preload` (a copy installed as
/// `greenhook.so`, say). The same code linked into an executable, or into
/// another library that uses the Rust API, patches nothing.
fn loaded_as_shared_library() -> bool {
    // SAFETY: dladdr only reads the loader's tables; `info` is written by it.
    let name = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(init as *const () as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return false;
        }
        std::ffi::CStr::from_ptr(info.dli_fname).to_bytes()
    };
    let base = basename(name);
    // `libgreenhook.so` (Linux), `libgreenhook.dylib` (macOS).
    if base.starts_with(b"libgreenhook") && (base.windows(3).any(|w| w == b".so") || base.ends_with(b".dylib")) {
        return true;
    }
    #[cfg(target_os = "linux")]
    let listed = std::env::var_os("LD_PRELOAD")
        .map(std::os::unix::ffi::OsStringExt::into_vec)
        .into_iter()
        // Read only if the variable did not name us.
        .chain(std::iter::once_with(|| std::fs::read("/etc/ld.so.preload").ok()).flatten());
    #[cfg(target_os = "macos")]
    let listed = std::env::var_os("DYLD_INSERT_LIBRARIES")
        .map(std::os::unix::ffi::OsStringExt::into_vec)
        .into_iter();
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let listed = std::iter::empty::<Vec<u8>>();
    preload_lists_name(listed, base)
}

/// The last component of a path.
fn basename(path: &[u8]) -> &[u8] {
    path.rsplit(|&c| c == b'/').next().unwrap_or(path)
}

/// Whether one of the preload `lists` names the object `base`. The loader
/// splits `LD_PRELOAD` at spaces and colons and `/etc/ld.so.preload` at
/// white space; an entry is a path or a bare name found on the library
/// path, so entries are compared by their last component.
fn preload_lists_name(lists: impl Iterator<Item = Vec<u8>>, base: &[u8]) -> bool {
    !base.is_empty()
        && lists.into_iter().any(|list| {
            list.split(|c| c.is_ascii_whitespace() || *c == b':')
                .any(|entry| !entry.is_empty() && basename(entry) == base)
        })
}

/// The caller's memory, read and written as the kernel would: a bad
/// pointer gets `EFAULT` instead of a crash inside a hook.
pub(crate) mod user {
    use std::mem::{size_of, MaybeUninit};

    /// Copies `*p`; `Err(EFAULT)` where the kernel would say so.
    ///
    /// On Linux through `process_vm_readv` on ourselves, unless `p` is in
    /// the live part of the running stack (see [`on_live_stack`]); where
    /// that is not permitted (a seccomp filter, e.g. Docker's default), a
    /// plain read.
    pub(crate) fn read<T: Copy>(p: *const T) -> Result<T, i32> {
        if p.is_null() {
            return Err(libc::EFAULT);
        }
        #[cfg(target_os = "linux")]
        if !on_live_stack(p as usize, size_of::<T>()) {
            let mut v = MaybeUninit::<T>::uninit();
            let local = libc::iovec {
                iov_base: v.as_mut_ptr().cast(),
                iov_len: size_of::<T>(),
            };
            let remote = libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: size_of::<T>(),
            };
            match copy(&local, &remote, false) {
                // SAFETY: the kernel wrote all of `v`.
                Some(true) => return Ok(unsafe { v.assume_init() }),
                Some(false) => return Err(libc::EFAULT),
                None => {}
            }
        }
        // SAFETY: the caller's pointer, non-null; no way to check it here.
        Ok(unsafe { p.read() })
    }

    /// Copies `dst.len()` bytes from `p` into `dst`; `Err(EFAULT)` where
    /// the kernel would say so (as [`read`]).
    #[cfg(greenhook_linux_hooks)]
    pub(crate) fn read_bytes(p: *const u8, dst: &mut [u8]) -> Result<(), i32> {
        if p.is_null() {
            return Err(libc::EFAULT);
        }
        #[cfg(target_os = "linux")]
        if !on_live_stack(p as usize, dst.len()) {
            let local = libc::iovec {
                iov_base: dst.as_mut_ptr().cast(),
                iov_len: dst.len(),
            };
            let remote = libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: dst.len(),
            };
            match copy(&local, &remote, false) {
                Some(true) => return Ok(()),
                Some(false) => return Err(libc::EFAULT),
                None => {}
            }
        }
        // SAFETY: the caller's pointer, non-null; no way to check it here.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Stores `v` at `p`; `Err(EFAULT)` where the kernel would say so.
    pub(crate) fn write<T: Copy>(p: *mut T, v: T) -> Result<(), i32> {
        if p.is_null() {
            return Err(libc::EFAULT);
        }
        #[cfg(target_os = "linux")]
        if !on_live_stack(p as usize, size_of::<T>()) {
            let local = libc::iovec {
                iov_base: (&raw const v) as *mut libc::c_void,
                iov_len: size_of::<T>(),
            };
            let remote = libc::iovec {
                iov_base: p.cast(),
                iov_len: size_of::<T>(),
            };
            match copy(&local, &remote, true) {
                Some(true) => return Ok(()),
                Some(false) => return Err(libc::EFAULT),
                None => {}
            }
        }
        // SAFETY: the caller's pointer, non-null; no way to check it here.
        unsafe { p.write(v) };
        Ok(())
    }

    /// Whether `[p, p + len)` lies between our own frame and the top of the
    /// stack we run on: memory the running code's callers are using, so
    /// mapped and writable, and a plain access cannot fault. Most timeouts
    /// are a caller's local `timespec`, and this spares them the two system
    /// calls of the checked copy (`getpid`, `process_vm_readv`): a timed
    /// wait between fibers makes none. The top is the fiber's (its
    /// `stack_bounds`), or in the root context the main thread's
    /// (`__libc_stack_end`, the stack pointer glibc started with) when we
    /// run within 8 MiB below it: no other thread's stack is mapped there
    /// (the kernel keeps at least 128 MiB below the main stack free of
    /// mappings). Anything else takes the checked copy, a signal handler
    /// on an alternate stack included.
    #[cfg(target_os = "linux")]
    #[inline]
    fn on_live_stack(p: usize, len: usize) -> bool {
        const MAIN_STACK_USED_AT_MOST: usize = 8 << 20;
        extern "C" {
            static __libc_stack_end: *const libc::c_void;
        }
        let here = 0u8;
        let sp = (&raw const here) as usize;
        let Some(end) = p.checked_add(len) else { return false };
        if p < sp {
            return false;
        }
        // On a fiber's stack (not a signal handler's alternate one): its top.
        let fiber_top = |f: &fiber::Fiber| {
            let (lo, hi) = f.stack_bounds();
            if (lo..hi).contains(&sp) {
                hi
            } else {
                0
            }
        };
        let top = hub::with_current_fiber(|f| f.map(fiber_top)).unwrap_or_else(|| {
            // SAFETY: ld.so sets `__libc_stack_end` before any code of
            // ours runs and never changes it; reading a pointer value.
            let e = unsafe { __libc_stack_end } as usize;
            if sp < e && e - sp <= MAIN_STACK_USED_AT_MOST {
                e
            } else {
                0
            }
        });
        end <= top
    }

    /// One `process_vm_readv`/`writev` on ourselves: whether all bytes
    /// moved, or None when the call is not available (errno kept).
    #[cfg(target_os = "linux")]
    fn copy(local: &libc::iovec, remote: &libc::iovec, write: bool) -> Option<bool> {
        let e = fiber::errno::get();
        let pid = std::process::id() as libc::pid_t;
        // SAFETY: one iovec each side; `local` is our own memory of the
        // right size, `remote` is checked by the kernel.
        let n = unsafe {
            if write {
                libc::process_vm_writev(pid, local, 1, remote, 1, 0)
            } else {
                libc::process_vm_readv(pid, local, 1, remote, 1, 0)
            }
        };
        if n == local.iov_len as isize {
            return Some(true);
        }
        let failed = fiber::errno::get();
        super::errno::set(e);
        if n >= 0 || failed == libc::EFAULT {
            return Some(false);
        }
        None
    }
}

/// errno helpers for the C edge.
pub(crate) mod errno {
    #[cfg(greenhook_linux_hooks)]
    pub(crate) use fiber::errno::get;
    pub(crate) use fiber::errno::set;

    /// Sets errno and returns -1 (the usual failure return).
    #[inline]
    pub(crate) fn fail<T: From<i8>>(e: i32) -> T {
        set(e);
        T::from(-1)
    }

    /// The C return of a wait that is a cancellation point, after its
    /// clean-up: the result with errno put back to `saved`, or, for a
    /// failed wait, a pending cancellation acted on first, then -1 with
    /// the error.
    #[cfg(greenhook_linux_hooks)]
    pub(crate) fn after_wait<T: From<i8>>(r: Result<T, i32>, saved: i32) -> T {
        match r {
            Ok(r) => {
                set(saved);
                r
            }
            Err(e) => {
                crate::cancel_point();
                fail(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::preload_lists_name;

    fn lists(v: &[&str]) -> impl Iterator<Item = Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn a_preload_entry_names_the_object_by_its_last_component() {
        assert!(preload_lists_name(lists(&["/opt/gh/greenhook.so"]), b"greenhook.so"));
        assert!(preload_lists_name(lists(&["libasan.so:greenhook.so"]), b"greenhook.so"));
        assert!(preload_lists_name(
            lists(&["", "a.so  /x/greenhook.so\n"]),
            b"greenhook.so"
        ));
        assert!(!preload_lists_name(lists(&["/opt/gh/greenhook.so.1"]), b"greenhook.so"));
        assert!(!preload_lists_name(
            lists(&["/opt/greenhook.so/other.so"]),
            b"greenhook.so"
        ));
        assert!(!preload_lists_name(lists(&["::"]), b""));
        assert!(!preload_lists_name(lists(&[]), b"greenhook.so"));
    }
}
