//! Calls that wait on something epoll cannot watch: file locks (`flock`,
//! `lockf`, `fcntl(F_SETLKW)` and its OFD form), System V IPC (`msgrcv`,
//! `msgsnd`, `semop`, `semtimedop`), POSIX message queues, `tcdrain` and
//! `msync(MS_SYNC)`. Unhooked, a fiber waiting for a lock held by another
//! fiber of the same hub deadlocked the process.
//!
//! Each first tries the call in a form that cannot wait (`LOCK_NB`,
//! `F_TLOCK`, `F_SETLK`, `IPC_NOWAIT`, a zero or already-past timeout),
//! which the kernel answers at once and, when it fails, leaves no trace (a
//! `semop` is all or nothing, a lock is not taken). Only when that attempt
//! says "would block", and the caller asked to block, does the original call
//! go to the offload pool while the fiber waits; the common uncontended
//! call costs one system call, as unpatched. The kernel checks the
//! arguments in the first attempt, so bad input gets its answer unchanged.
//!
//! An offloaded wait cannot be interrupted by a signal or `pthread_cancel`
//! aimed at the fiber (the worker blocks signals), as for the other offloaded
//! calls; `pthread_cancel` acts when the call returns.

use libc::{c_int, c_long, c_uint, c_void, mqd_t, size_t, ssize_t, timespec};

use crate::errno;

mod next {
    use libc::{c_char, c_int, c_long, c_uint, c_void, mqd_t, off_t, sembuf, size_t, ssize_t, timespec};
    crate::real::real! {
        fn flock(fd: c_int, op: c_int) -> c_int;
        fn lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int;
        fn lockf64(fd: c_int, cmd: c_int, len: off_t) -> c_int;
        fn msgrcv(id: c_int, p: *mut c_void, size: size_t, typ: c_long, flags: c_int) -> ssize_t;
        fn msgsnd(id: c_int, p: *const c_void, size: size_t, flags: c_int) -> c_int;
        fn semtimedop(id: c_int, ops: *mut sembuf, n: size_t, t: *const timespec) -> c_int;
        fn mq_timedreceive(q: mqd_t, p: *mut c_char, len: size_t, prio: *mut c_uint, t: *const timespec) -> ssize_t;
        fn mq_timedsend(q: mqd_t, p: *const c_char, len: size_t, prio: c_uint, t: *const timespec) -> c_int;
        fn tcdrain(fd: c_int) -> c_int;
        fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
    }
}

/// Runs `attempt` (the call in a form that cannot wait). If it fails with
/// one of `would_block`, runs `blocking` (the caller's call) on the offload
/// pool; otherwise its result stands. `R` is the C return type, -1 on error.
fn try_then_offload<R>(attempt: impl FnOnce() -> R, would_block: &[c_int], blocking: impl FnOnce() -> R) -> R
where
    R: Copy + PartialEq + From<i8> + Send,
{
    let saved = errno::get();
    let r = attempt();
    if r != R::from(-1) || !would_block.contains(&errno::get()) {
        return r;
    }
    errno::set(saved);
    crate::cancel_point();
    let call = crate::AssertSend(blocking);
    let r = crate::offload(move || call.call());
    crate::cancel_point();
    r
}

/// `flock(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_flock")]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    crate::real::guard("flock", || {
        if !crate::gate::cooperative() || op & libc::LOCK_NB != 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::flock(fd, op) };
        }
        try_then_offload(
            // SAFETY: the same lock request, not waiting.
            || unsafe { next::flock(fd, op | libc::LOCK_NB) },
            &[libc::EWOULDBLOCK],
            // SAFETY: forwarded unchanged, on a worker.
            || unsafe { next::flock(fd, op) },
        )
    })
}

