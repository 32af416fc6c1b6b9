//! Wait queues keyed by an address: [`park`] and [`unpark`], the building
//! block of fiber-aware locks and of futex emulation.
//!
//! A queue exists only while someone waits on its key, and wakes in FIFO
//! order. The cross-thread half (a futex woken by another OS thread) is
//! [`park_remote`](crate::park_remote).

use std::rc::Rc;
use std::time::Instant;

use crate::stats::bump;
use crate::{Hub, Waiting, Wake};

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
pub fn park(key: usize, deadline: Option<Instant>, validate: impl FnOnce() -> bool) -> Park {
    park_as(Waiting::Park(key), key, deadline, validate)
}

/// [`park`] on the queue of an object of `kind` ("mutex", "semaphore"…) at
/// `key`, named so in deadlock reports. For objects that cannot hold a
/// [`WaitList`](crate::WaitList) of their own (memory another process may
/// map).
pub fn park_object(kind: &'static str, key: usize, deadline: Option<Instant>, validate: impl FnOnce() -> bool) -> Park {
    park_as(Waiting::Object(kind, key), key, deadline, validate)
}

fn park_as(what: Waiting, key: usize, deadline: Option<Instant>, validate: impl FnOnce() -> bool) -> Park {
    if !validate() {
        return Park::Invalid;
    }
    let hub = Hub::get();
    let cur = hub.current();
    let w = hub.prepare(&cur, what);
    hub.waitq.borrow_mut().entry(key).or_default().push_back(w);
    bump(&hub.counters.parks);
    let r = hub.block(&cur, deadline);
    if r != Wake::Ready {
        let mut q = hub.waitq.borrow_mut();
        if let Some(list) = q.get_mut(&key) {
            list.retain(|w| !Rc::ptr_eq(&w.task, &cur));
            if list.is_empty() {
                q.remove(&key);
            }
        }
    }
    Park::after(r)
}

/// Wakes up to `n` tasks parked on `key`, oldest first; returns how many.
pub fn unpark(key: usize, n: usize) -> usize {
    let Some(hub) = Hub::existing() else { return 0 };
    let mut woken = 0;
    let mut q = hub.waitq.borrow_mut();
    if let Some(list) = q.get_mut(&key) {
        while woken < n {
            let Some(w) = list.pop_front() else { break };
            if hub.wake(&w, Wake::Ready) {
                woken += 1;
            }
        }
        if list.is_empty() {
            q.remove(&key);
        }
    }
    woken
}

/// How many tasks are parked on `key`.
pub fn parked(key: usize) -> usize {
    Hub::existing().map_or(0, |hub| hub.waitq.borrow().get(&key).map_or(0, |l| l.len()))
}
