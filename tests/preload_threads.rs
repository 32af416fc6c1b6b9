//! A thread's life and attributes under the preload, differentially: the
//! handles of ended threads and garbage handles (issue 13), lifetime
//! corners, asynchronous cancellation, scheduling attributes, CPU-time
//! clocks and signal masks (issue 12, groups 3–5), and the threads that
//! stay OS threads (OpenMP's).
mod util;

use util::{compile, compile_shared, differential, differential_env, named_time_ms, named_value, run};

/// Every function taking a `pthread_t`, on a live thread, one that
/// returned unjoined, one joined (a second join used to segfault), one
/// detached that ended, one detached after it ended: glibc's answers.
#[test]
fn thread_handles_of_ended_threads_get_glibcs_answers() {
    differential("thread_handles", &[]);
}

/// Handles that never were threads: glibc crashes on most, so this runs
/// under the preload only, and every answer must be an error.
#[test]
fn garbage_thread_handles_get_errors_not_crashes() {
    let bin = compile("thread_handles");
    let r = run(&bin, &["garbage"], true, &[]);
    assert_eq!(r.code(), Some(0), "{}", r.describe());
    let lines: Vec<_> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.describe());
    for line in lines {
        for answer in line.split_whitespace().skip(1) {
            let (op, v) = answer.split_once('=').unwrap();
            let want = if op == "equal_self" { "1" } else { "ESRCH" };
            assert_eq!(v, want, "{op} in {line}");
        }
    }
}

/// Joining a detached thread, `pthread_once` whose init routine is
/// cancelled, exits or blocks, many threads exiting at once through key
/// destructors, and mutexes of every kind relocked after their owner ended.
#[test]
fn thread_lifetime_corners() {
    differential("thread_lifetime", &[]);
}

/// A thread joining main, which calls `pthread_exit(0x2a)`, gets 0x2a.
#[test]
fn a_thread_joins_main_after_its_pthread_exit() {
    differential("thread_lifetime", &["join_main"]);
}

/// A thread's `pthread_exit` and cancellation unwind its stack as glibc's
/// do: C++ destructors run (a `lock_guard` lets its mutex go; a cancelled
/// condvar wait holds its mutex again for `unique_lock` to let go), then
/// thread-locals' destructors; `catch (...)` blocks see the unwinding and
/// rethrow it; `pthread_exit` from a signal handler and from a
/// `pthread_once` routine (which then runs again) unwind as well, and so
/// does `pthread_exit` in main. Before, the fiber (or main) ended without
/// unwinding: no destructor ran and the `lock_guard`'s mutex stayed locked.
#[test]
fn a_threads_exit_unwinds_its_stack() {
    for mode in ["raii", "cancel", "signal", "once", "main"] {
        differential("exit_unwinds", &[mode]);
    }
}

/// An exception that leaves a thread's start routine reaches
/// `std::terminate` (its handler runs), as natively: the unwinder's search
/// ends at the thread's first frame. Before, it went on into greenhook's
/// frames and aborted with Rust's "cannot catch foreign exceptions".
/// `backtrace()` lists the thread's own frames, not the resumer's too.
#[test]
fn an_uncaught_exception_in_a_thread_reaches_terminate() {
    util::differential_expect("exit_unwinds", &["uncaught"], 5);
    differential("exit_unwinds", &["backtrace"]);
}

/// A `catch (...)` that swallows a cancellation's unwinding: glibc's
/// "FATAL: exception not rethrown" and `abort`, under the preload too.
#[test]
fn a_swallowed_cancellation_aborts_as_in_glibc() {
    use std::os::unix::process::ExitStatusExt;
    let bin = compile("exit_unwinds");
    for preload in [false, true] {
        let r = run(&bin, &["swallow"], preload, &[]);
        assert_eq!(
            r.status.signal(),
            Some(libc::SIGABRT),
            "preload {preload}: {}",
            r.describe()
        );
        assert_eq!(
            r.stdout,
            "swallower: catch (...) returns\n",
            "preload {preload}: {}",
            r.describe()
        );
        assert!(
            r.stderr.contains("FATAL: exception not rethrown"),
            "preload {preload}: {}",
            r.describe()
        );
    }
}

