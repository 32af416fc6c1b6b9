//! `pthread_once`: a fiber arriving while another runs the init routine
//! parks until it is done. Same states as glibc (0, 1 = running, 2 = done),
//! so a `pthread_once_t` that glibc has already run stays done.
//!
//! An init routine that does not return (its thread is cancelled in it, or
//! calls `pthread_exit`) leaves the object as if `pthread_once` had never
//! been called, as POSIX asks and glibc does with a cleanup handler, and
//! wakes the waiters, one of which runs it again. Here the pthread fiber
//! running it has a marker in its cleanup chain (the object's address with
//! bit 0 set: a `pthread_once_t` is 4-aligned, cleanup buffers 8-aligned),
//! which [`exit`](super::exit) meets in order among the real handlers; the
//! root keeps its own list for its `pthread_exit`.
//!
//! A thread that is not the fibers' own (made with libc's own
//! `pthread_create`, a `SIGEV_THREAD` notification) runs glibc's
//! `pthread_once` on the same word, which means the same to it: it waits
//! in the kernel for a routine a fiber runs, so the fiber's end of it also
//! wakes the kernel's sleepers once such a thread is known (the hook notes
//! one, as the pthread objects' hooks do); a fiber waiting for such a
//! thread's routine, whose end wakes only the kernel's sleepers, looks
//! again every 2 ms besides (`sync::foreign_nap`).

use std::cell::RefCell;
use std::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, pthread_once_t};

use super::current_record;
use crate::gate::emulating_objects;
use crate::hook::hook;

const IN_PROGRESS: i32 = 1;
const DONE: i32 = 2;

/// Objects whose init routine the root is running, innermost last (per OS
/// thread: see `hub::PerThread`).
static ROOT_RUNNING: hub::PerThread<RefCell<Vec<usize>>> = hub::PerThread::new(|| RefCell::new(Vec::new()));

/// The state word of the object at `o`.
fn word<'a>(o: usize) -> &'a AtomicI32 {
    // SAFETY: `o` is the address of a caller's pthread_once_t, a 4-aligned
    // int that outlives the call (and the markers, which end with it).
    unsafe { &*(o as *const AtomicI32) }
}

/// Whether a cleanup-chain entry is a marker of ours.
pub(super) fn is_marker(entry: usize) -> bool {
    entry & 3 == 1
}

/// Undoes the init routine in progress that `marker` names.
pub(super) fn abandon(marker: usize) {
    reset(marker & !1);
}

/// Undoes every init routine the root is running (its `pthread_exit`).
pub(super) fn abandon_root() {
    for o in ROOT_RUNNING.with(|r| r.take()).into_iter().rev() {
        reset(o);
    }
}

/// Back to "never called", and the waiters woken: one runs it again.
fn reset(o: usize) {
    word(o).store(0, Ordering::Release);
    wake(o);
}

/// Wakes every waiter of the object at `o`: fibers, and threads that are
/// not fibers asleep in glibc's `pthread_once` (see the module docs).
fn wake(o: usize) {
    hub::unpark(o, usize::MAX);
    // After the state's store in the code; on the CPU the first such
    // thread's note makes it so (`sync::fence_fibers`).
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    if crate::gate::foreign_threads() {
        crate::sync::futex_wake(word(o), i32::MAX, false);
    }
}

/// Runs `f` as `o`'s init routine, marked as in progress for the exit path.
/// Left by an exception (a C++ `std::call_once` whose callable throws), the
/// routine is undone as by an exit, and the exception goes on to the
/// caller: glibc's `pthread_once` does the same with its cleanup.
fn run_init(o: usize, f: extern "C-unwind" fn()) {
    /// Undoes the routine's start when dropped, if still marked: only on
    /// an unwinding (an exit's stop function has undone it already).
    struct Undo<'a>(usize, &'a Option<std::rc::Rc<super::Record>>);
    impl Drop for Undo<'_> {
        fn drop(&mut self) {
            if unmark(self.0, self.1) {
                reset(self.0);
            }
        }
    }
    let rec = current_record();
    match &rec {
        Some(r) => r.cleanup.push(super::Cleanup::here(o | 1)),
        None if !hub::in_fiber() => ROOT_RUNNING.with(|r| r.borrow_mut().push(o)),
        None => {}
    }
    let undo = Undo(o, &rec);
    crate::hook::program(|| f());
    std::mem::forget(undo);
    unmark(o, &rec);
}

/// Removes the mark of `o`'s routine in progress that [`run_init`] made;
/// whether it was there.
fn unmark(o: usize, rec: &Option<std::rc::Rc<super::Record>>) -> bool {
    match rec {
        Some(r) => r.cleanup.remove(o | 1),
        None if !hub::in_fiber() => ROOT_RUNNING.with(|r| {
            let mut r = r.borrow_mut();
            r.iter().rposition(|&b| b == o).map(|i| r.remove(i)).is_some()
        }),
        None => false,
    }
}

hook! {
    /// `pthread_once`.
    // A thread that is not a fiber is noted here (see the module docs).
    #[gate(emulating_objects())]
    [thread] fn pthread_once(o: *mut pthread_once_t, f: extern "C-unwind" fn()) -> c_int {
        let key = o as usize;
        let w = word(key);
        loop {
            let s = w.load(Ordering::Acquire);
            if s & DONE != 0 {
                return 0;
            }
            if s == 0 {
                if w.compare_exchange(0, IN_PROGRESS, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    run_init(key, f);
                    w.store(DONE, Ordering::Release);
                    wake(key);
                    return 0;
                }
                continue;
            }
            let parked = hub::park(key, crate::sync::foreign_nap(None), || {
                let s = w.load(Ordering::Relaxed);
                s != 0 && s & DONE == 0
            });
            if parked == hub::Park::Interrupted {
                // Cancelled (asynchronously), or a signal for this thread:
                // its handler runs, and the wait goes on.
                crate::async_cancel_point();
            }
        }
    }
}
