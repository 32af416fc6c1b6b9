//! Calls that wait on something epoll cannot watch: file locks (`flock`,
//! `lockf`, `fcntl(F_SETLKW)` and its OFD form), System V IPC (`msgrcv`,
//! `msgsnd`, `semop`, `semtimedop`), POSIX message queues, `tcdrain`,
//! the POSIX AIO waits (`aio_suspend`, `lio_listio(LIO_WAIT)`) and
//! `msync(MS_SYNC)` (which the kernel does not interrupt). Unhooked, a
//! fiber waiting for a lock held by another fiber of the same hub
//! deadlocked the process.
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
//! A signal for the waiting fiber is met as the kernel meets one for a
//! thread in the call: the worker's call is ended with `EINTR` by
//! greenhook's own signal (see `signal::kick`), the handler runs, in the
//! fiber, and the call is made again where the kernel would restart it
//! (`SA_RESTART` on the file locks and message queues), else fails with
//! `EINTR` (`semop`, `semtimedop`, `msgrcv` and `msgsnd` after any
//! handler): an `alarm` times a lock wait out as natively, and a handler
//! that leaves by `siglongjmp` leaves no call behind to take the lock
//! later. A cancellation ends the call where it is a cancellation point,
//! and acts once it has returned. (On the pool without this, a handler
//! ran only after the call, so one that makes what the call waits for, a
//! lock file removed, left the two waiting for each other for ever.)

use libc::{c_char, c_int, c_long, c_uint, c_void, mqd_t, off_t, sembuf, size_t, ssize_t, timespec};

use crate::errno;
use crate::gate::cooperative;
use crate::hook::hook;

/// What the kernel does to a call of this kind that a handler interrupts.
#[derive(Clone, Copy)]
struct How {
    /// Restarted after a handler with `SA_RESTART` (else `EINTR`); not
    /// restartable: `EINTR` after any handler.
    restartable: bool,
    /// A cancellation point: a `pthread_cancel` ends the wait.
    cancellation_point: bool,
}

impl How {
    /// Where the call begins and ends: a cancellation point acts on a
    /// pending cancellation; another call only on an asynchronous one
    /// (a deferred one waits for the program's next point, as natively).
    fn cancel_point(self) {
        if self.cancellation_point {
            crate::cancel_point();
        } else {
            crate::thread::cancel::async_point();
        }
    }
}

/// `flock`.
const FLOCK: How = How {
    restartable: true,
    cancellation_point: false,
};
/// `fcntl(F_SETLKW)`, `lockf(F_LOCK)`.
const RECORD_LOCK: How = How {
    restartable: true,
    cancellation_point: true,
};
/// `msgrcv`, `msgsnd`.
const SYSV_MSG: How = How {
    restartable: false,
    cancellation_point: true,
};
/// `semop`, `semtimedop`.
const SYSV_SEM: How = How {
    restartable: false,
    cancellation_point: false,
};
/// The POSIX message queue calls.
const MQUEUE: How = How {
    restartable: true,
    cancellation_point: true,
};
/// `tcdrain` (`ioctl(TCSBRK)`).
const TCDRAIN: How = How {
    restartable: true,
    cancellation_point: true,
};
/// `aio_suspend`: `EINTR` after any handler.
const AIO_SUSPEND: How = How {
    restartable: false,
    cancellation_point: true,
};
/// `lio_listio(LIO_WAIT)`: `EINTR` after any handler, its requests still
/// under way.
const LIO_WAIT: How = How {
    restartable: false,
    cancellation_point: false,
};

/// The real `lio_listio` or `lio_listio64`.
type LioListio = unsafe fn(c_int, *const *mut libc::aiocb, c_int, *mut libc::sigevent) -> c_int;

/// `lio_listio` made by `real`: with `LIO_WAIT`, submitted and waited for
/// on the pool (glibc waits in the kernel for its AIO threads); the
/// notifications it asks for noted first (`notify`).
fn lio(real: LioListio, mode: c_int, list: *const *mut libc::aiocb, n: c_int, ev: *mut libc::sigevent) -> c_int {
    crate::notify::note_lio(list, n, ev);
    if mode != libc::LIO_WAIT || !cooperative() {
        // SAFETY: forwarded unchanged.
        return unsafe { real(mode, list, n, ev) };
    }
    let (list, ev) = (list as usize, ev as usize);
    // SAFETY: forwarded unchanged, on a worker; the caller waits, so its
    // arrays outlive the call.
    wait_on_pool(LIO_WAIT, || unsafe { real(mode, list as *const _, n, ev as *mut _) })
}

