//! Child processes: `waitpid`, `wait`, `wait4`, `waitid`, `pclose`,
//! `fork`, `vfork`, `_Fork`, `daemon`, the `exec` family (and `system`'s
//! wait: see [`crate::system`]).
//!
//! - **Waiting for one child** (`pid > 0`, `P_PID`, `P_PIDFD`) uses a pidfd
//!   (`pidfd_open`, a raw system call): the fiber waits on the hub until it
//!   polls readable (the child exited), then the real call with `WNOHANG`
//!   reaps it. Stops and continues (`WUNTRACED`, `WCONTINUED`, `WSTOPPED`)
//!   do not make a pidfd readable, so those waits take the polling path.
//! - **Waiting for any child** (`pid` -1, 0 or < -1, `P_ALL`, `P_PGID`) polls
//!   with `WNOHANG` and sleeps on the hub between tries, 1 ms doubling up to
//!   10 ms. Not the offload pool: a wait for "any child" may last forever
//!   and would hold one of the few workers (4 by default) for all that time,
//!   starving file I/O; a pidfd cannot name "any child", and a SIGCHLD
//!   handler or signalfd would take the signal from the program. The cost is
//!   at most ~100 cheap system calls a second per waiting fiber, and up to
//!   10 ms of extra latency.
//! - A user's `WNOHANG` passes straight through, as does every call outside
//!   a cooperative context. While waiting, a signal handler installed
//!   without `SA_RESTART` ends the wait with `EINTR` (see [`crate::signal`]).
//! - `system` is ours, made of these hooks: see [`crate::system`].
//! - `popen`'s pipe is an ordinary (foreign) fd, and reads through its
//!   `FILE` wait for readiness like any other foreign fd. `pclose` first
//!   drops the hub's registration of that fd (glibc closes it internally,
//!   where no hook sees it), then waits for the child on the hub: see
//!   [`pclose_on_hub`].
//! - `fork` in a cooperative process: the child keeps only the calling
//!   context, as POSIX says. The hub is reset with
//!   [`hub::reset_after_fork`]: other fibers are dropped (never resumed,
//!   never unwound), timers, wait queues and fd registrations are emptied,
//!   and the child gets its own epoll set and notifier under the same fd
//!   numbers (it must not change the parent's set, which it shares after
//!   fork). The calling fiber keeps running on its stack as the child's only
//!   context and may create more fibers; when none is left, the child exits
//!   with status 0 (the last thread ended). `pthread_join` on a thread of
//!   the parent would wait forever (a deadlock report); POSIX leaves it
//!   undefined.
//! - `vfork` is `fork`: the child of a real `vfork` shares our stack and
//!   must not return from the function that called it, which a hook is.
//!   `_Fork` and `daemon` make their child as `fork` does.
//!   `posix_spawn` and `exec*` pass through (glibc's `posix_spawn` blocks the
//!   calling thread only until the child has exec'd), except that a managed
//!   pipe the child inherits is given to it blocking: after `fork` in the
//!   child (every managed pipe: the child may make a close-on-exec one
//!   inheritable before it execs), around `posix_spawn` in the parent, and
//!   around an exec without a fork (see
//!   [`crate::fd::private_pipes_after_fork`], [`spawned`]).

use std::time::Duration;

use libc::{c_char, c_int, c_void, idtype_t, pid_t, rusage, siginfo_t};

use crate::errno;
use crate::gate::{can_yield, cooperative, patched};
use crate::hook::hook;
use crate::offload;

extern "C" {
    fn fileno(f: *mut c_void) -> c_int;
}

/// `P_PIDFD` (Linux 5.4): `id` is a pidfd.
const P_PIDFD: idtype_t = 3;

/// A pidfd for `pid`, or None (no such process, or an old kernel).
fn pidfd_open(pid: pid_t) -> Option<c_int> {
    // SAFETY: a raw system call with plain integer arguments; our `syscall`
    // hook passes numbers other than futex straight through.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then_some(fd as c_int)
}

