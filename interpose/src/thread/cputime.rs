//! Thread CPU-time clocks, per fiber: `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`
//! and `getrusage(RUSAGE_THREAD)` in a fiber, and the clock
//! `pthread_getcpuclockid` gives for one.
//!
//! The time itself is the hub's ([`hub::cpu_time`]): what a fiber used
//! while it was the running task, counted from the first question on
//! (before it, counting costs the hub nothing). The root's clock is its
//! OS thread's less what fibers used.
//!
//! A fiber's clock id is made the way the kernel makes a thread's
//! (`~tid << 3 | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED`, negative), from a
//! number above any tid the kernel can give (`PID_MAX_LIMIT` is 2^22):
//! `FAKE_BASE` plus the low bits of the handle's serial. So a program that
//! hands it to a call we do not hook (`timer_create`, `clock_nanosleep`)
//! gets the kernel's `EINVAL` for a thread that does not exist, and a
//! clock of a fiber that ended reads `EINVAL`, as the kernel answers for a
//! thread that exited.

use libc::{c_int, clockid_t, pthread_t, timespec};

use super::handle::{self, Gone};
use super::{lookup, resolve, Target};
use crate::gate::emulating;
use crate::hook::hook;

/// The kernel's flags in a CPU clock id: per thread, `CPUCLOCK_SCHED`.
const THREAD_SCHED: clockid_t = 4 | 2;
/// Fake tids start here (above `PID_MAX_LIMIT`, and `~tid << 3` still fits).
const FAKE_BASE: usize = 1 << 27;
const FAKE_MASK: usize = FAKE_BASE - 1;

/// The clock id of the fiber whose handle is `h`.
fn clock_of(h: usize) -> clockid_t {
    let fake = FAKE_BASE | (handle::serial(h) & FAKE_MASK);
    (!(fake as clockid_t) << 3) | THREAD_SCHED
}

/// The handle a fiber clock id names (the newest thread whose serial
/// matches its low bits), or `None` for any other clock id.
fn handle_of(clk: clockid_t) -> Option<usize> {
    if clk >= 0 || clk & 7 != THREAD_SCHED {
        return None;
    }
    let fake = !(clk >> 3) as usize;
    if fake & !FAKE_MASK != FAKE_BASE {
        return None;
    }
    let low = fake & FAKE_MASK;
    let next = handle::next_serial();
    let mut s = (next & !FAKE_MASK) | low;
    if s >= next {
        s = s.checked_sub(FAKE_BASE)?;
    }
    Some(handle::from_serial(s))
}

/// What a CPU clock of ours reads, or `EINVAL`: `Some` only for the calling
/// context's `CLOCK_THREAD_CPUTIME_ID` on a thread with a hub (a fiber's,
/// or the root's less its fibers') and for fiber clock ids.
fn read(clk: clockid_t) -> Option<Result<std::time::Duration, c_int>> {
    if clk == libc::CLOCK_THREAD_CPUTIME_ID {
        if !emulating() || !hub::has_hub() {
            return None;
        }
        return Some(Ok(hub::cpu_time(&hub::current())));
    }
    let h = handle_of(clk)?;
    Some(match lookup(h as pthread_t) {
        Some(rec) if !rec.ended.get() => Ok(hub::cpu_time(&rec.task)),
        _ => Err(libc::EINVAL),
    })
}

/// Resolves the real `clock_gettime` now: a program's first call may come
/// from a signal handler, where `dlsym` is not safe.
pub(crate) fn resolve_early() {
    let mut ts = timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock and out pointer.
    unsafe { clock_gettime::real(libc::CLOCK_MONOTONIC, &mut ts) };
}

/// Whether `clk` may be one of ours: one compare for every other clock.
#[inline]
fn maybe_ours(clk: clockid_t) -> bool {
    clk == libc::CLOCK_THREAD_CPUTIME_ID || clk < 0 && clk & 7 == THREAD_SCHED
}

