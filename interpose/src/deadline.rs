//! Timeouts as the C API passes them, turned into the hub's deadlines.
//!
//! Every `timespec` a caller hands us is read here, through
//! [`crate::user::read`]: a bad pointer gets `EFAULT` (the kernel's answer)
//! instead of a crash inside a hook. Relative timeouts become an
//! `Option<Instant>`, absolute ones an `Option<hub::Deadline>`, which keeps
//! following the wall clock for a `CLOCK_REALTIME` time: `None` waits
//! forever, which is also what a timeout too far away to represent means.

// The portable build (macOS selection) has only the sleep hooks.
#![cfg_attr(not(greenhook_linux_hooks), allow(dead_code))]

use std::time::{Duration, Instant};

use hub::Deadline;

use libc::{c_int, clockid_t, timespec};

/// Copies the caller's `timespec`; `EFAULT` for a bad (or null) pointer.
pub(crate) fn read(ts: *const timespec) -> Result<timespec, c_int> {
    crate::user::read(ts)
}

/// A relative timeout as a duration; `EINVAL` for a negative one or
/// nanoseconds out of range (the kernel's checks).
pub(crate) fn duration_of(ts: &timespec) -> Result<Duration, c_int> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(libc::EINVAL);
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// A duration as a `timespec` (saturating).
pub(crate) fn timespec_of(d: Duration) -> timespec {
    timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// The deadline `d` from now (`None`: never, or too far to represent).
pub(crate) fn after(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// A relative timeout from the caller's pointer: null waits forever.
pub(crate) fn relative(ts: *const timespec) -> Result<Option<Instant>, c_int> {
    if ts.is_null() {
        return Ok(None);
    }
    Ok(after(duration_of(&read(ts)?)?))
}

/// A relative timeout as the kernel reads an io_uring wait's
/// (`timespec64_to_ktime`, then added to the start time): nothing is
/// checked. Seconds beyond ktime's range wait forever; otherwise seconds
/// and nanoseconds are summed as they are (wrapping, as the kernel's
/// arithmetic does), so a sum at or below zero has expired already and a
/// `tv_nsec` of 2e9 waits two seconds. Only the read of `ts` can fail
/// (`EFAULT`).
#[cfg_attr(greenhook_table, allow(dead_code))] // for `uring`, not in the table build
pub(crate) fn ktime_relative(ts: *const timespec) -> Result<Option<Instant>, c_int> {
    const KTIME_SEC_MAX: i64 = i64::MAX / 1_000_000_000;
    let t = read(ts)?;
    let (sec, nsec): (i64, i64) = (t.tv_sec, t.tv_nsec);
    if sec >= KTIME_SEC_MAX {
        return Ok(None);
    }
    let ns = sec.wrapping_mul(1_000_000_000).wrapping_add(nsec);
    Ok(after(Duration::from_nanos(ns.max(0) as u64)))
}

/// A `poll`-style timeout in milliseconds: negative waits forever.
pub(crate) fn millis(timeout: c_int) -> Option<Instant> {
    (timeout >= 0)
        .then(|| after(Duration::from_millis(timeout as u64)))
        .flatten()
}

/// A `timespec` in nanoseconds.
fn nanos(ts: &timespec) -> i128 {
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// An absolute time on `clock` as a deadline (`None`: too far away). A
/// time already past is due. Neither `CLOCK_MONOTONIC`, std's `Instant`,
/// nor `CLOCK_REALTIME`, whose deadline follows the wall clock when it is
/// set ([`Deadline::wall`]), reads a clock here. `CLOCK_TAI` is the wall
/// clock plus the TAI offset (two reads): its deadline follows a set of
/// the wall clock too, as the kernel's do. Another clock's time is mapped
/// onto `CLOCK_MONOTONIC` once, with two reads.
#[inline(always)]
pub(crate) fn at(clock: clockid_t, ts: &timespec) -> Option<Deadline> {
    match clock {
        libc::CLOCK_MONOTONIC => Deadline::monotonic(nanos(ts)),
        libc::CLOCK_REALTIME => Deadline::wall(nanos(ts)),
        #[cfg(target_os = "linux")]
        libc::CLOCK_TAI => Deadline::wall(nanos(ts) - hub::offset_now(clock, libc::CLOCK_REALTIME)),
        _ => Deadline::monotonic(nanos(ts) - hub::offset_now(clock, libc::CLOCK_MONOTONIC)),
    }
}

/// An absolute pthread timeout (`pthread_mutex_timedlock`,
/// `pthread_cond_clockwait`, …) as glibc checks it: `EINVAL` for a clock
/// other than `CLOCK_REALTIME`/`CLOCK_MONOTONIC` or nanoseconds out of
/// range; a negative time is already past. A null pointer gets `EINVAL`
/// and another bad one `EFAULT`, where glibc would crash.
#[inline(always)]
pub(crate) fn absolute(clock: clockid_t, ts: *const timespec) -> Result<Option<Deadline>, c_int> {
    if ts.is_null() || (clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC) {
        return Err(libc::EINVAL);
    }
    let t = read(ts)?;
    if !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(libc::EINVAL);
    }
    if t.tv_sec < 0 {
        return Ok(Some(Instant::now().into()));
    }
    Ok(at(clock, &t))
}

/// [`absolute`] for a wait that must end: a time too far to represent
/// becomes thirty years from now rather than "never".
#[inline(always)]
pub(crate) fn absolute_bounded(clock: clockid_t, ts: *const timespec) -> Result<Option<Deadline>, c_int> {
    Ok(absolute(clock, ts)?.or_else(|| after(Duration::from_secs(86400 * 365 * 30)).map(Deadline::from)))
}
