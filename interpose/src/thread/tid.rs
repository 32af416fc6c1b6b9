//! Thread ids of their own: a pthread fiber's `gettid()` is its own
//! number, not its OS thread's, and the calls that take a thread id name
//! that fiber with it.
//!
//! Natively every thread has a kernel thread id, main's being the process
//! id. Fibers share one OS thread, and with it one kernel id: every
//! thread's `gettid()` was main's, so a check of `gettid() == getpid()`
//! took every thread for main, ids logged or kept as keys were all one,
//! and a signal sent to a thread's id ran its handler in whichever context
//! ran. So a fiber gets an id the kernel can never give: [`FIRST`] (the
//! kernel's `PID_MAX_LIMIT`, 2^22, above every pid and tid whatever
//! `pid_max` says) plus its handle's serial number (a handle's serial is
//! never reused; past `i32::MAX` the ids wrap, checked against the live
//! fibers). The root keeps the OS thread's own (main's is the process id).
//!
//! What takes such an id:
//! - `gettid`, `syscall(SYS_gettid)`: the caller's;
//! - `tgkill`, `syscall(SYS_tgkill)`, `syscall(SYS_tkill)`,
//!   `syscall(SYS_rt_tgsigqueueinfo)`: the signal goes to that fiber, as
//!   `pthread_kill` sends it; `ESRCH` once it ended, or for a thread group
//!   that is not this process; sent by a fiber to its OS thread's id
//!   (main's), the signal goes to the root, main;
//! - `kill` with a fiber's id: the process, as the kernel takes a thread's
//!   id there;
//! - `sched_setaffinity`/`sched_getaffinity`, `setpriority`/`getpriority`
//!   (`PRIO_PROCESS`), `sched_setscheduler`, `sched_getscheduler`,
//!   `sched_setparam`, `sched_getparam`: that fiber's own setting (see
//!   `sched`); an id that is not a live fiber's goes to the kernel, which
//!   answers `ESRCH`;
//! - `timer_create` with `SIGEV_THREAD_ID`: the OS thread's id (the
//!   kernel's signal reaches the OS thread, and there whichever context
//!   runs, as before);
//! - `open`, `openat`, `fopen` of `/proc/self/task/<id>/…`,
//!   `/proc/<pid>/task/<id>/…` or `/proc/<id>/…`: the OS thread's
//!   directory (its `stat`, `status` and `comm` are the OS thread's).
//!
//! Any other call given a fiber's id gets the kernel's answer for an id
//! that does not exist (`ESRCH`, mostly). In a child forked from a fiber
//! the forking thread is the child's main thread, and its `gettid()` is
//! the child's pid again ([`after_fork_child`]).

use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::{c_char, c_int, c_long, pid_t, pthread_t};

use super::{current_record, handle, lookup, Record};
use crate::hook::hook;

/// The first fiber id: the kernel's `PID_MAX_LIMIT` on 64-bit, which
/// `pid_max` cannot exceed, so no process or thread ever has it.
pub(crate) const FIRST: pid_t = 1 << 22;
/// How many fiber ids there are before they wrap.
const SPAN: usize = (pid_t::MAX - FIRST) as usize + 1;

/// The forks this process descends from (counted in each child), so that
/// a record made before the fork names no id in the child.
static FORKS: AtomicU32 = AtomicU32::new(0);

/// A fiber's id, and the process it belongs to (see [`FORKS`]).
#[derive(Debug)]
pub(super) struct Id {
    tid: pid_t,
    forks: u32,
}

impl Id {
    /// The id of the thread whose handle has serial number `serial`.
    pub(super) fn for_serial(serial: usize) -> Id {
        Id {
            tid: FIRST + (serial % SPAN) as pid_t,
            forks: FORKS.load(Ordering::Relaxed),
        }
    }

    /// The id, in the process that made it.
    fn get(&self) -> Option<pid_t> {
        (self.forks == FORKS.load(Ordering::Relaxed)).then_some(self.tid)
    }
}

/// Whether `tid` is in the range of fiber ids.
pub(crate) fn is_fiber_id(tid: pid_t) -> bool {
    tid >= FIRST
}

/// The caller's thread id: a pthread fiber's own, else the OS thread's.
pub(crate) fn own() -> pid_t {
    if crate::gate::emulating() {
        if let Some(t) = current_record().and_then(|r| r.id.get()) {
            return t;
        }
    }
    hub::internal::os_tid()
}

