//! `syscall(SYS_futex, …)`: futex waits that cooperate with the hub.
//!
//! Rust's std reaches the futex through libc's exported `syscall` (Mutex,
//! Condvar, RwLock, mpsc, Barrier, Once, `thread::park`), so this one hook
//! makes all of them fiber-aware after `patch_all()`.
//!
//! Design:
//! - A process-wide table (behind a spin lock: a futex-based lock here would
//!   recurse into this hook) maps a futex address to its fiber waiters, in
//!   arrival order, each with its bitset and a [`hub::RemoteWaker`].
//! - `FUTEX_WAIT`/`FUTEX_WAIT_BITSET` in a cooperative context park the
//!   caller with [`hub::park_remote`]; the value check and the enqueue happen
//!   under the table lock, inside the waker registration, so a wake-up from
//!   another thread between the check and the sleep is never lost.
//! - `FUTEX_WAKE`/`FUTEX_WAKE_BITSET` from any thread (patched or not, fiber
//!   or not) first wake up to `n` matching fiber waiters, then pass the
//!   remainder to the kernel for real threads blocked there.
//! - Outside a cooperative context, and for every other operation or system
//!   call number, the real `syscall` runs untouched.
//!
//! Every fiber waiter uses a `RemoteWaker`, also when the waker runs on the
//! same hub: one code path, at the cost of an eventfd poke per wake-up.

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_long, timespec};

use crate::gate::cooperative;
use crate::hook::hook;

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAKE_BITSET: i32 = 10;
const FUTEX_PRIVATE_FLAG: i32 = 128;
const FUTEX_CLOCK_REALTIME: i32 = 256;
const FUTEX_BITSET_MATCH_ANY: u32 = 0xffff_ffff;