/// Runs `attempt` (the call in a form that cannot wait). If it fails with
/// one of `would_block`, waits in `blocking` (the caller's call) on the
/// offload pool ([`wait_on_pool`]); otherwise its result stands. `R` is the
/// C return type, -1 on error.
fn try_then_offload<R>(attempt: impl FnOnce() -> R, would_block: &[c_int], how: How, blocking: impl Fn() -> R) -> R
where
    R: Copy + PartialEq + From<i8> + Send,
{
    let saved = errno::get();
    let r = attempt();
    if r != R::from(-1) || !would_block.contains(&errno::get()) {
        return r;
    }
    errno::set(saved);
    wait_on_pool(how, blocking)
}

/// Makes `blocking`, a call that waits in the kernel, on the offload pool
/// while the fiber waits, and treats a signal for the fiber as the kernel
/// treats one for a thread in that call: the call ends (greenhook's kick
/// makes it fail with `EINTR`: see `signal::kick`), the handlers run, in
/// the fiber, and the call is made again where the kernel would restart it
/// (`how`, `SA_RESTART`), else fails with `EINTR`. A cancellation ends it
/// where it is a cancellation point, and acts once it has returned.
///
/// The handlers run only once the worker's call is over, never beside it:
/// one that leaves by `siglongjmp` (the classic lock timeout) or ends the
/// thread leaves nothing behind, no call that still waits for the lock
/// and would take it, and no worker still using the fiber's stack. Where
/// the kick cannot be installed they run beside the call, which waits on.
fn wait_on_pool<R>(how: How, blocking: impl Fn() -> R) -> R
where
    R: Copy + PartialEq + From<i8> + Send,
{
    how.cancel_point();
    let kickable = crate::signal::kick::ready();
    loop {
        let mark = crate::signal::HandlerMark::now();
        let job = crate::signal::kick::Job::default();
        let call = crate::AssertSend(|| job.run(&blocking));
        let (r, e) = hub::offload_interruptible(
            hub::Lane::Wait,
            move || call.call(),
            |interrupted| {
                if interrupted {
                    if kickable {
                        job.end();
                    } else {
                        crate::signal::run_pending();
                    }
                }
                job.kick_if_wanted();
            },
        );
        // The call is over: what is due runs now, as on a thread's way
        // out of an interrupted system call.
        crate::signal::run_pending();
        let ran = mark.since();
        let ends = ran.interrupts
            || (ran.handler && !how.restartable)
            || (how.cancellation_point && crate::thread::cancel::due_here());
        if r == R::from(-1) && e == libc::EINTR && !ends {
            // Kicked for a handler with SA_RESTART, a cancellation this
            // call is no point of, or nothing left to run: the kernel's
            // restart (an asynchronous cancellation acts first).
            crate::thread::cancel::async_point();
            continue;
        }
        errno::set(e);
        how.cancel_point();
        return r;
    }
}

/// `lockf` and `lockf64` with `F_LOCK`: `real` (the entry point's own next
/// definition) with `F_TLOCK` first.
fn lockf_wait(real: unsafe fn(c_int, c_int, off_t) -> c_int, fd: c_int, len: off_t) -> c_int {
    try_then_offload(
        // SAFETY: the same lock request, not waiting.
        || unsafe { real(fd, libc::F_TLOCK, len) },
        &[libc::EACCES, libc::EAGAIN],
        RECORD_LOCK,
        // SAFETY: forwarded unchanged, on a worker.
        || unsafe { real(fd, libc::F_LOCK, len) },
    )
}

/// `fcntl(F_SETLKW)` / `fcntl(F_OFD_SETLKW)`, called by the `fcntl` hook:
/// tries the non-waiting command first.
pub(crate) fn fcntl_lock_wait(cmd: c_int, real: impl Fn(c_int) -> c_int) -> c_int {
    let nowait = if cmd == libc::F_OFD_SETLKW {
        libc::F_OFD_SETLK
    } else {
        libc::F_SETLK
    };
    try_then_offload(
        || real(nowait),
        &[libc::EACCES, libc::EAGAIN],
        RECORD_LOCK,
        || real(cmd),
    )
}

