//! Source compatibility with `std::thread`: one std-style program
//! (tests/std_compat/program.rs) compiled against `std::thread` and against
//! `greenhook as thread` gives the same log.

use std::time::Duration;

mod with_std {
    use std::thread;
    include!("std_compat/program.rs");
}

mod with_greenhook {
    use greenhook as thread;
    include!("std_compat/program.rs");
}

mod util;

/// Runs `program` on a fresh OS thread named "program"; returns its log and
/// how many fibers that thread's hub spawned.
fn run(program: fn() -> Vec<String>) -> (Vec<String>, u64) {
    util::within(Duration::from_secs(60), "program", move || {
        (program(), greenhook::stats().spawned)
    })
}

#[test]
fn a_std_program_runs_the_same_with_greenhook_as_thread() {
    let (std_log, no_fibers) = run(with_std::program);
    let (greenhook_log, fibers) = run(with_greenhook::program);
    assert_eq!(no_fibers, 0);
    assert!(fibers >= 15, "the greenhook build spawned only {fibers} fibers");
    for (i, (a, b)) in std_log.iter().zip(&greenhook_log).enumerate() {
        assert_eq!(a, b, "line {i} differs");
    }
    assert_eq!(std_log.len(), greenhook_log.len());
    // The log says what the program means (a few lines checked by hand).
    let expected = [
        "joined: Some(\"worker\") says hi",
        "main is named Some(\"program\")",
        "distinct ids: 2",
        "parked one says woken",
        "scope: total 11, doubled [2, 4, 6], counter 11",
        "unjoined scoped panic: Some(\"a scoped thread panicked\")",
    ];
    for line in expected {
        assert!(std_log.iter().any(|l| l == line), "no {line:?} in {std_log:#?}");
    }
}
