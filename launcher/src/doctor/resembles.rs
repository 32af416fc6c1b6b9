//! Which kinds of real software the program resembles, among those the
//! compatibility suite (`compat/`) runs: a malloc replacement linked in
//! (jemalloc, tcmalloc, mimalloc), io_uring (liburing), and OpenMP (GCC's
//! libgomp, which the suite's sox uses; LLVM's libomp too). Each is found
//! by `DT_NEEDED` or, linked statically, by a symbol only it defines (not
//! OpenMP: linked in, its code is the program's, which greenhook cannot
//! tell apart), and is reported in one line saying what it means under
//! greenhook.

use std::fmt::Write as _;

/// A kind of software `doctor` recognises.
pub struct Kind {
    /// "allocator", "io_uring" or "threads": the line's label.
    pub label: &'static str,
    /// Its name.
    pub name: &'static str,
    /// `DT_NEEDED` entries starting with one of these.
    libraries: &'static [&'static str],
    /// A defined symbol only it has (linked statically).
    defines: fn(&str) -> bool,
    /// What it means under greenhook.
    pub meaning: &'static str,
}

/// Everything recognised, allocators first.
pub const KINDS: &[Kind] = &[
    Kind {
        label: "allocator",
        name: "jemalloc",
        libraries: &["libjemalloc.so"],
        // je_mallctl (redis's build), _rjem_mallctl (Rust's jemallocator), mallctl.
        defines: |s| s.ends_with("mallctl"),
        meaning: "its locks are pthread mutexes, which greenhook emulates (a contended one parks the fiber \
                  inside malloc; no time slice ends there), and its background threads are real OS threads, \
                  created past the preload; each fiber is one more thread to it, with a cache of its own (as \
                  much memory per fiber as per thread); linked into the program, its code cannot be told \
                  from the program's, so fibers switch only where they wait (no time slice ends, nothing is \
                  preempted)",
    },
    Kind {
        label: "allocator",
        name: "tcmalloc",
        libraries: &["libtcmalloc"],
        defines: |s| s == "tc_malloc" || s.starts_with("_ZN8tcmalloc"),
        meaning: "its spin locks sleep in syscall(SYS_futex), which greenhook turns into a fiber wait \
                  inside malloc; each fiber is one more thread to it, with a thread cache of its own (as much \
                  memory per fiber as per thread); linked into the program, fibers switch only where they wait",
    },
    Kind {
        label: "allocator",
        name: "mimalloc",
        libraries: &["libmimalloc"],
        defines: |s| s == "mi_malloc" || s == "mi_version",
        meaning: "its heaps are per thread and lock-free: each fiber is one more thread to it, with a heap \
                  of its own (as much memory per fiber as per thread: ~190 KiB for one that allocates); linked \
                  into the program, fibers switch only where they wait",
    },
    Kind {
        label: "io_uring",
        name: "liburing",
        libraries: &["liburing.so"],
        defines: |s| s == "io_uring_queue_init" || s == "__io_uring_get_cqe",
        meaning: "liburing enters the kernel with inline syscall instructions that no hook sees: a fiber \
                  waiting for completions (io_uring_wait_cqe, io_uring_submit_and_wait) blocks every fiber \
                  of its thread",
    },
    Kind {
        label: "threads",
        name: "OpenMP, GCC's libgomp",
        libraries: &["libgomp.so"],
        // Linked in statically its code is the program's, which
        // `GREENHOOK_NATIVE_THREADS_FROM` cannot name: not claimed here.
        defines: |_| false,
        meaning: "its team threads stay OS threads, since they wait with inline syscall instructions that no \
                  hook sees; the thread that starts a parallel region waits for its team in the kernel, and \
                  the other fibers of its thread wait with it",
    },
    Kind {
        label: "threads",
        name: "OpenMP, LLVM's libomp",
        libraries: &["libomp.so", "libiomp5.so"],
        defines: |_| false,
        meaning: "its threads become fibers (its futex waits go through libc and are hooked), so a team \
                  shares one CPU; --native-threads-from libomp.so keeps them OS threads",
    },
];

/// The kind a defined symbol reveals, as an index into [`KINDS`].
pub fn defined_by(symbol: &str) -> Option<usize> {
    KINDS.iter().position(|k| (k.defines)(symbol))
}

