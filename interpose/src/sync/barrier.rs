//! Barriers, emulated in our own words of the caller's
//! `pthread_barrier_t` (init is ours too): the count, how many have
//! arrived, and a generation that the last arrival bumps to let the round go.
//! A barrier initialised process-shared is glibc's ([`super::pshared`]).
//!
//! A thread that is not the fibers' own (made with libc's own
//! `pthread_create`, a `SIGEV_THREAD` notification) cannot use glibc's
//! functions on these words (glibc's wait divided by a count it did not
//! find, and the process died of `SIGFPE`): it uses ours, by atomic
//! instructions, and sleeps in the kernel on the generation word, counted
//! in [`SLEEPERS`]. Once such a thread is known the fibers arrive by
//! atomic instructions too ([`arrive_shared_with_threads`]); an arrival
//! a fiber is making by plain stores when the first such thread appears
//! is finished before that thread goes on (`gate::plain`).

use std::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, c_uint, pthread_barrier_t, pthread_barrierattr_t};

use super::{park, pshared, tag, wake_all, word, Kind};
use crate::gate::ObjectsCaller;
use crate::hook::hook;

const COUNT: usize = 0;
const ARRIVED: usize = 1;
const GENERATION: usize = 2;
/// glibc's `shared` word, which tells its process-shared barriers apart.
const SHARED: usize = 3;
/// How many threads that are not fibers may sleep in the kernel on the
/// generation word (glibc's bytes past `shared`, ours here).
const SLEEPERS: usize = 4;

/// The words of the barrier at `a`: count, arrived, generation, sleepers.
///
/// # Safety
/// `a` is a live barrier (32 bytes).
unsafe fn words<'a>(a: usize) -> [&'a AtomicI32; 4] {
    // SAFETY: per the contract.
    unsafe { [word(a, COUNT), word(a, ARRIVED), word(a, GENERATION), word(a, SLEEPERS)] }
}

/// An arrival by atomic instructions, from a thread that is not a fiber
/// or from a fiber once such a thread is known: the generation is read
/// before the arrival is counted (the round's last arrival bumps it only
/// after ours); a fiber parks (napping, as its lock waits do, since the
/// other kind's wake-up comes from another thread), any other thread
/// sleeps in the kernel. The last arrival wakes both kinds.
///
/// # Safety
/// `a` is a live, process-private barrier.
unsafe fn arrive_shared_with_threads(a: usize) -> c_int {
    // SAFETY: per the contract.
    let [count, arrived, gen, sleepers] = unsafe { words(a) };
    let g = gen.load(Ordering::Acquire);
    if arrived.fetch_add(1, Ordering::AcqRel) + 1 >= count.load(Ordering::Relaxed) {
        arrived.store(0, Ordering::Relaxed);
        // A locked add: a full barrier before the sleepers' count is read
        // (a sleeper counts itself, then looks at the generation).
        gen.fetch_add(1, Ordering::SeqCst);
        super::wake_all_fibers(a);
        super::wake_sleepers(gen, sleepers);
        return libc::PTHREAD_BARRIER_SERIAL_THREAD;
    }
    if hub::is_fiber_thread() {
        while gen.load(Ordering::Acquire) == g {
            let nap = super::foreign_nap(None);
            park(Kind::Barrier, a, tag(0), nap, || gen.load(Ordering::Relaxed) == g);
        }
    } else {
        sleepers.fetch_add(1, Ordering::SeqCst);
        let forever = super::pshared::End::of(None);
        while gen.load(Ordering::SeqCst) == g {
            super::pshared::futex_wait(gen, g, &forever, false);
        }
        sleepers.fetch_sub(1, Ordering::Relaxed);
    }
    0
}

/// The barrier hooks' gate: the fibers' thread, or another OS thread
/// while they emulate barriers (`gate::ObjectsCaller::Beside`) on a
/// barrier that is not process-shared (`shared` says whether it is), which
/// the hooks then serve on our words.
#[inline]
fn ours(shared: impl FnOnce() -> bool) -> bool {
    match crate::gate::objects_caller() {
        ObjectsCaller::Fibers => true,
        ObjectsCaller::Beside => !shared(),
        ObjectsCaller::Neither => false,
    }
}