/// `lockf` with `F_LOCK` tries `F_TLOCK` first; the other commands never wait.
fn lockf_with(
    name: &'static str,
    real: unsafe fn(c_int, c_int, libc::off_t) -> c_int,
    fd: c_int,
    cmd: c_int,
    len: libc::off_t,
) -> c_int {
    crate::real::guard(name, || {
        if !crate::gate::cooperative() || cmd != libc::F_LOCK {
            // SAFETY: forwarded unchanged.
            return unsafe { real(fd, cmd, len) };
        }
        try_then_offload(
            // SAFETY: the same lock request, not waiting.
            || unsafe { real(fd, libc::F_TLOCK, len) },
            &[libc::EACCES, libc::EAGAIN],
            // SAFETY: forwarded unchanged, on a worker.
            || unsafe { real(fd, cmd, len) },
        )
    })
}

/// `lockf(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_lockf")]
pub unsafe extern "C" fn lockf(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int {
    lockf_with("lockf", next::lockf, fd, cmd, len)
}

/// `lockf64(3)` (the same function on 64-bit targets).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_lockf64")]
pub unsafe extern "C" fn lockf64(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int {
    lockf_with("lockf64", next::lockf64, fd, cmd, len)
}

/// `fcntl(F_SETLKW)` / `fcntl(F_OFD_SETLKW)`, called by the `fcntl` hook:
/// tries the non-waiting command first.
pub(crate) fn fcntl_lock_wait(cmd: c_int, real: impl Fn(c_int) -> c_int) -> c_int {
    let nowait = if cmd == libc::F_OFD_SETLKW {
        libc::F_OFD_SETLK
    } else {
        libc::F_SETLK
    };
    try_then_offload(|| real(nowait), &[libc::EACCES, libc::EAGAIN], || real(cmd))
}

/// `msgrcv(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_msgrcv")]
pub unsafe extern "C" fn msgrcv(id: c_int, p: *mut c_void, size: size_t, typ: c_long, flags: c_int) -> ssize_t {
    crate::real::guard("msgrcv", || {
        if !crate::gate::cooperative() || flags & libc::IPC_NOWAIT != 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::msgrcv(id, p, size, typ, flags) };
        }
        try_then_offload(
            // SAFETY: the same receive, not waiting (ENOMSG when empty).
            || unsafe { next::msgrcv(id, p, size, typ, flags | libc::IPC_NOWAIT) },
            &[libc::ENOMSG],
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { next::msgrcv(id, p, size, typ, flags) },
        )
    })
}

/// `msgsnd(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_msgsnd")]
pub unsafe extern "C" fn msgsnd(id: c_int, p: *const c_void, size: size_t, flags: c_int) -> c_int {
    crate::real::guard("msgsnd", || {
        if !crate::gate::cooperative() || flags & libc::IPC_NOWAIT != 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::msgsnd(id, p, size, flags) };
        }
        try_then_offload(
            // SAFETY: the same send, not waiting (EAGAIN when full).
            || unsafe { next::msgsnd(id, p, size, flags | libc::IPC_NOWAIT) },
            &[libc::EAGAIN],
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { next::msgsnd(id, p, size, flags) },
        )
    })
}

const NO_WAIT: timespec = timespec { tv_sec: 0, tv_nsec: 0 };

/// `semop(2)`: `semtimedop` without a timeout, which the kernel defines as
/// the same call.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_semop")]
pub unsafe extern "C" fn semop(id: c_int, ops: *mut libc::sembuf, n: size_t) -> c_int {
    // SAFETY: same contract, no timeout.
    unsafe { semtimedop(id, ops, n, std::ptr::null()) }
}

/// `semtimedop(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_semtimedop")]
pub unsafe extern "C" fn semtimedop(id: c_int, ops: *mut libc::sembuf, n: size_t, t: *const timespec) -> c_int {
    crate::real::guard("semtimedop", || {
        // The caller's timeout is never read here (the kernel validates it):
        // a zero one simply makes the offloaded call return at once too.
        if !crate::gate::cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::semtimedop(id, ops, n, t) };
        }
        try_then_offload(
            // SAFETY: the same operations, not waiting (EAGAIN); the kernel
            // validates them.
            || unsafe { next::semtimedop(id, ops, n, &NO_WAIT) },
            &[libc::EAGAIN],
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { next::semtimedop(id, ops, n, t) },
        )
    })
}

