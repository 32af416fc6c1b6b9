//! Thread-local storage is per thread under the preload, where threads are
//! fibers of one OS thread (issue 10): each runs with its own thread
//! pointer. Differential: the same output as unpatched. With
//! `GREENHOOK_TLS=shared` (the opt-out) they share, which the first test
//! shows is what used to corrupt `__thread` variables.
mod util;

use util::{compile, compile_shared, differential, differential_env, preload_lib, run};

/// 8 threads keep their own `__thread` values and errno across a sleep
/// that runs the others, and each starts from the initial value.
#[test]
fn thread_variables_are_per_thread() {
    differential("tls_per_thread", &["vars"]);
    // The opt-out shares the OS thread's TLS: the data corruption the
    // issue started from (1/8 kept their value).
    let bin = compile("tls_per_thread");
    let shared = run(&bin, &["vars"], true, &[("GREENHOOK_TLS", "shared")]);
    assert_eq!(shared.code(), Some(0), "{}", shared.describe());
    assert!(shared.stdout.starts_with("vars: 1/8 kept"), "{}", shared.describe());
}

/// A non-PIE program that takes `malloc`'s address in its code (node)
/// exports an undefined `malloc` whose value is its PLT entry, and `dlsym`
/// finds that first: the preload judged the program's malloc not glibc's
/// and gave its fibers one shared TLS (1/8 kept their value; node's
/// `worker_threads` crashed). The definition after the program counts.
#[test]
fn a_non_pie_programs_malloc_address_is_not_its_own_malloc() {
    let bin = compile("tls_nonpie");
    let dynsym = std::process::Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(&bin)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // What the test is about, where readelf can say: malloc undefined,
    // with the address of its PLT entry.
    if let Some(line) = dynsym.lines().find(|l| l.contains(" malloc@")) {
        assert!(
            line.contains(" UND ")
                && !line
                    .split_whitespace()
                    .nth(1)
                    .is_some_and(|v| v.trim_start_matches('0').is_empty()),
            "the program no longer exports a canonical PLT entry for malloc: {line}"
        );
    }
    differential("tls_nonpie", &["vars"]);
    let r = run(&bin, &["vars"], true, &[]);
    assert!(r.stdout.starts_with("vars: 8/8 kept"), "{}", r.describe());
    assert!(!r.stderr.contains("per-fiber TLS is not available"), "{}", r.describe());
}

/// The preload reads its settings as it loads: a program that empties its
/// environment before its first thread (nginx's workers keep only `TZ`)
/// still gets them. Read when first needed, `GREENHOOK_TLS=shared` was lost
/// here (8/8 kept: per-fiber TLS) and `GREENHOOK_STATS` printed nothing.
#[test]
fn settings_hold_after_the_program_empties_its_environment() {
    differential("tls_per_thread", &["cleared"]);
    let bin = compile("tls_per_thread");
    let r = run(
        &bin,
        &["cleared"],
        true,
        &[("GREENHOOK_TLS", "shared"), ("GREENHOOK_STATS", "1")],
    );
    assert_eq!(r.code(), Some(0), "{}", r.describe());
    assert!(r.stdout.starts_with("vars: 1/8 kept"), "{}", r.describe());
    assert!(r.stderr.contains("greenhook stats"), "{}", r.describe());
}

/// `strerror` and `strsignal` of unknown numbers format into per-thread
/// buffers: two threads keep their own strings.
#[test]
fn strerror_buffers_are_per_thread() {
    differential("tls_per_thread", &["strerror"]);
}

/// `uselocale` is per thread.
#[test]
fn uselocale_is_per_thread() {
    differential("tls_per_thread", &["locale"]);
}

/// `sched_getcpu` (read from glibc's rseq area through the thread pointer)
/// is sane in every thread.
#[test]
fn sched_getcpu_is_sane() {
    differential("tls_per_thread", &["cpu"]);
}

/// A library with `__thread` variables, dlopen'ed after the threads exist:
/// its dynamic TLS is per thread, and starts from its initial value.
#[test]
fn dlopened_library_tls_is_per_thread() {
    let lib = compile_shared("tls_dlopen_lib");
    differential("tls_per_thread", &["dlopen", lib.to_str().unwrap()]);
}

