//! `_FORTIFY_SOURCE` entry points (`__read_chk`, `__printf_chk`, …) and the
//! `printf` family, run differentially: `tests/c/fortified.c` is the program
//! built the way distributions build it, `tests/c/formatted.c` the same
//! program with the plain functions. Each mode waits for a peer thread
//! (data sent after 100 ms, or a pipe drained from 100 ms on) while a ticker
//! ticks every 10 ms: the results must match the unpatched run, and the
//! patched ticker must never have been held up.
//!
//! Before these hooks, under the preload: a fortified `read`/`recv` returned
//! `EAGAIN` at once, fortified `fgets`/`fread` and any `fprintf` into a full
//! pipe hung the process, and `dprintf` lost its output.
mod util;

use object::{Object, ObjectSymbol};
use util::{compile, differential_ticking};

/// The modes every target hooks, then the variadic output ones, whose
/// trampolines exist on x86-64 only (elsewhere they pass through, and a
/// `fprintf` into a full pipe would hold the hub).
fn modes() -> Vec<&'static str> {
    let mut m = vec!["read", "recv", "recvfrom", "poll", "fgets", "fread"];
    if cfg!(target_arch = "x86_64") {
        m.extend(["printf", "fprintf", "dprintf"]);
    }
    m
}

fn check(program: &str, mode: &str) {
    differential_ticking(program, &[mode]);
}

#[test]
fn the_fortified_build_really_calls_the_chk_functions() {
    let bin = std::fs::read(compile("fortified")).unwrap();
    let file = object::File::parse(&*bin).unwrap();
    let imports: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .collect();
    for f in [
        "__read_chk",
        "__recv_chk",
        "__recvfrom_chk",
        "__poll_chk",
        "__fgets_chk",
        "__fread_chk",
        "__printf_chk",
        "__fprintf_chk",
        "__dprintf_chk",
    ] {
        assert!(
            imports.iter().any(|i| i == f),
            "the compiler did not fortify {f}: {imports:?}"
        );
    }
}

#[test]
fn fortified_calls_cooperate_and_match_glibc() {
    for mode in modes() {
        check("fortified", mode);
    }
}

#[test]
fn plain_formatted_output_cooperates_and_matches_glibc() {
    for mode in modes() {
        check("formatted", mode);
    }
}
