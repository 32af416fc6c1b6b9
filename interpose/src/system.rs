//! `system(3)` made of hooked parts, as glibc makes it of its own
//! (`sysdeps/posix/system.c`): `SIGINT` and `SIGQUIT` ignored in the
//! process while any call runs (the first call saves their actions, the
//! last puts them back), `SIGCHLD` blocked in the *calling thread's* mask
//! for the call, `/bin/sh -c` spawned with the caller's mask and those two
//! signals back to their default unless they were ignored already, and a
//! `waitpid` for that shell, retried after `EINTR`.
//!
//! Ours rather than glibc's, in a cooperative context, because glibc's
//! waits with its internal `waitpid`, which no hook sees: the call had to
//! run on the offload pool, where
//! - the shell was spawned while fibers ran, so a managed pipe it
//!   inherited could not be swapped for a blocking description unseen (see
//!   [`crate::fd::blocking_pipes_for_spawn`]): the shell met `EAGAIN`;
//! - `SIGCHLD` was blocked in the worker's mask, not the caller's;
//! - at most as many calls as the pool has workers ran at once.
//!
//! Here the spawn goes through the `posix_spawn` hook (it does not yield,
//! so the swap is unseen) and the wait waits on the hub like a `waitpid`
//! hook's. The signal calls are the hooks too, so the actions and masks
//! are the emulated ones (see [`crate::signal`]).
//!
//! **Cancellation** (`system` is a cancellation point): a cancellation
//! that arrives while the shell runs kills it with `SIGKILL`, reaps it and
//! puts the two actions back when this was the last call, then acts, as
//! glibc's clean-up handler does. One pending on entry acts before
//! anything is spawned.
//!
//! **Versions.** The argument list is `sh -c -- LINE` from glibc 2.38 on
//! (`sh -c LINE` before: a line starting with `-` was an option), and a
//! shell that could not be spawned for lack of resources (`EAGAIN`,
//! `ENOMEM`) gives -1 from 2.41 on (status 127 before); the running glibc's
//! version decides. Each call restores its own thread's mask, as glibc
//! does since 2.38 and on the 2.36 and 2.37 release branches (BZ #30163).
//!
//! Outside a cooperative context (a thread of its own, a root context with
//! no fibers) glibc's `system` runs: nothing else could run meanwhile. Its
//! reference count is not ours: a `system` of such a thread that overlaps
//! one of a fiber may put the actions back while the other still runs.

use std::ffi::CStr;
use std::sync::Mutex;

use libc::{c_char, c_int, pid_t, sigset_t};

use crate::errno;
use crate::gate::cooperative;
use crate::hook::hook;

extern "C" {
    static environ: *const *mut c_char;
    fn gnu_get_libc_version() -> *const c_char;
}

/// The actions of SIGINT and SIGQUIT saved by the first of the calls that
/// run now, and how many run.
struct Saved {
    calls: usize,
    intr: libc::sigaction,
    quit: libc::sigaction,
}

// SAFETY: plain data (handler words), only read and written under the lock.
unsafe impl Send for Saved {}

static SAVED: Mutex<Option<Saved>> = Mutex::new(None);

/// The running glibc's (major, minor) version.
fn glibc_version() -> (u32, u32) {
    // SAFETY: glibc returns a static string such as "2.36".
    let v = unsafe { CStr::from_ptr(gnu_get_libc_version()) }.to_string_lossy();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// A sigaction with `handler` (a word: `SIG_IGN`...), no flags, no mask.
fn action(handler: libc::sighandler_t) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is valid plain data (an empty mask).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa
}

/// The first call ignores SIGINT and SIGQUIT, saving their actions;
/// returns whether each was ignored already (then the shell keeps it so).
fn enter() -> (bool, bool) {
    let mut saved = SAVED.lock().unwrap_or_else(|p| p.into_inner());
    let s = saved.get_or_insert_with(|| Saved {
        calls: 0,
        intr: action(libc::SIG_DFL),
        quit: action(libc::SIG_DFL),
    });
    if s.calls == 0 {
        let ign = action(libc::SIG_IGN);
        // SAFETY: the sigaction hook, with valid actions; it cannot fail
        // for these two signals.
        unsafe {
            crate::signal::sigaction(libc::SIGINT, &ign, &mut s.intr);
            crate::signal::sigaction(libc::SIGQUIT, &ign, &mut s.quit);
        }
    }
    s.calls += 1;
    (
        s.intr.sa_sigaction == libc::SIG_IGN,
        s.quit.sa_sigaction == libc::SIG_IGN,
    )
}

/// The last call puts the actions of SIGINT and SIGQUIT back.
fn leave() {
    let mut saved = SAVED.lock().unwrap_or_else(|p| p.into_inner());
    let Some(s) = saved.as_mut() else { return };
    s.calls -= 1;
    if s.calls == 0 {
        // SAFETY: the sigaction hook, with the actions saved by `enter`.
        unsafe {
            crate::signal::sigaction(libc::SIGINT, &s.intr, std::ptr::null_mut());
            crate::signal::sigaction(libc::SIGQUIT, &s.quit, std::ptr::null_mut());
        }
    }
}