/// `semtimedop` and `semop` (`semtimedop` without a timeout, which the
/// kernel defines as the same call). The caller's timeout is never read
/// here (the kernel validates it): a zero one simply makes the offloaded
/// call return at once too.
fn semtimedop_wait(id: c_int, ops: *mut sembuf, n: size_t, t: *const timespec) -> c_int {
    const NO_WAIT: timespec = timespec { tv_sec: 0, tv_nsec: 0 };
    try_then_offload(
        // SAFETY: the same operations, not waiting (EAGAIN); the kernel
        // validates them.
        || unsafe { semtimedop::real(id, ops, n, &NO_WAIT) },
        &[libc::EAGAIN],
        SYSV_SEM,
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        || unsafe { semtimedop::real(id, ops, n, t) },
    )
}

/// An absolute `CLOCK_REALTIME` deadline long past: the timed queue calls
/// return `ETIMEDOUT` at once instead of waiting (`EAGAIN` if the user made
/// the queue non-blocking).
const PAST: timespec = timespec { tv_sec: 0, tv_nsec: 0 };

/// `mq_timedreceive` and `mq_receive` (glibc's own is `mq_timedreceive`
/// without a deadline).
fn mq_receive_wait(q: mqd_t, p: *mut c_char, len: size_t, prio: *mut c_uint, t: *const timespec) -> ssize_t {
    try_then_offload(
        // SAFETY: the same receive with a past deadline.
        || unsafe { mq_timedreceive::real(q, p, len, prio, &PAST) },
        &[libc::ETIMEDOUT],
        MQUEUE,
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        || unsafe { mq_timedreceive::real(q, p, len, prio, t) },
    )
}

/// `mq_timedsend` and `mq_send` (glibc's own is `mq_timedsend` without a
/// deadline).
fn mq_send_wait(q: mqd_t, p: *const c_char, len: size_t, prio: c_uint, t: *const timespec) -> c_int {
    try_then_offload(
        // SAFETY: the same send with a past deadline.
        || unsafe { mq_timedsend::real(q, p, len, prio, &PAST) },
        &[libc::ETIMEDOUT],
        MQUEUE,
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        || unsafe { mq_timedsend::real(q, p, len, prio, t) },
    )
}