/// Writes one line per kind found: by `needed` (the program's `DT_NEEDED`)
/// or by `defined` (index into [`KINDS`], symbol), and one for the
/// allocator when none was found: the program's own when it exports
/// `malloc` (`own_malloc`: the loader then takes its for everyone's, as
/// greenhook does), else glibc's.
pub fn report(out: &mut String, needed: &[String], defined: &[(usize, String)], own_malloc: bool) {
    let mut any_allocator = false;
    for (i, kind) in KINDS.iter().enumerate() {
        let how = if let Some(lib) = needed.iter().find(|n| kind.libraries.iter().any(|l| n.starts_with(l))) {
            format!("DT_NEEDED {lib}")
        } else if let Some((_, symbol)) = defined.iter().find(|(k, _)| *k == i) {
            format!("linked in statically: defines {symbol}")
        } else {
            continue;
        };
        any_allocator |= kind.label == "allocator";
        let _ = writeln!(
            out,
            "  {}: {} ({how}): {}",
            kind.label,
            kind.name,
            squeeze(kind.meaning)
        );
    }
    if !any_allocator && own_malloc {
        let _ = writeln!(
            out,
            "  allocator: the program's own (it defines malloc): its code cannot be told from the program's, so \
             fibers switch only where they wait (no time slice ends, nothing is preempted)"
        );
    } else if !any_allocator {
        let _ = writeln!(
            out,
            "  allocator: glibc's malloc (no jemalloc, tcmalloc or mimalloc linked in): its locks are internal, never a fiber wait"
        );
    }
}

/// The meanings are written over several source lines; one space between words.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(needed: &[&str], defined: &[&str]) -> String {
        let needed: Vec<String> = needed.iter().map(|s| s.to_string()).collect();
        let defined: Vec<(usize, String)> = defined
            .iter()
            .filter_map(|s| defined_by(s).map(|k| (k, s.to_string())))
            .collect();
        let mut out = String::new();
        report(&mut out, &needed, &defined, false);
        out
    }

    #[test]
    fn found_by_needed_or_by_a_defined_symbol() {
        let out = lines(&["libc.so.6", "libjemalloc.so.2"], &[]);
        assert!(
            out.contains("allocator: jemalloc (DT_NEEDED libjemalloc.so.2): its locks"),
            "{out}"
        );
        let out = lines(&["libc.so.6"], &["main", "_rjem_mallctl"]);
        assert!(
            out.contains("allocator: jemalloc (linked in statically: defines _rjem_mallctl)"),
            "{out}"
        );
        let out = lines(&["libtcmalloc_minimal.so.4"], &[]);
        assert!(
            out.contains("allocator: tcmalloc (DT_NEEDED libtcmalloc_minimal.so.4)"),
            "{out}"
        );
        let out = lines(&[], &["mi_malloc", "io_uring_queue_init"]);
        assert!(
            out.contains("allocator: mimalloc (linked in statically: defines mi_malloc)"),
            "{out}"
        );
        assert!(out.contains("io_uring: liburing (linked in statically"), "{out}");
        assert!(!out.contains("glibc"), "{out}");
    }

    #[test]
    fn glibc_malloc_when_none_is_found() {
        let out = lines(&["liburing.so.2", "libc.so.6"], &["malloc"]);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(out.contains("io_uring: liburing (DT_NEEDED liburing.so.2)"), "{out}");
        assert!(out.contains("allocator: glibc's malloc"), "{out}");
        let out = lines(&["libgomp.so.1", "libc.so.6"], &[]);
        assert!(
            out.contains("threads: OpenMP, GCC's libgomp (DT_NEEDED libgomp.so.1): its team threads stay OS threads"),
            "{out}"
        );
        let out = lines(&["libomp.so.5"], &["GOMP_parallel", "__kmpc_fork_call"]);
        assert!(
            out.contains("threads: OpenMP, LLVM's libomp (DT_NEEDED libomp.so.5): its threads become fibers"),
            "{out}"
        );
        assert!(!out.contains("libgomp"), "{out}");
        assert!(
            out.lines().all(|l| !l.trim().contains("  ")),
            "one space between words: {out}"
        );
    }

    #[test]
    fn a_malloc_of_the_programs_own() {
        // mold links mimalloc in with its names stripped: only `malloc`
        // tells.
        let mut out = String::new();
        report(&mut out, &["libc.so.6".to_string()], &[], true);
        assert!(
            out.contains("allocator: the program's own (it defines malloc)"),
            "{out}"
        );
        assert!(out.contains("fibers switch only where they wait"), "{out}");
        assert!(!out.contains("glibc"), "{out}");
    }
}
