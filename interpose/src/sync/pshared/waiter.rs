//! Waiter threads: where a fiber's blocking call on a process-shared
//! object is made, so that the hub's one OS thread goes on running the
//! other fibers meanwhile (see [the module docs](super)).
//!
//! Another process meets such an object only in its memory and in the
//! kernel's futex queues, so that is where a fiber must wait too: a waiter
//! thread makes the blocking call (glibc's own, or a `FUTEX_WAIT` on the
//! object's word) and hands its result back through a
//! [`hub::RemoteWaker`]. Unlike the offload pool's calls these may last for
//! ever, and a barrier of n fibers needs n - 1 of them at once: so each
//! waiting call has a thread of its own, never a bounded pool that could
//! run dry (natively each of those fibers would have been a thread). Idle
//! waiter threads are kept for the next call, up to [`IDLE_MAX`].
//!
//! A fiber that leaves a call (a cancellation takes it) tells the call's
//! [`Ticket`]; the thread then undoes what its call did (an rwlock taken,
//! a futex wake-up meant for a waiter: passed on) rather than hand it
//! over, and ends.
//! Timed calls are made in slices of at most [`SLICE`] ([`sliced`]), so a
//! call whose fiber left ends soon even if the object never changes.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use libc::{c_int, timespec};

use crate::futex::SpinLock;

/// The longest single timed call a waiter thread makes for a wait.
pub(super) const SLICE: Duration = Duration::from_millis(100);
/// How many idle waiter threads are kept.
const IDLE_MAX: usize = 16;
/// A waiter thread's stack: glibc's waits and our few frames need little.
const STACK: usize = 128 * 1024;

/// [`Worker::word`]: nothing to do (the thread sleeps on the word).
const IDLE: u32 = 0;
/// [`Worker::word`]: a job is in [`Worker::job`].
const JOB: u32 = 1;
/// [`Worker::word`]: the thread ends.
const EXIT: u32 = 2;

/// A job returns whether its thread may take another (its fiber did not
/// leave it).
type Job = Box<dyn FnOnce() -> bool + Send>;

/// One waiter thread, as the hub sees it.
struct Worker {
    /// [`IDLE`], [`JOB`] or [`EXIT`]; the thread sleeps on it.
    word: AtomicU32,
    /// # Invariant
    /// Written only while the thread is not looking at it: by whoever
    /// holds the worker (its creator, or the hub that took it from
    /// [`IDLERS`]) before storing [`JOB`] with Release; taken by the
    /// thread after it loaded [`JOB`] with Acquire.
    job: UnsafeCell<Option<Job>>,
}

// SAFETY: `job` is handed over through `word` (see its invariant); the job
// itself is Send.
unsafe impl Sync for Worker {}

/// Idle waiter threads. Only hub threads touch it (a waiter thread never
/// does), so a `fork` never finds it locked.
static IDLERS: SpinLock<Vec<Arc<Worker>>> = SpinLock::new(Vec::new());

/// Where a waiter thread's call meets the fiber waiting for it.
pub(super) struct Ticket {
    state: SpinLock<TicketState>,
}

#[derive(Default)]
struct TicketState {
    /// The call's result, once handed over.
    result: Option<c_int>,
    /// The fiber left: the result is not wanted.
    left: bool,
    /// Wakes the fiber.
    waker: Option<hub::RemoteWaker>,
}

impl Ticket {
    /// Whether the fiber left the call.
    pub(super) fn left(&self) -> bool {
        self.state.with(|s| s.left)
    }

    /// On the waiter thread: hands the call's result `r` to the fiber,
    /// running `keep` first with the fiber unable to leave in between (it
    /// must not block). False when the fiber has left: the caller then
    /// undoes what its call did.
    pub(super) fn publish(&self, r: c_int, keep: impl FnOnce()) -> bool {
        let (ok, waker) = self.state.with(|s| {
            if s.left {
                (false, None)
            } else {
                keep();
                s.result = Some(r);
                (true, s.waker.take())
            }
        });
        drop(waker); // wakes the fiber, outside the lock
        ok
    }

    fn result(&self) -> Option<c_int> {
        self.state.with(|s| s.result)
    }
}

/// What a call's fiber does when its wait is interrupted (a cancellation
/// request, a signal).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Interrupted {
    /// Go on waiting for the call.
    Stay,
    /// Leave the call (unless its result is already there).
    Leave,
}

/// The interrupt policy of a call that can be undone: leave it when a
/// cancellation is pending (the caller then reaches its cancellation point
/// and, if it survives, starts over); a signal's interruption changes
/// nothing.
pub(super) fn leave_for_cancel() -> Interrupted {
    if crate::thread::cancel::any_pending() {
        Interrupted::Leave
    } else {
        Interrupted::Stay
    }
}

