//! State the layers above keep per OS thread ([`PerThread`]), reachable
//! from every context of the thread and at every moment of its life.
//!
//! A plain `thread_local!` is wrong for it twice over. With per-fiber TLS
//! each fiber has its own thread-local block, so a `thread_local!` is per
//! fiber, not per OS thread. And a `thread_local!` with a destructor is
//! gone during and after the thread's TLS destructors, while hooks keep
//! being called then: a C++ `thread_local` destructor, a `pthread_key`
//! destructor, an `atexit` handler or a library destructor run by
//! `_dl_fini` may join, lock, sleep or write ("cannot access a Thread
//! Local Storage value during or after destruction" was node's exit).
//!
//! So each OS thread has one [`Block`] of slots, pointed to from the hub's
//! thread-local `LOCAL` (which has no destructor, so it is readable at any
//! time) and copied into every fiber's `LOCAL` when the fiber is made. The
//! block is made with the thread's hub (or earlier, on first use) and is
//! leaked with the hub: suspended fibers may refer to it whenever the thread
//! exits, and the hub outlives the thread's TLS destructors. A thread that
//! never gets a hub (a real thread a library made) frees its block when its
//! thread-locals are destroyed; a slot used after that gets a fresh value in
//! a block that is never freed (once per thread, at most).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{internal, with_local};

/// Slots in a block: the number of [`PerThread`] statics in the whole
/// program (greenhook's own use a dozen).
const SLOTS: usize = 32;

/// How many slots have been handed out, process-wide.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// A slot being initialised (its `init` runs): a re-entrant use is a bug.
const INITIALISING: *const () = std::ptr::dangling::<()>();

/// How a slot's value is dropped (see [`drop_box`]).
type Dropper = unsafe fn(*const ());

/// One OS thread's slots (see the [module](self) docs).
pub(crate) struct Block {
    /// Each slot's value, from `Box::into_raw`; null until first used.
    values: [Cell<*const ()>; SLOTS],
    /// How to drop each value, for a block freed at thread exit.
    drops: [Cell<Option<Dropper>>; SLOTS],
}

/// Per-OS-thread state of the layers above, like `thread_local!` but shared
/// by every fiber of the thread and usable at any time, thread-local
/// destruction and `exit` included (see the [module](self) docs).
///
/// ```
/// use std::cell::Cell;
/// static COUNT: hub::PerThread<Cell<u32>> = hub::PerThread::new(|| Cell::new(0));
/// COUNT.with(|c| c.set(c.get() + 1));
/// assert_eq!(COUNT.with(|c| c.get()), 1);
/// ```
pub struct PerThread<T: 'static> {
    /// The slot index plus one; 0 until first used.
    slot: AtomicUsize,
    init: fn() -> T,
}

impl<T: 'static> PerThread<T> {
    /// A slot whose value on each OS thread starts as `init()` (made on
    /// first use, as machinery: hooks entered from the allocator meanwhile
    /// pass through).
    pub const fn new(init: fn() -> T) -> PerThread<T> {
        PerThread {
            slot: AtomicUsize::new(0),
            init,
        }
    }

    #[inline]
    fn index(&self) -> usize {
        let s = self.slot.load(Ordering::Relaxed);
        if s != 0 {
            return s - 1;
        }
        self.assign()
    }

    #[cold]
    fn assign(&self) -> usize {
        let mine = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) + 1;
        assert!(mine <= SLOTS, "greenhook: more than {SLOTS} PerThread slots");
        match self
            .slot
            .compare_exchange(0, mine, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => mine - 1,
            // Another thread assigned it first; our number stays unused.
            Err(theirs) => theirs - 1,
        }
    }

    /// Runs `f` with the calling OS thread's value, made on first use.
    #[inline]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let block = block();
        let i = self.index();
        let p = block.values[i].get();
        if p.is_null() || p == INITIALISING {
            return f(self.make(block, i));
        }
        // SAFETY: a set slot holds a `Box<T>` of this very static (slots
        // are never shared between statics), alive while the block is.
        f(unsafe { &*(p as *const T) })
    }

    /// Runs `f` with the calling OS thread's value if it was made; `None`
    /// (and nothing made) otherwise.
    #[inline]
    pub fn with_existing<R>(&'static self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let b = with_local(|l| l.block.get());
        // SAFETY: a non-null block pointer is live (see `block`).
        let block = unsafe { b.as_ref() }?;
        let p = block.values[self.index()].get();
        if p.is_null() || p == INITIALISING {
            return None;
        }
        // SAFETY: as in `with`.
        Some(f(unsafe { &*(p as *const T) }))
    }

    #[cold]
    fn make<'b>(&self, block: &'b Block, i: usize) -> &'b T {
        assert!(
            block.values[i].get() != INITIALISING,
            "greenhook: a PerThread value was used while being made"
        );
        block.values[i].set(INITIALISING);
        let p = internal::bookkeeping(|| Box::into_raw(Box::new((self.init)())));
        block.values[i].set(p as *const ());
        block.drops[i].set(Some(drop_box::<T>));
        // SAFETY: just made, owned by the block.
        unsafe { &*p }
    }
}

