//! Wait queues keyed by an address: [`park`] and [`unpark`], the building
//! block of fiber-aware locks and of futex emulation.
//!
//! The queues are the buckets of a fixed table per hub, each a
//! [`WaitList`] whose nodes carry their key and live on the parked tasks'
//! stacks: parking and waking allocate nothing, so the hub can park a task
//! that is inside an allocator's lock, and nothing is borrowed while a
//! task is parked. Each key wakes in FIFO order. The cross-thread half (a
//! futex woken by another OS thread) is [`park_remote`](crate::park_remote).

use crate::{Deadline, Hub, WaitList, Waiting, Wake};

/// Buckets per hub: 16 KiB of list heads. Keys that share a bucket are
/// told apart by the key in each node.
const BUCKETS: usize = 1024;

/// The hub's table of keyed queues.
pub(crate) struct WaitTable {
    buckets: Box<[WaitList; BUCKETS]>,
}

impl WaitTable {
    pub(crate) fn new() -> WaitTable {
        WaitTable {
            // Built on the heap (16 KiB is more than a small stack may
            // have); a fixed length, so a bucket's index needs no check.
            buckets: (0..BUCKETS)
                .map(|_| WaitList::new())
                .collect::<Box<[WaitList]>>()
                .try_into()
                .unwrap_or_else(|_| unreachable!("BUCKETS lists")),
        }
    }

    /// The queue `key` lives in (Fibonacci hashing of the address).
    #[inline]
    fn bucket(&self, key: usize) -> &WaitList {
        let h = (key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - BUCKETS.trailing_zeros());
        &self.buckets[h as usize]
    }
}

/// How a [`park`] ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Park {
    /// Woken by [`unpark`].
    Unparked,
    /// The deadline passed.
    TimedOut,
    /// `validate` returned false: the caller did not sleep.
    Invalid,
    /// [`Task::interrupt`](crate::Task::interrupt) was called.
    Interrupted,
}

impl Park {
    /// How a park that blocked and was woken for `why` ended.
    pub(crate) fn after(why: Wake) -> Park {
        match why {
            Wake::Ready => Park::Unparked,
            Wake::TimedOut => Park::TimedOut,
            Wake::Closed | Wake::Interrupted => Park::Interrupted,
        }
    }
}

/// Parks the current task on the wait queue keyed by `key` (usually an
/// address) until [`unpark`]ed or the deadline passes.
///
/// `validate` runs first, with nothing else able to run in between (the hub
/// is single-threaded): if it returns false the task does not sleep. This is
/// the futex contract: "sleep only if the word still holds the value I saw".
pub fn park(key: usize, deadline: Option<Deadline>, validate: impl FnOnce() -> bool) -> Park {
    park_as(Waiting::Park(key), key, 0, deadline, validate)
}

/// [`park`] on the queue of an object of `kind` ("mutex", "semaphore"…) at
/// `key`, named so in deadlock reports, with the caller's word `tag` for
/// this waiter (see [`unpark_where`], [`unpark_best`]).
#[inline(always)]
pub fn park_object(
    kind: &'static str,
    key: usize,
    tag: u32,
    deadline: Option<Deadline>,
    validate: impl FnOnce() -> bool,
) -> Park {
    park_as(Waiting::Object(kind, key), key, tag, deadline, validate)
}

#[inline(always)]
fn park_as(what: Waiting, key: usize, tag: u32, deadline: Option<Deadline>, validate: impl FnOnce() -> bool) -> Park {
    if !validate() {
        return Park::Invalid;
    }
    let (hub, cur) = Hub::get_and_current();
    hub.waits.bucket(key).park_keyed(hub, &cur, key, what, tag, deadline)
}

/// Wakes up to `n` tasks parked on `key`, oldest first; returns how many.
#[inline]
pub fn unpark(key: usize, n: usize) -> usize {
    let Some(hub) = Hub::existing() else { return 0 };
    let b = hub.waits.bucket(key);
    let mut woken = 0;
    while woken < n && b.wake_where_keyed(hub, Some(key), |_| true) {
        woken += 1;
    }
    woken
}

/// Wakes the oldest task parked on `key` whose tag satisfies `pick`.
#[inline]
pub fn unpark_where(key: usize, pick: impl FnMut(u32) -> bool) -> bool {
    Hub::existing().is_some_and(|hub| hub.waits.bucket(key).wake_where_keyed(hub, Some(key), pick))
}

/// Wakes the task parked on `key` with the highest `rank(tag)` (`None`
/// skips it), the oldest among equals.
pub fn unpark_best(key: usize, rank: impl FnMut(u32) -> Option<u32>) -> bool {
    Hub::existing().is_some_and(|hub| hub.waits.bucket(key).wake_best_keyed(hub, Some(key), rank))
}

/// How many tasks are parked on `key`.
pub fn parked(key: usize) -> usize {
    Hub::existing().map_or(0, |hub| {
        hub.waits.bucket(key).count_keyed(Some(key), |_| true, usize::MAX)
    })
}

/// Whether a task parked on `key` has a tag satisfying `f`.
pub fn parked_where(key: usize, f: impl FnMut(u32) -> bool) -> bool {
    Hub::existing().is_some_and(|hub| hub.waits.bucket(key).count_keyed(Some(key), f, 1) > 0)
}