/// Spawns `/bin/sh -c LINE` with mask `mask` and SIGINT/SIGQUIT back to
/// their default unless `ignored`; the pid, or the error number.
fn spawn_shell(line: *const c_char, mask: &sigset_t, ignored: (bool, bool)) -> Result<pid_t, c_int> {
    // SAFETY: an all-zero sigset and attribute object are valid out buffers
    // for the init calls below, which cannot fail for these arguments.
    let mut reset: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut attr: libc::posix_spawnattr_t = unsafe { std::mem::zeroed() };
    // SAFETY: local objects, initialised before use.
    unsafe {
        libc::sigemptyset(&mut reset);
        if !ignored.0 {
            libc::sigaddset(&mut reset, libc::SIGINT);
        }
        if !ignored.1 {
            libc::sigaddset(&mut reset, libc::SIGQUIT);
        }
        libc::posix_spawnattr_init(&mut attr);
        libc::posix_spawnattr_setsigmask(&mut attr, mask);
        libc::posix_spawnattr_setsigdefault(&mut attr, &reset);
        libc::posix_spawnattr_setflags(
            &mut attr,
            (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as _,
        );
    }
    let sh = c"sh".as_ptr().cast_mut();
    let dash_c = c"-c".as_ptr().cast_mut();
    let argv: Vec<*mut c_char> = if glibc_version() >= (2, 38) {
        vec![
            sh,
            dash_c,
            c"--".as_ptr().cast_mut(),
            line.cast_mut(),
            std::ptr::null_mut(),
        ]
    } else {
        vec![sh, dash_c, line.cast_mut(), std::ptr::null_mut()]
    };
    let mut pid: pid_t = 0;
    // SAFETY: the posix_spawn hook (inheritable managed pipes go to the
    // shell blocking); valid attribute, argument list and environment.
    let r = unsafe {
        crate::process::posix_spawn(
            &mut pid,
            c"/bin/sh".as_ptr(),
            std::ptr::null(),
            &attr,
            argv.as_ptr(),
            environ,
        )
    };
    // SAFETY: initialised above.
    unsafe { libc::posix_spawnattr_destroy(&mut attr) };
    if r == 0 {
        Ok(pid)
    } else {
        Err(r)
    }
}

/// A cancellation arrived while the shell ran (it is killed and reaped).
struct Cancelled;

/// Waits for the shell `pid`: its status, or the wait's error number; on a
/// cancellation, kills and reaps it first.
fn wait_shell(pid: pid_t) -> Result<Result<c_int, c_int>, Cancelled> {
    let mut status = 0;
    loop {
        match crate::process::reap(pid, &mut status) {
            Ok(_) => return Ok(Ok(status)),
            Err(libc::EINTR) if crate::thread::cancel::due_here() => {
                // SAFETY: our own child, not yet reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                while crate::process::reap(pid, std::ptr::null_mut()) == Err(libc::EINTR) {}
                return Err(Cancelled);
            }
            // TEMP_FAILURE_RETRY, as glibc's waitpid loop.
            Err(libc::EINTR) => continue,
            Err(e) => return Ok(Err(e)),
        }
    }
}

/// glibc's `do_system`, from hooked parts (see the module docs).
fn do_system(line: *const c_char) -> c_int {
    let caller_errno = errno::get();
    let ignored = enter();
    // SAFETY: an all-zero sigset is a valid buffer for sigemptyset.
    let mut chld: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut omask: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: local sets; the pthread_sigmask hook (the caller's mask).
    unsafe {
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        crate::signal::pthread_sigmask(libc::SIG_BLOCK, &chld, &mut omask);
    }
    let mut cancelled = false;
    let (status, e) = match spawn_shell(line, &omask, ignored) {
        Ok(pid) => match wait_shell(pid) {
            Ok(Ok(status)) => (status, caller_errno),
            Ok(Err(e)) => (-1, e),
            Err(Cancelled) => {
                cancelled = true;
                // If it is not acted on after all (the thread is already
                // exiting): a wait that found no child.
                (-1, libc::ECHILD)
            }
        },
        Err(e @ (libc::EAGAIN | libc::ENOMEM)) if glibc_version() >= (2, 41) => (-1, e),
        // As if the shell had run and exited with 127.
        Err(e) => (127 << 8, e),
    };
    leave();
    if cancelled {
        // After glibc's clean-up handler's work (above): the thread ends.
        crate::cancel_point();
    }
    // SAFETY: the pthread_sigmask hook, with the mask saved above.
    unsafe { crate::signal::pthread_sigmask(libc::SIG_SETMASK, &omask, std::ptr::null_mut()) };
    errno::set(e);
    status
}

hook! {
    /// `system(3)`: see the module docs.
    #[gate(cooperative())]
    [process] fn system(cmd: *const c_char) -> c_int {
        crate::cancel_point();
        if cmd.is_null() {
            // Whether a shell is there to run commands (after a chroot
            // there may be none).
            return c_int::from(do_system(c"exit 0".as_ptr()) == 0);
        }
        do_system(cmd)
    }
}