/// A spin lock that never calls into libc (so never into this hook).
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` with the lock held. `f` must not block or switch fibers.
    /// It may allocate: it runs as greenhook machinery, so an allocator's
    /// own lock taken meanwhile is the real one (a futex wait of ours from
    /// in here would spin on this lock for ever).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _machinery = hub::internal::Guard::new();
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        struct Unlock<'a>(&'a AtomicBool);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _u = Unlock(&self.locked);
        // SAFETY: we hold the lock, so nobody else has a reference.
        f(unsafe { &mut *self.value.get() })
    }
}

struct Entry {
    id: u64,
    bitset: u32,
    waker: hub::RemoteWaker,
}

static TABLE: SpinLock<BTreeMap<usize, VecDeque<Entry>>> = SpinLock::new(BTreeMap::new());
/// Fiber waiters in the table: lets FUTEX_WAKE skip the lock when zero.
static WAITERS: AtomicUsize = AtomicUsize::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

hook! {
    /// The `syscall` hook: futexes cooperate (below); `SYS_close` and
    /// `SYS_close_range` drop greenhook's bookkeeping of the fds first, as
    /// the `close` hooks do (a registration left behind would swallow the
    /// events of the next fd given the same number); every other call
    /// passes through, as raw as the caller asked; `SYS_gettid` and the
    /// signals sent to a thread id are `thread::tid`'s (a fiber's own id).
    #[gate(n == libc::SYS_futex || n == libc::SYS_close || n == libc::SYS_close_range || crate::thread::tid::takes(n))]
    [futex] fn syscall(n: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long {
        if n != libc::SYS_futex {
            if let Some(r) = crate::thread::tid::syscall(n, a1, a2, a3, a4) {
                return r;
            }
            // SAFETY: forwarded unchanged (a close range in pieces).
            return crate::fd::raw_close(n, a1, a2, a3, |a1, a2, a3| unsafe { syscall::real(n, a1, a2, a3, a4, a5, a6) });
        }
        let uaddr = a1 as usize;
        let op = a2 as i32;
        let cmd = op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
        let realtime = op & FUTEX_CLOCK_REALTIME != 0;
        let r = match cmd {
            FUTEX_WAKE | FUTEX_WAKE_BITSET => {
                let bitset = if cmd == FUTEX_WAKE {
                    FUTEX_BITSET_MATCH_ANY
                } else {
                    a6 as u32
                };
                if bitset == 0 || !uaddr.is_multiple_of(4) {
                    Err(libc::EINVAL)
                } else {
                    let want = (a3 as i32).max(0) as usize;
                    let woken = wake(uaddr, want, bitset);
                    if woken >= want {
                        Ok(woken as c_long)
                    } else {
                        // SAFETY: a real futex wake for the remainder, same arguments otherwise.
                        let k = unsafe { syscall::real(n, a1, a2, (want - woken) as c_long, a4, a5, a6) };
                        if k < 0 {
                            if woken > 0 {
                                Ok(woken as c_long)
                            } else {
                                Err(crate::errno::get())
                            }
                        } else {
                            Ok(woken as c_long + k)
                        }
                    }
                }
            }
            FUTEX_WAIT | FUTEX_WAIT_BITSET if uaddr != 0 && cooperative() => {
                let bitset = if cmd == FUTEX_WAIT {
                    FUTEX_BITSET_MATCH_ANY
                } else {
                    a6 as u32
                };
                let ts = a4 as *const timespec;
                if bitset == 0 || !uaddr.is_multiple_of(4) {
                    Err(libc::EINVAL)
                } else {
                    match deadline(ts, cmd == FUTEX_WAIT, realtime) {
                        Err(e) => Err(e),
                        Ok(d) => wait(uaddr, a3 as u32, bitset, d).map(|()| 0),
                    }
                }
            }
            // SAFETY: forwarded unchanged.
            _ => return unsafe { syscall::real(n, a1, a2, a3, a4, a5, a6) },
        };
        match r {
            Ok(v) => v,
            Err(e) => crate::errno::fail(e),
        }
    }
}

/// Converts a futex timeout to a deadline: relative (FUTEX_WAIT) or absolute
/// on CLOCK_MONOTONIC / CLOCK_REALTIME.
fn deadline(ts: *const timespec, relative: bool, realtime: bool) -> Result<Option<hub::Deadline>, i32> {
    if ts.is_null() {
        return Ok(None);
    }
    let ts = crate::deadline::read(ts)?;
    let d = crate::deadline::duration_of(&ts)?;
    if relative {
        return Ok(crate::deadline::after(d).map(Into::into));
    }
    let clock = if realtime {
        libc::CLOCK_REALTIME
    } else {
        libc::CLOCK_MONOTONIC
    };
    Ok(crate::deadline::at(clock, &ts))
}

/// Waits as a fiber; Ok(()) when woken.
fn wait(uaddr: usize, val: u32, bitset: u32, deadline: Option<hub::Deadline>) -> Result<(), i32> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut mismatch = false;
    let r = hub::park_remote(uaddr, deadline, |waker| {
        TABLE.with(|t| {
            // SAFETY: the caller gave us a futex word; it is 4-aligned (checked).
            let cur = unsafe { (*(uaddr as *const AtomicI32)).load(Ordering::SeqCst) } as u32;
            if cur != val {
                mismatch = true;
                // Dropped below, after the lock: wakes us at once.
                Some(waker)
            } else {
                t.entry(uaddr).or_default().push_back(Entry { id, bitset, waker });
                WAITERS.fetch_add(1, Ordering::SeqCst);
                None
            }
        });
    });
    if mismatch {
        return Err(libc::EAGAIN);
    }
    match r {
        hub::Park::Unparked => Ok(()),
        other => {
            // Still queued: the wait really timed out (or was interrupted).
            // Already gone: a waker counted us, so report the wake-up.
            let removed = TABLE.with(|t| {
                let q = t.get_mut(&uaddr)?;
                let pos = q.iter().position(|e| e.id == id)?;
                let e = q.remove(pos);
                if q.is_empty() {
                    t.remove(&uaddr);
                }
                WAITERS.fetch_sub(1, Ordering::SeqCst);
                e
            });
            match removed {
                None => Ok(()),
                Some(e) => {
                    std::mem::forget(e.waker); // its wake-up would be stale; skip the poke
                    if other == hub::Park::TimedOut {
                        Err(libc::ETIMEDOUT)
                    } else {
                        Err(libc::EINTR)
                    }
                }
            }
        }
    }
}

/// Wakes up to `n` fiber waiters on `uaddr` whose bitset matches; returns how many.
fn wake(uaddr: usize, n: usize, bitset: u32) -> usize {
    if n == 0 || WAITERS.load(Ordering::SeqCst) == 0 {
        return 0;
    }
    let mut woken = Vec::new();
    TABLE.with(|t| {
        let Some(q) = t.get_mut(&uaddr) else { return };
        let mut i = 0;
        while i < q.len() && woken.len() < n {
            if q[i].bitset & bitset != 0 {
                woken.extend(q.remove(i));
            } else {
                i += 1;
            }
        }
        if q.is_empty() {
            t.remove(&uaddr);
        }
        WAITERS.fetch_sub(woken.len(), Ordering::SeqCst);
    });
    let k = woken.len();
    drop(woken); // outside the lock: each drop wakes its fiber
    k
}