/// A call running on a waiter thread.
pub(super) struct Call {
    ticket: Arc<Ticket>,
    worker: Arc<Worker>,
}

impl Call {
    /// Whether the call has returned.
    pub(super) fn done(&self) -> bool {
        self.ticket.result().is_some()
    }

    /// Waits on the hub until the call returns and gives its result, or
    /// `None` when `interrupted` said to leave. `key` (the object's
    /// address) names the wait in reports.
    pub(super) fn finish(self, key: usize, mut interrupted: impl FnMut() -> Interrupted) -> Option<c_int> {
        loop {
            hub::park_remote(key, None, |waker| {
                let stale = self.ticket.state.with(|s| {
                    if s.result.is_some() {
                        Some(waker) // dropped below: wakes us at once
                    } else {
                        s.waker.replace(waker)
                    }
                });
                drop(stale);
            });
            if let Some(r) = self.ticket.result() {
                recycle(self.worker);
                return Some(r);
            }
            if interrupted() == Interrupted::Leave {
                let stale = self.ticket.state.with(|s| {
                    if s.result.is_some() {
                        return Err(());
                    }
                    s.left = true;
                    Ok(s.waker.take())
                });
                // Left: the thread undoes its call and ends. Else the
                // result is there: the next turn takes it.
                if let Ok(waker) = stale {
                    drop(waker);
                    return None;
                }
            }
        }
    }
}

/// Starts `job` on a waiter thread (an idle one, or a new one). `None` if
/// no thread could be started: the caller then makes its call itself.
pub(super) fn start(job: impl FnOnce(&Ticket) + Send + 'static) -> Option<Call> {
    let ticket = Arc::new(Ticket {
        state: SpinLock::new(TicketState::default()),
    });
    let t = ticket.clone();
    let job: Job = Box::new(move || {
        job(&t);
        !t.left()
    });
    let worker = match IDLERS.with(|v| v.pop()) {
        Some(w) => {
            // SAFETY: an idle worker waits for JOB and does not look at `job`.
            unsafe { *w.job.get() = Some(job) };
            w.word.store(JOB, Ordering::Release);
            futex(&w.word, libc::FUTEX_WAKE, 1, None);
            w
        }
        None => spawn(job)?,
    };
    Some(Call { ticket, worker })
}

/// A new waiter thread, starting with `job`.
fn spawn(job: Job) -> Option<Arc<Worker>> {
    let w = Arc::new(Worker {
        word: AtomicU32::new(JOB),
        job: UnsafeCell::new(Some(job)),
    });
    let mine = w.clone();
    // Machinery also for the report below if the spawn fails.
    let _machinery = hub::internal::Guard::new();
    match hub::internal::spawn_thread(
        std::thread::Builder::new()
            .name("greenhook-waiter".into())
            .stack_size(STACK),
        move || work(&mine),
    ) {
        Ok(_) => Some(w),
        Err(e) => {
            use std::sync::atomic::AtomicBool;
            static TOLD: AtomicBool = AtomicBool::new(false);
            if !TOLD.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "greenhook: cannot start a waiter thread ({e}); a wait on a process-shared object blocks its hub"
                );
            }
            None
        }
    }
}

/// A waiter thread's life: one job at a time, until a job's fiber left it
/// or it is told to end.
fn work(w: &Worker) {
    // Greenhook machinery for its whole life: every hook passes through.
    let _machinery = hub::internal::Guard::new();
    // Signals are for the program's threads (see the offload pool's workers).
    // SAFETY: a local set, filled and applied to this thread only.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    loop {
        loop {
            match w.word.load(Ordering::Acquire) {
                JOB => break,
                IDLE => futex(&w.word, libc::FUTEX_WAIT, IDLE, None),
                _ => return,
            }
        }
        // SAFETY: JOB was loaded with Acquire: the job is written and
        // nobody else touches it until we are idle again.
        let job = unsafe { (*w.job.get()).take() };
        // Before the job: its result is what lets the hub reuse us.
        w.word.store(IDLE, Ordering::Relaxed);
        if !job.is_some_and(|j| j()) {
            return;
        }
    }
}

/// A worker whose call was taken: kept for the next call, or ended.
fn recycle(w: Arc<Worker>) {
    let spare = IDLERS.with(|v| {
        if v.len() < IDLE_MAX {
            v.push(w);
            None
        } else {
            Some(w)
        }
    });
    if let Some(w) = spare {
        w.word.store(EXIT, Ordering::Release);
        futex(&w.word, libc::FUTEX_WAKE, 1, None);
    }
}

