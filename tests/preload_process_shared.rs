//! Process-shared mutexes, condition variables, rwlocks, barriers and
//! semaphores in `MAP_SHARED` memory, between a parent and its forked
//! child, both under the preload: glibc's answers, and a wait for the other
//! process lets the hub run.
mod util;

use util::{differential, differential_ticking, ticker};

#[test]
fn process_shared_objects_between_a_parent_and_its_child() {
    differential("process_shared", &[]);
}

/// Each process also runs a thread that naps: under the preload every
/// main thread then shares its hub with a fiber, so its waits on the other
/// process go through the waiter threads rather than straight to glibc.
#[test]
fn process_shared_objects_with_a_second_thread_on_each_side() {
    differential("process_shared", &["companion"]);
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
        assert!(t.ticks >= 3, "{mode}: the ticker ticked {} times", t.ticks);
    }
}
