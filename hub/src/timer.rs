//! Timers and sleeping.
//!
//! Every deadline a task waits with (a sleep, or any wait with a timeout)
//! is one entry of a binary heap ordered by `(deadline, order)`: `order`
//! makes equal deadlines distinct and fires them in the order they were
//! armed. Each loop turn fires the entries that are due, waking their tasks
//! with [`Wake::TimedOut`]. A timer never fires early.
//!
//! Most timed waits end before their deadline (a condvar signalled, a
//! semaphore posted, data arriving before a `poll` timeout), so a wait that
//! ends otherwise does not look for its entry: the entry is left in the
//! heap, stale, and recognised as such when it comes to the top or when the
//! heap is compacted. It is stale once its task has been woken since it was
//! armed (the task's `seq` moved on, see [`Hub::wake_raw`]). Compaction
//! runs when stale entries outnumber live ones (plus a small slack), so the
//! heap stays within about twice the live timers and each arm pays for it
//! in amortised constant time. A stale entry holds its task weakly: a fiber
//! that ends is dropped as before, and only the small `Rc` allocation waits
//! for the entry to go.
//!
//! A timer fires within the timer slack of its deadline, as the kernel's
//! do (`prctl(PR_SET_TIMERSLACK)`: 50 µs by default, none for real-time
//! threads): due timers fire together once the earliest of them is a slack
//! past its deadline, or when the loop's wait for that deadline ends (the
//! kernel grants that wait the same slack). So sleepers of a microsecond
//! in a loop wake in batches, a slack apart, as they do natively, instead
//! of at every turn of the loop: four such threads made the loop spin at
//! full CPU, 2.6 million wake-ups a second against 53,000 natively. The
//! slack is the hub thread's, read when the hub is made and again when the
//! program sets it ([`timer_slack_changed`]); one slack for all its
//! fibers, where the kernel keeps one per thread.
//!
//! A deadline given on the wall clock ([`Deadline::wall`]) is an entry like
//! the others, at the instant the hub's measure of the offset between the
//! two clocks maps it to, and marked as a wall entry. While the heap holds
//! any, each turn measures the offset again (two clock reads, no system
//! call); when the wall clock was set, every wall entry moves by the change
//! and the heap is rebuilt, so such a wait ends when the wall clock says,
//! as the kernel's waits on `CLOCK_REALTIME` do.

use std::collections::BinaryHeap;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use crate::clock::{wall_offset_now, Deadline};
use crate::stats::bump;
use crate::task::Task;
use crate::{internal, Hub, Waiting, Wake};

/// Stale entries tolerated beyond the live ones before a compaction.
const SLACK: usize = 64;

/// The bit of `Entry::order` that marks a wall-clock deadline (orders are
/// counted from 0 and never reach it).
const WALL: u64 = 1 << 63;

/// How far the offset between the wall clock and the hub's may move before
/// the wall entries move with it: more than two clock reads can take, even
/// when the thread is descheduled between them. A smaller set of the wall
/// clock is followed once changes add up to this.
const WALL_SLACK_NS: i128 = 1_000_000;

/// One armed deadline.
struct Entry {
    at: Instant,
    /// Tells equal deadlines apart: the earlier armed fires first. The
    /// [`WALL`] bit marks a wall-clock deadline.
    order: u64,
    task: Weak<Task>,
    /// The task's wait the entry belongs to (see [`Hub::wake_raw`]).
    seq: u64,
}

impl Entry {
    /// The task, if the wait this entry was armed for still goes on.
    fn live(&self) -> Option<Rc<Task>> {
        self.task.upgrade().filter(|t| t.seq.get() == self.seq)
    }

    fn is_wall(&self) -> bool {
        self.order & WALL != 0
    }
}

// The heap is a max-heap: the earliest deadline must compare greatest.
impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        (other.at, other.order).cmp(&(self.at, self.order))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl Eq for Entry {}

/// The hub's armed deadlines (see the [module](self) docs).
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Entry>,
    /// How late past its deadline a timer may fire (see the
    /// [module](self) docs).
    slack: Duration,
    /// Entries armed and neither fired nor disarmed; the heap's others are
    /// stale. Exact again after every compaction.
    live: usize,
    /// The next entry's `order`.
    order: u64,
    /// Wall entries in the heap, stale ones included.
    walls: usize,
    /// `CLOCK_REALTIME` less the hub's clock, in nanoseconds, as the wall
    /// entries are mapped (measured at the first one).
    wall_offset: Option<i128>,
}