/// In a forked child: the waiter threads stayed in the parent.
pub(super) fn after_fork_child() {
    IDLERS.with(|v| std::mem::forget(std::mem::take(v)));
}

/// A private futex operation on one of our own words.
fn futex(word: &AtomicU32, op: c_int, val: u32, timeout: Option<&timespec>) {
    // SAFETY: a live word of ours; the real `syscall` (our hook would
    // emulate a fiber's wait).
    unsafe {
        crate::futex::syscall::real(
            libc::SYS_futex,
            word.as_ptr() as libc::c_long,
            (op | libc::FUTEX_PRIVATE_FLAG) as libc::c_long,
            val as libc::c_long,
            timeout.map_or(0, |t| t as *const timespec as libc::c_long),
            0,
            0,
        );
    }
}

/// Where a wait in the kernel ends: an absolute time on the clock the
/// kernel is to follow. A wall-clock deadline stays on `CLOCK_REALTIME`,
/// so the kernel's wait ends when that clock is set past it, as glibc's
/// own waits do; any other is on `CLOCK_MONOTONIC`.
#[derive(Clone, Copy)]
pub(in crate::sync) struct End {
    pub(super) clock: libc::clockid_t,
    pub(super) at: timespec,
}

impl End {
    /// `clock` at `ns` nanoseconds (kept within what a `timespec` holds).
    fn new(clock: libc::clockid_t, ns: i128) -> End {
        const NS: i128 = 1_000_000_000;
        let ns = ns.clamp(0, i64::MAX as i128 / 2 * NS);
        End {
            clock,
            at: timespec {
                tv_sec: (ns / NS) as libc::time_t,
                tv_nsec: (ns % NS) as libc::c_long,
            },
        }
    }

    /// The time `deadline` stands for, or one far enough away to stand for
    /// "never" (`None`).
    pub(in crate::sync) fn of(deadline: Option<hub::Deadline>) -> End {
        match deadline {
            Some(d) => {
                let (clock, ns) = d.clock_time();
                End::new(clock, ns)
            }
            None => {
                const YEARS_30: i128 = 30 * 365 * 24 * 3600 * 1_000_000_000;
                End::new(libc::CLOCK_MONOTONIC, hub::now_nanos(libc::CLOCK_MONOTONIC) + YEARS_30)
            }
        }
    }
}

/// `FUTEX_WAIT` on a word of a pthread object until `end`, shared (no
/// private flag) or not as the object's own waiters and wakers use it: 0
/// when woken, else `EAGAIN` (the word no longer held `val`), `ETIMEDOUT`
/// or `EINTR`. The bitset form, which takes an absolute time on either
/// clock; its mask matches every waker's.
pub(in crate::sync) fn futex_wait(word: &AtomicI32, val: i32, end: &End, shared: bool) -> c_int {
    let mut op = libc::FUTEX_WAIT_BITSET;
    if !shared {
        op |= libc::FUTEX_PRIVATE_FLAG;
    }
    if end.clock == libc::CLOCK_REALTIME {
        op |= libc::FUTEX_CLOCK_REALTIME;
    }
    // SAFETY: a live futex word; the real `syscall`.
    let r = unsafe {
        crate::futex::syscall::real(
            libc::SYS_futex,
            word.as_ptr() as libc::c_long,
            op as libc::c_long,
            val as libc::c_long,
            &end.at as *const timespec as libc::c_long,
            0,
            libc::FUTEX_BITSET_MATCH_ANY as libc::c_long,
        )
    };
    if r == 0 {
        0
    } else {
        crate::errno::get()
    }
}

/// Makes a timed call `call(end)` in slices ending at most [`SLICE`] from
/// now, until `deadline` (`None`: for ever), so that a call whose fiber
/// left ends soon; returns the last slice's result. Each slice ends on
/// the deadline's own clock (see [`End`]): a wall-clock deadline's wait
/// ends when the wall clock is set past it. (A set back lengthens the
/// slice it falls in by as much.)
pub(super) fn sliced(ticket: &Ticket, deadline: Option<hub::Deadline>, mut call: impl FnMut(&End) -> c_int) -> c_int {
    let (clock, at) = deadline.map_or((libc::CLOCK_MONOTONIC, i128::MAX), hub::Deadline::clock_time);
    loop {
        let slice_end = hub::now_nanos(clock) + SLICE.as_nanos() as i128;
        let last = at <= slice_end;
        let r = call(&End::new(clock, at.min(slice_end)));
        if r != libc::ETIMEDOUT || last || ticket.left() {
            return r;
        }
    }
}