/// What libstdc++ decides from glibc's state: `__libc_single_threaded` is
/// cleared by the first `pthread_create`, as glibc's own clears it (it
/// stayed 1, and libstdc++ took its single-threaded paths: two threads
/// in a function-local static's constructor threw `recursive_init_error`,
/// a `std::stop_callback`'s destructor waited for ever); a `call_once`
/// whose callable throws leaves the flag to the next call (it deadlocked).
#[test]
fn libstdcxx_sees_threads_as_glibc_shows_them() {
    for mode in ["single", "static_init", "stop", "call_once"] {
        differential("libstdcxx_threads", &[mode]);
    }
}

/// `setuid` and its kin in a thread, once a thread has waited for a lock
/// on a worker of greenhook's pool (a real thread): the credentials
/// change on every OS thread, as glibc makes them. The process died of
/// signal 33 (glibc's `SIGSETXID`, with no handler: clearing
/// `__libc_single_threaded` ourselves had kept glibc from installing it),
/// and, with the handler, hung: glibc took the OS thread's descriptor
/// for another thread than the calling fiber's.
#[test]
fn credentials_change_from_a_thread() {
    differential("creds_in_thread", &[]);
}

/// CPU affinity is per thread: `sched_setaffinity` of the calling thread
/// (pid 0 or its tid) pinned the OS thread, every fiber's, so the others
/// and main saw one CPU too; a new thread now inherits its creator's set
/// or takes its attribute's (`pthread_attr_setaffinity_np`; one with no
/// CPU there is `EINVAL`, as glibc's).
#[test]
fn affinity_is_per_thread() {
    differential("affinity_per_thread", &[]);
}

/// Every thread has a thread id of its own (`tests/c/thread_ids.c`):
/// every fiber's `gettid()` was its OS thread's, main's, so a thread took
/// itself for main (`gettid() == getpid()`), `tgkill` to a thread's id ran
/// the handler in whatever ran, and a nice value or CPU set given by a
/// thread's id reached main and every thread. Now each pthread fiber's id
/// is its own (above every kernel id), taken by `tgkill`, `tkill`,
/// `rt_tgsigqueueinfo`, the `sched_*` and priority calls, `kill`,
/// `timer_create` and `/proc/…/task/<id>` opens, and `ESRCH` once the
/// thread is gone; a thread that forks is its child's main, whose id is
/// its pid.
#[test]
fn threads_have_ids_of_their_own() {
    differential("thread_ids", &[]);
}

/// A nice value is per thread on Linux: `setpriority` of the calling
/// thread (pid 0 or its tid) and `nice` reniced the OS thread, every
/// fiber's, so one thread that lowered its priority lowered main's and
/// every other thread's; a raise is still refused without the privilege.
#[test]
fn nice_is_per_thread() {
    differential("nice_per_thread", &[]);
}

/// Joiner cycles, which hang glibc 2.36, are `EDEADLK` for the joiner that
/// closes the cycle (a deliberate difference, in README's caveats).
#[test]
fn joiner_cycles_are_edeadlk() {
    let bin = compile("thread_lifetime");
    let r = run(&bin, &["join_cycle"], true, &[]);
    assert_eq!(r.code(), Some(0), "{}", r.describe());
    assert_eq!(
        r.stdout,
        "join_cycle: second_joiner=EDEADLK first_joiner=0\njoin_cycle_main: thread_joins_main=EDEADLK\n",
        "{}",
        r.describe()
    );
}

/// Asynchronous cancellation of a thread blocked in a sleep, a pipe read,
/// a join, `sigwait`, a condition wait, or yielding; and the asynchronous
/// type (or cancellation itself) turned on with a cancel pending.
#[test]
fn asynchronous_cancel_ends_blocked_threads() {
    let (_, patched) = differential(
        "cancel_async",
        &[
            "sleep",
            "pipe_read",
            "join",
            "sigwait",
            "pending_type",
            "pending_enable",
            "yield",
            "cond_wait",
        ],
    );
    for w in ["sleep", "pipe_read", "join", "sigwait", "cond_wait"] {
        let ms = named_time_ms(&patched.stderr, w).unwrap();
        assert!(ms < 1000, "{w}: the cancel took {ms} ms");
    }
}

