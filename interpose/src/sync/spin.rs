//! Spinlocks, in glibc's own representation (a word that is 0 when free):
//! in a cooperative context a spinning fiber yields between attempts, so
//! that the holder, another fiber of the same hub, can run and unlock
//! (once threads have priorities, it sleeps a moment: the holder may have
//! a lower one).

use libc::{c_int, pthread_spinlock_t};

use crate::gate::cooperative;
use crate::hook::hook;

mod next {
    crate::real::real! {
        fn pthread_spin_trylock(l: *mut libc::pthread_spinlock_t) -> libc::c_int;
    }
}

hook! {
    /// `pthread_spin_lock`: yields between attempts. Natively a spinning
    /// thread runs the program's code, so its signal handlers run and an
    /// asynchronous cancellation takes it: here too, between attempts.
    #[gate(cooperative())]
    [sync] fn pthread_spin_lock(l: *mut pthread_spinlock_t) -> c_int {
        loop {
            // SAFETY: the caller's spinlock; same representation as glibc's.
            if unsafe { next::pthread_spin_trylock(l) } == 0 {
                return 0;
            }
            if hub::internal::priorities_differ() {
                // A yield would let only equal or higher priorities run,
                // and a holder of a lower one never would: a short sleep
                // lets it, as another CPU would natively.
                hub::sleep(std::time::Duration::from_micros(20));
            } else {
                hub::yield_now();
            }
            crate::async_cancel_point();
        }
    }
}