fn close_pidfd(fd: c_int) {
    hub::forget_fd(fd);
    // SAFETY: our own pidfd, no longer registered anywhere.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// Waits on the hub until `pidfd` polls readable or, without one, for the
/// next polling interval (a timed park that only a signal can end early).
/// A signal for this thread interrupts it: its handler runs here, and the
/// wait ends with `Err(EINTR)` if the handler lacks `SA_RESTART` (or a
/// cancellation is due: the caller acts on it once the pidfd is closed).
fn wait_once(pidfd: Option<c_int>, backoff: &mut Duration) -> Result<(), c_int> {
    let interrupted = match pidfd {
        Some(fd) => {
            hub::wait_fd(fd, hub::Interest::Readable, None).is_err_and(|e| e.kind() == std::io::ErrorKind::Interrupted)
        }
        None => {
            let key = backoff as *mut Duration as usize;
            let deadline = std::time::Instant::now().checked_add(*backoff);
            *backoff = (*backoff * 2).min(Duration::from_millis(10));
            hub::park(key, deadline.map(Into::into), || true) == hub::Park::Interrupted
        }
    };
    if interrupted && !crate::signal::restart_after_interrupt() {
        return Err(libc::EINTR);
    }
    Ok(())
}

/// The loop of every wait here: `try_once` is the real call with
/// `WNOHANG` added and returns Some(result) when it is final; in between,
/// the fiber waits ([`wait_once`]). `Err(EINTR)` when a handler without
/// `SA_RESTART` ran or a cancellation is due; nothing acts on it here.
fn until_final<R>(pidfd: Option<c_int>, mut try_once: impl FnMut() -> Option<R>) -> Result<R, c_int> {
    let mut backoff = Duration::from_millis(1);
    loop {
        if let Some(r) = try_once() {
            return Ok(r);
        }
        wait_once(pidfd, &mut backoff)?;
    }
}

/// The hooks' wait: [`until_final`] as a cancellation point. A pidfd that
/// is `owned` is closed at the end.
fn wait_loop<R: From<i8>>(pidfd: Option<c_int>, owned: bool, try_once: impl FnMut() -> Option<R>) -> R {
    crate::cancel_point();
    let r = until_final(pidfd, try_once);
    let e = errno::get();
    if let Some(fd) = pidfd {
        if owned {
            close_pidfd(fd);
        } else {
            hub::forget_fd(fd);
        }
    }
    // A pending cancellation acts there, after the pidfd is closed.
    errno::after_wait(r, e)
}

/// Reaps child `pid` once it has exited, its status to `status` (may be
/// null): `waitpid(pid, status, 0)` waiting on the hub, except that it
/// never acts on a cancellation and is not restarted after a handler
/// without `SA_RESTART`: both end it with `Err(EINTR)` (the caller,
/// `system`, has clean-up to do first). For a cooperative context only.
pub(crate) fn reap(pid: pid_t, status: *mut c_int) -> Result<pid_t, c_int> {
    let pidfd = pidfd_open(pid);
    let r = until_final(pidfd, || {
        // SAFETY: the caller's status pointer (or null).
        let r = unsafe { waitpid::real(pid, status, libc::WNOHANG) };
        (r != 0).then(|| if r < 0 { Err(errno::get()) } else { Ok(r) })
    });
    if let Some(fd) = pidfd {
        close_pidfd(fd);
    }
    r.and_then(|found| found)
}

/// Whether a pidfd can stand for this wait (a specific child, exits only).
fn pidfd_fits(options: c_int) -> bool {
    options & (libc::WUNTRACED | libc::WCONTINUED) == 0
}

/// The gate of the waits: a cooperative context, and the caller did not
/// ask for `WNOHANG` (which never waits).
fn cooperative_wait(options: c_int) -> bool {
    cooperative() && options & libc::WNOHANG == 0
}

/// The `waitpid` family's wait for `pid` with `options`: `try_once` is the
/// real call with `WNOHANG` added (0: nothing to report yet).
fn wait_child(pid: pid_t, options: c_int, mut try_once: impl FnMut() -> pid_t) -> pid_t {
    let pidfd = if pid > 0 && pidfd_fits(options) {
        pidfd_open(pid)
    } else {
        None
    };
    wait_loop(pidfd, true, || {
        let r = try_once();
        (r != 0).then_some(r)
    })
}

/// `fork` and its stand-ins: in the child, the calling context becomes the
/// hub's only one.
fn forked() -> pid_t {
    // SAFETY: glibc's fork, forwarded unchanged.
    forked_by(|| unsafe { fork::real() })
}

/// [`forked`] with the fork made by `fork` (glibc's `fork` or `_Fork`).
fn forked_by(fork: impl FnOnce() -> pid_t) -> pid_t {
    // On the OS thread's own thread pointer: see `hub::on_thread_tls`.
    let pid = hub::on_thread_tls(fork);
    if pid == 0 {
        in_forked_child();
    }
    pid
}

/// Registers [`first_in_child`] as an `atfork` child handler: as the
/// preload loads, so before the handlers of what loads later.
pub(crate) fn register_fork_handler() {
    // SAFETY: a handler of ours, registered for no object (never
    // unregistered: this library stays loaded).
    unsafe { crate::thread::register_atfork(None, None, Some(first_in_child)) };
}

/// The first `atfork` child handler: the hub gets a poller of its own
/// before the other handlers run (see `hub::poller_after_fork`).
unsafe extern "C" fn first_in_child() {
    if patched() && hub::has_hub() {
        hub::poller_after_fork();
    }
}

/// In a new child process with a copy of our memory (`fork`, or `clone`
/// without `CLONE_VM`): the calling context becomes the hub's only one.
fn in_forked_child() {
    if !patched() {
        return;
    }
    let e = errno::get();
    if hub::has_hub() {
        hub::reset_after_fork();
        crate::signal::after_fork_child();
        crate::preempt::after_fork_child();
    }
    crate::fd::private_pipes_after_fork();
    crate::fd::mark_sockets_after_fork();
    crate::sync::after_fork_child();
    crate::gate::after_fork_child();
    crate::thread::tid::after_fork_child();
    #[cfg(all(target_arch = "x86_64", target_env = "gnu", not(greenhook_table)))]
    crate::thread::dlopen_after_fork_child();
    errno::set(e);
}

/// A `clone` child's function and argument, read by [`clone_child`] in the
/// child's copy of the caller's memory.
#[cfg(target_os = "linux")]
struct CloneChild {
    f: unsafe extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
}

/// What a `clone` child without `CLONE_VM` runs first: it is made a child
/// as `fork`'s is, then runs the caller's function.
#[cfg(target_os = "linux")]
unsafe extern "C" fn clone_child(p: *mut c_void) -> c_int {
    // SAFETY: `p` is the `CloneChild` on the caller's stack, which this
    // child has a copy of (the hook that made it is still in that frame).
    let c = unsafe { &*(p as *const CloneChild) };
    in_forked_child();
    // SAFETY: the caller's function and argument, as `clone` would call them.
    unsafe { (c.f)(c.arg) }
}

/// `pclose` as glibc's makes it (`_IO_new_proc_close`: the stream's final
/// flush, its fd closed, then `waitpid` for the child, retried after
/// `EINTR`, with cancellation disabled), with the wait on the hub: the
/// flush through the `fflush` hook, the pipe closed by putting `/dev/null`
/// under the fd (the child sees EOF or `EPIPE` as when glibc closes it, and
/// the fd stays open for glibc's own close), a wait for the child's pidfd
/// to poll readable (it exited; not reaped), then glibc's `pclose`, whose
/// `waitpid` reaps it at once. Signals that arrive meanwhile run their
/// handlers and the wait goes on; a cancellation waits for the call's end.
///
/// None (nothing done but the flush) where it cannot: `f` is not a stream
/// `popen` made, the flush failed (glibc's own flush then fails again and
/// gives `pclose` its result), no pidfd (the child was reaped elsewhere,
/// or an old kernel): the caller's offload way, glibc's all through.
fn pclose_on_hub(f: *mut libc::FILE) -> Option<c_int> {
    let pid = crate::stdio::popen_child(f)?;
    let caller_errno = errno::get();
    // SAFETY: the fflush hook on the caller's live FILE.
    if crate::stdio::writes(f) && unsafe { crate::stdio::fflush(f) } != 0 {
        errno::set(caller_errno);
        return None;
    }
    let pidfd = pidfd_open(pid)?;
    // SAFETY: a live FILE (the caller's).
    let fd = unsafe { fileno(f.cast()) };
    if !close_under(fd) {
        close_pidfd(pidfd);
        errno::set(caller_errno);
        return None;
    }
    loop {
        match hub::wait_fd(pidfd, hub::Interest::Readable, None) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                // Handlers run; neither EINTR nor cancellation ends it.
                crate::signal::run_pending();
            }
            // Readable, or an error: glibc's waitpid then waits (if it
            // must) in the kernel.
            _ => break,
        }
    }
    close_pidfd(pidfd);
    errno::set(caller_errno);
    // SAFETY: the caller's FILE, handed to glibc's pclose once (its lock
    // taken cooperatively first).
    Some(crate::stdio::coop_acquired(f, || unsafe { pclose::real(f.cast()) }))
}