/// The same for a thread blocked in `pthread_mutex_lock`, on a mutex it
/// holds itself or one main holds.
#[test]
fn asynchronous_cancel_ends_threads_blocked_on_mutexes() {
    differential("cancel_async", &["mutex_self_deadlock", "mutex_other"]);
}

/// A deferred cancellation acts where glibc's calls are cancellation
/// points: inside a `write` blocked on a full socket, not inside a
/// `sendfile` (which then sends it all, and the thread ends at its next
/// `pthread_testcancel`; it ended inside the call, the reader short of
/// data, before), but at a `pthread_testcancel` in a signal handler run
/// during that `sendfile` (the call's mark held for the handler too,
/// before), and at a `read`, `write` or `pwrite` of a regular file (a
/// thread looping over a file ran its loop to the end, before).
#[test]
fn deferred_cancel_acts_only_at_glibcs_cancellation_points() {
    differential("cancel_points", &[]);
}

/// A cancellation already pending when a call is made: each of glibc's
/// cancellation points acts on it even where the call would not wait (a
/// zero timeout, `MSG_DONTWAIT`, a ready pipe, a free semaphore), and the
/// calls glibc does not make points return. Before, 31 calls greenhook
/// passed straight to libc in those cases (`poll` with no timeout, `recv`
/// with `MSG_DONTWAIT`, `close`, `accept` on a non-blocking listener, the
/// message queues, `fcntl(F_SETLKW)` on a free lock…) returned, and
/// `sem_clockwait` on a free semaphore acted where glibc's does not.
#[test]
fn a_pending_cancellation_acts_at_every_glibc_cancellation_point() {
    differential("cancel_every_point", &[]);
}

/// A cancellation that arrives while a thread is inside a cancellation
/// point acts there, also after its wait ended (`tests/c/cancel_after_wake.c`:
/// the timeout fired, the woken fiber not yet run again): it acted at the
/// next point, a `write` under a mutex its cleanup handlers did not
/// unlock, and rsyslog's shutdown waited for that mutex for good.
#[test]
fn a_cancellation_during_a_call_acts_in_it_after_its_wait_ended() {
    differential("cancel_after_wake", &[]);
}

/// C11 threads (`thrd_*`, `mtx_*`, `cnd_*`, `call_once`, `tss_*`), which
/// glibc builds on its pthread functions by their internal names: two
/// pthreads taking turns through a `mtx_t` and a `cnd_t` hung (the waits
/// went to the kernel), `thrd_create` made OS threads, `thrd_sleep` held
/// the hub. Now glibc's answers, the ticker running throughout.
#[test]
fn c11_threads_are_fibers_with_glibcs_answers() {
    differential("c11_threads", &[]);
}

/// Policy and priority per thread: set, read back, inherited, explicit at
/// creation, and glibc's errors.
#[test]
fn scheduling_policy_and_priority_per_thread() {
    differential("thread_sched", &[]);
}

/// The same as a process without privilege (`EPERM` for real-time
/// policies, and for leaving `SCHED_IDLE`), where the test runs as root and
/// `setpriv` can drop it; elsewhere there is nothing to compare.
#[test]
fn scheduling_errors_of_an_unprivileged_process() {
    // SAFETY: no arguments.
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = std::process::Command::new("setpriv").arg("--version").output();
    if !root || setpriv.is_err() {
        eprintln!("skipped: needs root and setpriv to drop privileges");
        return;
    }
    let bin = compile("thread_sched");
    let bin = bin.to_str().unwrap();
    let drop = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        bin,
    ];
    let setpriv = std::path::Path::new("setpriv");
    let plain = run(setpriv, &drop, false, &[]);
    let patched = run(setpriv, &drop, true, &[]);
    assert_eq!(plain.code(), Some(0), "{}", plain.describe());
    assert!(
        plain.stdout.contains("fifo10=EPERM"),
        "not unprivileged after all: {}",
        plain.describe()
    );
    assert_eq!(plain.stdout, patched.stdout, "{}", patched.describe());
}

/// Each thread's CPU clock counts its own time only.
#[test]
fn thread_cpu_clocks_count_each_threads_own_time() {
    differential("thread_cpu_clock", &[]);
}

/// A new thread starts with its creator's signal mask.
#[test]
fn a_new_thread_inherits_its_creators_signal_mask() {
    differential("thread_signal_mask", &["inherit"]);
}

