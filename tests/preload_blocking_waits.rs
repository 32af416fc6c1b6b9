//! Waits epoll cannot watch (file locks, System V IPC, POSIX message
//! queues, `msync`) and the splice family, run differentially: `tests/c/blocking_waits.c` and
//! `tests/c/pool_waits.c` block
//! a thread on something a peer releases later, while a ticker ticks. The
//! results must match the unpatched run and the ticker must not have been
//! held up. Unhooked, every mode whose peer is a thread deadlocked under the
//! shim, and the record locks (peer: a child process) froze the ticker.
mod util;

use util::differential_ticking;

fn check(mode: &str) {
    differential_ticking("blocking_waits", &[mode]);
}

#[test]
fn file_locks_wait_on_the_offload_pool() {
    for mode in ["flock", "lockf", "setlkw", "ofd_setlkw"] {
        check(mode);
    }
}

#[test]
fn system_v_ipc_waits_on_the_offload_pool() {
    for mode in ["msgrcv", "msgsnd", "semop", "semtimedop"] {
        check(mode);
    }
}

/// More threads wait at once in calls epoll cannot watch than the offload
/// pool keeps workers (4), and main makes the call their waits depend on
/// meanwhile: a name lookup, which runs on the pool too, and in `mixed` a
/// further lock wait of its own. Natively every thread waits on its own.
/// The pool used to queue a call until a worker was free, and each mode
/// deadlocked (found with curl, whose lookups of an unreachable name server
/// held back the lookup of a name in `/etc/hosts`).
#[test]
fn pool_waits_never_queue_behind_one_another() {
    for mode in ["flock", "msgrcv", "mixed"] {
        util::differential_ticking("pool_waits", &[mode]);
    }
    util::differential_env("pool_waits", &["mixed", "12"], &[("GREENHOOK_POOL_SIZE", "1")]);
}

/// A handler runs while its thread waits for a file lock on the offload
/// pool, and makes what the lock's holder (another process) waits for:
/// the holder lets go and the wait takes the lock, as natively. The
/// handler ran only after the wait before, so the two waited for each
/// other until the holder gave up after 5 s.
#[test]
fn a_handler_runs_while_a_file_lock_waits() {
    for mode in ["flock", "fcntl"] {
        util::differential_ticking("lock_handler", &[mode]);
    }
}

/// Interrupted waits on the offload pool end as glibc's do: a handler
/// without `SA_RESTART` ends a file lock, System V IPC or message queue
/// wait with `EINTR` (the classic `alarm` timeout; they waited on, and
/// the first, a `flock`, never ended, before), `SA_RESTART` keeps a lock
/// waiting, `semop`/`msgrcv` end after any handler, a cancellation ends an
/// `fcntl(F_SETLKW)`, and the program's own use of greenhook's kick signal
/// (`SIGRTMAX-1`) is untouched.
#[test]
fn interrupted_pool_waits_end_as_the_kernel_ends_them() {
    util::differential_ticking("lock_interrupt", &[]);
}

/// Pipes and sockets the shim made non-blocking underneath: `splice`,
/// `tee` and `vmsplice` must wait (on the hub), not fail with `EAGAIN`.
#[test]
fn splice_tee_and_vmsplice_wait_like_the_blocking_calls() {
    for mode in ["splice", "tee", "vmsplice"] {
        check(mode);
    }
}

#[test]
fn message_queues_and_msync_wait_on_the_offload_pool() {
    for mode in ["mq_receive", "mq_send", "msync", "bad"] {
        check(mode);
    }
}

/// Two threads meet at a FIFO, each end opened with a blocking `open`,
/// `openat`, `creat` or `fopen`, the reader first or the writer first: the
/// open waits on the hub, not in the kernel (it opens without waiting and
/// the first read waits, or the writer tries again until a reader has
/// it), and a ticker runs meanwhile. Unhooked, the first open held the hub
/// and the other end never came: the program hung.
#[test]
fn opening_a_fifo_waits_on_the_hub() {
    differential_ticking("fifo_open", &[]);
}

/// Notifications glibc runs on threads of its own (`SIGEV_THREAD`: a timer,
/// `mq_notify`) wake a thread waiting on a condition variable (the process
/// exited with the deadlock report before the timer first fired), and
/// POSIX AIO on a pipe reads what another thread writes later, its waits
/// (`aio_suspend`, `lio_listio(LIO_WAIT)`) letting the other threads run
/// (the read met `EAGAIN`, the wait held the hub).
#[test]
fn sigev_thread_notifications_and_aio_behave_as_glibcs() {
    util::differential("notify_threads", &[]);
}
