//! Diagnostics that name the culprit: the stall monitor, the deadlock report
//! and the stats table, on C programs run under the preload.
mod util;

use std::sync::Mutex;

use util::{compile, run};

/// These tests measure stalls: run them one at a time, so that one test's
/// busy loop does not make another's hub look stalled on a 2-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn stall_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("greenhook: stall")).collect()
}

#[test]
fn the_stall_monitor_names_the_cpu_bound_fiber_once() {
    let _s = serial();
    let bin = compile("stall_demo");
    // With preemption off: a computation it cannot interrupt (inside libc,
    // say) stalls the same way.
    let r = run(
        &bin,
        &["cpu", "600"],
        true,
        &[("GREENHOOK_STALL_MS", "50"), ("GREENHOOK_PREEMPT", "0")],
    );
    assert_eq!(r.stdout, "ok cpu\n", "{}", r.describe());
    // One report and one end line for the culprit (a loaded machine may add
    // reports of its own; the culprit's must be exactly one pair).
    let lines = stall_lines(&r.stderr);
    let reports = lines.iter().filter(|l| l.contains("'spin' has run")).count();
    let ends = lines
        .iter()
        .filter(|l| l.contains("stall over: fiber ") && l.contains("'spin' held"))
        .count();
    assert_eq!((reports, ends), (1, 1), "{}", r.stderr);
    assert!(
        r.stderr.contains("busy_loop"),
        "the backtrace shows the busy function: {}",
        r.stderr
    );
}

/// Fibers that yield to each other may hand over directly, without the
/// root; the heartbeat must still name the one that then blocks in a
/// system call (no backtrace signal is sent then, so the heartbeat is all
/// the monitor knows), not the one that handed it control. Which of the
/// two hands over changes every trip through the root, so two bounce
/// counts cover both cases. Fiber 2 is "spin" (the ticker is 1, "partner"
/// is 3: creation order).
#[test]
fn the_stall_monitor_names_a_fiber_that_was_handed_control() {
    let _s = serial();
    let bin = compile("stall_demo");
    for bounces in ["100001", "100065"] {
        let r = run(&bin, &["handed", "400", bounces], true, &[("GREENHOOK_STALL_MS", "50")]);
        assert_eq!(r.stdout, "ok handed\n", "{}", r.describe());
        let lines = stall_lines(&r.stderr);
        assert!(
            lines.iter().any(|l| l.contains("stall: fiber 2 has blocked the hub")),
            "{bounces}: {}",
            r.stderr
        );
        assert!(!lines.iter().any(|l| l.contains("fiber 3")), "{bounces}: {}", r.stderr);
    }
}

#[test]
fn an_unhooked_blocking_syscall_is_named_not_interrupted() {
    let _s = serial();
    let bin = compile("stall_demo");
    let r = run(&bin, &["raw", "400"], true, &[("GREENHOOK_STALL_MS", "50")]);
    assert_eq!(r.stdout, "ok raw\n", "{}", r.describe());
    let named = stall_lines(&r.stderr)
        .iter()
        .filter(|l| l.contains("system call 35"))
        .count();
    assert_eq!(named, 1, "nanosleep is syscall 35 on x86-64: {}", r.stderr);
}

#[test]
fn a_hooked_sleep_is_not_a_stall() {
    let _s = serial();
    let bin = compile("stall_demo");
    let r = run(&bin, &["hooked", "400"], true, &[("GREENHOOK_STALL_MS", "50")]);
    assert_eq!(r.stdout, "ok hooked\n", "{}", r.describe());
    assert!(stall_lines(&r.stderr).is_empty(), "{}", r.stderr);
}