/// ... and with no pending signal of its own: a signal pending for main
/// is neither seen nor delivered by a thread that unblocks it.
#[test]
fn a_new_thread_has_no_pending_signals() {
    differential("thread_signal_mask", &["pending"]);
}

/// Lock, condvar and rwlock waiters with SCHED_FIFO priorities go through
/// highest priority first, as the kernel orders futex waiters (skipped,
/// alike on both sides, without CAP_SYS_NICE).
#[test]
fn lock_waiters_are_served_by_priority() {
    differential("sched_lock_order", &[]);
}

/// `SCHED_FIFO` threads run highest priority first, as on one CPU: a
/// thread created or woken above the running one's priority runs at once,
/// and `sched_yield` lets only equal or higher priorities go first. Fibers
/// ran in FIFO order whatever their priority before (the conformance
/// suite's `pthread_create` 1-6 failed on that).
#[test]
fn fifo_threads_run_highest_priority_first() {
    differential("sched_fifo_order", &[]);
}

/// Threads that sleep a microsecond in a loop wake about once a timer
/// slack (50 µs by default), as the kernel fires their sleeps: the hub's
/// timers keep the slack (`hub/src/timer.rs`). Before, each turn of the
/// loop fired every sleep due, and four such threads kept it busy: 2.6
/// million wake-ups a second and a full CPU, against 53,000 natively
/// (800,000 in this test's 300 ms against ~16,000); a pipe round trip
/// beside 16 of them took 84 µs against 10-16 µs natively. A slack the
/// program sets (`PR_SET_TIMERSLACK`) is the hub's from then. The bound is
/// 6 wake-ups a slack for each thread: on a busy machine other timer
/// interrupts end sleeps early within their slack (natively too; CI saw
/// one thread wake every 19 µs).
#[test]
fn tiny_sleeps_wake_within_the_timer_slack() {
    let check = |args: &[&str]| {
        let (_, patched) = differential("tiny_sleepers", args);
        let wakeups = named_value(&patched.stderr, "wakeups").expect("no wakeups on stderr");
        let per_slack = named_value(&patched.stderr, "per_slack").expect("no per_slack on stderr");
        if per_slack > 0 {
            let most = 6 * per_slack;
            assert!(wakeups <= most, "{args:?}: {wakeups} wake-ups (at most {most})");
        }
    };
    for threads in ["4", "16"] {
        check(&[threads, "300"]);
    }
    // A slack the threads set is followed, also while another thread keeps
    // the run queue busy: 1 ms, ~1,200 wake-ups natively, ~22,000 with the
    // default's 50 µs.
    check(&["4", "300", "1000000"]);
    check(&["4", "300", "1000000", "busy"]);
}

/// Threads that wait for work by yielding in a loop do not hold back a
/// thread woken by I/O: `sched_yield` looks at I/O (and timers) first and
/// what that wakes runs before the yielders' next turns, as the kernel runs
/// the thread it woke. Before, a yield passed through the root's turn
/// without a look at I/O (one every 64 turns, or a direct hand-over
/// between two yielders), so each hop of a round trip through two pipes
/// waited ~64 of the spinners' yields: 123-250 of them a round trip, and a
/// UDP echo in Erlang with its schedulers' busy waits took 350 µs a round
/// trip against 31-57 µs unpatched. A sleep of zero (`usleep(0)`,
/// `nanosleep` of `{0, 0}`) is such a yield: it returned at once, and
/// loops of it held the hub until their slice ended (~8 ms a round trip,
/// ~3,000 of their rounds). Threads that ask for I/O in a loop without
/// waiting (a zero timeout, `EAGAIN` on their own non-blocking fd or with
/// `MSG_DONTWAIT`) give
/// way once they have found nothing for 20 µs: ~9 ms a round trip before,
/// ~50 µs now (a dozen rounds a hop here; the bound leaves room for a CPU
/// whose `pause` is shorter).
#[test]
fn yielding_threads_let_the_woken_run_first() {
    for (backoff, most) in [
        ("sched_yield", 8),
        ("usleep0", 8),
        ("nanosleep0", 8),
        ("poll0", 1000),
        ("select0", 1000),
        ("epoll0", 1000),
        ("eagain", 1000),
        ("eagain_write", 1000),
        ("recv_dontwait", 1000),
        ("recvmmsg_dontwait", 1000),
        ("send_dontwait", 1000),
    ] {
        for spinners in ["1", "2", "4", "16"] {
            let (_, patched) = differential("yield_spinners", &[spinners, "300", backoff]);
            let yields = named_value(&patched.stderr, "yields_per_trip").expect("no yields_per_trip on stderr");
            assert!(
                yields <= most,
                "{spinners} spinners, {backoff}: {yields} of their rounds a round trip (at most {most})"
            );
        }
    }
}

