//! Deadlines, on the hub's clock or on the wall clock.
//!
//! The hub's timers run on std's [`Instant`], which is `CLOCK_MONOTONIC` on
//! Linux (as `Instant::now` documents). A deadline given on the wall clock
//! (`CLOCK_REALTIME`: `pthread_cond_timedwait`'s default, `sem_timedwait`,
//! an absolute `clock_nanosleep`) must follow that clock when it is set, as
//! the kernel's own waits do. Such a [`Deadline`] keeps its wall time and is
//! mapped onto the hub's clock when its timer is armed, with the hub's
//! measure of the offset between the two clocks, made once, not at every
//! wait; the hub measures it again at its turns, and when the wall clock was
//! set, every wall deadline of the hub moves with it (see `timer`). A hub
//! asleep in its poller is woken for that by a timer fd that the kernel
//! cancels when the wall clock is set (see `reactor`).

use std::num::NonZeroU64;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::Hub;

/// When a wait ends: a time on the hub's clock, or one on the wall clock
/// (which the hub maps onto its own as the wall clock stands when it arms
/// the wait's timer, and moves when that clock is set).
///
/// One word, so that an `Option<Deadline>` passes through the park calls
/// in a register as an `Option<Instant>` did (a two-word deadline cost the
/// timed condvar ping-pong an eighth of its instructions): nanoseconds plus
/// one (never zero), since the hub clock's [`base`] or, with the [`WALL`]
/// bit, since 1970 on the wall clock. That spans 292 years (from the
/// process's first deadline; to 2262); a later one is as good as never and
/// is kept at that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(NonZeroU64);

/// The bit of a [`Deadline`] that marks a wall-clock one.
const WALL: u64 = 1 << 63;
/// The furthest a deadline reaches, in nanoseconds.
const FURTHEST: u64 = WALL - 2;

impl From<Instant> for Deadline {
    /// An instant before the base is due.
    #[inline]
    fn from(at: Instant) -> Deadline {
        let ns = at.saturating_duration_since(base().1).as_nanos();
        Deadline::of(u64::try_from(ns).unwrap_or(u64::MAX).min(FURTHEST), 0)
    }
}

impl Deadline {
    #[inline(always)]
    fn of(ns: u64, wall: u64) -> Deadline {
        // `ns` is at most FURTHEST: plus one, it is neither zero nor reaches
        // the WALL bit.
        Deadline(NonZeroU64::new((ns + 1) | wall).unwrap_or(NonZeroU64::MIN))
    }

    /// `ns`, clamped below at 0 (due); `None` beyond [`FURTHEST`].
    #[inline(always)]
    fn clamped(ns: i128, wall: u64) -> Option<Deadline> {
        if ns > FURTHEST as i128 {
            return None;
        }
        Some(Deadline::of(ns.max(0) as u64, wall))
    }

    /// A time of the hub's clock (`CLOCK_MONOTONIC` on Linux), in
    /// nanoseconds, as a deadline, without reading a clock. `None`: too far
    /// away to represent. A time already past is due.
    #[inline(always)]
    pub fn monotonic(ns: i128) -> Option<Deadline> {
        Deadline::clamped(ns - base().0, 0)
    }

    /// A `CLOCK_REALTIME` time, in nanoseconds, as a deadline that follows
    /// the wall clock when it is set, without reading a clock. `None`: too
    /// far away to represent. A time already past is due.
    #[inline(always)]
    pub fn wall(ns: i128) -> Option<Deadline> {
        Deadline::clamped(ns, WALL)
    }

    /// The nanoseconds it holds.
    #[inline(always)]
    fn nanos(self) -> u64 {
        (self.0.get() & !WALL) - 1
    }

    /// The instant on the hub's clock it stands for now: for a wall-clock
    /// deadline, as the calling thread's hub maps the wall clock (reading
    /// no clock once the hub has measured the offset between the two).
    #[inline]
    pub fn instant(self) -> Instant {
        self.instant_with(if self.is_wall() { Hub::get().wall_offset() } else { 0 })
    }

    /// The instant it stands for when the wall clock is `wall_offset`
    /// nanoseconds ahead of the hub's (ignored for a deadline on the hub's
    /// clock).
    #[inline]
    pub(crate) fn instant_with(self, wall_offset: i128) -> Instant {
        if !self.is_wall() {
            // Within 292 years of an `Instant` taken now: no overflow.
            return base().1 + Duration::from_nanos(self.nanos());
        }
        let (base_ns, base_instant) = *base();
        match u64::try_from(self.nanos() as i128 - wall_offset - base_ns) {
            Ok(ahead) => base_instant + Duration::from_nanos(ahead),
            Err(_) => base_instant, // before the base: due
        }
    }