/// Drops a slot's value.
///
/// # Safety
/// `p` came from `Box::<T>::into_raw` and is not used again.
unsafe fn drop_box<T>(p: *const ()) {
    // SAFETY: the contract.
    drop(unsafe { Box::from_raw(p as *mut T) });
}

/// The calling OS thread's block, made on first use.
#[inline]
fn block() -> &'static Block {
    let p = with_local(|l| l.block.get());
    if !p.is_null() {
        // SAFETY: a block stays allocated while LOCAL points at it: it is
        // leaked, or freed by `Reaper` only after LOCAL was cleared.
        return unsafe { &*p };
    }
    make_block()
}

/// Makes the calling thread's block if it has none (the hub calls this
/// when it is created, so that every fiber inherits the block).
#[cold]
pub(crate) fn make_block() -> &'static Block {
    let p = with_local(|l| l.block.get());
    if !p.is_null() {
        // SAFETY: as in `block`.
        return unsafe { &*p };
    }
    let b: &'static Block = internal::bookkeeping(|| {
        Box::leak(Box::new(Block {
            values: [const { Cell::new(std::ptr::null()) }; SLOTS],
            drops: [const { Cell::new(None) }; SLOTS],
        }))
    });
    with_local(|l| l.block.set(b));
    // Free it at thread exit unless a hub keeps it. If thread-locals are
    // already being destroyed this fails, and the block is simply kept.
    let _ = REAPER.try_with(|_| ());
    b
}

/// Frees a thread's block at its exit, unless it has a hub (whose fibers
/// may refer to it).
struct Reaper;

thread_local! {
    static REAPER: Reaper = const { Reaper };
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if crate::Hub::existing().is_some() {
            return;
        }
        let p = with_local(|l| l.block.replace(std::ptr::null()));
        if p.is_null() {
            return;
        }
        let _g = internal::Guard::new();
        // SAFETY: the block came from `Box::leak` in `make_block`, and no
        // reference to it outlives a `with` call (none runs now: this is
        // the thread's own exit path); LOCAL no longer points at it.
        let block = unsafe { Box::from_raw(p as *mut Block) };
        for (v, d) in block.values.iter().zip(&block.drops) {
            if let (p, Some(drop)) = (v.get(), d.get()) {
                if !p.is_null() && p != INITIALISING {
                    // SAFETY: `drop` is the value's own `drop_box`.
                    unsafe { drop(p) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::PerThread;

    static N: PerThread<Cell<u32>> = PerThread::new(|| Cell::new(7));

    #[test]
    fn values_are_per_os_thread() {
        assert_eq!(N.with_existing(|n| n.get()).unwrap_or(7), 7);
        N.with(|n| n.set(8));
        assert_eq!(N.with(|n| n.get()), 8);
        std::thread::spawn(|| {
            assert_eq!(N.with_existing(|n| n.get()), None);
            assert_eq!(N.with(|n| n.get()), 7);
        })
        .join()
        .unwrap();
        assert_eq!(N.with(|n| n.get()), 8);
    }

    /// A value used from a thread-local destructor of its own thread, after
    /// the block was freed, is a fresh one (never a crash).
    #[test]
    fn usable_from_thread_local_destructors() {
        struct Late;
        impl Drop for Late {
            fn drop(&mut self) {
                N.with(|n| n.set(n.get() + 1));
            }
        }
        thread_local! { static LATE: Late = const { Late }; }
        std::thread::spawn(|| {
            // Registered before the block's reaper: destroyed after it.
            LATE.with(|_| ());
            N.with(|n| n.set(1));
        })
        .join()
        .unwrap();
    }
}
