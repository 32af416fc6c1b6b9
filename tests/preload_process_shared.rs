//! Process-shared mutexes, condition variables, rwlocks, barriers and
//! semaphores in `MAP_SHARED` memory, between a parent and its forked
//! child, both under the preload: glibc's answers, and a wait for the other
//! process lets the hub run.
mod util;

use util::{differential, differential_ticking, ticker};

/// Runs `tests/c/<name>.c` differentially twice: each process alone on its
/// hub (a main thread with no other thread may block in glibc, as
/// natively), then with a thread that naps beside it in each process
/// (`companion`: every wait of main must then let the hub run, so it goes
/// through a waiter thread).
fn alone_and_with_a_companion(name: &str) {
    differential(name, &[]);
    differential(name, &["companion"]);
}

#[test]
fn mutexes_between_a_parent_and_its_child() {
    alone_and_with_a_companion("pshared_mutex");
}

#[test]
fn robust_mutexes_whose_owner_dies() {
    alone_and_with_a_companion("pshared_robust");
}

#[test]
fn condition_variables_between_a_parent_and_its_child() {
    alone_and_with_a_companion("pshared_cond");
}

#[test]
fn rwlocks_between_a_parent_and_its_child() {
    alone_and_with_a_companion("pshared_rwlock");
}

#[test]
fn barriers_between_a_parent_and_its_child() {
    alone_and_with_a_companion("pshared_barrier");
}

#[test]
fn semaphores_between_processes_named_or_not() {
    alone_and_with_a_companion("pshared_sem");
}

#[test]
fn a_cancelled_waiter_leaves_a_shared_object_cleanly() {
    alone_and_with_a_companion("pshared_cancel");
}

/// A parent and its child take turns 5,000 times through a process-shared
/// mutex and condvar, then through two semaphores, while the parent's
/// ticker runs: the ticker is never held up (the hub ran while main
/// waited on the child), and the round trips are printed side by side.
#[test]
fn a_wait_for_another_process_lets_the_hub_run() {
    for mode in ["cond", "sem"] {
        let (plain, patched) = differential_ticking("pshared_pingpong", &[mode, "5000"]);
        let us = |stderr: &str| {
            stderr
                .lines()
                .find_map(|l| l.strip_prefix("round_trip_us=")?.trim().parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let t = ticker(&patched.stderr);
        eprintln!(
            "{mode}: round trip unpatched {:.1} µs, patched {:.1} µs; ticker ticked {} times, at most {} ms late",
            us(&plain.stderr),
            us(&patched.stderr),
            t.ticks,
            t.late_ms
        );
        // The hub kept running while fibers waited on the other process:
        // the ticker ticked about as often as the run lasted (a run that
        // took under 50 ms leaves too few ticks to tell), and on time.
        let ms = us(&patched.stderr) * 5000.0 / 1000.0;
        assert!(
            ms < 50.0 || t.ticks >= 3,
            "{mode}: {ms:.0} ms, the ticker ticked {} times",
            t.ticks
        );
        assert!(t.late_ms < 100, "{mode}: the ticker was {} ms late", t.late_ms);
    }
}

/// A process-shared recursive or error-checking mutex handed to a condvar
/// wait: until the waiter thread holds it, and again from when the waiter
/// thread has it back until the waiting thread runs, another thread's lock
/// must wait (it took it as a relock of its own before: its unlock failed
/// with EPERM and the waiter hung, or a timed-out wait returned while the
/// other thread held the mutex).
#[test]
fn a_mutex_in_a_condvar_wait_is_nobody_elses_relock() {
    for ty in ["1", "2"] {
        differential("pshared_cond_owner", &[ty]);
        differential("pshared_cond_owner", &[ty, "timeout"]);
    }
}
