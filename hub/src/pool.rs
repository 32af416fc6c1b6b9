//! The offload pool: a bounded set of worker threads, started lazily, that
//! run blocking closures while the calling fiber waits (libuv's thread pool
//! is the model). Size: `GREENHOOK_POOL_SIZE`, default 4.
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

struct Pool {
    jobs: SegQueue<Job>,
    workers: AtomicUsize,
    idle: AtomicUsize,
    /// Bumped on every submission; idle workers sleep on it.
    signal: AtomicU32,
}

static POOL: Pool = Pool {
    jobs: SegQueue::new(),
    workers: AtomicUsize::new(0),
    idle: AtomicUsize::new(0),
    signal: AtomicU32::new(0),
};

/// The pool's maximum number of workers: `GREENHOOK_POOL_SIZE` or 4.
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

fn submit(job: Job) {
    POOL.jobs.push(job);
    POOL.signal.fetch_add(1, Ordering::SeqCst);
    let idle = POOL.idle.load(Ordering::SeqCst);
    if idle > 0 {
        sys::wake_one(&POOL.signal);
    }
    // A woken worker stays counted as idle until it runs, so a burst would
    // all queue behind one sleeper: grow while the backlog exceeds the
    // workers that could take it.
    if POOL.jobs.len() <= idle {
        return;
    }
    let n = POOL.workers.load(Ordering::Relaxed);
    if n < pool_size()
        && POOL
            .workers
            .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    {
        let _g = internal::Guard::new();
        let r = internal::spawn_thread(
            std::thread::Builder::new()
                .name("greenhook-pool".into())
                .stack_size(256 * 1024),
            worker,
        );
        if let Err(e) = r {
            POOL.workers.fetch_sub(1, Ordering::SeqCst);
            if POOL.workers.load(Ordering::SeqCst) == 0 {
                // No worker at all: run the job here rather than never.
                eprintln!("greenhook: cannot start an offload worker ({e}); running the call on the hub");
                if let Some(j) = POOL.jobs.pop() {
                    j();
                }
            }
        }
    }
}

/// In a forked child: the parent's workers do not exist here, and the jobs
/// queued for them belong to fibers that are gone.
pub(crate) fn reset_after_fork() {
    while let Some(j) = POOL.jobs.pop() {
        std::mem::forget(j);
    }
    POOL.workers.store(0, Ordering::SeqCst);
    POOL.idle.store(0, Ordering::SeqCst);
}

fn worker() {
    internal::mark_thread();
    // A job that runs a child with the worker's mask (glibc's `system`)
    // sets its own mask first.
    internal::block_signals();
    loop {
        if let Some(j) = POOL.jobs.pop() {
            j();
            continue;
        }
        let seen = POOL.signal.load(Ordering::SeqCst);
        POOL.idle.fetch_add(1, Ordering::SeqCst);
        if let Some(j) = POOL.jobs.pop() {
            POOL.idle.fetch_sub(1, Ordering::SeqCst);
            j();
            continue;
        }
        sys::wait(&POOL.signal, seen);
        POOL.idle.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Slot<R> {
    done: AtomicBool,
    value: UnsafeCell<Option<std::thread::Result<R>>>,
}

// SAFETY: `value` is written by exactly one worker before `done` is set
// (Release) and read by the waiting task only after it sees `done`
// (Acquire); R itself is Send.
unsafe impl<R: Send> Sync for Slot<R> {}

/// Runs `f` on the offload pool while the current task waits; returns its
/// result (a panic in `f` is resumed in the caller).
///
/// The wait cannot be interrupted, so `f` may borrow from the caller's
/// stack: the caller does not return before `f` has finished.
pub fn offload<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let slot = Slot::new();
    wait_remote(|waker| submit_into(&slot, f, waker));
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
pub fn offload_interruptible<F, R>(f: F, mut interrupted: impl FnMut(bool)) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let slot = Slot::new();
    let key = Arc::as_ptr(&slot) as usize;
    let first = crate::park_remote(key, None, |waker| submit_into(&slot, f, waker));
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

/// Queues `f` as a job that writes its result to `slot` and then drops
/// `waker` (the caller's wake-up).
fn submit_into<F, R>(slot: &Arc<Slot<R>>, f: F, waker: crate::RemoteWaker)
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
    submit(job);
}

#[cfg(target_os = "linux")]
mod sys {
    use std::sync::atomic::AtomicU32;

    use rustix::thread::futex;

    pub(super) fn wait(word: &AtomicU32, seen: u32) {
        let _ = futex::wait(word, futex::Flags::PRIVATE, seen, None);
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
    pub(super) fn wait(word: &AtomicU32, seen: u32) {
        while word.load(Ordering::SeqCst) == seen {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub(super) fn wake_one(_word: &AtomicU32) {}
}