/// Closes what `fd` refers to while keeping `fd` open: `/dev/null` goes
/// under it (close-on-exec, until its owner closes it). Raw system calls:
/// greenhook's own fd bookkeeping has nothing to do with it.
fn close_under(fd: c_int) -> bool {
    // SAFETY: raw system calls on a constant path and plain integers.
    unsafe {
        let null = libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/dev/null".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC,
        );
        if null < 0 {
            return false;
        }
        let moved = libc::syscall(libc::SYS_dup3, null, fd, libc::O_CLOEXEC) == fd as libc::c_long;
        libc::syscall(libc::SYS_close, null);
        moved
    }
}

/// The spawn hooks' body: `spawn` runs with the caller's inheritable pipes
/// swapped for blocking descriptions, and with the caller's own signal
/// mask in the kernel. A program started by `exec`, or the child of
/// `posix_spawn` (unless its attribute sets a mask), starts with the mask
/// of the thread that started it. Where masks are per fiber the kernel's
/// is every context's intersection (so this only adds blocks), and a
/// thread that had blocked `SIGTERM` spawned a child that had not
/// (`tests/c/spawn_mask.c`).
fn spawned<R>(spawn: impl FnOnce() -> R) -> R {
    let pipes = crate::fd::blocking_pipes_for_spawn();
    let mask = crate::signal::virtual_masks().then(|| crate::signal::KernelMask::set(&crate::signal::current_mask()));
    let r = spawn();
    drop(mask);
    pipes.restore();
    r
}

