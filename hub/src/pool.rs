//! The offload pool: worker threads, started lazily, that run blocking
//! closures while the calling fiber waits (libuv's thread pool is the
//! model), in two lanes:
//!
//! - [`Lane::Work`]: calls that end on their own, however long they take (a
//!   read that misses the page cache, `fsync`). At most
//!   `GREENHOOK_POOL_SIZE` (default 4) run at once; the rest queue in order.
//!   The bound is the pool's point: a flood of cold reads gets the disk's
//!   parallelism, not a thread per fiber.
//! - [`Lane::Wait`]: calls that wait for something outside the calling
//!   fiber (a file lock, a System V message, a name server, a child, the
//!   next line of input). Such a call is never queued behind another: it
//!   runs on an idle worker of its lane or on a new one. Queued, it waited
//!   until a call ahead of it ended, which may be never: four threads
//!   waiting for a lock that their own process releases only after a
//!   `getaddrinfo` deadlocked, and curl's lookups of an unreachable name
//!   server held back the lookup of a name in `/etc/hosts`. Natively every
//!   thread waits on its own, so this lane never has more workers than the
//!   program would have threads waiting. Idle workers beyond
//!   `GREENHOOK_POOL_SIZE` leave after [`LINGER`] without a call.
//!
//! Workers are greenhook machinery for their whole life (hooks pass straight
//! through on them), and they sleep on a raw futex, never on a lock that a
//! fiber could also take.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;

use crate::stats::bump;
use crate::{internal, wait_remote, Hub};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Which workers run an offloaded call (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A call that ends on its own (disk I/O): at most [`pool_size`] at
    /// once, the rest queue.
    Work,
    /// A call that waits for something outside the caller: never queued
    /// behind another call.
    Wait,
}

struct Pool {
    jobs: SegQueue<Job>,
    workers: AtomicUsize,
    idle: AtomicUsize,
    /// Bumped on every submission; idle workers sleep on it.
    signal: AtomicU32,
    lane: Lane,
}

impl Pool {
    const fn new(lane: Lane) -> Pool {
        Pool {
            jobs: SegQueue::new(),
            workers: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            signal: AtomicU32::new(0),
            lane,
        }
    }

    /// The most workers the lane may have.
    fn cap(&self) -> usize {
        match self.lane {
            Lane::Work => pool_size(),
            Lane::Wait => usize::MAX,
        }
    }

    /// How long an idle worker waits for a call before it may leave.
    fn linger(&self) -> Option<Duration> {
        match self.lane {
            Lane::Work => None,
            Lane::Wait => Some(LINGER),
        }
    }
}

static WORK: Pool = Pool::new(Lane::Work);
static WAIT: Pool = Pool::new(Lane::Wait);

/// How long an idle worker of [`Lane::Wait`] beyond [`pool_size`] stays
/// for the next call (5 s; starting a worker costs tens of µs).
pub const LINGER: Duration = Duration::from_secs(5);

fn pool(lane: Lane) -> &'static Pool {
    match lane {
        Lane::Work => &WORK,
        Lane::Wait => &WAIT,
    }
}

