//! Differential tests of child processes and signals under the preload:
//! `tests/c/proc_children.c` and `tests/c/sig_fibers.c` run plainly and
//! under `libgreenhook.so`; stdout and exit status must be identical, and
//! the patched run must not have stalled the other threads.
mod util;

use util::{differential, differential_env, ticker, time_ms};

#[test]
fn system_in_three_threads_takes_one_second_not_three() {
    let (_, patched) = differential("proc_children", &["system"]);
    let ms = time_ms(&patched.stderr).unwrap();
    assert!((1000..2000).contains(&ms), "{ms} ms");
}

/// `system` as glibc makes it, from hooked parts: a managed pipe reaches
/// the shell blocking (13,457 of 20,000 lines arrived before), eight
/// threads' shells run at once (four did: the offload pool's size), a
/// cancelled caller's shell is killed (the call ran to its end), and the
/// signal handling matches glibc's: what the shell gets, SIGCHLD blocked
/// in the caller alone, SIGINT/SIGQUIT ignored meanwhile and put back.
#[test]
fn system_spawns_and_waits_as_glibc_does() {
    util::differential_ticking("system_calls", &[]);
}

/// `pclose` waits for its child on the hub: a handler runs during the wait
/// (on the offload pool it ran only after it, so a child waiting for what
/// the handler makes never ended), and the flush, statuses, a child reaped
/// elsewhere first and eight threads at once match glibc's.
#[test]
fn pclose_waits_on_the_hub_as_glibc_waits() {
    util::differential_ticking("popen_close", &[]);
}

#[test]
fn popen_reads_with_read_do_not_stall_a_ticker() {
    let (_, patched) = differential("proc_children", &["popen_fd"]);
    let util::Ticker { late_ms: late, ticks } = ticker(&patched.stderr);
    assert!(
        ticks >= 20,
        "ticker ticked {ticks} times in ~600 ms\n{}",
        patched.stderr
    );
    assert!(late < 100, "worst tick {late} ms late");
}

/// Reads through the popen `FILE` with `fgets`: glibc reaches its internal
/// `read`, which only the stdio input hooks make cooperative.
#[test]
fn popen_reads_with_stdio_do_not_stall_a_ticker() {
    let (_, patched) = differential("proc_children", &["popen"]);
    let ticks = ticker(&patched.stderr).ticks;
    assert!(
        ticks >= 20,
        "ticker ticked {ticks} times in ~600 ms\n{}",
        patched.stderr
    );
}

#[test]
fn waitpid_wait4_waitid_let_others_run() {
    differential("proc_children", &["waitpid"]);
}

#[test]
fn waiting_for_any_child_lets_others_run() {
    differential("proc_children", &["waitany"]);
}

#[test]
fn fork_in_a_thread_then_exec() {
    differential("proc_children", &["fork_exec"]);
}

#[test]
fn fork_in_a_thread_then_more_threads_in_the_child() {
    differential("proc_children", &["fork_threads"]);
}

#[test]
fn fork_child_whose_only_thread_returns_exits_zero() {
    differential("proc_children", &["fork_returns"]);
}

#[test]
fn fork_from_main_with_threads_alive_then_threads_system_and_pause_in_the_child() {
    differential("proc_children", &["fork_root"]);
}

/// `daemon()` and `_Fork()` from a thread while another runs: in the
/// child only the caller goes on, as natively (glibc makes both with its
/// internal fork, which no hook saw, and the other thread kept running in
/// the child); the daemon's fds 0–2, directory and session as glibc's.
#[test]
fn daemon_and_underscore_fork_leave_only_the_caller_in_the_child() {
    for how in ["daemon", "_Fork"] {
        let log = std::env::temp_dir().join(format!("greenhook-fork-variants-{how}-{}.log", std::process::id()));
        differential("fork_variants", &[how, log.to_str().unwrap()]);
    }
}

/// An `atfork` child handler that closes an fd a thread of the parent is
/// reading does not touch the parent: the child has a poller of its own
/// before any other handler runs. The close took the fd out of the epoll
/// set the child still shared with the parent, and the reader waited for
/// ever (gRPC's handler closes its poller's epoll fd: in Python, every
/// call after a `subprocess.Popen` timed out).
#[test]
fn atfork_child_handlers_leave_the_parents_waits_alone() {
    differential("fork_atfork_close", &[]);
}

