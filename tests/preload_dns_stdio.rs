//! Differential tests of the stdio hooks (`interpose/src/stdio.rs`): a
//! reader thread blocks in a stdio input function on an empty pipe while a
//! writer thread feeds it in pieces 100 ms apart and a ticker ticks every
//! 10 ms. Outputs must match the unpatched run, and patched, the ticker must
//! never be late by 100 ms (unhooked, the hub froze inside glibc's read).
mod util;

use util::differential_ticking;

fn stdio_case(mode: &str) {
    differential_ticking("stdio_pipe", &[mode]);
}

#[test]
fn fgets_on_an_empty_pipe_does_not_freeze() {
    stdio_case("fgets");
}

#[test]
fn getline_on_an_empty_pipe_does_not_freeze() {
    stdio_case("getline");
}

#[test]
fn fread_on_an_empty_pipe_does_not_freeze() {
    stdio_case("fread");
}

#[test]
fn fgetc_on_an_empty_pipe_does_not_freeze() {
    stdio_case("fgetc");
}

#[test]
fn fscanf_on_an_empty_pipe_does_not_freeze() {
    stdio_case("scanf");
}

#[test]
fn fwrite_to_a_full_pipe_waits_cooperatively() {
    stdio_case("fwrite");
}

/// A thread cancelled while blocked in `fgets` on an empty pipe or in
/// `fwrite` to a full one: cancelled (the write looked for room for ever),
/// and the stream's lock let go, so another thread can use the stream
/// (it waited for ever for the cancelled thread's lock).
#[test]
fn a_thread_cancelled_in_stdio_lets_the_stream_go() {
    util::differential("stdio_cancel", &[]);
}

/// A cancellation already pending acts where glibc's stdio reads or
/// writes the fd, not where a call is served from the stream's buffer:
/// buffered reads and writes that fit on a pipe acted, before, and
/// `fflush`/`fclose` of a regular file's pending output did not.
#[test]
fn stdio_acts_on_a_pending_cancellation_where_it_reads_or_writes() {
    util::differential("stdio_points", &[]);
}

/// `getc_unlocked`/`putc_unlocked` as optimised code inlines them (they
/// call `__uflow`/`__overflow`) on a pipe served late by another thread:
/// it hung, the hub held in the kernel.
#[test]
fn inline_getc_unlocked_and_putc_unlocked_wait_on_the_hub() {
    util::differential("stdio_wide_inline", &["inline"]);
}

/// Wide input (`fgetwc`, `getwc`, `fgetws`, `fwscanf`) on a pipe whose
/// writer comes late: it hung, the hub held in the kernel.
#[test]
fn wide_character_input_waits_on_the_hub() {
    util::differential("stdio_wide_inline", &["wide_in"]);
}

/// Wide output (`fputwc`, `fputws` of more than a pipe holds, `fwprintf`)
/// to a pipe whose reader comes late.
#[test]
fn wide_character_output_waits_on_the_hub() {
    util::differential("stdio_wide_inline", &["wide_out"]);
}

/// Name resolution runs on the offload pool while other threads keep
/// running. The names are answered by /etc/hosts through NSS (no network);
/// this machine offers no slow name source we may control without touching
/// system configuration (its nameserver is on a private address that tests
/// must never contact), so the test proves the mechanism instead: every
/// lookup is counted as an offload, answers match the unpatched run, and the
/// ticker stays on time.
#[test]
fn name_resolution_runs_on_the_offload_pool() {
    differential_ticking("dns_lookup", &["20"]);
    let bin = util::compile("dns_lookup");
    let r = util::run(&bin, &["20"], true, &[("GREENHOOK_STATS", "1")]);
    let offloads: u64 = r
        .stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("offloads"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(offloads >= 8 * 50 * 20, "{offloads} offloads: {}", r.stderr);
    assert!(r.stderr.contains("dns 8000"), "{}", r.stderr);
}
