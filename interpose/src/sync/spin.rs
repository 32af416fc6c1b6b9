//! Spinlocks, in glibc's own representation (a word that is 0 when free):
//! in a cooperative context a spinning fiber yields between attempts, so
//! that the holder, another fiber of the same hub, can run and unlock.

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
            hub::yield_now();
            crate::async_cancel_point();
        }
    }
}