/// `dlerror()`'s message stays valid until the thread's next `dl*` call,
/// whatever the preload looks up meanwhile (its hooks' first `dlsym`s, the
/// `dlsym` std makes when the offload pool starts a thread).
#[test]
fn dlerror_message_survives_the_preloads_own_lookups() {
    differential("tls_per_thread", &["dlerror"]);
}

/// A library whose TLS glibc puts in the static block (initial-exec
/// variables), dlopen'ed after the threads exist: glibc copies its initial
/// image into the threads it knows of, and the preload into the fibers.
#[test]
fn dlopened_static_tls_library_starts_from_its_image_in_every_thread() {
    let lib = compile_shared("tls_static_lib");
    differential("tls_per_thread", &["dlopen", lib.to_str().unwrap()]);
}

/// The same for a library reached through TLS descriptors, which glibc
/// puts in the static block when there is room.
#[test]
fn dlopened_tlsdesc_library_starts_from_its_image_in_every_thread() {
    let lib = compile_shared("tls_desc_lib");
    differential("tls_per_thread", &["dlopen", lib.to_str().unwrap()]);
}

/// A thread dlopens a library by bare name, found through the program's
/// RUNPATH (`$ORIGIN`): glibc must still see the program as the caller
/// under the preload's `dlopen` hook. The loading thread and the others
/// start from the library's image, dynamic or static TLS alike.
#[test]
fn dlopen_in_a_thread_searches_the_programs_runpath_and_initialises_tls() {
    for lib in ["tls_dlopen_lib", "tls_static_lib", "tls_desc_lib"] {
        compile_shared(lib);
        differential("tls_per_thread", &["dlopen-in-thread", &format!("lib{lib}.so")]);
    }
}

/// Destructors registered with `__cxa_thread_atexit_impl` (C++
/// `thread_local`'s) run at each thread's exit, on its own TLS, before its
/// join returns.
#[test]
fn thread_local_destructors_run_at_thread_exit() {
    differential("tls_per_thread", &["dtors"]);
}

/// C++ `thread_local` objects with constructors and destructors: order and
/// count per thread, and main's destroyed at exit.
#[test]
fn cxx_thread_local_objects() {
    differential("tls_cxx", &[]);
}

/// `fork` in a thread (a fiber with TLS of its own): the child keeps the
/// thread's values, allocates, runs a thread and forks again; glibc's
/// bookkeeping in the child acts on the OS thread's own descriptor.
#[test]
fn fork_in_a_thread_keeps_its_tls() {
    differential("tls_per_thread", &["fork"]);
}

/// A signal handler runs on the thread that was running: it sees that
/// thread's `__thread` values.
#[test]
fn signal_handlers_see_the_running_threads_tls() {
    differential("tls_per_thread", &["signal"]);
}

/// Threads created and ended by the hundred thousand, each using what a
/// thread's exit must clean up (`__thread`, malloc's cache, strerror's
/// buffer, a thread_local destructor, a key destructor, a dlopen'ed
/// library's dynamic TLS): every destructor runs, and the resident set
/// stays flat (no leak per ended fiber).
#[test]
fn ended_threads_leave_nothing_behind() {
    let lib = compile_shared("tls_dlopen_lib");
    let lib = lib.to_str().unwrap();
    differential("thread_churn", &["20000", "200", lib]);
    let bin = compile("thread_churn");
    let r = run(&bin, &["200000", "300", lib], true, &[]);
    assert_eq!(r.code(), Some(0), "{}", r.describe());
    let rss = |k: &str| util::named_value(&r.stderr, &format!("rss_kib.{k}")).expect("rss line");
    let (early, last) = (rss("20100"), rss("200000"));
    // 180,000 more threads; a leak of 16 bytes each would be 2.8 MiB.
    assert!(
        last < early + 1024,
        "RSS grew from {early} to {last} KiB: {}",
        r.describe()
    );
}

/// Two threads write records (fputs of 3000 bytes, fprintf of 1000) to one
/// FILE on a pipe that a slow reader thread drains: a thread waiting for
/// room holds the FILE's lock (its own, with TLS of its own), and the other
/// must wait for it on the hub, not in the kernel (which would block the
/// holder too). Every record arrives whole.
#[test]
fn two_threads_print_to_one_full_pipe() {
    differential("stdio_fiber_locks", &["full_pipe"]);
}

/// A thread holds stdout with flockfile across a sleep: another thread's
/// printf waits for its funlockfile (output in glibc's order), and
/// ftrylockfile says busy meanwhile.
#[test]
fn flockfile_held_across_a_sleep_serialises_other_threads() {
    differential("stdio_fiber_locks", &["flockfile"]);
}