/// An absolute `CLOCK_REALTIME` deadline long past: the timed queue calls
/// return `ETIMEDOUT` at once instead of waiting (`EAGAIN` if the user made
/// the queue non-blocking).
const PAST: timespec = timespec { tv_sec: 0, tv_nsec: 0 };

/// `mq_timedreceive(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_mq_timedreceive")]
pub unsafe extern "C" fn mq_timedreceive(
    q: mqd_t,
    p: *mut libc::c_char,
    len: size_t,
    prio: *mut c_uint,
    t: *const timespec,
) -> ssize_t {
    crate::real::guard("mq_timedreceive", || {
        if !crate::gate::cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::mq_timedreceive(q, p, len, prio, t) };
        }
        try_then_offload(
            // SAFETY: the same receive with a past deadline.
            || unsafe { next::mq_timedreceive(q, p, len, prio, &PAST) },
            &[libc::ETIMEDOUT],
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { next::mq_timedreceive(q, p, len, prio, t) },
        )
    })
}

/// `mq_receive(3)`: glibc's own is `mq_timedreceive` without a deadline.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_mq_receive")]
pub unsafe extern "C" fn mq_receive(q: mqd_t, p: *mut libc::c_char, len: size_t, prio: *mut c_uint) -> ssize_t {
    // SAFETY: same contract, no deadline.
    unsafe { mq_timedreceive(q, p, len, prio, std::ptr::null()) }
}

/// `mq_timedsend(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_mq_timedsend")]
pub unsafe extern "C" fn mq_timedsend(
    q: mqd_t,
    p: *const libc::c_char,
    len: size_t,
    prio: c_uint,
    t: *const timespec,
) -> c_int {
    crate::real::guard("mq_timedsend", || {
        if !crate::gate::cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::mq_timedsend(q, p, len, prio, t) };
        }
        try_then_offload(
            // SAFETY: the same send with a past deadline.
            || unsafe { next::mq_timedsend(q, p, len, prio, &PAST) },
            &[libc::ETIMEDOUT],
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { next::mq_timedsend(q, p, len, prio, t) },
        )
    })
}

/// `mq_send(3)`: glibc's own is `mq_timedsend` without a deadline.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_mq_send")]
pub unsafe extern "C" fn mq_send(q: mqd_t, p: *const libc::c_char, len: size_t, prio: c_uint) -> c_int {
    // SAFETY: same contract, no deadline.
    unsafe { mq_timedsend(q, p, len, prio, std::ptr::null()) }
}

/// `tcdrain(3)`: waits for a terminal's output to be sent; on the pool.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_tcdrain")]
pub unsafe extern "C" fn tcdrain(fd: c_int) -> c_int {
    crate::real::guard("tcdrain", || {
        if !crate::gate::cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::tcdrain(fd) };
        }
        crate::cancel_point();
        // SAFETY: forwarded unchanged, on a worker; plain values.
        crate::offload(move || unsafe { next::tcdrain(fd) })
    })
}

/// `msync(2)`: `MS_SYNC` waits for the disk, on the pool.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_msync")]
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    crate::real::guard("msync", || {
        if !crate::gate::cooperative() || flags & libc::MS_SYNC == 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::msync(addr, len, flags) };
        }
        let call = crate::AssertSend(move || {
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            unsafe { next::msync(addr, len, flags) }
        });
        crate::offload(move || call.call())
    })
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    flock,
    lockf,
    lockf64,
    msgrcv,
    msgsnd,
    semop,
    semtimedop,
    mq_timedreceive,
    mq_receive,
    mq_timedsend,
    mq_send,
    tcdrain,
    msync,
}
