//! Process-shared objects: mutexes, condition variables, rwlocks and
//! barriers made `PTHREAD_PROCESS_SHARED`, and semaphores that a post from
//! outside this hub may reach (`sem_init` with `pshared` set, `sem_open`'s).
//! Another process, or a thread that is not a fiber, meets such an object
//! only in its memory and in the kernel's futex queues of its words, so it
//! keeps glibc's own representation and glibc's own functions operate on
//! it. What is ours:
//!
//! - **who holds one here.** glibc sees the hub's OS thread as the owner of
//!   whatever any of its fibers locked. Which fiber holds a mutex or
//!   write-holds an rwlock is kept beside ([`HOLDERS`]), so that another
//!   fiber of this process is no owner (`EPERM`, no recursion, no
//!   `EDEADLK`: it waits), and glibc is asked only what it can answer for
//!   the thread it sees.
//! - **where a call that would block waits.** The non-blocking form is
//!   tried on the hub's thread (`trylock`, `trywait`). When it fails and
//!   other fibers could run, a mutex or semaphore waiter first yields to
//!   the hub for up to 30 µs looking again (another process often answers
//!   that fast); then the fiber parks while a [waiter thread](waiter) waits
//!   where the other process's wake-up arrives: in the kernel, on the
//!   object's futex word, as one of glibc's waiters. For a mutex and a
//!   semaphore that is a `FUTEX_WAIT` after marking the word contended (a
//!   mutex's 2 or `FUTEX_WAITERS`, a semaphore's waiter count) exactly as
//!   glibc's waiters do, and the fiber then tries again on the hub; the
//!   futex protocol of a process-shared word is an ABI between processes,
//!   whatever their glibc, so it can be relied on. An rwlock, a barrier and
//!   a condvar, whose protocols are glibc's business, are waited for with
//!   glibc's own calls, and what glibc records of the thread that made them
//!   is handed back to the hub's thread ([`rwlock`], [`cond`]). When no
//!   other fiber could run, glibc's blocking call is made right here, as
//!   natively.
//!
//! Measured here (`tests/c/pshared_pingpong.c`: a parent and its child
//! taking turns, each with a second thread; a noisy 2-vCPU machine): a
//! round trip through two semaphores takes from under 1 µs (both sides
//! catch the other while looking again) to about 65 µs (through the waiter
//! threads) under the preload, 4–8 µs natively, and took 2.3–2.9 ms with
//! the 2 ms re-check semaphores had before; through a process-shared mutex
//! and condvar 30–130 µs against 15–55 µs natively, where before the other
//! process's signal never arrived.
//!
//! Priority-inheritance and priority-protected mutexes, whose words only the
//! kernel or glibc may hand over, are tried again every
//! [`FOREIGN_NAP`](super::FOREIGN_NAP) instead (and at once after an unlock
//! here).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::futex::SpinLock;

pub(super) mod barrier;
pub(super) mod cond;
pub(super) mod mutex;
pub(super) mod rwlock;
pub(super) mod sem;
mod waiter;

// The kernel waits of threads that are not fibers on emulated rwlocks.
pub(in crate::sync) use waiter::{futex_wait, End};

/// A process-shared object held by a fiber (or root context) of this process.
#[derive(Clone, Copy)]
struct Holder {
    /// Its owner id ([`hub::owner_id`]).
    owner: i32,
    /// A mutex (else an rwlock's write lock).
    mutex: bool,
}

/// Process-shared mutexes and write-locked rwlocks held here, by address.
/// Only hub threads touch it, so a `fork` never finds it locked.
static HOLDERS: SpinLock<BTreeMap<usize, Holder>> = SpinLock::new(BTreeMap::new());

/// Who holds the object at `a` here.
fn holder(a: usize) -> Option<i32> {
    HOLDERS.with(|h| h.get(&a).map(|x| x.owner))
}

fn hold(a: usize, owner: i32, mutex: bool) {
    HOLDERS.with(|h| h.insert(a, Holder { owner, mutex }));
}

fn unhold(a: usize) {
    HOLDERS.with(|h| h.remove(&a));
}

/// The mutexes `owner` holds.
fn mutexes_of(owner: i32) -> Vec<usize> {
    HOLDERS.with(|h| {
        h.iter()
            .filter(|(_, x)| x.owner == owner && x.mutex)
            .map(|(&a, _)| a)
            .collect()
    })
}

/// Who holds the process-shared object at `a` here, for deadlock reports.
pub(super) fn describe_holder(a: usize) -> Option<String> {
    Some(match holder(a)? {
        o if o > 0 => format!("fiber {o}"),
        _ => "main (root)".to_string(),
    })
}

/// In a forked child: nothing here holds what the parent's fibers held
/// (glibc sees the child's thread as another one), and no waiter thread
/// came along.
pub(crate) fn after_fork_child() {
    HOLDERS.with(|h| std::mem::forget(std::mem::take(h)));
    waiter::after_fork_child();
}

/// Whether nothing but the caller could run, so a call may block here.
fn alone() -> bool {
    !crate::gate::can_yield()
}

/// How long a fiber yields to the hub, looking again, before it hands its
/// wait to a waiter thread (see [`spin`]): about what that hand-off and
/// the hand-back cost.
const SPIN: Duration = Duration::from_micros(30);

/// Yields to the hub (other fibers run, fds are polled) for up to [`SPIN`]
/// while `busy()`: another process often answers within microseconds (a
/// ping-pong), and catching that here spares the two hand-offs of a wait
/// on a waiter thread. Whether `busy()` stopped holding.
fn spin(busy: impl Fn() -> bool) -> bool {
    let end = Instant::now() + SPIN;
    while busy() {
        if Instant::now() >= end {
            return false;
        }
        hub::yield_now();
    }
    true
}

/// Whether `deadline` has passed, read on its own clock (the wall clock
/// for a wall-clock one: as the kernel's waits see it, set or not).
pub(in crate::sync) fn passed(deadline: Option<hub::Deadline>) -> bool {
    deadline.is_some_and(|d| {
        let (clock, at) = d.clock_time();
        hub::now_nanos(clock) >= at
    })
}