/// A thread that never waits but keeps calling hooked functions gets no
/// more than its time slice (`GREENHOOK_SLICE_MS`): a poller of a flag
/// under a mutex lets main set it, a thread spinning on a spin lock runs
/// its signal handler, and a self-deadlocked main is ended by its alarm's
/// handler (a handler is installed: no deadlock report exit): each hung
/// before, where the kernel would have preempted the thread. And a worker
/// flooded with signals whose handlers run at its hooks' returns still
/// lets main's sleep end: the shape of the conformance suite's
/// `pthread_kill` 8-1, which hung until handlers run at a safe point got
/// time slices (this small copy did not reproduce that hang). A thread
/// looping on `pthread_atfork` alone lets main's sleep end too (the
/// suite's `pthread_atfork` 3-3, which hung while it was not hooked).
///
/// The pollers' `lock` and `unlock` are the uncontended fast paths, which
/// end no slice by themselves: the unlock's counts. With TLS shared, where
/// no signal preempts code that calls nothing, the count alone must do.
#[test]
fn busy_threads_leave_room_for_the_others() {
    for mode in ["poll", "rwpoll", "spin", "relock", "signalled", "atfork"] {
        differential("busy_threads", &[mode]);
    }
    for mode in ["poll", "rwpoll"] {
        differential_env("busy_threads", &[mode], &[("GREENHOOK_TLS", "shared")]);
    }
}

/// The uncontended lock and unlock paths, and the wake-ups of
/// `sem_post`, `pthread_cond_signal` and `pthread_cond_broadcast`, answer
/// before a hook's entry, and a signal may arrive anywhere in them: a
/// handler that sleeps there lets the other threads run in the middle of
/// the call. Counts, writes, readers and ping-pong turns all come out
/// right, and nobody's wake-up is lost (a hang), with TLS per thread and
/// shared. A lost wake-up shows as the deadlock
/// report (the next signal's handler, run by the waiters, then lets them
/// look again): without the unlock's shield, a third to a half of these
/// runs printed one.
#[test]
fn lock_fast_paths_survive_handlers_that_wait() {
    for _ in 0..5 {
        for env in [&[][..], &[("GREENHOOK_TLS", "shared")][..]] {
            let (_, patched) = differential_env("lock_fast_signals", &[], env);
            assert!(!patched.stderr.contains("deadlock"), "{}", patched.describe());
        }
    }
}

/// An rwlock glibc's own functions wrote before greenhook's constructor
/// ran (a library's constructor, or here the program's `.preinit_array`)
/// is left in glibc's write phase, which greenhook's words read as a
/// reader holding it: the next write lock waited for good (BIND's `named`
/// hung at start so, in OpenSSL).
#[test]
fn rwlocks_glibc_used_before_the_preload_are_free() {
    differential("rwlock_before_preload", &[]);
}

/// An rwlock made `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP` keeps new
/// readers out while a writer waits (its `tryrdlock` is `EBUSY`), as
/// glibc's does; the default and `PREFER_WRITER_NP` let them in.
#[test]
fn rwlock_kinds_order_readers_and_writers_as_glibc() {
    differential("rwlock_kinds", &[]);
}

/// OpenMP (GCC's libgomp), whose threads wait on futexes by the `syscall`
/// instruction, which no hook sees: a program hung at its first parallel
/// region while they were fibers. Its teams are OS threads, started from
/// main or from pthreads (fibers), with the starter's signal mask, while
/// the other fibers go on.
#[test]
fn openmp_teams_run_as_without_greenhook() {
    differential("openmp_pool", &[]);
}