/// Without FSGSBASE (Linux before 5.9, or a CPU without it) a switch sets
/// the thread pointer with `arch_prctl`, which `GREENHOOK_TLS=fiber-syscall`
/// forces here. Thread variables, errno and glibc's per-thread state stay
/// per thread, and signal handlers run at preemptions between such
/// switches as natively. The system call is made by the instruction, not
/// through libc's `syscall()`, which under the preload is our own hook and
/// would run in the middle of the switch.
#[test]
fn a_switch_by_system_call_keeps_thread_state() {
    let env = [("GREENHOOK_TLS", "fiber-syscall")];
    for mode in ["vars", "strerror", "locale", "cpu"] {
        differential_env("tls_per_thread", &[mode], &env);
    }
    differential_env("pure_loops_are_preempted", &["signals"], &env);
}

/// With a malloc that is not glibc's, each fiber is one more thread to it:
/// the program's thread-locals are the fiber's own, and the allocator's
/// per-thread state, set up at a fiber's first malloc, is taken down by
/// the key destructor it set, once more if the fiber's way out set it up
/// again (mimalloc leaked a heap per fiber so, and jemalloc's list of
/// threads kept blocks that were reused). BIND's `named` (jemalloc) hung at
/// start while fibers shared their thread's TLS.
#[test]
fn a_foreign_malloc_keeps_thread_locals_per_fiber() {
    let bin = compile("own_malloc_tls");
    let native = run(&bin, &[], false, &[]);
    assert_eq!(
        native.stdout,
        "threads read 8 and 9; caches left: 1\n",
        "{}",
        native.describe()
    );
    let r = run(&bin, &[], true, &[]);
    assert!(r.status.success(), "{}", r.describe());
    assert_eq!(r.stdout, native.stdout, "{}", r.describe());
    assert!(!r.stderr.contains("per-fiber TLS is not available"), "{}", r.describe());
}

/// A malloc replacement preloaded in front of greenhook whose every
/// allocation takes a pthread mutex (as jemalloc's arenas do): threads that
/// allocate in bursts longer than a slice, beside threads that make
/// threads (greenhook's bookkeeping allocating), do their work as natively.
/// No fiber is switched away inside the allocator (see
/// `tests/c/allocator_slices.c` for what this does and does not show).
#[test]
fn a_preloaded_allocator_with_a_lock_runs_as_natively() {
    let lib = compile_shared("locked_malloc_lib");
    let bin = compile("allocator_slices");
    let lib = lib.to_str().expect("a UTF-8 path");
    let native = run(&bin, &[], false, &[("LD_PRELOAD", lib)]);
    assert_eq!(
        native.stdout,
        "4 sleepers done, 2 allocators allocated\n",
        "{}",
        native.describe()
    );
    let both = format!("{lib} {}", preload_lib().display());
    for slice in ["1", "10"] {
        let r = run(
            &bin,
            &[],
            false,
            &[("LD_PRELOAD", &both), ("GREENHOOK_SLICE_MS", slice)],
        );
        assert!(r.status.success(), "{}", r.describe());
        assert_eq!(r.stdout, native.stdout, "{}", r.describe());
        assert!(!r.stderr.contains("per-fiber TLS is not available"), "{}", r.describe());
    }
}

/// A `malloc` with a lock linked into the program itself (as rustc links
/// jemalloc): its code cannot be told from the program's, so no slice ends
/// at a hook return. The previous library took the program for the
/// allocator's library, and its first stack walk, at a slice's end inside
/// the allocator's lock, allocated: the main thread waited on the lock it
/// held (rustc hung so). See `tests/c/program_malloc.c`.
#[test]
fn a_malloc_linked_into_the_program_runs_as_natively() {
    let bin = compile("program_malloc");
    let native = run(&bin, &[], false, &[]);
    assert_eq!(
        native.stdout,
        "20 bursts allocated, 2 threads made threads\n",
        "{}",
        native.describe()
    );
    for slice in ["1", "10"] {
        let r = run(&bin, &[], true, &[("GREENHOOK_SLICE_MS", slice)]);
        assert!(r.status.success(), "{}", r.describe());
        assert_eq!(r.stdout, native.stdout, "{}", r.describe());
    }
}