/// The newest serial number below the next to be issued whose id is
/// `tid` (a fiber id).
fn newest_serial(tid: pid_t) -> Option<usize> {
    newest_below(tid, handle::next_serial())
}

/// [`newest_serial`] with `next` the next serial number to be issued.
fn newest_below(tid: pid_t, next: usize) -> Option<usize> {
    let off = (tid - FIRST) as usize;
    let last = next.checked_sub(1)?;
    let s = off + last.checked_sub(off)? / SPAN * SPAN;
    (s != 0).then_some(s)
}

/// The live pthread fiber whose id is `tid`, looked up on the fibers'
/// thread: one whose exit is not complete (natively the kernel's thread
/// lives until then).
pub(super) fn fiber(tid: pid_t) -> Option<Rc<Record>> {
    if !is_fiber_id(tid) {
        return None;
    }
    let mut s = newest_serial(tid)?;
    loop {
        if let Some(rec) = lookup(handle::from_serial(s) as pthread_t) {
            if rec.id.get() == Some(tid) && !rec.ended.get() {
                return Some(rec);
            }
        }
        s = s.checked_sub(SPAN).filter(|&s| s != 0)?;
    }
}

/// In a child forked from a fiber: the ids of the parent's fibers name
/// nothing here, and the forking fiber, the child's only thread, has the
/// child's pid as its id.
pub(crate) fn after_fork_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// `pid` as `kill` takes it: a live fiber's id names this process.
pub(crate) fn for_kill(pid: pid_t) -> pid_t {
    let live = if hub::is_fiber_thread() {
        fiber(pid).is_some()
    } else {
        is_fiber_id(pid) && newest_serial(pid).is_some()
    };
    if live {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() }
    } else {
        pid
    }
}

/// The kernel's id for `tid` where a call hands it to the kernel: a live
/// fiber's id is its OS thread's.
pub(crate) fn for_kernel(tid: pid_t) -> pid_t {
    if is_fiber_id(tid) && hub::is_fiber_thread() && fiber(tid).is_some() {
        hub::internal::os_tid()
    } else {
        tid
    }
}

/// A signal sent to the thread `tid` (`tgkill` with `tgid`, `tkill`
/// without, `rt_tgsigqueueinfo` with a value): `None` when `tid` is not a
/// fiber id (the kernel's call), else the answer, 0 or an errno value, in
/// the kernel's order: arguments, the thread, the signal. A signal the
/// fiber's thread gets from another OS thread is carried to it (see
/// `to_fibers_thread`): 0 unless the id was never issued.
fn signal(tgid: Option<pid_t>, tid: pid_t, sig: c_int, value: Option<libc::sigval>) -> Option<c_int> {
    if tgid.is_some_and(|g| g <= 0) || tid <= 0 {
        return None;
    }
    // SAFETY: getpid has no preconditions.
    let other_group = tgid.is_some_and(|g| g != unsafe { libc::getpid() });
    if !is_fiber_id(tid) {
        return to_root(tid, sig, value).filter(|_| !other_group);
    }
    // glibc's own cancellation and set*id signals are not sent to a fiber
    // (its `pthread_kill` refuses them too).
    let refused = sig != 0 && (!crate::signal::valid(sig) || super::internal_signal(sig));
    if !hub::is_fiber_thread() {
        let Some(s) = newest_serial(tid).filter(|_| !other_group) else {
            return Some(libc::ESRCH);
        };
        if refused {
            return Some(libc::EINVAL);
        }
        let value = value.map(|v| v.sival_ptr as usize);
        return Some(super::to_fibers_thread(
            handle::from_serial(s) as pthread_t,
            move |rec| {
                if sig != 0 && rec.id.get() == Some(tid) {
                    let v = value.map(|v| libc::sigval {
                        sival_ptr: v as *mut libc::c_void,
                    });
                    crate::signal::send_to(rec.task.id(), sig, v);
                }
            },
        ));
    }
    let Some(rec) = fiber(tid).filter(|_| !other_group) else {
        return Some(libc::ESRCH);
    };
    Some(match sig {
        0 => 0,
        _ if refused => libc::EINVAL,
        _ => crate::signal::send_to(rec.task.id(), sig, value),
    })
}