/// `GREENHOOK_NATIVE_THREADS_FROM` names more libraries whose threads stay
/// OS threads, found by their start routine's address, also in a library
/// loaded by `dlopen` after the program started.
#[test]
fn native_threads_from_named_libraries() {
    let bin = compile("native_threads_from");
    let lib = compile_shared("native_pool_lib");
    let lib = lib.to_str().expect("a UTF-8 path");
    let plain = run(&bin, &[lib], false, &[]);
    assert_eq!(plain.stdout, "program: own\nlibrary: own\n", "{}", plain.describe());
    let fibers = run(&bin, &[lib], true, &[]);
    assert_eq!(
        fibers.stdout,
        "program: shared\nlibrary: shared\n",
        "{}",
        fibers.describe()
    );
    let named = run(
        &bin,
        &[lib],
        true,
        &[("GREENHOOK_NATIVE_THREADS_FROM", "libunrelated.so:libnative_pool")],
    );
    assert_eq!(named.stdout, "program: shared\nlibrary: own\n", "{}", named.describe());
}

/// Go's runtime waits on futexes by the `syscall` instruction, as libgomp
/// does: a Go program (any object with Go's build ID note) keeps its
/// threads native, and so does a library Go made, loaded into a program
/// whose own threads are fibers. A Go program with cgo hung at once
/// before: its runtime's first thread was a fiber.
#[test]
fn go_programs_and_libraries_keep_their_threads() {
    let (_, patched) = differential("go_program", &[]);
    assert_eq!(patched.stdout, "turns: 2000\nthread: own\n", "{}", patched.describe());
    let bin = compile("native_threads_from");
    let lib = compile_shared("go_pool_lib");
    let lib = lib.to_str().expect("a UTF-8 path");
    let fibers = run(&bin, &[lib], true, &[]);
    assert_eq!(
        fibers.stdout,
        "program: shared\nlibrary: own\n",
        "{}",
        fibers.describe()
    );
}

/// Loads and unloads one at a time, as glibc's loader lock makes them
/// among threads: four threads dlopen and dlclose copies of a library
/// whose constructor and destructor sleep, and a constructor loads another
/// copy from inside itself. glibc's lock is recursive by thread id, which
/// fibers share: their constructors ran five at once, and a dlclose made
/// meanwhile returned before its library's destructor ran.
#[test]
fn loads_and_unloads_are_one_at_a_time_among_fibers() {
    let lib = compile_shared("loader_serial_lib");
    differential("loader_serial", &[lib.to_str().expect("a UTF-8 path")]);
}

/// `pthread_setattr_default_np` sets the stack of threads made without an
/// attribute from then on. The default was read once, at the first
/// `pthread_create`: raised to 4 MiB after a first thread, under
/// `ulimit -s 1000`, a thread still got 1,000 KiB and its 2.5 MiB
/// recursion overflowed.
#[test]
fn the_default_attribute_sets_later_threads_stacks() {
    differential("default_stack_size", &[]);
}

/// glibc's functions `alloca` no more than a quarter of the thread's stack
/// block (at most 64 KiB). A fiber's descriptor had no stack block, which
/// glibc takes for the main thread's: 64 KiB allowed on a 64 KiB stack,
/// where a thread of that size gets 17 KiB. Fibers' descriptors now say
/// where their stack is (with TLS of their own: fibers sharing their
/// thread's TLS share its descriptor too).
#[test]
fn alloca_is_cut_off_by_the_threads_own_stack() {
    differential("alloca_cutoff", &[]);
}

/// `pthread_attr_setguardsize`: a thread's guard is as large as it asked
/// (it was one page whatever the attribute said), and `pthread_getattr_np`
/// reports it as glibc does (whole pages, 0 on the caller's own stack; it
/// said a page). A write 8 KiB below a 64 KiB-guarded stack faults in the
/// guard, as natively, instead of past a one-page one.
#[test]
fn a_thread_gets_the_guard_it_asks_for() {
    differential("guard_size", &[]);
}

/// A library's constructor makes the process's first thread under
/// `dlopen`, as OpenBLAS's does (numpy's compat row hung so). glibc's own
/// thread that greenhook's first `pthread_create` has made looked up a
/// symbol, which waits for the loader's lock its creator held while it
/// waited for the thread.
#[test]
fn a_constructor_makes_the_first_thread_under_dlopen() {
    let lib = compile_shared("ctor_thread_lib");
    differential("ctor_thread", &[lib.to_str().expect("a UTF-8 path")]);
}