    /// The clock whose time it is and that time, in nanoseconds: for a
    /// wall-clock deadline, `CLOCK_REALTIME`; else the hub's clock (the
    /// clock of `Instant`). For a wait made elsewhere (the kernel's),
    /// which then follows a set of the wall clock as the hub does.
    #[inline]
    pub fn clock_time(self) -> (libc::clockid_t, i128) {
        if self.is_wall() {
            (libc::CLOCK_REALTIME, self.nanos() as i128)
        } else {
            (INSTANT_CLOCK, base().0 + self.nanos() as i128)
        }
    }

    /// Whether it follows the wall clock.
    #[inline]
    pub(crate) fn is_wall(self) -> bool {
        self.0.get() & WALL != 0
    }

    /// The earlier of the two; a deadline on the hub's clock when `at` is.
    #[inline]
    pub fn min(self, at: Instant) -> Deadline {
        if at < self.instant() {
            Deadline::from(at)
        } else {
            self
        }
    }
}

/// The time on `clock` now, in nanoseconds.
#[inline]
pub fn now_nanos(clock: libc::clockid_t) -> i128 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec as i128 * 1_000_000_000 + now.tv_nsec as i128
}

/// The clock std's `Instant` reads (its docs name them).
#[cfg(target_vendor = "apple")]
const INSTANT_CLOCK: libc::clockid_t = libc::CLOCK_UPTIME_RAW;
#[cfg(not(target_vendor = "apple"))]
const INSTANT_CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// `clock` less `from`, in nanoseconds, measured now. `clock` is read
/// first: the result is short of the true offset by the time between the
/// two reads, so a time of `clock` mapped onto `from` with it lands late by
/// as much, never early.
#[inline]
pub fn offset_now(clock: libc::clockid_t, from: libc::clockid_t) -> i128 {
    let ahead = now_nanos(clock);
    ahead - now_nanos(from)
}

/// `CLOCK_REALTIME` less the `Instant` clock, measured now (see
/// [`offset_now`]).
pub(crate) fn wall_offset_now() -> i128 {
    let offset = offset_now(libc::CLOCK_REALTIME, INSTANT_CLOCK);
    #[cfg(test)]
    let offset = offset + WALL_CLOCK_SET.with(|s| s.get());
    offset
}

#[cfg(test)]
thread_local! {
    /// How far the unit tests of this thread set the wall clock ahead, as
    /// this thread's hub sees it.
    pub(crate) static WALL_CLOCK_SET: std::cell::Cell<i128> = const { std::cell::Cell::new(0) };
}

/// A time of the `Instant` clock (`CLOCK_MONOTONIC` on Linux,
/// `CLOCK_UPTIME_RAW` on Apple's systems) in nanoseconds, and the same time
/// as an `Instant`: std's `Instant` is that clock, so this one pair of
/// readings, made once, maps every time of the clock to an `Instant`
/// without reading it again. The clock is read first, then the `Instant`,
/// so a mapped instant is late by the time between the two reads (tens of
/// nanoseconds), never early.
#[inline(always)]
fn base() -> &'static (i128, Instant) {
    static BASE: OnceLock<(i128, Instant)> = OnceLock::new();
    BASE.get_or_init(|| (now_nanos(INSTANT_CLOCK), Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_gives_back_its_clock_and_time() {
        let mono = now_nanos(libc::CLOCK_MONOTONIC) + 5_000_000_000;
        let d = Deadline::monotonic(mono).unwrap();
        assert_eq!(d.clock_time(), (libc::CLOCK_MONOTONIC, mono));
        let wall = now_nanos(libc::CLOCK_REALTIME) + 5_000_000_000;
        let d = Deadline::wall(wall).unwrap();
        assert_eq!(d.clock_time(), (libc::CLOCK_REALTIME, wall));
        // An instant is kept to the nanosecond of the `Instant` clock.
        let at = Instant::now() + Duration::from_secs(5);
        let (clock, ns) = Deadline::from(at).clock_time();
        assert_eq!(clock, libc::CLOCK_MONOTONIC);
        assert_eq!(Deadline::monotonic(ns).unwrap().instant(), Deadline::from(at).instant());
    }
}