/// A signal a fiber sends its OS thread's id (main's, on main's thread):
/// the root's, as `pthread_kill` of the root's handle sends it (the kernel
/// would give it to the OS thread on the call's return, and the handler
/// would run in the sender). Only for the program's own call (hook depth
/// 1): greenhook's own code signals its OS thread this way too. `None`:
/// the kernel's call.
fn to_root(tid: pid_t, sig: c_int, value: Option<libc::sigval>) -> Option<c_int> {
    if !hub::in_fiber()
        || hub::internal::hook_depth() != 1
        || !crate::gate::emulating()
        || super::internal_signal(sig)
        || tid != hub::internal::os_tid()
    {
        return None;
    }
    Some(match sig {
        0 => 0,
        _ => crate::signal::send_to(crate::signal::ROOT, sig, value),
    })
}

/// The `syscall` hook's share: `SYS_gettid`, and the signals sent to a
/// thread id (`SYS_tgkill`, `SYS_tkill`, `SYS_rt_tgsigqueueinfo`) where the
/// id is a fiber's. `None`: the kernel's call.
pub(crate) fn syscall(n: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long) -> Option<c_long> {
    let answer = |r: c_int| -> c_long {
        match r {
            0 => 0,
            e => crate::errno::fail::<c_long>(e),
        }
    };
    match n {
        libc::SYS_gettid => Some(own().into()),
        libc::SYS_tgkill => signal(Some(a1 as pid_t), a2 as pid_t, a3 as c_int, None).map(answer),
        libc::SYS_tkill => signal(None, a1 as pid_t, a2 as c_int, None).map(answer),
        libc::SYS_rt_tgsigqueueinfo => {
            let (tgid, tid, sig) = (a1 as pid_t, a2 as pid_t, a3 as c_int);
            if !is_fiber_id(tid) {
                return None;
            }
            let info = a4 as *const libc::siginfo_t;
            if info.is_null() {
                return Some(answer(libc::EFAULT));
            }
            // SAFETY: the caller's siginfo (not null).
            let (code, value) = unsafe { ((*info).si_code, (*info).si_value()) };
            // The kernel's rule: only a signal to oneself may pass for
            // one the kernel or `tkill` sent.
            if (code >= 0 || code == libc::SI_TKILL) && own() != tid {
                return Some(answer(libc::EPERM));
            }
            signal(Some(tgid), tid, sig, Some(value)).map(answer)
        }
        _ => None,
    }
}

/// Whether the `syscall` hook gives call `n` to [`syscall`].
#[inline]
pub(crate) fn takes(n: c_long) -> bool {
    matches!(
        n,
        libc::SYS_gettid | libc::SYS_tgkill | libc::SYS_tkill | libc::SYS_rt_tgsigqueueinfo
    )
}

/// The digits of a positive decimal number at the start of `s`, and what
/// follows them.
fn number(s: &[u8]) -> Option<(pid_t, &[u8])> {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 10 {
        return None;
    }
    let v: i64 = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
    Some((pid_t::try_from(v).ok()?, &s[n..]))
}

/// A `/proc` path naming a live fiber's directory (`/proc/self/task/<id>`,
/// `/proc/<pid>/task/<id>`, `/proc/<id>`, each alone or followed by `/…`)
/// rewritten to name its OS thread's, as a NUL-terminated string; `None`
/// for every other path (the common case costs a look at its first
/// bytes).
///
/// # Safety
/// `path` is null or a NUL-terminated string.
pub(crate) unsafe fn proc_path(path: *const c_char) -> Option<Vec<u8>> {
    const PROC: &[u8] = b"/proc/";
    // The prefix byte by byte, which stops at the string's end.
    let byte = |i: usize| {
        // SAFETY: per the contract; read only up to the first byte that
        // differs from the prefix (its NUL ends the string there at the
        // latest).
        unsafe { *path.add(i) as u8 }
    };
    if path.is_null() || !PROC.iter().enumerate().all(|(i, &c)| byte(i) == c) {
        return None;
    }
    if !hub::is_fiber_thread() {
        return None;
    }
    // SAFETY: per the contract.
    let p = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
    // SAFETY: getpid has no preconditions.
    let (head, tid, tail) = split_proc(p, unsafe { libc::getpid() })?;
    fiber(tid)?;
    let mut out = head.to_vec();
    out.extend_from_slice(hub::internal::os_tid().to_string().as_bytes());
    out.extend_from_slice(tail);
    out.push(0);
    Some(out)
}

