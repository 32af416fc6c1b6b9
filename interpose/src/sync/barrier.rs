//! Barriers, emulated in our own words of the caller's
//! `pthread_barrier_t` (init is ours too): the count, how many have
//! arrived, and a generation that the last arrival bumps to let the round go.
//! A barrier initialised process-shared is glibc's ([`super::pshared`]).

use std::sync::atomic::Ordering;

use libc::{c_int, c_uint, pthread_barrier_t, pthread_barrierattr_t};

use super::{park, pshared, tag, wake_all, word, Kind};
use crate::gate::emulating_objects;
use crate::hook::hook;

const COUNT: usize = 0;
const ARRIVED: usize = 1;
const GENERATION: usize = 2;
/// glibc's `shared` word, which tells its process-shared barriers apart.
const SHARED: usize = 3;

hook! {
    /// `pthread_barrier_init` (our own layout when emulating).
    #[gate(emulating_objects())]
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
        }
        0
    }

    /// `pthread_barrier_wait`: exactly one waiter per round gets
    /// `PTHREAD_BARRIER_SERIAL_THREAD`.
    #[gate(emulating_objects())]
    [sync] fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
        // SAFETY: the caller's barrier.
        if unsafe { pshared::barrier::is_shared(b) } {
            // SAFETY: the caller's barrier.
            return unsafe { pshared::barrier::wait(b) };
        }
        let a = b as usize;
        // SAFETY: the caller's barrier.
        let (count, arrived, gen) = unsafe { (word(a, COUNT), word(a, ARRIVED), word(a, GENERATION)) };
        let n = arrived.load(Ordering::Relaxed) + 1;
        if n >= count.load(Ordering::Relaxed) {
            arrived.store(0, Ordering::Relaxed);
            // Only the fibers of one hub use an emulated barrier, one at a
            // time (a signal handler runs only at a safe point, never
            // inside a hook): program order is enough, no locked add.
            gen.store(gen.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
            wake_all(a);
            return libc::PTHREAD_BARRIER_SERIAL_THREAD;
        }
        arrived.store(n, Ordering::Relaxed);
        let g = gen.load(Ordering::Relaxed);
        while gen.load(Ordering::Acquire) == g {
            park(Kind::Barrier, a, tag(0), None, || gen.load(Ordering::Relaxed) == g);
        }
        0
    }

    /// `pthread_barrier_destroy`: EBUSY while fibers wait on it.
    #[gate(emulating_objects())]
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