impl Timers {
    /// No timers, firing within the calling thread's timer slack.
    pub(crate) fn new() -> Timers {
        Timers {
            slack: thread_timer_slack(),
            ..Timers::default()
        }
    }

    /// Whether the top entry's slack has run out by `now`: the due entries
    /// fire.
    fn slack_spent(&self, now: Instant) -> bool {
        self.heap
            .peek()
            .is_some_and(|e| e.at.checked_add(self.slack).is_some_and(|h| h <= now))
    }

    /// Drops the stale entries at the top, so the top, if any, is live.
    fn skim(&mut self) {
        while self.heap.peek().is_some_and(|e| e.live().is_none()) {
            self.pop();
        }
    }

    /// Takes the top entry off the heap.
    fn pop(&mut self) -> Option<Entry> {
        let e = self.heap.pop()?;
        if e.is_wall() {
            self.walls -= 1;
        }
        Some(e)
    }

    /// Keeps only the live entries.
    fn compact(&mut self) {
        self.heap.retain(|e| e.live().is_some());
        self.live = self.heap.len();
        self.walls = self.heap.iter().filter(|e| e.is_wall()).count();
    }

    /// The offset wall deadlines are mapped with: measured now when no
    /// wall entry was mapped with the last measure (so a set of the wall
    /// clock made while none was pending counts at once).
    fn wall_offset(&mut self) -> i128 {
        match self.wall_offset {
            Some(offset) if self.walls > 0 => offset,
            _ => *self.wall_offset.insert(wall_offset_now()),
        }
    }

    /// Moves the wall entries if the wall clock was set since they were
    /// mapped.
    fn follow_wall_clock(&mut self) {
        let Some(old) = self.wall_offset.filter(|_| self.walls > 0) else {
            return;
        };
        let new = wall_offset_now();
        let change = new - old;
        if change.abs() < WALL_SLACK_NS {
            return;
        }
        self.wall_offset = Some(new);
        // Set ahead by `change`, the wall clock reaches a deadline `change`
        // sooner on the hub's clock (later when set back).
        let by = Duration::from_nanos(u64::try_from(change.unsigned_abs()).unwrap_or(u64::MAX));
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        for e in entries.iter_mut().filter(|e| e.is_wall()) {
            e.at = if change > 0 {
                // Before the hub's clock began: due.
                e.at.checked_sub(by).unwrap_or_else(Instant::now)
            } else {
                // An `Instant` holds u64 seconds: this cannot overflow.
                e.at.checked_add(by).unwrap_or(e.at)
            };
        }
        self.heap = BinaryHeap::from(entries);
    }
}

impl Hub {
    /// Arms a timer that wakes `cur`'s current wait at `deadline`.
    #[inline]
    pub(crate) fn arm_timer(&self, cur: &Rc<Task>, deadline: Deadline) {
        internal::bookkeeping(|| {
            let mut t = self.timers.borrow_mut();
            if t.heap.len() >= 2 * t.live + SLACK {
                t.compact();
            }
            let mut order = t.order;
            t.order += 1;
            t.live += 1;
            let at = if deadline.is_wall() {
                let at = deadline.instant_with(t.wall_offset());
                order |= WALL;
                t.walls += 1;
                self.reactor.watch_wall_clock();
                at
            } else {
                deadline.instant_with(0)
            };
            t.heap.push(Entry {
                at,
                order,
                task: Rc::downgrade(cur),
                seq: cur.seq.get(),
            });
        });
        bump(&self.counters.timer_waits);
    }

    /// Notes that a wait with a timer ended before the timer fired. Its
    /// entry stays, stale (see the [module](self) docs).
    #[inline]
    pub(crate) fn disarm_timer(&self) {
        let mut t = self.timers.borrow_mut();
        // Saturating: a fork's reset empties the heap under a wait that
        // the root resumes afterwards.
        t.live = t.live.saturating_sub(1);
    }

    /// The offset between the wall clock and the hub's that a wall deadline
    /// is mapped with now (see [`Deadline::wall`]).
    pub(crate) fn wall_offset(&self) -> i128 {
        self.timers.borrow_mut().wall_offset()
    }

