//! CPU time per fiber, for thread CPU-time clocks ([`cpu_time`]).
//!
//! A fiber's CPU time is the time it was the running task: measured on
//! the monotonic clock at each switch into and out of it. The root's is
//! the OS thread's own CPU clock less everything charged to fibers, so
//! time the root spends blocked in the kernel (an idle poll, a real
//! `nanosleep`) is not counted, as for a real thread.
//!
//! Accounting is off until the first question ([`cpu_time`]): a yield
//! pays nothing for it until then (the inlined hand-over between two
//! fibers, see [`handover`](crate::handover), keeps no clock and is then
//! simply not used). From then on every switch reads the monotonic clock
//! (a vDSO call on Linux, ~30 ns here): a yield round trip between two
//! fibers takes an out-of-line hand-over with two reads, and a trip
//! through the root two reads per fiber run. Fibers' clocks count from the
//! first question on: whatever they ran before counts as the root's. It
//! is wall time while the fiber runs: a fiber blocked in a system call no
//! hook turned into a wait (so still the running task), or whose OS thread
//! the kernel has descheduled, is charged for it.

use std::cell::Cell;
use std::time::Duration;

use std::rc::Rc;

use crate::handover::DIRECT_BUDGET;
use crate::{Hub, Task};

/// The hub's accounting state.
#[derive(Default)]
pub(crate) struct Clocks {
    /// Accounting is on (see the module docs).
    pub(crate) on: Cell<bool>,
    /// When the running fiber was resumed, in [`now_ns`] nanoseconds.
    mark: Cell<u64>,
    /// Everything charged to fibers so far.
    fibers: Cell<u64>,
    /// The root's last answer: its clock never goes back.
    root_last: Cell<u64>,
    /// Accounted hand-overs left before a yield goes through the root
    /// ([`Hub::cpu_hand_over`]).
    direct_left: Cell<u32>,
}

/// The two clocks accounting reads, in nanoseconds. On Linux not through
/// libc, whose `clock_gettime` the interposer hooks (rustix calls the vDSO).
#[cfg(target_os = "linux")]
mod clock {
    use rustix::time::{clock_gettime, ClockId};