hook! {
    /// `execve(2)`: the program it runs inherits blocking pipes, not the
    /// non-blocking descriptions greenhook made (see [`spawned`]); glibc's
    /// `execl*` and `execv*` reach the kernel through its internal
    /// `execve`, so each has a hook of its own. Before, an exec without a
    /// fork (a wrapper that execs the real program, a shell's `exec`)
    /// passed its pipes on non-blocking, and the new program met `EAGAIN`
    /// on a blocking read. If the exec fails, the pipes are put back.
    #[gate(patched())]
    [process] fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { execve::real(path, argv, envp) })
    }

    /// `execv(3)`: as [`execve()`].
    #[gate(patched())]
    [process] fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { execv::real(path, argv) })
    }

    /// `execvp(3)`: as [`execve()`].
    #[gate(patched())]
    [process] fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { execvp::real(file, argv) })
    }

    /// `execvpe(3)`: as [`execve()`].
    #[gate(patched())]
    [process] fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { execvpe::real(file, argv, envp) })
    }

    /// `fexecve(3)`: as [`execve()`].
    #[gate(patched())]
    [process] fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { fexecve::real(fd, argv, envp) })
    }

    /// `execveat(2)`: as [`execve()`].
    #[gate(patched())]
    [process] fn execveat(
        dir: c_int,
        path: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
        flags: c_int,
    ) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { execveat::real(dir, path, argv, envp, flags) })
    }

    /// `waitpid(2)`: waits on the hub, not in the kernel.
    #[cancel_point]
    #[gate(cooperative_wait(options))]
    [process] fn waitpid(pid: pid_t, status: *mut c_int, options: c_int) -> pid_t {
        // SAFETY: the caller's arguments, plus WNOHANG.
        wait_child(pid, options, || unsafe { waitpid::real(pid, status, options | libc::WNOHANG) })
    }

    /// `wait(2)`: `waitpid` for any child.
    #[cancel_point]
    #[gate(cooperative())]
    [process] fn wait(status: *mut c_int) -> pid_t {
        // SAFETY: the caller's status pointer, for any child, WNOHANG.
        wait_child(-1, 0, || unsafe { waitpid::real(-1, status, libc::WNOHANG) })
    }

    /// `wait4(2)`.
    #[cancel_point]
    #[gate(cooperative_wait(options))]
    [process] fn wait4(pid: pid_t, status: *mut c_int, options: c_int, ru: *mut rusage) -> pid_t {
        // SAFETY: the caller's arguments, plus WNOHANG.
        wait_child(pid, options, || unsafe { wait4::real(pid, status, options | libc::WNOHANG, ru) })
    }

    /// `wait3(2)`: `wait4` for any child.
    #[cancel_point]
    #[gate(cooperative_wait(options))]
    [process] fn wait3(status: *mut c_int, options: c_int, ru: *mut rusage) -> pid_t {
        // SAFETY: the caller's arguments, for any child, plus WNOHANG.
        wait_child(-1, options, || unsafe { wait4::real(-1, status, options | libc::WNOHANG, ru) })
    }

    /// `waitid(2)`: with `WNOHANG` the kernel leaves `si_pid` 0 when no child
    /// is ready; we zero it before each try to tell.
    #[cancel_point]
    #[gate(cooperative_wait(options) && !info.is_null())]
    [process] fn waitid(idtype: idtype_t, id: libc::id_t, info: *mut siginfo_t, options: c_int) -> c_int {
        let exits_only = options & (libc::WSTOPPED | libc::WCONTINUED) == 0;
        let (pidfd, owned) = match idtype {
            libc::P_PID if exits_only => (pidfd_open(id as pid_t), true),
            // The caller's own pidfd: waited on, never closed by us.
            P_PIDFD if exits_only => (Some(id as c_int), false),
            _ => (None, false),
        };
        wait_loop(pidfd, owned, || {
            // SAFETY: the caller's siginfo; zeroing it is what the kernel
            // does for a WNOHANG call that finds nothing.
            unsafe { std::ptr::write_bytes(info, 0, 1) };
            // SAFETY: the caller's arguments, plus WNOHANG.
            let r = unsafe { waitid::real(idtype, id, info, options | libc::WNOHANG) };
            // SAFETY: written by the kernel (or zeroed above).
            let found = r != 0 || unsafe { (*info).si_pid() } != 0;
            found.then_some(r)
        })
    }

    /// `pclose(3)`: forgets the pipe's registration, then waits for the
    /// child on the hub ([`pclose_on_hub`]), or, where it cannot, on the
    /// offload pool.
    #[gate(patched())]
    [process] fn pclose(f: *mut c_void) -> c_int {
        if !f.is_null() {
            // SAFETY: the caller's FILE from popen.
            let fd = unsafe { fileno(f) };
            hub::forget_fd(fd);
        }
        if !can_yield() {
            // SAFETY: forwarded unchanged.
            return unsafe { pclose::real(f) };
        }
        if let Some(r) = pclose_on_hub(f.cast()) {
            return r;
        }
        let f = f as usize;
        // SAFETY: the FILE is the caller's and nobody else uses it now.
        offload(hub::Lane::Wait, move || unsafe { pclose::real(f as *mut c_void) })
    }

    /// `fork(2)`.
    [process] fn fork() -> pid_t {
        forked()
    }

    /// `vfork(2)`, implemented as [`fork()`]: a hook is a function the child
    /// would return from, which a real `vfork` child must never do.
    [process] fn vfork() -> pid_t {
        forked()
    }

    /// `__vfork`, glibc's alias of `vfork`: [`fork()`] too.
    [process] fn __vfork() -> pid_t {
        forked()
    }

    /// `clone(2)`'s glibc wrapper (variadic: the three optional arguments
    /// are read as fixed ones, as the x86-64 and aarch64 calling
    /// conventions allow, and passed on; glibc reads them only where
    /// `flags` asks). The child runs `f(arg)` on `stack`:
    /// - without `CLONE_VM` (a new process with a copy of our memory, as
    ///   sandboxes make them with namespace flags): it is made a child as
    ///   `fork`'s is before `f` runs. Before, its hooks worked on the
    ///   parent's hub: its `close` of a pipe took the parent's epoll
    ///   registration away (the two share the epoll set), and the parent's
    ///   thread waiting on that pipe waited for ever.
    /// - with `CLONE_VM | CLONE_VFORK` (a spawn helper: the child shares
    ///   our memory and the caller waits until it execs or exits): its
    ///   hooks pass straight through, and the program it execs gets
    ///   blocking pipes and the caller's signal mask, as from
    ///   `posix_spawn`. Before, its `close`s and `dup2`s rewrote the
    ///   parent's fd table, and the parent's read of the pipe the child
    ///   wrote returned `EAGAIN`.
    /// - with `CLONE_VM` alone (the child runs beside us in our memory) or
    ///   `CLONE_THREAD`: unchanged; see README.
    #[cfg(target_os = "linux")]
    #[gate(patched())]
    [process] fn clone(
        f: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
        stack: *mut c_void,
        flags: c_int,
        arg: *mut c_void,
        ptid: *mut pid_t,
        tls: *mut c_void,
        ctid: *mut pid_t,
    ) -> c_int {
        let shared = flags & (libc::CLONE_VM | libc::CLONE_THREAD);
        match f {
            Some(f) if shared == 0 => {
                let child = CloneChild { f, arg };
                let p = (&raw const child).cast_mut().cast();
                // SAFETY: the caller's arguments, with our function in front
                // of theirs; `child` outlives the call in the parent, and the
                // child has its own copy.
                unsafe { clone::real(Some(clone_child), stack, flags, p, ptid, tls, ctid) }
            }
            Some(_) if shared == libc::CLONE_VM && flags & libc::CLONE_VFORK != 0 => spawned(|| {
                // SAFETY: forwarded unchanged; the caller waits in it until
                // the child has exec'd or exited.
                hub::internal::as_machinery_for_shared_child(|| unsafe {
                    clone::real(f, stack, flags, arg, ptid, tls, ctid)
                })
            }),
            // SAFETY: forwarded unchanged (a null `f` gets glibc's EINVAL).
            _ => unsafe { clone::real(f, stack, flags, arg, ptid, tls, ctid) },
        }
    }

    /// `_Fork(2)`: glibc's fork without the `atfork` handlers, the child
    /// made as [`fork()`]'s (it was glibc's own: the other threads' fibers
    /// went on running in the child).
    [process] fn _Fork() -> pid_t {
        // SAFETY: glibc's `_Fork`, forwarded unchanged.
        forked_by(|| unsafe { _Fork::real() })
    }

    /// `daemon(3)`, as glibc makes it (`misc/daemon.c`) but with the fork
    /// of [`fork()`]: glibc's calls its internal fork, which no hook sees,
    /// and the other threads' fibers went on running in the daemon. The
    /// parent `_exit`s; the child starts a session, changes to `/` unless
    /// `nochdir`, and unless `noclose` puts `/dev/null` on fds 0–2 (through
    /// the `dup2` hook, so the fd table knows), `ENODEV` if it is not the
    /// null device.
    [process] fn daemon(nochdir: c_int, noclose: c_int) -> c_int {
        match forked() {
            -1 => return -1,
            0 => {}
            // SAFETY: the parent ends here, as glibc's does.
            _ => unsafe { libc::_exit(0) },
        }
        // SAFETY: plain calls on the child's own process.
        unsafe {
            if libc::setsid() == -1 {
                return -1;
            }
            if nochdir == 0 {
                libc::chdir(c"/".as_ptr());
            }
            if noclose != 0 {
                return 0;
            }
            let fd = crate::fifo::open::real(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
            if fd == -1 {
                return -1;
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 {
                crate::fd::close::real(fd);
                return -1;
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFCHR || st.st_rdev != libc::makedev(1, 3) {
                crate::fd::close::real(fd);
                return errno::fail(libc::ENODEV);
            }
            for target in 0..3 {
                crate::fd::dup2(fd, target);
            }
            if fd > 2 {
                crate::fd::close(fd);
            }
        }
        0
    }

    /// `posix_spawn(3)`: passes through, except that a pipe the child would
    /// inherit non-blocking underneath is given to it blocking (see
    /// [`crate::fd::blocking_pipes_for_spawn`]).
    #[gate(patched())]
    [process] fn posix_spawn(
        pid: *mut pid_t,
        path: *const c_char,
        fa: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { posix_spawn::real(pid, path, fa, attr, argv, envp) })
    }

    /// `popen(3)`: glibc spawns the shell itself, out of the
    /// `posix_spawn` hook's sight; a pipe the shell would inherit
    /// non-blocking underneath is given to it blocking, as around
    /// `posix_spawn` (the call does not yield: no fiber sees the swap).
    #[gate(patched())]
    [process] fn popen(cmd: *const c_char, mode: *const c_char) -> *mut c_void {
        // SAFETY: forwarded unchanged.
        let f = spawned(|| unsafe { popen::real(cmd, mode) });
        crate::stdio::popened(f.cast());
        f
    }

    /// `posix_spawnp(3)`: like [`posix_spawn()`].
    #[gate(patched())]
    [process] fn posix_spawnp(
        pid: *mut pid_t,
        file: *const c_char,
        fa: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int {
        // SAFETY: forwarded unchanged.
        spawned(|| unsafe { posix_spawnp::real(pid, file, fa, attr, argv, envp) })
    }
}

/// The x86-64 System V `va_list` that the variadic trampolines build (see
/// `stdio::printf`): the next argument word is in the register save area
/// until its six words are used, then on the caller's stack.
#[cfg(target_arch = "x86_64")]
#[repr(C)]
struct VaList {
    gp_offset: u32,
    fp_offset: u32,
    overflow_arg_area: *mut usize,
    reg_save_area: *mut u8,
}

/// The next pointer-sized argument of `ap`.
///
/// # Safety
/// `ap` is a live `va_list` with an integer or pointer argument left.
#[cfg(target_arch = "x86_64")]
unsafe fn next_arg(ap: *mut VaList) -> usize {
    // SAFETY: per the contract; the layout is the ABI's.
    unsafe {
        let ap = &mut *ap;
        if ap.gp_offset < 48 {
            let v = ap.reg_save_area.add(ap.gp_offset as usize).cast::<usize>().read();
            ap.gp_offset += 8;
            v
        } else {
            let v = ap.overflow_arg_area.read();
            ap.overflow_arg_area = ap.overflow_arg_area.add(1);
            v
        }
    }
}

/// `arg0` and the arguments after it up to the terminating null, as an
/// argument vector (ending in that null), and `ap` left after the null.
///
/// # Safety
/// As `execl`: a null-terminated list of strings after `arg0`.
#[cfg(target_arch = "x86_64")]
unsafe fn arg_vector(arg0: *const c_char, ap: *mut VaList) -> Vec<*const c_char> {
    let mut argv = vec![arg0];
    let mut next = arg0;
    while !next.is_null() {
        // SAFETY: per the contract, until the null.
        next = unsafe { next_arg(ap) } as *const c_char;
        argv.push(next);
    }
    argv
}

/// `execl` with its list gathered ([`arg_vector`]), then [`execv()`].
///
/// # Safety
/// As `execl`.
#[cfg(target_arch = "x86_64")]
unsafe extern "C-unwind" fn execl_v(path: *const c_char, arg0: *const c_char, ap: *mut VaList) -> c_int {
    // SAFETY: per the contract.
    let argv = unsafe { arg_vector(arg0, ap) };
    // SAFETY: a null-terminated vector of the caller's strings.
    unsafe { execv(path, argv.as_ptr()) }
}

/// `execlp`: as [`execl_v`], then [`execvp()`].
///
/// # Safety
/// As `execlp`.
#[cfg(target_arch = "x86_64")]
unsafe extern "C-unwind" fn execlp_v(file: *const c_char, arg0: *const c_char, ap: *mut VaList) -> c_int {
    // SAFETY: per the contract.
    let argv = unsafe { arg_vector(arg0, ap) };
    // SAFETY: as in `execl_v`.
    unsafe { execvp(file, argv.as_ptr()) }
}

/// `execle`: as [`execl_v`], the environment after the null, then
/// [`execve()`].
///
/// # Safety
/// As `execle`.
#[cfg(target_arch = "x86_64")]
unsafe extern "C-unwind" fn execle_v(path: *const c_char, arg0: *const c_char, ap: *mut VaList) -> c_int {
    // SAFETY: per the contract: the environment follows the null.
    let (argv, envp) = unsafe {
        let argv = arg_vector(arg0, ap);
        (argv, next_arg(ap) as *const *const c_char)
    };
    // SAFETY: as in `execl_v`.
    unsafe { execve(path, argv.as_ptr(), envp) }
}

#[cfg(target_arch = "x86_64")]
crate::stdio::va_hooks! {
    /// `execl(3)`: a trampoline to [`execl_v`].
    [2] fn execl => execl_v;
    /// `execlp(3)`: a trampoline to [`execlp_v`].
    [2] fn execlp => execlp_v;
    /// `execle(3)`: a trampoline to [`execle_v`].
    [2] fn execle => execle_v;
}
