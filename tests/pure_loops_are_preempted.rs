//! Threads that compute without calling anything are preempted by a signal
//! (x86-64 under the preload): the others run, and the preempted code
//! finds every register, its flags and `errno` as it left them. Never where
//! libc is below it on the stack. See `interpose/src/preempt/tick.rs`.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod util;

use util::{compile, differential, named_value, run};

#[test]
fn spinning_threads_let_main_run_and_keep_their_registers() {
    let (_, patched) = differential("pure_loops_are_preempted", &["flag"]);
    let bin = compile("pure_loops_are_preempted");
    let r = run(&bin, &["flag"], true, &[("GREENHOOK_STATS", "1")]);
    assert_eq!(r.stdout, patched.stdout, "{}", r.describe());
    assert!(stat(&r.stderr, "preempted") > 0, "{}", r.stderr);
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

/// Code made at run time (no unwind tables, where the unwinder's walk
/// stops: a JIT's) is preempted: its fiber's stack is looked at for what
/// the walk would have found. It was never preempted before, so a timed
/// wait beside a computing JVM or Guile thread ended only when that thread
/// called something (a `Future.get(300 ms)` returned the result after
/// 0.6 s instead of timing out). The same code called back by
/// `dl_iterate_phdr` (under the loader's lock) or by greenhook (a
/// `pthread_once` routine) is not. The same on the main thread, whose
/// stack is looked at up to its top (node's JavaScript runs there: a loop
/// waiting for a worker with `Atomics.load` hung for good before). Under
/// greenhook only: natively the ticker runs on the other core.
#[test]
fn code_without_unwind_tables_is_preempted() {
    let bin = compile("pure_loops_are_preempted");
    let r = run(&bin, &["jit"], true, &[]);
    assert_eq!(
        r.stdout,
        "made code: ticker ran yes\n\
         as a dl_iterate_phdr callback: ticker ran no\n\
         as a pthread_once routine: ticker ran no\n\
         main thread, made code: ticker ran yes\n\
         main thread, as a dl_iterate_phdr callback: ticker ran no\n\
         main thread, as a pthread_once routine: ticker ran no\n",
        "{}",
        r.describe()
    );
}

/// A frame's slots that were never written hold what earlier frames left
/// there, and a signal's frame leaves its return address (`sa_restorer`)
/// below the code it interrupted. Code without unwind tables is
/// preempted after a scan of the stack above it for that word (a live
/// handler's frame); while greenhook's own handlers (the preemption tick,
/// the trampoline in front of the program's) returned through libc's
/// `__restore_rt`, the words they left refused every switch from code
/// running below them: node's main thread, spinning in JavaScript for a
/// worker's store below libuv's `uv__io_poll` (1,024 `epoll_event`s on its
/// stack, a few of them written), hung in 9 runs of 40. With libc's
/// restorer the handled signal's lines say "no" in every run, the ticks'
/// in most (whether a tick's word is still below the loop when it ends
/// varies). Under greenhook only.
#[test]
fn words_left_by_signal_frames_do_not_stop_preemption() {
    let bin = compile("pure_loops_are_preempted");
    let r = run(&bin, &["stale"], true, &[]);
    assert_eq!(
        r.stdout,
        "after a handled signal: ticker ran yes\n\
         after ticks: ticker ran yes\n\
         main thread, after a handled signal: ticker ran yes\n\
         main thread, after ticks: ticker ran yes\n\
         signals handled: 2\n",
        "{}",
        r.describe()
    );
}

/// The plain loop holds the hub as before (the qsort mode ends on its own;
/// the flag mode would spin for ever).
/// A handler that walks the stack (`backtrace`, as haproxy's watchdog
/// does) for a signal that came while greenhook's preemption handler ran
/// is run at the preemption trampoline's first instruction: the walk must
/// find its way into the interrupted frames there. The trampoline's
/// unwind tables placed the return address in a slot it filled ~20
/// instructions later, and the walk crashed on a stale word of the
/// interrupted leaf's red zone (every run within half a second; haproxy's
/// watchdog panic died of SIGSEGV instead of its thread dump).
#[test]
fn a_handler_can_walk_the_stack_from_the_preemption_trampoline() {
    let (_, patched) = differential("backtrace_at_preemption", &["1"]);
    assert!(
        named_value(&patched.stderr, "walks").is_some_and(|n| n > 1000),
        "{}",
        patched.describe()
    );
}

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

/// The number after `word` in the stats table (0 if absent).
fn stat(stderr: &str, word: &str) -> u64 {
    stderr
        .split_whitespace()
        .skip_while(|w| *w != word)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Two threads hand a turn back and forth, each waiting in a loop that
/// only reads the turn (plain, with `pause`, through a pointer read from
/// the frame): every wait ends at the first tick that lands in it, as a
/// spin wait, not at a whole slice's end (`interpose/src/preempt/spin.rs`;
/// each wait cost 10–20 ms of CPU before, ~4 ms now with the kernel's
/// 250 Hz tick, as the same program pinned to one CPU without greenhook).
#[test]
fn spin_waits_end_at_the_first_tick() {
    let bin = compile("spin_waits");
    for mode in ["turns", "pause", "pointer"] {
        let plain = run(&bin, &[mode, "100"], false, &[]);
        let r = run(&bin, &[mode, "100"], true, &[("GREENHOOK_STATS", "1")]);
        assert_eq!(r.stdout, plain.stdout, "{mode}: {}", r.describe());
        assert_eq!(r.stdout, "turns: 100 and 100, turn ends with 0\n", "{mode}");
        let waited = named_value(&r.stderr, "waits").unwrap_or(0);
        let spinning = stat(&r.stderr, "spinning");
        assert!(waited >= 100, "{mode}: {}", r.stderr);
        assert!(
            spinning * 10 >= waited * 9,
            "{mode}: {spinning} of {waited} waits ended as spin waits\n{}",
            r.stderr
        );
    }
}

/// A test-and-test-and-set spinlock among 4 threads: a holder preempted
/// at its slice's end inside the critical section is waited for by the
/// others' spinning (on the lock, or in `pause` loops of growing length
/// between two reads of it), which is cut short; the count stays exact.
#[test]
fn a_spinlock_holder_preempted_inside_runs_again() {
    let bin = compile("spin_waits");
    for mode in ["lock", "backoff"] {
        let plain = run(&bin, &[mode, "2000"], false, &[]);
        let r = run(&bin, &[mode, "2000"], true, &[("GREENHOOK_STATS", "1")]);
        assert_eq!(r.stdout, "counter: 8000 of 8000\n", "{mode}: {}", r.describe());
        assert_eq!(r.stdout, plain.stdout);
        assert!(stat(&r.stderr, "spinning") > 0, "{mode}: {}", r.stderr);
    }
}
