//! Sleeps and yields: `sleep`, `usleep`, `nanosleep`, `clock_nanosleep`,
//! `sched_yield`, `pthread_yield`. Each needs its own hook: glibc's `sleep`
//! calls its internal nanosleep, which no `nanosleep` hook sees.
//!
//! Gate: cooperative only inside a fiber, or in a root context whose hub has
//! fibers to run meanwhile; otherwise the real call (exact kernel
//! semantics). Invalid arguments get the kernel's answer.

use std::time::{Duration, Instant};

use libc::{c_int, c_uint, timespec};

use crate::errno;

mod next {
    use libc::{c_int, c_uint, timespec};
    #[cfg(greenhook_linux_hooks)]
    crate::real::real! {
        fn clock_nanosleep(clock: libc::clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int;
    }
    crate::real::real! {
        fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int;
        fn sleep(secs: c_uint) -> c_uint;
        fn usleep(us: libc::useconds_t) -> c_int;
        fn sched_yield() -> c_int;
    }
}

use crate::cooperative;

/// A valid timespec as a duration; `EINVAL` for out-of-range fields.
pub(crate) fn duration_of(ts: &timespec) -> Result<Duration, c_int> {
    if ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= 1_000_000_000 {
        return Err(libc::EINVAL);
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

pub(crate) fn timespec_of(d: Duration) -> timespec {
    timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Sleeps cooperatively; `Err(remaining)` when interrupted (a signal, or a
/// cancellation that was not acted on).
pub(crate) fn sleep_for(d: Duration) -> Result<(), Duration> {
    crate::cancel_point();
    let Some(deadline) = Instant::now().checked_add(d) else {
        hub::sleep_forever();
        crate::cancel_point();
        return Err(d);
    };
    if hub::sleep_interruptible(deadline) {
        Ok(())
    } else {
        crate::cancel_point();
        Err(deadline.saturating_duration_since(Instant::now()))
    }
}

/// `nanosleep(2)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_nanosleep")]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    crate::real::guard("nanosleep", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::nanosleep(req, rem) };
        }
        let req = match crate::user::read(req) {
            Ok(req) => req,
            Err(e) => return errno::fail(e),
        };
        match duration_of(&req) {
            Err(e) => errno::fail(e),
            Ok(d) => match sleep_for(d) {
                Ok(()) => 0,
                Err(left) => {
                    if !rem.is_null() {
                        if let Err(e) = crate::user::write(rem, timespec_of(left)) {
                            return errno::fail(e);
                        }
                    }
                    errno::fail(libc::EINTR)
                }
            },
        }
    })
}

/// `clock_nanosleep(2)`: returns an error number, never sets errno.
#[cfg(greenhook_linux_hooks)]
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_clock_nanosleep")]
pub unsafe extern "C" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> c_int {
    crate::real::guard("clock_nanosleep", || {
        let known = matches!(
            clock,
            libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI
        );
        if !cooperative() || !known || flags & !libc::TIMER_ABSTIME != 0 {
            // SAFETY: forwarded unchanged.
            return unsafe { next::clock_nanosleep(clock, flags, req, rem) };
        }
        let req = match crate::user::read(req) {
            Ok(req) => req,
            Err(e) => return e,
        };
        let d = match duration_of(&req) {
            Ok(d) => d,
            Err(e) => return e,
        };
        let abs = flags & libc::TIMER_ABSTIME != 0;
        let d = if abs {
            let mut now = timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `now` is a valid out pointer; the clock id is valid.
            unsafe { libc::clock_gettime(clock, &mut now) };
            let now = Duration::new(now.tv_sec.max(0) as u64, now.tv_nsec as u32);
            d.saturating_sub(now)
        } else {
            d
        };
        match sleep_for(d) {
            Ok(()) => 0,
            Err(left) => {
                if !abs && !rem.is_null() {
                    if let Err(e) = crate::user::write(rem, timespec_of(left)) {
                        return e;
                    }
                }
                libc::EINTR
            }
        }
    })
}

/// `sleep(3)`: returns the unslept seconds when interrupted.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sleep")]
pub unsafe extern "C" fn sleep(secs: c_uint) -> c_uint {
    crate::real::guard("sleep", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::sleep(secs) };
        }
        match sleep_for(Duration::from_secs(secs.into())) {
            Ok(()) => 0,
            // Like glibc: round the remainder up, never report 0 if interrupted early.
            Err(left) => (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1) as c_uint,
        }
    })
}

/// `usleep(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_usleep")]
pub unsafe extern "C" fn usleep(us: libc::useconds_t) -> c_int {
    crate::real::guard("usleep", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::usleep(us) };
        }
        match sleep_for(Duration::from_micros(us.into())) {
            Ok(()) => 0,
            Err(_) => errno::fail(libc::EINTR),
        }
    })
}

/// `sched_yield(2)`: lets the other fibers run.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sched_yield")]
pub unsafe extern "C" fn sched_yield() -> c_int {
    crate::real::guard("sched_yield", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::sched_yield() };
        }
        hub::yield_now();
        0
    })
}

/// `pthread_yield(3)` (deprecated alias of `sched_yield`).
#[cfg(greenhook_linux_hooks)]
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_yield")]
pub unsafe extern "C" fn pthread_yield() -> c_int {
    // SAFETY: same contract.
    unsafe { sched_yield() }
}

// Entries of the interpose table (see `real::interpose!`).
#[cfg(greenhook_linux_hooks)]
crate::real::interpose! {
    clock_nanosleep,
}
crate::real::interpose! {
    nanosleep,
    sleep,
    usleep,
    sched_yield,
}
// Not `pthread_yield`: glibc keeps it only as a compatibility symbol (no
// default version to bind to), and macOS never had it.