    /// How long the loop may sleep before the next timer is due (None: no
    /// timer): until its deadline, which the kernel's wait extends by its
    /// own slack; past that deadline (the loop woke for something else
    /// meanwhile), or with a poller whose waits get no slack, until the
    /// slack has run out.
    pub(crate) fn until_next_timer(&self, now: Instant) -> Option<Duration> {
        internal::bookkeeping(|| {
            let mut t = self.timers.borrow_mut();
            t.follow_wall_clock();
            t.skim();
            let slack = t.slack;
            t.heap.peek().map(|e| match e.at.checked_duration_since(now) {
                Some(d) if !d.is_zero() && crate::reactor::Reactor::WAIT_HAS_SLACK => d,
                _ => e.at.checked_add(slack).unwrap_or(e.at).saturating_duration_since(now),
            })
        })
    }

    /// Whether the earliest timer's slack has run out: a quick look, without the wall
    /// clock followed or cancelled entries skimmed (either may make it say
    /// yes where the poll then finds nothing due, or no for a wall-clock
    /// deadline the clock was just set past, which the next poll fires).
    /// False while the timers are being changed (never seen from a
    /// program's call: the hub changes them as its own machinery).
    #[inline]
    pub(crate) fn timer_due(&self) -> bool {
        let Ok(t) = self.timers.try_borrow() else { return false };
        t.slack_spent(Instant::now())
    }

    /// Wakes the tasks whose timers are due, once the earliest one's slack
    /// has run out or `waited` (the loop's wait for a deadline ended without
    /// events: the kernel gave it the slack).
    pub(crate) fn fire_timers(&self, waited: bool) {
        internal::bookkeeping(|| self.fire_timers_now(waited))
    }

    fn fire_timers_now(&self, waited: bool) {
        let mut timers = self.timers.borrow_mut();
        if timers.heap.is_empty() {
            return;
        }
        timers.follow_wall_clock();
        timers.skim();
        let now = Instant::now();
        if !waited && !timers.slack_spent(now) {
            return;
        }
        // A timer due exactly now fires: deadlines are "not before".
        while timers.heap.peek().is_some_and(|e| e.at <= now) {
            let Some(e) = timers.pop() else { break };
            if let Some(task) = e.task.upgrade() {
                if self.wake_raw(Rc::as_ptr(&task), e.seq, Wake::TimedOut) {
                    timers.live = timers.live.saturating_sub(1);
                }
            }
        }
    }
}

/// Takes the calling thread's timer slack again for its hub's timers,
/// after the program set it (`prctl(PR_SET_TIMERSLACK)`); nothing on a
/// thread without a hub.
pub fn timer_slack_changed() {
    // Not while the hub changes its timers (a handler that interrupted
    // it): that change is missed, and the old slack stays.
    if let Some(mut t) = Hub::existing().and_then(|hub| hub.timers.try_borrow_mut().ok()) {
        t.slack = thread_timer_slack();
    }
}