hook! {
    /// `pthread_barrier_init` (our own layout when emulating).
    // SAFETY: the caller's attribute.
    #[gate(ours(|| unsafe { pshared::barrier::attr_is_shared(attr) }))]
    [sync] fn pthread_barrier_init(
        b: *mut pthread_barrier_t,
        attr: *const pthread_barrierattr_t,
        count: c_uint,
    ) -> c_int {
        // SAFETY: the caller's attribute.
        if unsafe { pshared::barrier::attr_is_shared(attr) } {
            // SAFETY: the caller's barrier and attribute.
            return unsafe { pshared::barrier::init(b, attr, count) };
        }
        if count == 0 || count > i32::MAX as c_uint {
            return libc::EINVAL;
        }
        let a = b as usize;
        // SAFETY: the caller's barrier (32 bytes).
        unsafe {
            word(a, COUNT).store(count as i32, Ordering::Relaxed);
            word(a, ARRIVED).store(0, Ordering::Relaxed);
            word(a, GENERATION).store(0, Ordering::Relaxed);
            // glibc's "process-shared" word says private, as its init would.
            word(a, SHARED).store(0, Ordering::Relaxed);
            word(a, SLEEPERS).store(0, Ordering::Relaxed);
        }
        0
    }

    /// `pthread_barrier_wait`: exactly one waiter per round gets
    /// `PTHREAD_BARRIER_SERIAL_THREAD`.
    // SAFETY: the caller's barrier.
    #[gate(ours(|| unsafe { pshared::barrier::is_shared(b) }))]
    [sync] fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
        // SAFETY: the caller's barrier.
        if unsafe { pshared::barrier::is_shared(b) } {
            // SAFETY: the caller's barrier.
            return unsafe { pshared::barrier::wait(b) };
        }
        let a = b as usize;
        // A thread that is not a fiber got here noted (see `ours`); the
        // plain sequence below is the fibers' thread's alone.
        if crate::gate::foreign_threads() {
            // SAFETY: the caller's barrier, process-private.
            return unsafe { arrive_shared_with_threads(a) };
        }
        // SAFETY: the caller's barrier.
        let [count, arrived, gen, _] = unsafe { words(a) };
        // Only the fibers of one hub use the words this way, one at a time
        // (a signal handler runs only at a safe point, never inside a
        // hook): program order is enough, no locked add. Some(None): the
        // last arrival; Some(Some(g)): wait for generation g to pass.
        let arrival = crate::gate::plain(|| {
            let n = arrived.load(Ordering::Relaxed) + 1;
            if n >= count.load(Ordering::Relaxed) {
                arrived.store(0, Ordering::Relaxed);
                gen.store(gen.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
                return Some(None);
            }
            arrived.store(n, Ordering::Relaxed);
            Some(Some(gen.load(Ordering::Relaxed)))
        });
        match arrival {
            Some(None) => {
                wake_all(a);
                libc::PTHREAD_BARRIER_SERIAL_THREAD
            }
            Some(Some(g)) => {
                while gen.load(Ordering::Acquire) == g {
                    park(Kind::Barrier, a, tag(0), None, || gen.load(Ordering::Relaxed) == g);
                }
                0
            }
            // The first such thread was noted meanwhile.
            // SAFETY: the caller's barrier, process-private.
            None => unsafe { arrive_shared_with_threads(a) },
        }
    }

    /// `pthread_barrier_destroy`: EBUSY while fibers wait on it.
    // SAFETY: the caller's barrier.
    #[gate(ours(|| unsafe { pshared::barrier::is_shared(b) }))]
    [sync] fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int {
        // SAFETY: the caller's barrier.
        if unsafe { pshared::barrier::is_shared(b) } {
            // SAFETY: the caller's barrier.
            return unsafe { pshared::barrier::destroy(b) };
        }
        // SAFETY: the caller's barrier.
        if unsafe { word(b as usize, ARRIVED) }.load(Ordering::Relaxed) != 0 {
            return libc::EBUSY;
        }
        0
    }
}
