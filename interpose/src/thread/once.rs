//! `pthread_once`: a fiber arriving while another runs the init routine
//! parks until it is done. Same states as glibc (0, 1 = running, 2 = done),
//! so a `pthread_once_t` that glibc has already run stays done.

use std::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, pthread_once_t};

use crate::gate::emulating;
use crate::hook::hook;

const IN_PROGRESS: i32 = 1;
const DONE: i32 = 2;

hook! {
    /// `pthread_once`.
    #[gate(emulating())]
    [thread] fn pthread_once(o: *mut pthread_once_t, f: extern "C" fn()) -> c_int {
        // SAFETY: pthread_once_t is a 4-aligned int.
        let w = unsafe { &*(o as *const AtomicI32) };
        loop {
            let s = w.load(Ordering::Acquire);
            if s & DONE != 0 {
                return 0;
            }
            if s == 0 {
                if w.compare_exchange(0, IN_PROGRESS, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    f();
                    w.store(DONE, Ordering::Release);
                    hub::unpark(o as usize, usize::MAX);
                    return 0;
                }
                continue;
            }
            hub::park(o as usize, None, || {
                let s = w.load(Ordering::Relaxed);
                s != 0 && s & DONE == 0
            });
        }
    }
}
