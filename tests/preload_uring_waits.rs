//! io_uring waits inside liburing, run differentially: `tests/c/uring_waits.c`
//! waits for completions that a peer thread produces later, beside a
//! ticker. The results must match the unpatched run, and the ticker must
//! not have been held up. Before the liburing hooks every mode whose
//! completion came from a peer thread hung under the preload (liburing's
//! inline system calls held the hub, so the peer fiber never ran), and the
//! timed waits froze the ticker.
//!
//! Needs liburing's headers (`liburing-dev`), as .ci/run installs them.
mod util;

use util::{compile, differential, differential_ticking, line_diff, run};

#[test]
fn liburing_waits_park_the_fiber_not_the_hub() {
    for mode in [
        "wait_cqe",
        "registered",
        "threads",
        "shared",
        "submit_and_wait",
        "timeout_op",
    ] {
        differential_ticking("uring_waits", &[mode]);
    }
}

/// Return values as liburing gives them: negative errnos, the count
/// submitted even when the wait then fails, `-ETIME` only with an empty
/// completion queue, the kernel's reading of odd timespecs and bad masks.
#[test]
fn timeouts_masks_and_short_submissions_match_the_kernel() {
    for mode in ["wait_cqes", "submit_timeout", "partial", "misc"] {
        differential_ticking("uring_waits", &[mode]);
    }
}

/// An `SQPOLL` ring's waits, including `io_uring_sqring_wait` on a full
/// queue whose kernel thread a peer fiber wakes.
#[test]
fn sqpoll_rings_wait_for_completions_and_for_room() {
    differential_ticking("uring_waits", &["sqpoll"]);
}

#[test]
fn a_signal_without_sa_restart_interrupts_a_wait() {
    differential("uring_waits", &["eintr"]);
}

/// liburing closes the ring fd with a raw system call: without the
/// `io_uring_queue_exit` hook the hub kept a registration for the number,
/// and a read on the pipe given that number next never woke.
#[test]
fn an_exited_ring_leaves_no_registration_behind() {
    differential_ticking("uring_waits", &["exit_reuse"]);
}

/// `DEFER_TASKRUN` and `IOPOLL` rings go to liburing unchanged (their
/// waits block the hub, so the ticker is not checked).
#[test]
fn rings_the_hub_cannot_wait_for_pass_through() {
    differential("uring_waits", &["passthrough"]);
}

/// With `GREENHOOK_THREADS=native` threads are real and every hook passes
/// through: the same results again.
#[test]
fn native_threads_pass_through() {
    let bin = compile("uring_waits");
    for mode in ["wait_cqe", "threads", "timeout_op", "sqpoll", "eintr"] {
        let plain = run(&bin, &[mode], false, &[]);
        let native = run(&bin, &[mode], true, &[("GREENHOOK_THREADS", "native")]);
        assert!(plain.status.success(), "{mode}, unpatched:\n{}", plain.describe());
        assert!(native.status.success(), "{mode}, native:\n{}", native.describe());
        assert!(
            plain.stdout == native.stdout,
            "{mode}: stdout differs with GREENHOOK_THREADS=native:\n{}",
            line_diff(&plain.stdout, &native.stdout)
        );
    }
}