/// An exec without a fork hands the new program its pipes blocking, as
/// glibc's does, through every exec function (the shell it runs, without
/// the preload, met `EAGAIN` on a blocking read of an inherited pipe); a
/// failed exec leaves the pipe as it was, waiting on the hub.
#[test]
fn an_exec_without_fork_hands_on_blocking_pipes() {
    for how in [
        "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "failed",
    ] {
        differential("exec_pipes", &[how]);
    }
}

/// A program that closes every fd from 3 up while it has threads
/// (`closefrom`, `close_range`, the raw system call, a loop of `close`, and
/// in a forked child) keeps working: the hub's own fds, which live high,
/// are passed by (they were closed, and the next wait aborted), and a new
/// file gets the lowest number, as natively. Not with the portable backend
/// (`--cfg greenhook_force_polling`): the `polling` crate's fds are its
/// own, neither moved nor named to greenhook, and a program that closes
/// every fd closes them.
#[cfg(not(greenhook_force_polling))]
#[test]
fn closing_every_fd_leaves_the_hubs_own() {
    for how in ["closefrom", "close_range", "raw", "loop", "child"] {
        differential("close_all", &[how]);
    }
}

#[test]
fn posix_spawn_and_vfork_keep_working() {
    differential("proc_children", &["spawn"]);
    differential("proc_children", &["vfork"]);
}

#[test]
fn sa_restart_handler_gives_no_eintr() {
    differential("sig_fibers", &["restart"]);
}

#[test]
fn handler_without_sa_restart_interrupts_the_accepting_thread_only() {
    differential("sig_fibers", &["norestart"]);
}

#[test]
fn pause_suspends_only_its_thread() {
    let (_, patched) = differential("sig_fibers", &["pause"]);
    assert!(ticker(&patched.stderr).ticks >= 5, "{}", patched.stderr);
}

#[test]
fn sigsuspend_suspends_only_its_thread() {
    differential("sig_fibers", &["sigsuspend"]);
}

#[test]
fn sigwait_and_sigtimedwait_suspend_only_their_thread() {
    differential("sig_fibers", &["sigwait"]);
}

/// A handler left by `siglongjmp` (the classic `alarm` timeout): the mask
/// `sigsetjmp` saved, the caller's own, is the thread's again after the
/// jump, through `siglongjmp`, `longjmp` and `__longjmp_chk`, in main and
/// in a thread, from a wait or from a computation; `_setjmp` saves none.
/// (glibc restores it with an internal `sigprocmask`: the handler's mask
/// stayed, SIGALRM blocked, and the second alarm never reached its
/// handler.) A `SIGSEGV` handler jumping back out of a bad write three
/// times (the second fault killed the process once greenhook kept glibc
/// off the real mask, until the jump set it again itself).
#[test]
fn a_handler_left_by_siglongjmp_gives_back_the_saved_mask() {
    differential("jump_masks", &[]);
}

/// The System V and BSD signal calls (`sighold`, `sigrelse`, `sigset`,
/// `sigignore`, `siginterrupt`, both `sigpause`s, `sigblock`, `sigsetmask`,
/// `siggetmask`, `gsignal`, `ssignal`) give glibc's answers, with another
/// thread ticking meanwhile. glibc makes them with its internal calls: a
/// held signal's handler ran at once, `siginterrupt` left a `read` waiting
/// for ever, and `sigpause` stopped every thread of the hub.
#[test]
fn system_v_and_bsd_signal_calls_act_on_the_calling_thread() {
    differential("signal_compat", &[]);
}

/// The same with pthreads left as OS threads: a managed pipe's `read`,
/// which waits in the kernel there, ends with `EINTR` after the program's
/// own handler without `SA_RESTART` (it waited for ever, before: only the
/// handlers behind greenhook's trampoline were counted).
#[test]
fn system_v_and_bsd_signal_calls_with_threads_left_native() {
    differential_env("signal_compat", &[], &[("GREENHOOK_THREADS", "native")]);
}

#[test]
fn signal_masks_are_per_thread() {
    differential("sig_fibers", &["masks"]);
}

/// `pselect`, `ppoll` and `epoll_pwait` with an empty mask in a thread
/// that blocks the signal: the handler runs in it, under the call's mask,
/// and the call fails with `EINTR`. (Regression: held for a thread whose
/// own mask blocked it, the handler never ran.)
#[test]
fn a_waits_temporary_mask_lets_its_signal_in() {
    differential("sig_fibers", &["waitmask"]);
}

