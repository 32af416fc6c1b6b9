//! [`park`], [`park_timeout`] and [`Thread::unpark`](crate::Thread::unpark):
//! std's token semantics, between fibers and across OS threads.
//!
//! Each [`Thread`](crate::Thread) has a [`Parker`]: a three-state token
//! word, as std's futex parker has, and a slot for the
//! [`hub::RemoteWaker`] of the owner's current wait. The owner always waits
//! with [`hub::park_remote`], because the `Thread` may be unparked from any
//! OS thread and only a remote waker reaches a hub from outside. An unpark
//! from another OS thread drops that waker (an eventfd write and a loop
//! turn on the owner's hub); an unpark from the owner's own OS thread wakes
//! the owner's task directly ([`hub::Task::interrupt`]), which costs a
//! switch and no system call.
//!
//! A parked context counts as waiting for another thread, so the hub's
//! deadlock detector stays quiet while anyone is parked: any thread holding
//! the handle may still unpark it, as with std.

use std::marker::PhantomData;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicI8, AtomicPtr, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::thread::{current, os_thread};

/// Blocks the calling fiber (or the root context, which runs the other
/// fibers meanwhile) unless or until its token is available, like
/// `std::thread::park`.
///
/// Each [`Thread`](crate::Thread) has a token, initially absent. `park`
/// consumes it if it is there and returns at once; otherwise it blocks
/// until [`Thread::unpark`](crate::Thread::unpark) makes it available (from
/// any fiber or OS thread), and consumes it. It may also return spuriously, without consuming it: call
/// it in a loop that checks the condition waited for. An `unpark` happens
/// before the `park` that consumes its token returns.
///
/// This is greenhook's own token, distinct from `std::thread::park`'s
/// (which belongs to the OS thread, shared by all its fibers).
pub fn park() {
    current().parker().park(None)
}

/// Like [`park`], but returns after at most about `dur` (never earlier,
/// unless unparked or spuriously), like `std::thread::park_timeout`.
pub fn park_timeout(dur: Duration) {
    current().parker().park(Instant::now().checked_add(dur))
}

/// Uses [`park_timeout`]; mirrors std's deprecated function.
#[deprecated(since = "0.1.0", note = "replaced by `greenhook::park_timeout`")]
pub fn park_timeout_ms(ms: u32) {
    park_timeout(Duration::from_millis(u64::from(ms)))
}

/// The token is there.
const NOTIFIED: i8 = 1;
/// No token, owner not parked.
const EMPTY: i8 = 0;
/// No token, owner parked (or about to be).
const PARKED: i8 = -1;