/// The calling thread's timer slack (`PR_GET_TIMERSLACK`), none where it
/// cannot be read.
fn thread_timer_slack() -> Duration {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_TIMERSLACK takes no arguments and only reads the
        // thread's own value.
        let ns = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
        Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Duration::ZERO
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
/// interrupted. A wall-clock deadline ([`Deadline::wall`]) is followed when
/// the wall clock is set meanwhile.
pub fn sleep_interruptible(deadline: impl Into<Deadline>) -> bool {
    let deadline = deadline.into();
    if Instant::now() >= deadline.instant() {
        return true;
    }
    let hub = Hub::get();
    let cur = hub.current();
    loop {
        hub.prepare(&cur, Waiting::Sleep);
        match hub.block(&cur, Some(deadline)) {
            Wake::TimedOut => return true,
            Wake::Interrupted => return false,
            Wake::Ready | Wake::Closed => {} // not what it waits for: sleep on
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use crate::{Hub, Task};

    /// Timed waits that end before their deadline leave their entries
    /// behind; compaction keeps the heap within twice the live timers plus
    /// the slack, none of the leftovers still counts as a wait, and they
    /// do not keep the fiber that armed them alive once it has ended.
    #[test]
    fn waits_that_end_early_leave_a_bounded_heap_and_no_fiber_alive() {
        const KEY: usize = 0x7a11;
        const WAITS: usize = 10_000;
        let far = Instant::now() + Duration::from_secs(3600);
        let t = crate::spawn(crate::Spawn::default(), move || {
            for _ in 0..WAITS {
                assert_eq!(crate::park(KEY, Some(far.into()), || true), crate::Park::Unparked);
            }
        })
        .unwrap();
        for _ in 0..WAITS {
            crate::yield_now();
            assert_eq!(crate::unpark(KEY, 1), 1);
            let timers = Hub::get().timers.borrow();
            assert!(
                timers.heap.len() <= 2 * timers.live + super::SLACK + 1,
                "{} entries for {} live timers",
                timers.heap.len(),
                timers.live
            );
        }
        crate::join(&t);
        let fiber = Rc::downgrade(&t);
        drop(t);
        assert!(fiber.upgrade().is_none(), "a stale timer kept the ended fiber alive");
        let timers = Hub::get().timers.borrow();
        assert_eq!(timers.live, 0);
        assert!(!timers.heap.is_empty(), "the test should leave stale entries behind");
        assert!(timers.heap.iter().all(|e| e.live().is_none()));
        drop(timers);
        // Nothing left to wait for: the loop sees no timer at all.
        assert_eq!(Hub::get().until_next_timer(Instant::now()), None);
        assert!(Hub::get().timers.borrow().heap.is_empty());
    }

    const SECOND: i128 = 1_000_000_000;

    /// Sets the wall clock `by` nanoseconds ahead (back when negative), as
    /// this thread's hub sees it.
    fn set_wall_clock(by: i128) {
        crate::clock::WALL_CLOCK_SET.with(|s| s.set(s.get() + by));
    }

    /// A fiber that parks on `key` until the wall clock reads `from_now`
    /// nanoseconds past now, once per answer in `expect`, each time with
    /// that same deadline, and asserts each answer. It has parked the first
    /// time when this returns.
    fn wall_parker(key: usize, from_now: i128, expect: &'static [crate::Park]) -> Rc<Task> {
        let at = crate::Deadline::wall(crate::now_nanos(libc::CLOCK_REALTIME) + from_now);
        let t = crate::spawn(crate::Spawn::default(), move || {
            for &e in expect {
                assert_eq!(crate::park(key, at, || true), e);
            }
        })
        .unwrap();
        crate::yield_now();
        t
    }

    /// A wait until a wall-clock time ends as soon as the wall clock is set
    /// past it, as the kernel's waits on `CLOCK_REALTIME` do.
    #[test]
    fn a_wall_deadline_follows_the_wall_clock_set_ahead() {
        let t0 = Instant::now();
        let t = wall_parker(0x3a11, 30 * SECOND, &[crate::Park::TimedOut]);
        set_wall_clock(31 * SECOND);
        crate::join(&t);
        assert!(t0.elapsed() < Duration::from_secs(10), "waited {:?}", t0.elapsed());
        let timers = Hub::get().timers.borrow();
        assert_eq!((timers.walls, timers.live), (0, 0));
    }

    /// Set back, the wall clock takes longer to reach the deadline.
    #[test]
    fn a_wall_deadline_follows_the_wall_clock_set_back() {
        const KEY: usize = 0x3a12;
        let t = wall_parker(KEY, SECOND / 5, &[crate::Park::Unparked]);
        set_wall_clock(-3600 * SECOND);
        crate::sleep(Duration::from_millis(600));
        assert!(
            !t.is_finished(),
            "the wait ended at the deadline the wall clock was set back from"
        );
        assert_eq!(crate::unpark(KEY, 1), 1);
        crate::join(&t);
    }

    /// A wait that parks again with the same deadline after the wall clock
    /// was set (a wake-up that was not for it) maps it as the clock stands
    /// then, not as it stood when the deadline was made.
    #[test]
    fn a_wall_deadline_parked_again_after_a_set_is_mapped_afresh() {
        const KEY: usize = 0x3a13;
        let t0 = Instant::now();
        let t = wall_parker(KEY, 30 * SECOND, &[crate::Park::Unparked, crate::Park::TimedOut]);
        // 10 s left on the wall clock; a turn of the hub follows the set.
        set_wall_clock(20 * SECOND);
        crate::sleep(Duration::from_millis(1));
        assert_eq!(crate::unpark(KEY, 1), 1);
        crate::yield_now();
        // Past the deadline: the second wait must end now, not 11 s on.
        set_wall_clock(11 * SECOND);
        crate::join(&t);
        assert!(t0.elapsed() < Duration::from_secs(5), "waited {:?}", t0.elapsed());
    }
}