/// `pthread_kill` to a fiber reaches that fiber (signal::kill).
#[test]
fn pthread_kill_reaches_the_target_thread() {
    differential("sig_fibers", &["pthread_kill"]);
}

/// Regression: a pipe created under the shim is non-blocking underneath; a
/// child exec'd with it as stdout (fork + dup2 + execlp, or posix_spawn with
/// a dup2 action) inherited that, met EAGAIN on a full pipe and lost output
/// ("echo: I/O error", 17,814 of 20,000 lines arrived). The same for a pipe
/// the child inherits at its own number, fd 3 or above (15,900 to 19,800 of
/// 20,000 lines arrived; the child gets a blocking description of its own
/// now). And a forked child that does not exec keeps writing to it. The
/// same for a close-on-exec pipe the child makes inheritable between fork
/// and exec (Python's `pass_fds`: multiprocessing's resource tracker met
/// EAGAIN, took its parent for dead and unlinked its semaphores), and for a
/// pipe sent to the child over a Unix socket (`SCM_RIGHTS`: multiprocessing's
/// forkserver read `None` from its request pipe). And for a socket either
/// way (a duplex `multiprocessing.Pipe()` under spawn: `BlockingIOError`),
/// which greenhook in the exec'd child recognises by its mark.
#[test]
fn a_child_execd_on_a_pipe_loses_no_output() {
    for how in [
        "fork",
        "spawn",
        "fork-fd",
        "spawn-fd",
        "fork-noexec",
        "fork-cloexec",
        "scm",
        "fork-cloexec-socket",
        "scm-socket",
        "popen-fd",
    ] {
        let (_, patched) = differential("proc_exec_pipe", &["20000", how]);
        assert!(patched.stdout.starts_with("lines=20000 "), "{how}: {}", patched.stdout);
    }
}

/// A listening socket a fiber made, inherited by a program it execs (as
/// `pass_fds` passes it): the program's blocking `accept` in its main thread,
/// with no connection yet, waited; it met `EAGAIN` when greenhook in it did
/// not recognise the socket as one made non-blocking by greenhook.
#[test]
fn an_execd_program_accepts_on_an_inherited_socket_as_blocking() {
    let (_, patched) = differential("socket_handoff", &[]);
    assert!(patched.stdout.contains("accepted, read 5 bytes"), "{}", patched.stdout);
}

/// A connected socket (a socketpair, and an accepted TCP connection)
/// reaches a program exec'd with an empty environment, so without the
/// preload, at fd 3 and up: its blocking writes and reads behave as
/// blocking ones, because greenhook never made the socket's shared
/// description non-blocking (its tries ask for no wait per call). With the
/// description non-blocking underneath (`GREENHOOK_SOCKETS=nonblocking`,
/// the way before) the program's first write to a full socket met
/// `EAGAIN`.
#[test]
fn a_socket_reaches_a_program_without_the_preload_blocking() {
    let (_, patched) = differential("socket_to_plain_child", &["unix"]);
    assert!(patched.stdout.contains("child exit 0"), "{}", patched.stdout);
    let (_, patched) = differential("socket_to_plain_child", &["tcp"]);
    assert!(patched.stdout.contains("child exit 0"), "{}", patched.stdout);
}

/// Issue 12, thread-directed signals: `pthread_kill` runs the handler in
/// its target (its `pthread_self()`, its own per-thread value), here a
/// thread sleeping in a loop. Before, the handler ran on the sender's
/// stack.
#[test]
fn pthread_kill_runs_the_handler_in_its_target() {
    differential("pthread_kill_target", &["sleeping"]);
}

/// ... in a target blocked in `pthread_mutex_lock`, a read or write lock,
/// `pthread_barrier_wait`, `pthread_cond_wait` or `pthread_join`: the
/// handler runs while it waits, and the wait goes on (no `EINTR`).
#[test]
fn a_handler_runs_in_a_thread_blocked_on_a_lock_and_the_wait_goes_on() {
    differential("pthread_kill_target", &["mutex", "rwlock", "barrier", "cond", "join"]);
}

/// ... in a target blocked in `read`: the read goes on with `SA_RESTART`
/// and fails with `EINTR` without it.
#[test]
fn a_handler_interrupts_a_read_as_sa_restart_says() {
    differential("pthread_kill_target", &["read"]);
}