/// The park token of one context and the means to wake it.
pub(crate) struct Parker {
    /// [`NOTIFIED`], [`EMPTY`] or [`PARKED`]. Only the owner moves it down
    /// (consuming the token or parking); unparkers only set `NOTIFIED`.
    state: AtomicI8,
    /// The waker of the owner's current wait, while it waits.
    waker: Slot<hub::RemoteWaker>,
    /// The owner's OS thread and hub task, written by the owner before it
    /// parks (so an unparker that sees `PARKED` sees them).
    ///
    /// # Invariant
    /// While `state` is `PARKED`, `task` is the owner's task, which is alive
    /// (a context cannot end while parked).
    home: AtomicU64,
    task: AtomicPtr<hub::Task>,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker {
            state: AtomicI8::new(EMPTY),
            waker: Slot::new(),
            home: AtomicU64::new(0),
            task: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Consumes the token, or waits for it until `deadline`. Called by the
    /// owner only (through [`current`]).
    pub(crate) fn park(&self, deadline: Option<Instant>) {
        self.home.store(os_thread(), Relaxed);
        self.task.store(Rc::as_ptr(&hub::current()).cast_mut(), Relaxed);
        // NOTIFIED -> EMPTY: the token was there, consumed. EMPTY -> PARKED:
        // from here on an unparker will wake us.
        if self.state.fetch_sub(1, SeqCst) == NOTIFIED {
            return;
        }
        let key = self as *const Parker as usize;
        loop {
            let how = hub::park_remote(key, deadline.map(Into::into), |waker| {
                self.waker.put(waker);
                // An unpark from another OS thread between the decrement
                // above and the put found no waker to drop: drop it
                // ourselves, which wakes this wait. (Both sides write, then
                // read the other's word, all SeqCst: at least one of them
                // sees the other's write.)
                if self.state.load(SeqCst) == NOTIFIED {
                    drop(self.waker.take());
                }
            });
            if let Some(w) = self.waker.take() {
                // The wait ended otherwise (a local unpark, a timeout, an
                // interrupt): the hub has forgotten this waker's token.
                // Dropping it would post a wake-up the hub ignores, at the
                // cost of an eventfd write; forgetting it leaks one count
                // of the hub's inbox, which lives as long as the process.
                std::mem::forget(w);
            }
            if self.state.compare_exchange(NOTIFIED, EMPTY, SeqCst, SeqCst).is_ok() {
                return;
            }
            if how != hub::Park::Unparked {
                // Timed out, or interrupted (a spurious return, which std
                // allows). A token that arrives meanwhile is consumed by
                // this return.
                self.state.swap(EMPTY, SeqCst);
                return;
            }
        }
    }

    /// Makes the token available and wakes the owner if it is parked.
    pub(crate) fn unpark(&self) {
        if self.state.swap(NOTIFIED, SeqCst) != PARKED {
            return;
        }
        if self.home.load(Relaxed) == os_thread() {
            // The owner lives on this OS thread, and since we run, it is
            // suspended inside `park`: blocked in `park_remote` (or already
            // woken, when `interrupt` does nothing). Waking it through the
            // hub directly costs a switch, where the waker would cost an
            // eventfd write and a poll.
            let t = self.task.load(Relaxed);
            // SAFETY: the invariant of `task` (we saw PARKED, which the
            // owner published after writing it); and we are on the task's
            // own thread, the only one that may touch its counts.
            let task = unsafe {
                Rc::increment_strong_count(t);
                Rc::from_raw(t)
            };
            task.interrupt();
        } else {
            drop(self.waker.take());
        }
    }
}

/// A cell for one value handed between OS threads: put by one side, taken
/// by whichever side gets there first. Lock-free on purpose: the parker puts
/// its waker while its fiber is already marked blocked on the hub, where a
/// futex-backed lock (std's `Mutex` under `monkey::patch_all`) must not
/// wait.
struct Slot<T> {
    /// # Invariant
    /// Null, or a pointer from `Box::into_raw` that the slot owns.
    ptr: AtomicPtr<T>,
    _owns: PhantomData<Box<T>>,
}

// SAFETY: the slot owns at most one `T`, moved in and out whole by atomic
// swaps (no `&T` is ever handed out): sharing it is like sharing a
// `Mutex<Option<T>>`, which needs only `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}

impl<T> Slot<T> {
    const fn new() -> Slot<T> {
        Slot {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Puts `v` in, dropping a value that was still there.
    fn put(&self, v: T) {
        let old = self.ptr.swap(Box::into_raw(Box::new(v)), SeqCst);
        if !old.is_null() {
            // SAFETY: the invariant; the swap took it out, so it is ours.
            drop(unsafe { Box::from_raw(old) });
        }
    }

    /// Takes the value out, if there is one.
    fn take(&self) -> Option<T> {
        // Usually empty: a load is cheaper than a swap (a SeqCst load takes
        // its place in the one total order all the same).
        if self.ptr.load(SeqCst).is_null() {
            return None;
        }
        let p = self.ptr.swap(ptr::null_mut(), SeqCst);
        // SAFETY: the invariant; the swap took it out, so it is ours.
        (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
    }
}

impl<T> Drop for Slot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}
