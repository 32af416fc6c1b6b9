//! Timers and sleeping.
//!
//! Every deadline a task waits with (a sleep, or any wait with a timeout)
//! is one entry of an ordered map keyed by `(deadline, seq)`: `seq` makes
//! equal deadlines distinct and fires them in the order they were armed.
//! Each loop turn fires the entries that are due, waking their tasks with
//! [`Wake::TimedOut`]; a wait that ends otherwise removes its entry. A timer
//! never fires early.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::stats::bump;
use crate::task::{Task, Waiter};
use crate::{internal, Hub, Waiting, Wake};

/// A timer's key in the map: its deadline, then the order it was armed in.
pub(crate) type TimerKey = (Instant, u64);

impl Hub {
    /// Arms a timer that wakes `cur`'s current wait at `deadline`.
    #[inline]
    pub(crate) fn arm_timer(&self, cur: &Rc<Task>, deadline: Instant) -> TimerKey {
        let k = (deadline, self.timer_seq.get());
        self.timer_seq.set(k.1 + 1);
        let w = Waiter {
            task: cur.clone(),
            seq: cur.seq.get(),
        };
        internal::bookkeeping(|| self.timers.borrow_mut().insert(k, w));
        bump(&self.counters.timer_waits);
        k
    }

    /// Removes a timer whose wait ended before it fired.
    #[inline]
    pub(crate) fn disarm_timer(&self, k: TimerKey) {
        internal::bookkeeping(|| self.timers.borrow_mut().remove(&k));
    }

    /// How long the loop may sleep before the next timer is due (None: no
    /// timer).
    pub(crate) fn until_next_timer(&self, now: Instant) -> Option<Duration> {
        self.timers
            .borrow()
            .keys()
            .next()
            .map(|k| k.0.saturating_duration_since(now))
    }

    /// Wakes the tasks whose timers are due.
    pub(crate) fn fire_timers(&self) {
        internal::bookkeeping(|| self.fire_timers_now())
    }

    fn fire_timers_now(&self) {
        let mut timers = self.timers.borrow_mut();
        if timers.is_empty() {
            return;
        }
        let now = Instant::now();
        // A timer due exactly now fires: deadlines are "not before".
        while let Some(entry) = timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let w = entry.remove();
            self.wake(&w, Wake::TimedOut);
        }
    }
}

/// Sleeps the current task for at least `dur`.
pub fn sleep(dur: Duration) {
    match Instant::now().checked_add(dur) {
        Some(d) => sleep_until(d),
        None => sleep_forever(),
    }
}

/// Sleeps the current task until `deadline` (never earlier), unless it is
/// interrupted ([`Task::interrupt`]) first.
pub fn sleep_until(deadline: Instant) {
    sleep_interruptible(deadline);
}

/// Sleeps until interrupted ([`Task::interrupt`]).
pub fn sleep_forever() {
    let hub = Hub::get();
    let cur = hub.current();
    hub.prepare(&cur, Waiting::Sleep);
    // Counted as pending so the deadlock detector stays quiet: a signal or
    // cancellation may end it.
    hub.remote.hold();
    hub.block(&cur, None);
    hub.remote.release();
}

/// Sleeps like [`sleep_until`] but returns early with `false` if the task is
/// interrupted.
pub fn sleep_interruptible(deadline: Instant) -> bool {
    let hub = Hub::get();
    let cur = hub.current();
    while Instant::now() < deadline {
        hub.prepare(&cur, Waiting::Sleep);
        if hub.block(&cur, Some(deadline)) == Wake::Interrupted {
            return false;
        }
    }
    true
}
