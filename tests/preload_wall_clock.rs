//! Absolute waits on `CLOCK_REALTIME` follow a set of the wall clock, under
//! the preload as without it. A test binary of its own: it sets the
//! machine's wall clock 30 s ahead for a few seconds (and back), which no
//! other test may see meanwhile. Without the right to set the clock
//! (`CAP_SYS_TIME`) both runs print the same "skipped" line.
mod util;

#[test]
fn realtime_waits_follow_a_set_of_the_wall_clock() {
    let (_, patched) = util::differential("wall_clock_set", &[]);
    if patched.stdout.starts_with("skipped") {
        eprintln!("{}", patched.stdout.trim());
    }
}