hook! {
    /// `pthread_getcpuclockid`: a fiber's CPU clock; `ESRCH` once it ended.
    [thread] fn pthread_getcpuclockid(t: pthread_t, clk: *mut clockid_t) -> c_int {
        match resolve(t) {
            Target::Fiber(rec) if !rec.ended.get() => {
                // SAFETY: the caller's out pointer.
                unsafe { *clk = clock_of(rec.handle) };
                0
            }
            Target::Fiber(_) | Target::Gone(Gone::Joined | Gone::Detached | Gone::Never) => libc::ESRCH,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => unsafe { pthread_getcpuclockid::real(t, clk) },
        }
    }

    /// `clock_gettime(2)`: per-fiber thread CPU clocks; every other clock
    /// goes straight to libc.
    #[gate(maybe_ours(clk))]
    [clock] fn clock_gettime(clk: clockid_t, ts: *mut timespec) -> c_int {
        match read(clk) {
            Some(Ok(d)) => {
                if ts.is_null() {
                    return crate::errno::fail(libc::EFAULT);
                }
                // SAFETY: the caller's out pointer (null checked; the kernel
                // would give EFAULT for other bad ones, glibc's vDSO path
                // crashes).
                unsafe { *ts = crate::deadline::timespec_of(d) };
                0
            }
            Some(Err(e)) => crate::errno::fail(e),
            // SAFETY: forwarded unchanged.
            None => unsafe { clock_gettime::real(clk, ts) },
        }
    }

    /// `getrusage(2)` with `RUSAGE_THREAD`: the CPU time is the calling
    /// context's, as its `CLOCK_THREAD_CPUTIME_ID` reads (all of it in
    /// `ru_utime`: the hub does not tell the kernel's part apart); the
    /// other fields stay the OS thread's. It was the OS thread's, every
    /// fiber's together.
    #[gate(who == libc::RUSAGE_THREAD && emulating())]
    [clock] fn getrusage(who: c_int, usage: *mut libc::rusage) -> c_int {
        // SAFETY: the caller's arguments, to the kernel's checks.
        let r = unsafe { getrusage::real(who, usage) };
        if r != 0 || !hub::has_hub() {
            return r;
        }
        let d = hub::cpu_time(&hub::current());
        // SAFETY: the caller's buffer, which the kernel just filled.
        unsafe {
            (*usage).ru_utime = libc::timeval {
                tv_sec: d.as_secs() as libc::time_t,
                tv_usec: libc::suseconds_t::from(d.subsec_micros()),
            };
            (*usage).ru_stime = libc::timeval { tv_sec: 0, tv_usec: 0 };
        }
        0
    }

    /// `clock_getres(2)`: a fiber clock ticks in nanoseconds, like a
    /// thread's.
    #[gate(maybe_ours(clk) && clk != libc::CLOCK_THREAD_CPUTIME_ID)]
    [clock] fn clock_getres(clk: clockid_t, res: *mut timespec) -> c_int {
        match handle_of(clk) {
            Some(h) => match lookup(h as pthread_t) {
                Some(rec) if !rec.ended.get() => {
                    if !res.is_null() {
                        // SAFETY: the caller's out pointer.
                        unsafe { *res = timespec { tv_sec: 0, tv_nsec: 1 } };
                    }
                    0
                }
                _ => crate::errno::fail(libc::EINVAL),
            },
            // SAFETY: forwarded unchanged.
            None => unsafe { clock_getres::real(clk, res) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fiber_clock_ids_round_trip_and_look_like_thread_clocks() {
        let h = handle::new_handle();
        let c = clock_of(h);
        assert!(c < 0 && c & 7 == THREAD_SCHED);
        assert_eq!(handle_of(c), Some(h));
        assert_eq!(handle_of(libc::CLOCK_MONOTONIC), None);
        assert_eq!(handle_of(libc::CLOCK_THREAD_CPUTIME_ID), None);
        // A real thread's clock (tid 1234) is not ours.
        let real = (!1234 << 3) | THREAD_SCHED;
        assert_eq!(handle_of(real), None);
    }
}