/// A handler may itself sleep and block on a mutex: it does so in its
/// thread, and the other threads run meanwhile.
#[test]
fn a_handler_may_sleep_and_block() {
    differential("pthread_kill_target", &["handler_blocks"]);
}

/// A thread that blocks the signal keeps it pending (its own
/// `sigpending`, not main's) and runs the handler when it unblocks it,
/// before `pthread_sigmask` returns; `pthread_sigqueue` values arrive in
/// order with `SI_QUEUE`; `raise` runs the handler before it returns.
#[test]
fn a_masked_thread_keeps_its_signal_pending_and_queued_values_arrive() {
    differential("pthread_kill_target", &["masked", "sigqueue", "raise"]);
}

/// Issue 11: a handler never runs in a thread that blocks its signal (here
/// in the middle of that thread's `malloc`). 300 threads allocate and lock
/// while a 200 µs timer fires an allocating SIGALRM handler that only the
/// one thread in `pause()` accepts. Before, the handler ran on whichever
/// fiber was current.
#[test]
fn a_handler_never_runs_in_a_thread_that_masks_its_signal() {
    differential("signal_masked_alloc", &[]);
}

/// A thread that overflows its stack with a `SIGSEGV` handler on an
/// alternate stack of its own catches the fault and `siglongjmp`s out, as
/// natively (greenhook's overflow report and abort came first before).
#[test]
fn a_program_that_catches_its_stack_overflow_goes_on() {
    differential("overflow_caught", &[]);
}

/// A SIGSEGV that is sent, not caused by a fault (`raise`, `kill`,
/// `pthread_kill`, `sigqueue`, another process), ends the process by its
/// default action once a thread has run, as natively; ignored or handled,
/// it is. Before, the stack overflow reporter the first thread installs
/// took it for a fault, set the default back and returned: the signal was
/// lost and the program went on. And `sigaction` now reports the
/// program's SIGSEGV action, not that reporter.
#[test]
fn a_sent_segv_is_not_lost() {
    differential("segv_sent", &[]);
}

/// A thread's alternate signal stack goes with the thread: one freed as
/// its thread ends (without a disable: natively safe) was the OS thread's
/// alternate stack for good under the preload, and a later `SA_ONSTACK`
/// handler's frame overwrote 3 KiB of a live heap block.
#[test]
fn an_ended_threads_alternate_stack_is_not_used() {
    differential("altstack_freed", &[]);
}

/// A program started from a thread (`posix_spawn`, `posix_spawnp`, an
/// `exec`) starts with that thread's signal mask: under the preload a
/// spawned child got the OS thread's, every thread's intersection, and a
/// thread that had blocked `SIGTERM` spawned a child that had not.
#[test]
fn a_spawned_program_starts_with_its_threads_mask() {
    differential("spawn_mask", &[]);
}

/// Children of glibc's `clone()` wrapper made from a thread. Without
/// `CLONE_VM` the child's hooks worked on the parent's hub (the two share
/// the epoll set): its `close` of a pipe another thread waited on took that
/// wait's registration away, and the process hung. With `CLONE_VM |
/// CLONE_VFORK` (a spawn helper in our memory) its `close`s and `dup2`s
/// rewrote the parent's fd table, and the parent's read of the pipe the
/// child wrote returned `EAGAIN`. Now the first is made a child as `fork`'s
/// is, and the second touches nothing of ours and execs with blocking
/// pipes and its thread's mask, as `posix_spawn` does.
#[test]
fn clone_children_leave_the_parent_alone() {
    differential("clone_children", &[]);
}

/// A signal sent to the process goes to main first when main accepts it,
/// as the kernel gives it to the thread group's leader: a thread's
/// `kill(getpid(), …)` ends main's `poll` or `sem_wait` with `EINTR` (the
/// handler ran in the sender, and main waited on: CPython's Ctrl-C never
/// reached a main thread waiting on a lock). A semaphore wait fails with
/// `EINTR` as glibc's does (after a handler without `SA_RESTART`;
/// `sem_timedwait` after any handler), in main, in a thread and on a
/// process-shared semaphore (it ran the handler and went on); and a
/// process signal that only the sender accepts is handled before its
/// `kill` returns.
#[test]
fn process_signals_go_to_main_first_and_end_semaphore_waits() {
    differential("signal_recipient", &[]);
}
