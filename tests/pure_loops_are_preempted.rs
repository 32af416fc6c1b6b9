//! Threads that compute without calling anything are preempted by a signal
//! (x86-64 under the preload): the others run, and the preempted code
//! finds every register, its flags and `errno` as it left them. Never where
//! libc is below it on the stack. See `interpose/src/preempt/tick.rs`.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod util;

use util::{compile, differential, run};

/// The number after `preempted` in the stats table (0 if absent).
fn preempted(stderr: &str) -> u64 {
    stderr
        .split_whitespace()
        .skip_while(|w| *w != "preempted")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn spinning_threads_let_main_run_and_keep_their_registers() {
    let (_, patched) = differential("pure_loops_are_preempted", &["flag"]);
    let bin = compile("pure_loops_are_preempted");
    let r = run(&bin, &["flag"], true, &[("GREENHOOK_STATS", "1")]);
    assert_eq!(r.stdout, patched.stdout, "{}", r.describe());
    assert!(preempted(&r.stderr) > 0, "{}", r.stderr);
}

/// With shared TLS (`GREENHOOK_TLS=shared`, or a malloc other than
/// glibc's) nothing is preempted by signal: fibers would meet each other's
/// per-thread state half updated.
#[test]
fn nothing_is_preempted_with_shared_tls() {
    assert_qsort_mode(&[("GREENHOOK_TLS", "shared")], "no");
}

/// A spinner whose loop ends on a count that signal handlers raise: the
/// handlers run in it while it is preempted now and then, and a flag lost
/// at a preemption (between its compare and its jump) ends the loop early.
#[test]
fn a_spinner_takes_signals_between_preemptions() {
    let bin = compile("pure_loops_are_preempted");
    for _ in 0..3 {
        let r = run(&bin, &["signals"], true, &[]);
        assert_eq!(r.stdout, "signals: 50\n", "{}", r.describe());
    }
    differential("pure_loops_are_preempted", &["signals"]);
}

#[test]
fn a_forked_child_is_preempted_too() {
    differential("pure_loops_are_preempted", &["fork"]);
}

/// The cancellation runs at a preemption and unwinds through the
/// trampoline into the spinning frame, whose cleanup handler runs.
#[test]
fn an_asynchronously_cancelled_spinner_runs_its_cleanup() {
    let (plain, _) = differential("pure_loops_are_preempted", &["cancel"]);
    assert_eq!(plain.stdout, "cancelled: yes, cleanup ran: yes\n");
}

/// The program's own SIGURG (the preemption signal) reaches its handler and
/// reads back as installed; a daemon's "every disposition to SIG_DFL, every
/// signal blocked" does not stop preemption.
#[test]
fn the_programs_own_sigurg_still_works() {
    differential("pure_loops_are_preempted", &["urg"]);
}

/// Under greenhook only: natively the ticker runs on the other core.
#[test]
fn a_callback_from_libc_is_never_preempted() {
    assert_qsort_mode(&[], "yes");
}

/// The plain loop holds the hub as before (the qsort mode ends on its own;
/// the flag mode would spin for ever).
#[test]
fn greenhook_preempt_0_turns_it_off() {
    assert_qsort_mode(&[("GREENHOOK_PREEMPT", "0")], "no");
}

/// Runs the `qsort` mode under greenhook with `env`: the ticker never runs
/// during the comparator, and during the plain loop as `plain` says.
fn assert_qsort_mode(env: &[(&str, &str)], plain: &str) {
    let bin = compile("pure_loops_are_preempted");
    let r = run(&bin, &["qsort"], true, env);
    assert_eq!(
        r.stdout,
        format!("comparator: ticker ran no; plain loop: ticker ran {plain}\n"),
        "{env:?}: {}",
        r.describe()
    );
}