/// Preempted every slice, the busy fiber no longer holds the hub: no stall
/// to report.
#[test]
fn a_preempted_computation_is_not_a_stall() {
    let _s = serial();
    let bin = compile("stall_demo");
    let r = run(&bin, &["cpu", "400"], true, &[("GREENHOOK_STALL_MS", "100")]);
    assert_eq!(r.stdout, "ok cpu\n", "{}", r.describe());
    assert!(
        !stall_lines(&r.stderr).iter().any(|l| l.contains("'spin'")),
        "{}",
        r.stderr
    );
}

#[test]
fn the_monitor_is_off_by_default() {
    let _s = serial();
    let bin = compile("stall_demo");
    let r = run(&bin, &["cpu", "200"], true, &[]);
    assert!(stall_lines(&r.stderr).is_empty(), "{}", r.stderr);
}

#[test]
fn a_deadlock_is_reported_with_every_fiber_and_exit_86() {
    let bin = compile("deadlock");
    let r = run(&bin, &[], true, &[]);
    assert_eq!(r.code(), Some(86), "{}", r.describe());
    assert!(r.stderr.contains("deadlock"), "{}", r.stderr);
    assert!(r.stderr.contains("main (root) joins fiber"), "{}", r.stderr);
    let held_by = r
        .stderr
        .lines()
        .filter(|l| l.contains("waits on mutex") && l.contains("held by fiber"))
        .count();
    assert_eq!(held_by, 2, "both fibers say which mutex and who holds it: {}", r.stderr);
}

/// A copy of the library under another name patches when the program is
/// given it to preload, by path or by bare name on the library path: the
/// name check keeps the same code linked into an executable from patching,
/// not a renamed install.
#[test]
fn a_renamed_copy_patches_when_preloaded() {
    let bin = compile("sleep_threads");
    let dir = util::target_dir().join("renamed-preload");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("greenhook.so");
    // Copied to a new name and renamed into place: a test running the
    // same code at once never sees half a file.
    let part = dir.join(format!("greenhook.so.{}", std::process::id()));
    std::fs::copy(util::preload_lib(), &part).unwrap();
    std::fs::rename(&part, &copy).unwrap();
    let path = copy.to_str().unwrap();
    let dir = dir.to_str().unwrap();
    for env in [
        vec![("LD_PRELOAD", path)],
        vec![("LD_PRELOAD", "greenhook.so"), ("LD_LIBRARY_PATH", dir)],
    ] {
        let mut env = env.clone();
        env.push(("GREENHOOK_STATS", "1"));
        let r = run(&bin, &["100", "usleep", "10"], false, &env);
        assert_eq!(r.stdout, "ok 100\n", "{}", r.describe());
        assert!(r.stderr.contains("spawned 100"), "patched under {env:?}: {}", r.stderr);
    }
}

#[test]
fn stats_at_exit_show_fibers_and_hooked_calls() {
    let bin = compile("sleep_threads");
    let r = run(&bin, &["100", "usleep", "10"], true, &[("GREENHOOK_STATS", "1")]);
    assert_eq!(r.stdout, "ok 100\n", "{}", r.describe());
    assert_eq!(r.stderr.matches("greenhook stats").count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("spawned 100"), "{}", r.stderr);
    assert!(r.stderr.contains("time 100"), "{}", r.stderr);
    let r = run(&bin, &["10", "usleep", "10"], true, &[]);
    assert!(!r.stderr.contains("greenhook stats"), "off by default: {}", r.stderr);
}

/// A program that never makes a thread (an event loop like lighttpd's or
/// mosquitto's) gets its table too, once, with the calls it made; it got
/// none, since the table was set up with the first hub.
#[test]
fn stats_at_exit_without_a_thread() {
    let bin = compile("plain_calls");
    let r = run(&bin, &["main"], true, &[("GREENHOOK_STATS", "1")]);
    assert_eq!(r.code(), Some(0), "{}", r.describe());
    assert_eq!(r.stderr.matches("greenhook stats").count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("spawned 0"), "{}", r.stderr);
    assert!(r.stderr.contains("hooked "), "{}", r.stderr);
}