hook! {
    /// `flock(2)`.
    #[gate(cooperative() && op & libc::LOCK_NB == 0)]
    [file] fn flock(fd: c_int, op: c_int) -> c_int {
        try_then_offload(
            // SAFETY: the same lock request, not waiting.
            || unsafe { flock::real(fd, op | libc::LOCK_NB) },
            &[libc::EWOULDBLOCK],
            FLOCK,
            // SAFETY: forwarded unchanged, on a worker.
            || unsafe { flock::real(fd, op) },
        )
    }

    /// `lockf(3)`: with `F_LOCK` tries `F_TLOCK` first; the other commands
    /// never wait.
    #[cancel_point(cmd == libc::F_LOCK)]
    #[gate(cooperative() && cmd == libc::F_LOCK)]
    [file] fn lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int {
        lockf_wait(lockf::real, fd, len)
    }

    /// `lockf64(3)` (the same function on 64-bit targets).
    #[cancel_point(cmd == libc::F_LOCK)]
    #[gate(cooperative() && cmd == libc::F_LOCK)]
    [file] fn lockf64(fd: c_int, cmd: c_int, len: off_t) -> c_int {
        lockf_wait(lockf64::real, fd, len)
    }

    /// `msgrcv(2)`.
    #[cancel_point]
    #[gate(cooperative() && flags & libc::IPC_NOWAIT == 0)]
    [file] fn msgrcv(id: c_int, p: *mut c_void, size: size_t, typ: c_long, flags: c_int) -> ssize_t {
        try_then_offload(
            // SAFETY: the same receive, not waiting (ENOMSG when empty).
            || unsafe { msgrcv::real(id, p, size, typ, flags | libc::IPC_NOWAIT) },
            &[libc::ENOMSG],
            SYSV_MSG,
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { msgrcv::real(id, p, size, typ, flags) },
        )
    }

    /// `msgsnd(2)`.
    #[cancel_point]
    #[gate(cooperative() && flags & libc::IPC_NOWAIT == 0)]
    [file] fn msgsnd(id: c_int, p: *const c_void, size: size_t, flags: c_int) -> c_int {
        try_then_offload(
            // SAFETY: the same send, not waiting (EAGAIN when full).
            || unsafe { msgsnd::real(id, p, size, flags | libc::IPC_NOWAIT) },
            &[libc::EAGAIN],
            SYSV_MSG,
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { msgsnd::real(id, p, size, flags) },
        )
    }

    /// `semop(2)`.
    #[gate(cooperative())]
    [file] fn semop(id: c_int, ops: *mut sembuf, n: size_t) -> c_int {
        semtimedop_wait(id, ops, n, std::ptr::null())
    }

    /// `semtimedop(2)`.
    #[gate(cooperative())]
    [file] fn semtimedop(id: c_int, ops: *mut sembuf, n: size_t, t: *const timespec) -> c_int {
        semtimedop_wait(id, ops, n, t)
    }

    /// `mq_timedreceive(3)`.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn mq_timedreceive(q: mqd_t, p: *mut c_char, len: size_t, prio: *mut c_uint, t: *const timespec) -> ssize_t {
        mq_receive_wait(q, p, len, prio, t)
    }

    /// `mq_receive(3)`.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn mq_receive(q: mqd_t, p: *mut c_char, len: size_t, prio: *mut c_uint) -> ssize_t {
        mq_receive_wait(q, p, len, prio, std::ptr::null())
    }

    /// `mq_timedsend(3)`.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn mq_timedsend(q: mqd_t, p: *const c_char, len: size_t, prio: c_uint, t: *const timespec) -> c_int {
        mq_send_wait(q, p, len, prio, t)
    }

    /// `mq_send(3)`.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn mq_send(q: mqd_t, p: *const c_char, len: size_t, prio: c_uint) -> c_int {
        mq_send_wait(q, p, len, prio, std::ptr::null())
    }

    /// `aio_suspend(3)`: glibc's waits in the kernel for its AIO threads
    /// (the hub with it); tried with no wait, then on the pool. A
    /// cancellation point only where it waits, as glibc's.
    #[gate(cooperative())]
    [file] fn aio_suspend(list: *const *const libc::aiocb, n: c_int, t: *const timespec) -> c_int {
        let zero = timespec { tv_sec: 0, tv_nsec: 0 };
        // A zero timeout of the caller's: the attempt is the answer.
        let nowait = crate::deadline::read(t).is_ok_and(|d| d.tv_sec == 0 && d.tv_nsec == 0);
        try_then_offload(
            // SAFETY: the same call, not waiting (EAGAIN when none is done).
            || unsafe { aio_suspend::real(list, n, &zero) },
            if nowait { &[] } else { &[libc::EAGAIN] },
            AIO_SUSPEND,
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            || unsafe { aio_suspend::real(list, n, t) },
        )
    }

    /// `lio_listio(3)`: see [`lio`].
    [file] fn lio_listio(mode: c_int, list: *const *mut libc::aiocb, n: c_int, ev: *mut libc::sigevent) -> c_int {
        lio(lio_listio::real, mode, list, n, ev)
    }

    /// `lio_listio64`: the same function on 64-bit glibc.
    [file] fn lio_listio64(mode: c_int, list: *const *mut libc::aiocb, n: c_int, ev: *mut libc::sigevent) -> c_int {
        lio(lio_listio64::real, mode, list, n, ev)
    }

    /// `tcdrain(3)`: waits for a terminal's output to be sent; on the pool,
    /// ended by a signal or a cancellation as the kernel ends it.
    #[cancel_point]
    #[gate(cooperative())]
    [file] fn tcdrain(fd: c_int) -> c_int {
        // SAFETY: forwarded unchanged, on a worker; plain values.
        wait_on_pool(TCDRAIN, || unsafe { tcdrain::real(fd) })
    }

    /// `msync(2)`: `MS_SYNC` waits for the disk, on the pool.
    #[cancel_point]
    #[gate(cooperative() && flags & libc::MS_SYNC != 0)]
    [file] fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
        let call = crate::AssertSend(move || {
            // SAFETY: forwarded unchanged, on a worker; the caller waits.
            unsafe { msync::real(addr, len, flags) }
        });
        crate::offload(hub::Lane::Work, move || call.call())
    }
}