/// The bound of [`Lane::Work`] and the idle workers [`Lane::Wait`] keeps:
/// `GREENHOOK_POOL_SIZE` or 4.
pub fn pool_size() -> usize {
    static SIZE: AtomicUsize = AtomicUsize::new(0);
    let s = SIZE.load(Ordering::Relaxed);
    if s != 0 {
        return s;
    }
    let s = std::env::var("GREENHOOK_POOL_SIZE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4);
    SIZE.store(s, Ordering::Relaxed);
    s
}

/// The workers each lane has now, `(work, wait)`: for tests and reports.
pub fn pool_workers() -> (usize, usize) {
    (WORK.workers.load(Ordering::SeqCst), WAIT.workers.load(Ordering::SeqCst))
}

fn submit(pool: &'static Pool, job: Job) {
    pool.jobs.push(job);
    pool.signal.fetch_add(1, Ordering::SeqCst);
    let idle = pool.idle.load(Ordering::SeqCst);
    if idle > 0 {
        sys::wake_one(&pool.signal);
    }
    // A woken worker stays counted as idle until it runs, so a burst would
    // all queue behind one sleeper: grow while the backlog exceeds the
    // workers that could take it. (A worker that leaves first sees this
    // submission's signal and stays: see `worker`.)
    if pool.jobs.len() <= idle {
        return;
    }
    let n = pool.workers.load(Ordering::Relaxed);
    if n < pool.cap()
        && pool
            .workers
            .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    {
        let _g = internal::Guard::new();
        let r = internal::spawn_thread(
            std::thread::Builder::new()
                .name("greenhook-pool".into())
                .stack_size(256 * 1024),
            move || worker(pool),
        );
        if let Err(e) = r {
            pool.workers.fetch_sub(1, Ordering::SeqCst);
            if pool.workers.load(Ordering::SeqCst) == 0 {
                // No worker at all: run the job here rather than never.
                eprintln!("greenhook: cannot start an offload worker ({e}); running the call on the hub");
                if let Some(j) = pool.jobs.pop() {
                    j();
                }
            }
        }
    }
}

/// In a forked child: the parent's workers do not exist here, and the jobs
/// queued for them belong to fibers that are gone.
pub(crate) fn reset_after_fork() {
    for pool in [&WORK, &WAIT] {
        while let Some(j) = pool.jobs.pop() {
            std::mem::forget(j);
        }
        pool.workers.store(0, Ordering::SeqCst);
        pool.idle.store(0, Ordering::SeqCst);
    }
}

fn worker(pool: &'static Pool) {
    internal::mark_thread();
    // A job that runs a child with the worker's mask (glibc's `system`)
    // sets its own mask first.
    internal::block_signals();
    loop {
        if let Some(j) = pool.jobs.pop() {
            j();
            continue;
        }
        let seen = pool.signal.load(Ordering::SeqCst);
        pool.idle.fetch_add(1, Ordering::SeqCst);
        if let Some(j) = pool.jobs.pop() {
            pool.idle.fetch_sub(1, Ordering::SeqCst);
            j();
            continue;
        }
        let timed_out = sys::wait(&pool.signal, seen, pool.linger());
        pool.idle.fetch_sub(1, Ordering::SeqCst);
        // Leave only if no submission came since `seen`. A submission that
        // counted this worker as idle, and so started none, bumped the
        // signal before it read the idle count, which was before this
        // worker's decrement: this load then sees the bump (both are in the
        // one sequentially consistent order), and the worker stays for it.
        if timed_out && pool.signal.load(Ordering::SeqCst) == seen && leave(pool) {
            return;
        }
    }
}

/// Takes one worker off `pool`'s count if it has more than it keeps idle.
fn leave(pool: &Pool) -> bool {
    let mut n = pool.workers.load(Ordering::SeqCst);
    while n > pool_size() {
        match pool
            .workers
            .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
    false
}

struct Slot<R> {
    done: AtomicBool,
    value: UnsafeCell<Option<std::thread::Result<R>>>,
}

// SAFETY: `value` is written by exactly one worker before `done` is set
// (Release) and read by the waiting task only after it sees `done`
// (Acquire); R itself is Send.
unsafe impl<R: Send> Sync for Slot<R> {}

/// Runs `f` on the offload pool's `lane` while the current task waits;
/// returns its result (a panic in `f` is resumed in the caller).
///
/// The wait cannot be interrupted, so `f` may borrow from the caller's
/// stack: the caller does not return before `f` has finished.
pub fn offload<F, R>(lane: Lane, f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let slot = Slot::new();
    wait_remote(|waker| submit_into(pool(lane), &slot, f, waker));
    slot.take()
}

/// [`offload`] whose wait a [`Task::interrupt`](crate::Task::interrupt)
/// does reach: `interrupted(true)` is called then, in the waiting task,
/// and from then on `interrupted(false)` every few milliseconds (1 ms,
/// doubling up to 8) until `f` has finished. `f` is never abandoned: the
/// call still returns only once `f` has (so `f` may borrow from the
/// caller's stack, as with [`offload`]); the callbacks are where the caller
/// runs what the interruption is for, and may make `f` end early (a signal
/// to the worker that makes its system call fail with `EINTR`: the
/// callbacks that follow the first are for sending it again, in case it
/// reached the worker before the call began).
pub fn offload_interruptible<F, R>(lane: Lane, f: F, mut interrupted: impl FnMut(bool)) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let slot = Slot::new();
    let key = Arc::as_ptr(&slot) as usize;
    let first = crate::park_remote(key, None, |waker| submit_into(pool(lane), &slot, f, waker));
    if first == crate::Park::Interrupted {
        // The waker's wake-up is ignored from now on: look for the end.
        let mut nap = Duration::from_millis(1);
        let mut now_interrupted = true;
        while !slot.done.load(Ordering::Acquire) {
            interrupted(now_interrupted);
            if slot.done.load(Ordering::Acquire) {
                break;
            }
            now_interrupted = !crate::sleep_interruptible(Instant::now() + nap);
            nap = (nap * 2).min(Duration::from_millis(8));
        }
    }
    slot.take()
}

impl<R> Slot<R> {
    fn new() -> Arc<Slot<R>> {
        Arc::new(Slot {
            done: AtomicBool::new(false),
            value: UnsafeCell::new(None),
        })
    }

    /// The job's result, once `done` (a panic resumed here).
    fn take(&self) -> R {
        // A remote wake can only come from the job's waker, after `done`;
        // the interruptible wait saw `done` itself.
        while !self.done.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        // SAFETY: done was observed with Acquire; the worker no longer
        // touches it.
        match unsafe { (*self.value.get()).take() } {
            Some(Ok(v)) => v,
            Some(Err(p)) => resume_unwind(p),
            None => unreachable!("offload slot empty after completion"),
        }
    }
}

/// Queues `f` on `pool` as a job that writes its result to `slot` and then
/// drops `waker` (the caller's wake-up).
fn submit_into<F, R>(pool: &'static Pool, slot: &Arc<Slot<R>>, f: F, waker: crate::RemoteWaker)
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    bump(&Hub::get().counters.offloads);
    let s2 = slot.clone();
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        // SAFETY: the only writer; see Slot.
        unsafe { *s2.value.get() = Some(r) };
        s2.done.store(true, Ordering::Release);
        drop(waker);
    });
    // SAFETY: the job may borrow from the caller's frame; the caller waits
    // in `offload` or `offload_interruptible` until the job has set `done`
    // (neither returns before: see `Slot::take`), so those borrows outlive
    // the job.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    submit(pool, job);
}

#[cfg(target_os = "linux")]
mod sys {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    use rustix::thread::futex;

    /// Sleeps while `word` is `seen`, for at most `limit`; true if the
    /// limit passed.
    pub(super) fn wait(word: &AtomicU32, seen: u32, limit: Option<Duration>) -> bool {
        let limit = limit.map(|d| futex::Timespec {
            tv_sec: d.as_secs() as _,
            tv_nsec: d.subsec_nanos() as _,
        });
        matches!(
            futex::wait(word, futex::Flags::PRIVATE, seen, limit.as_ref()),
            Err(rustix::io::Errno::TIMEDOUT)
        )
    }

    pub(super) fn wake_one(word: &AtomicU32) {
        let _ = futex::wake(word, futex::Flags::PRIVATE, 1);
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    // Without a raw futex, idle workers nap briefly; the portable path is
    // for correctness, not speed.
    pub(super) fn wait(word: &AtomicU32, seen: u32, limit: Option<Duration>) -> bool {
        let start = std::time::Instant::now();
        while word.load(Ordering::SeqCst) == seen {
            if limit.is_some_and(|l| start.elapsed() >= l) {
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        false
    }

    pub(super) fn wake_one(_word: &AtomicU32) {}
}
