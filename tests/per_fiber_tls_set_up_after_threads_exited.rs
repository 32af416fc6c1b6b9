//! Per-fiber TLS is set up on first use by probing a scratch block with a
//! `malloc`/`free`; in a process where threads have come and gone, that
//! malloc attaches to a reused arena and may be served from its fastbins,
//! which moves chunks of the same size into the new cache. The probe must
//! still find glibc's words (it once asked for exactly one cached chunk and
//! fell back to shared TLS: a benchmark measured shared TLS as "own").
//! One test: the probe runs once per process.

#[test]
fn the_probe_finds_mallocs_words_in_a_reused_arena() {
    // A thread that leaves 24-byte chunks in its arena's fastbins (its
    // cache holds only 7 of a size), then exits: its arena goes to the free
    // list, where the next new thread's (the probe's) malloc finds it.
    std::thread::spawn(|| {
        let chunks: Vec<*mut libc::c_void> = (0..64)
            // SAFETY: plain allocations, freed below.
            .map(|_| unsafe { libc::malloc(24) })
            .collect();
        for c in chunks {
            // SAFETY: allocated above, freed once.
            unsafe { libc::free(c) };
        }
    })
    .join()
    .unwrap();
    assert!(fiber::tls::enabled(), "per-fiber TLS fell back to shared");
    let own = greenhook::spawn(|| hub::with_current_fiber(|f| f.is_some_and(|f| f.has_own_tls())));
    assert!(own.join().unwrap());
}
