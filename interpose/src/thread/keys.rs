//! Thread-specific data. Keys are the real glibc keys, so they work in the
//! root and in pass-through mode. A pthread fiber with TLS of its own keeps
//! its values where glibc keeps a thread's, in its own block, and glibc's
//! destructors for them run when it ends (`fiber::tls::run_destructors`,
//! once in glibc's order and once more as the fiber's very last act, for a
//! value set again by what ran in between: an allocator whose state a late
//! `malloc` set up again). A fiber sharing its thread's TLS keeps its values
//! in its own slots (`Fiber::local`), and the destructors recorded at
//! `pthread_key_create` run when it ends.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void, pthread_key_t};

use crate::gate::in_fiber_thread;
use crate::hook::hook;

/// A key destructor.
pub(crate) type Dtor = unsafe extern "C-unwind" fn(*mut c_void);

/// Fiber slots, and so keys a fiber can hold a value for.
const KEYS_MAX: usize = 1024;
/// Rounds of destructors while values keep being set (POSIX's
/// `PTHREAD_DESTRUCTOR_ITERATIONS`).
const DESTRUCTOR_ITERATIONS: usize = 4;

/// Destructors by key (0: none).
static DTORS: [AtomicUsize; KEYS_MAX] = [const { AtomicUsize::new(0) }; KEYS_MAX];

/// The destructor registered for a key, from its slot word.
///
/// # Safety
/// `d` is a non-zero word of [`DTORS`].
unsafe fn dtor(d: usize) -> Dtor {
    // SAFETY: per the contract: only pthread_key_create stores there, from a `Dtor`.
    unsafe { std::mem::transmute::<usize, Dtor>(d) }
}

/// Whether the caller is a pthread fiber whose key values live in its
/// slots: one sharing its thread's TLS (see the module docs).
fn in_slots() -> bool {
    in_fiber_thread() && hub::with_current_fiber(|f| f.is_some_and(|f| !f.has_own_tls()))
}

/// Runs the destructors of the calling fiber's key values, as glibc does:
/// key by key in creation order, each value cleared just before its
/// destructor runs (so the destructor sees its own key empty and the later
/// keys still set), in rounds while destructors set values again. Then
/// every slot is freed.
pub(super) fn run_fiber_destructors() {
    let with = |f: &dyn Fn(&fiber::Fiber)| hub::with_current_fiber(|fib| fib.map(f));
    for _ in 0..DESTRUCTOR_ITERATIONS {
        // The common case, no value at all, costs one look.
        let vals = hub::with_current_fiber(|f| f.map(|f| f.take_locals()).unwrap_or_default());
        if vals.iter().all(|&v| v == 0) {
            break;
        }
        for (k, &v) in vals.iter().enumerate() {
            if v != 0 {
                with(&|f| f.set_local(k, v));
            }
        }
        let mut ran = false;
        for k in 0..vals.len() {
            let v = hub::with_current_fiber(|f| f.map_or(0, |f| f.local(k)));
            if v == 0 {
                continue;
            }
            with(&|f| f.set_local(k, 0));
            let d = DTORS.get(k).map_or(0, |d| d.load(Ordering::Relaxed));
            if d != 0 {
                ran = true;
                // SAFETY: `d` is a non-zero DTORS word; called with the value
                // the thread stored, as POSIX says.
                crate::hook::program(|| unsafe { dtor(d)(v as *mut c_void) });
            }
        }
        if !ran {
            break;
        }
    }
    hub::with_current_fiber(|f| f.map(|f| f.take_locals()));
}

/// Runs the destructors of the root's key values (the real keys').
pub(super) fn run_root_destructors() {
    for _ in 0..DESTRUCTOR_ITERATIONS {
        let mut ran = false;
        for (k, d) in DTORS.iter().enumerate() {
            let d = d.load(Ordering::Relaxed);
            if d == 0 {
                continue;
            }
            // SAFETY: a key that has a destructor was created by pthread_key_create.
            let v = unsafe { pthread_getspecific::real(k as pthread_key_t) };
            if !v.is_null() {
                ran = true;
                // SAFETY: clearing our own value before calling the destructor.
                unsafe { pthread_setspecific::real(k as pthread_key_t, std::ptr::null()) };
                // SAFETY: `d` is a non-zero DTORS word; called with the
                // stored value, as POSIX says.
                crate::hook::program(|| unsafe { dtor(d)(v) });
            }
        }
        if !ran {
            break;
        }
    }
}

hook! {
    /// `pthread_key_create`: a real key; its destructor is remembered for fibers.
    [thread] fn pthread_key_create(k: *mut pthread_key_t, d: Option<Dtor>) -> c_int {
        // SAFETY: forwarded unchanged.
        let r = unsafe { pthread_key_create::real(k, d) };
        if r == 0 {
            // SAFETY: the real call wrote the key.
            let key = unsafe { *k } as usize;
            if let Some(slot) = DTORS.get(key) {
                slot.store(d.map_or(0, |d| d as usize), Ordering::Relaxed);
            }
        }
        r
    }

    /// `pthread_key_delete`.
    [thread] fn pthread_key_delete(k: pthread_key_t) -> c_int {
        // SAFETY: forwarded unchanged.
        let r = unsafe { pthread_key_delete::real(k) };
        if r == 0 {
            if let Some(slot) = DTORS.get(k as usize) {
                slot.store(0, Ordering::Relaxed);
            }
        }
        r
    }

    /// `pthread_getspecific`: the fiber's slot inside a fiber sharing TLS.
    #[gate(in_slots())]
    [thread] fn pthread_getspecific(k: pthread_key_t) -> *mut c_void {
        if (k as usize) >= KEYS_MAX {
            return std::ptr::null_mut();
        }
        hub::with_current_fiber(|f| f.map_or(0, |f| f.local(k as usize))) as *mut c_void
    }

    /// `pthread_setspecific`: the fiber's slot inside a fiber sharing TLS.
    #[gate(in_slots())]
    [thread] fn pthread_setspecific(k: pthread_key_t, v: *const c_void) -> c_int {
        if (k as usize) >= KEYS_MAX {
            return libc::EINVAL;
        }
        hub::with_current_fiber(|f| {
            if let Some(f) = f {
                f.set_local(k as usize, v as usize)
            }
        });
        0
    }
}