/// A `/proc` path `p` that names a thread id, split around it: what comes
/// before, the id, and what follows (nothing, or `/…`). `pid` is this
/// process's, which `/proc/<pid>/task/<id>` names.
fn split_proc(p: &[u8], pid: pid_t) -> Option<(&[u8], pid_t, &[u8])> {
    let rest = p.strip_prefix(b"/proc/")?;
    let at = |r: &[u8]| p.len() - r.len();
    let (head, tid, tail) = if let Some(r) = rest.strip_prefix(b"self/task/") {
        let (t, tail) = number(r)?;
        (&p[..at(r)], t, tail)
    } else {
        let (first, after) = number(rest)?;
        match after.strip_prefix(b"/task/") {
            Some(r) if first == pid => {
                let (t, tail) = number(r)?;
                (&p[..at(r)], t, tail)
            }
            _ => (&p[..at(rest)], first, after),
        }
    };
    (tail.is_empty() || tail[0] == b'/').then_some((head, tid, tail))
}

hook! {
    /// `gettid(2)`: a pthread fiber's own id (see the module docs).
    [thread] fn gettid() -> pid_t {
        own()
    }

    /// `tgkill(2)`: to a fiber's id, the signal goes to that fiber.
    [signal] fn tgkill(tgid: pid_t, tid: pid_t, sig: c_int) -> c_int {
        match signal(Some(tgid), tid, sig, None) {
            Some(0) => 0,
            Some(e) => crate::errno::fail(e),
            // SAFETY: forwarded unchanged.
            None => unsafe { tgkill::real(tgid, tid, sig) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_above_every_kernel_id_and_wrap_back_to_the_first() {
        assert_eq!(Id::for_serial(1).tid, FIRST + 1);
        assert_eq!(Id::for_serial(SPAN - 1).tid, pid_t::MAX);
        assert_eq!(Id::for_serial(SPAN).tid, FIRST);
        assert!(is_fiber_id(FIRST) && !is_fiber_id(FIRST - 1) && !is_fiber_id(-5));
    }

    #[test]
    fn an_id_names_the_newest_serial_that_has_it() {
        // Serials 1..next have been issued.
        assert_eq!(newest_below(FIRST + 3, 10), Some(3));
        assert_eq!(newest_below(FIRST + 3, 4), Some(3));
        assert_eq!(newest_below(FIRST + 3, 3), None, "not issued yet");
        assert_eq!(newest_below(FIRST, 10), None, "serial 0 is never issued");
        assert_eq!(newest_below(FIRST, SPAN + 1), Some(SPAN));
        assert_eq!(newest_below(FIRST + 3, 2 * SPAN + 10), Some(2 * SPAN + 3));
        assert_eq!(newest_below(FIRST + 3, 0), None);
    }

    #[test]
    fn proc_paths_split_around_the_thread_id() {
        let pid = 1234;
        let split = |p: &str| split_proc(p.as_bytes(), pid).map(|(h, t, r)| (h.to_vec(), t, r.to_vec()));
        let want = |h: &str, t, r: &str| Some((h.as_bytes().to_vec(), t, r.as_bytes().to_vec()));
        assert_eq!(
            split("/proc/self/task/4194305/stat"),
            want("/proc/self/task/", 4194305, "/stat")
        );
        assert_eq!(split("/proc/self/task/4194305"), want("/proc/self/task/", 4194305, ""));
        assert_eq!(
            split("/proc/1234/task/4194305/comm"),
            want("/proc/1234/task/", 4194305, "/comm")
        );
        assert_eq!(split("/proc/4194305/status"), want("/proc/", 4194305, "/status"));
        assert_eq!(split("/proc/99/task/4194305"), want("/proc/", 99, "/task/4194305"));
        assert_eq!(split("/proc/self/task/4194305x"), None);
        assert_eq!(split("/proc/self/status"), None);
        assert_eq!(split("/proc/self/task/"), None);
        assert_eq!(split("/proc/99999999999/stat"), None);
        assert_eq!(split("/etc/passwd"), None);
    }
}