    fn ns(c: ClockId) -> u64 {
        let t = clock_gettime(c);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    /// The monotonic clock.
    pub(super) fn now_ns() -> u64 {
        ns(ClockId::Monotonic)
    }

    /// The OS thread's own CPU time.
    pub(super) fn thread_ns() -> u64 {
        ns(ClockId::ThreadCPUTime)
    }
}

#[cfg(not(target_os = "linux"))]
mod clock {
    fn ns(c: libc::clockid_t) -> u64 {
        // SAFETY: a zeroed timespec is a valid out buffer.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: a valid clock id and out pointer.
        unsafe { libc::clock_gettime(c, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    /// The monotonic clock.
    pub(super) fn now_ns() -> u64 {
        ns(libc::CLOCK_MONOTONIC)
    }

    /// The OS thread's own CPU time.
    pub(super) fn thread_ns() -> u64 {
        ns(libc::CLOCK_THREAD_CPUTIME_ID)
    }
}

use clock::{now_ns, thread_ns};

impl Hub {
    /// A fiber is about to be resumed (accounting on).
    #[cold]
    #[inline(never)]
    pub(crate) fn cpu_resuming(&self) {
        self.cpu.mark.set(now_ns());
    }

    /// `t` just suspended (accounting on): charge it since its resumption.
    #[cold]
    #[inline(never)]
    pub(crate) fn cpu_suspended(&self, t: &Task) {
        self.cpu_switch(t);
    }

    /// `t` stops running and another task starts: one clock read.
    fn cpu_switch(&self, t: &Task) {
        let now = now_ns();
        let d = now.saturating_sub(self.cpu.mark.replace(now));
        t.cpu.set(t.cpu.get() + d);
        self.cpu.fibers.set(self.cpu.fibers.get() + d);
    }

    /// The direct hand-over of a yield from the running fiber `me` (see
    /// [`handover`](crate::handover)), with the clock kept: the inlined one
    /// keeps none, so once accounting is on its budget is 0 and yields come
    /// here, out of line. Returns whether it handed over (else the yield
    /// goes through the root, which renews the budget). Never under the
    /// stall monitor, which wants every yield through the root.
    #[cold]
    #[inline(never)]
    pub(crate) fn cpu_hand_over(&self, me: *const Task) -> bool {
        if self.beat.is_some() {
            return false;
        }
        let left = self.cpu.direct_left.get();
        let Some(next) = self.runq.sole().filter(|_| left > 0) else {
            self.cpu.direct_left.set(DIRECT_BUDGET);
            return false;
        };
        self.cpu.direct_left.set(left - 1);
        // SAFETY: `next` is the run queue's front entry, which holds a
        // strong reference; one more keeps it alive should it end (and be
        // dropped) while it runs.
        let next = unsafe {
            Rc::increment_strong_count(next);
            Rc::from_raw(next)
        };
        // SAFETY: `me` is the running task (the current-task pointer).
        self.cpu_switch(unsafe { &*me });
        self.hand_over(me, Rc::as_ptr(&next));
        self.cpu_switch(&next);
        true
    }

    /// Turns accounting on. A fiber running now counts from here; no more
    /// direct hand-overs (they keep no clock).
    fn cpu_enable(&self) {
        if self.cpu.on.replace(true) {
            return;
        }
        self.cpu.mark.set(now_ns());
        self.cpu.direct_left.set(DIRECT_BUDGET);
        self.direct_budget.set(0);
        self.direct_left.set(0);
    }
}

/// The CPU time `task` has used (see the module docs), turning accounting
/// on if it was off. `task` is a task of this thread's hub.
pub fn cpu_time(task: &Task) -> Duration {
    let hub = Hub::get();
    hub.cpu_enable();
    let running = std::ptr::eq(crate::current_ptr(), task);
    let c = &hub.cpu;
    let ns = if task.is_root() {
        // The running fiber's share since it was resumed is not charged yet.
        let unaccounted = if crate::current_ptr().is_null() {
            0
        } else {
            now_ns().saturating_sub(c.mark.get())
        };
        let own = thread_ns().saturating_sub(c.fibers.get() + unaccounted);
        let ns = own.max(c.root_last.get());
        c.root_last.set(ns);
        ns
    } else if running {
        task.cpu.get() + now_ns().saturating_sub(c.mark.get())
    } else {
        task.cpu.get()
    };
    Duration::from_nanos(ns)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    /// Spins until `d` of wall time has passed.
    fn spin(d: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < d {}
    }

    #[test]
    fn each_fiber_counts_its_own_time_and_sleeps_do_not_count() {
        let root0 = crate::cpu_time(&crate::current());
        let busy = crate::spawn(crate::Spawn::default(), || {
            let me = crate::current();
            let t0 = crate::cpu_time(&me);
            for _ in 0..10 {
                spin(Duration::from_millis(5));
                crate::yield_now();
            }
            let used = crate::cpu_time(&me) - t0;
            assert!(used >= Duration::from_millis(45), "{used:?}");
        })
        .unwrap();
        let sleeper = crate::spawn(crate::Spawn::default(), || {
            crate::sleep(Duration::from_millis(60));
        })
        .unwrap();
        crate::join(&busy);
        crate::join(&sleeper);
        assert!(crate::cpu_time(&busy) >= Duration::from_millis(45));
        let slept = crate::cpu_time(&sleeper);
        assert!(slept < Duration::from_millis(20), "{slept:?}");
        // The root's clock does not count what the busy fiber used.
        let root = crate::cpu_time(&crate::current()) - root0;
        assert!(root < Duration::from_millis(30), "{root:?}");
    }
}
