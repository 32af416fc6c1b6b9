//! Fiber-aware pthread synchronisation: mutexes, condition variables,
//! rwlocks, barriers, spinlocks and semaphores.
//!
//! A blocked waiter parks on the hub ([`hub::park`], keyed by the object's
//! address) instead of blocking the only OS thread, so a fiber that sleeps
//! while holding a lock cannot deadlock the hub.
//!
//! ## Decision: when we emulate
//! With `threads_as_fibers` (the preload default) mutexes, condition
//! variables, rwlocks and barriers are **always** emulated while patched,
//! in fibers and in the root alike, so one object never sees two
//! representations (main may lock a mutex before it creates threads). The
//! preload library patches in its constructor, before `main`. The emulated
//! state lives in the caller's object, in fields the static initialisers
//! zero, and it keeps the fields glibc's `*_init`/`*_destroy` read:
//! - mutex: `__lock` 0/1, `__count` (recursion), `__owner` (our owner id:
//!   the fiber id, or minus the tid for a root context), `__kind` read back
//!   from what the real `pthread_mutex_init` or the initialiser wrote;
//!   `__nusers` stays 0, so the real `pthread_mutex_destroy` works;
//! - condvar: no state at all (waiters park on its address); the clock is
//!   read from bit 1 of `__wrefs`, written by the real `pthread_cond_init`;
//! - rwlock: `__readers` is -1 (writer) or the reader count, `__cur_writer`
//!   the writing owner; readers are preferred (glibc's default);
//! - barrier: our own count/arrived/generation words (init is ours too).
//!
//! Spinlocks and semaphores keep glibc's own representation (a word that is
//! 0 when free; a semaphore's value in the low half of its first 64-bit
//! word), so the real `trylock`/`sem_post`/`sem_getvalue`/`sem_open` work on
//! them unchanged and they cooperate in every mode. A semaphore that another
//! process or a real thread may post (process-shared, e.g. `sem_open`, or
//! any semaphore when threads stay native) is re-checked every 2 ms while a
//! fiber waits, since such a post cannot reach this hub.
//!
//! With `GREENHOOK_THREADS=native` and in `patch_all()` mode, mutexes,
//! condvars, rwlocks and barriers pass through to glibc (real threads share
//! them); a fiber blocking on one then blocks its hub.
//!
//! Robust mutexes: a fiber that ends holding one releases it and marks it
//! "owner died" (word `__spins`/`__elision`, zero in every initialiser), so
//! the next locker gets `EOWNERDEAD`; `pthread_mutex_consistent` clears it,
//! an unlock without it makes the mutex `ENOTRECOVERABLE`.
//! Limits: priority-inheritance and process-shared mutexes are emulated
//! like plain ones; all waiters of an emulated
//! object must be on one OS thread (true when threads are fibers).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use libc::{c_int, c_uint, clockid_t, pthread_barrier_t, pthread_cond_t, pthread_mutex_t, timespec};

mod next {
    use crate::real::real;
    real! {
        fn pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> libc::c_int;
        fn pthread_mutex_trylock(m: *mut libc::pthread_mutex_t) -> libc::c_int;
        fn pthread_mutex_timedlock(m: *mut libc::pthread_mutex_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_mutex_clocklock(m: *mut libc::pthread_mutex_t, c: libc::clockid_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_mutex_unlock(m: *mut libc::pthread_mutex_t) -> libc::c_int;
        fn pthread_mutex_destroy(m: *mut libc::pthread_mutex_t) -> libc::c_int;
        fn pthread_mutex_consistent(m: *mut libc::pthread_mutex_t) -> libc::c_int;
        fn pthread_cond_wait(c: *mut libc::pthread_cond_t, m: *mut libc::pthread_mutex_t) -> libc::c_int;
        fn pthread_cond_timedwait(c: *mut libc::pthread_cond_t, m: *mut libc::pthread_mutex_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_cond_clockwait(c: *mut libc::pthread_cond_t, m: *mut libc::pthread_mutex_t, k: libc::clockid_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_cond_signal(c: *mut libc::pthread_cond_t) -> libc::c_int;
        fn pthread_cond_broadcast(c: *mut libc::pthread_cond_t) -> libc::c_int;
        fn pthread_rwlock_rdlock(l: *mut libc::pthread_rwlock_t) -> libc::c_int;
        fn pthread_rwlock_wrlock(l: *mut libc::pthread_rwlock_t) -> libc::c_int;
        fn pthread_rwlock_tryrdlock(l: *mut libc::pthread_rwlock_t) -> libc::c_int;
        fn pthread_rwlock_trywrlock(l: *mut libc::pthread_rwlock_t) -> libc::c_int;
        fn pthread_rwlock_timedrdlock(l: *mut libc::pthread_rwlock_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_rwlock_timedwrlock(l: *mut libc::pthread_rwlock_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_rwlock_clockrdlock(l: *mut libc::pthread_rwlock_t, c: libc::clockid_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_rwlock_clockwrlock(l: *mut libc::pthread_rwlock_t, c: libc::clockid_t, t: *const libc::timespec) -> libc::c_int;
        fn pthread_rwlock_unlock(l: *mut libc::pthread_rwlock_t) -> libc::c_int;
        fn pthread_barrier_init(b: *mut libc::pthread_barrier_t, a: *const libc::pthread_barrierattr_t, n: libc::c_uint) -> libc::c_int;
        fn pthread_barrier_wait(b: *mut libc::pthread_barrier_t) -> libc::c_int;
        fn pthread_barrier_destroy(b: *mut libc::pthread_barrier_t) -> libc::c_int;
        fn pthread_spin_lock(l: *mut libc::pthread_spinlock_t) -> libc::c_int;
        fn pthread_spin_trylock(l: *mut libc::pthread_spinlock_t) -> libc::c_int;
        fn sem_wait(s: *mut libc::sem_t) -> libc::c_int;
        fn sem_timedwait(s: *mut libc::sem_t, t: *const libc::timespec) -> libc::c_int;
        fn sem_clockwait(s: *mut libc::sem_t, c: libc::clockid_t, t: *const libc::timespec) -> libc::c_int;
        fn sem_post(s: *mut libc::sem_t) -> libc::c_int;
    }
}

// ---------- owners, keys, diagnostics ----------

/// The caller's owner id: the fiber id, or minus the tid in a root context.
pub(crate) fn owner_id() -> i32 {
    match hub::with_current_fiber(|f| f.map(|f| f.id())) {
        Some(id) => (id & 0x7fff_ffff) as i32,
        // SAFETY: gettid has no preconditions.
        None => -(unsafe { libc::gettid() }).max(1),
    }
}

fn owner_name(o: i32) -> String {
    if o > 0 {
        format!("fiber {o}")
    } else if o < 0 {
        "main (root)".to_string()
    } else {
        "nobody".to_string()
    }
}

thread_local! {
    static KINDS: RefCell<HashMap<usize, &'static str>> = RefCell::new(HashMap::new());
}
static DESCRIBER_SET: AtomicBool = AtomicBool::new(false);

fn describe(key: usize) -> Option<String> {
    let kind = KINDS.with(|k| k.try_borrow().ok().and_then(|m| m.get(&key).copied()))?;
    let owner = match kind {
        // SAFETY: the key is the address of a live object of that kind (a
        // task is parked on it right now).
        "mutex" => unsafe { Some(word(key, OWNER).load(Ordering::Relaxed)) },
        // SAFETY: as above.
        "rwlock" => unsafe { Some(word(key, RW_WRITER).load(Ordering::Relaxed)) },
        _ => None,
    };
    Some(match owner {
        Some(o) if o != 0 => format!("{kind} {key:#x} held by {}", owner_name(o)),
        _ => format!("{kind} {key:#x}"),
    })
}

/// Parks on `key` (an object of `kind`), noting the kind for deadlock reports.
fn park(kind: &'static str, key: usize, deadline: Option<Instant>, validate: impl FnOnce() -> bool) -> hub::Park {
    if !DESCRIBER_SET.swap(true, Ordering::Relaxed) {
        hub::internal::set_key_describer(describe);
    }
    KINDS.with(|k| {
        if let Ok(mut m) = k.try_borrow_mut() {
            m.insert(key, kind);
        }
    });
    hub::park(key, deadline, validate)
}

/// The `i`th 32-bit word of the object at `p`.
///
/// # Safety
/// `p` must point at a live, 4-aligned object at least `4 * (i + 1)` bytes long.
#[inline]
unsafe fn word<'a>(p: usize, i: usize) -> &'a AtomicI32 {
    // SAFETY: per the contract.
    unsafe { &*(p as *const AtomicI32).add(i) }
}

// ---------- mutex ----------

const LOCK: usize = 0;
const COUNT: usize = 1;
const OWNER: usize = 2;
const KIND: usize = 4;
const ROBUST: usize = 5;
const KIND_ROBUST_FLAG: i32 = 16;
const ROBUST_DIED: i32 = 1;
const ROBUST_UNRECOVERABLE: i32 = 2;
const KIND_RECURSIVE: i32 = 1;
const KIND_ERRORCHECK: i32 = 2;

/// The mutex kind (0 normal/adaptive, 1 recursive, 2 errorcheck).
///
/// # Safety
/// `m` is a live mutex.
unsafe fn kind(m: usize) -> i32 {
    // SAFETY: per the contract.
    let k = unsafe { word(m, KIND) }.load(Ordering::Relaxed) & 3;
    if k == 3 {
        0
    } else {
        k
    }
}

/// Locks an emulated mutex. `deadline`: Err(None) = trylock, Ok(d) = wait until d.
///
/// # Safety
/// `m` is a live mutex.
pub(crate) unsafe fn mutex_acquire(m: *mut pthread_mutex_t, wait: Result<Option<Instant>, ()>) -> c_int {
    let a = m as usize;
    // SAFETY: per the contract (pthread_mutex_t is 40 bytes, 4-aligned).
    let (lock, count, owner) = unsafe { (word(a, LOCK), word(a, COUNT), word(a, OWNER)) };
    let me = owner_id();
    // SAFETY: per the contract.
    let k = unsafe { kind(a) };
    // SAFETY: per the contract.
    let robust_kind = unsafe { word(a, KIND) }.load(Ordering::Relaxed) & KIND_ROBUST_FLAG != 0;
    if owner.load(Ordering::Relaxed) == me && lock.load(Ordering::Relaxed) != 0 {
        match k {
            KIND_RECURSIVE => {
                let c = count.load(Ordering::Relaxed);
                if c == -1 {
                    return libc::EAGAIN;
                }
                count.store(c + 1, Ordering::Relaxed);
                return 0;
            }
            _ if wait.is_err() => return libc::EBUSY,
            KIND_ERRORCHECK => return libc::EDEADLK,
            _ => {} // a normal mutex relocked by its owner deadlocks, as in glibc
        }
    }
    loop {
        // SAFETY: per the contract.
        let robust = unsafe { word(a, ROBUST) };
        if robust_kind && robust.load(Ordering::Relaxed) == ROBUST_UNRECOVERABLE {
            return libc::ENOTRECOVERABLE;
        }
        if lock
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            owner.store(me, Ordering::Relaxed);
            count.store(1, Ordering::Relaxed);
            if robust_kind {
                ROBUST_HELD.with(|h| h.borrow_mut().entry(me).or_default().push(a));
                if robust.load(Ordering::Relaxed) == ROBUST_DIED {
                    return libc::EOWNERDEAD;
                }
            }
            return 0;
        }
        let deadline = match wait {
            Err(()) => return libc::EBUSY,
            Ok(d) => d,
        };
        if park("mutex", a, deadline, || lock.load(Ordering::Relaxed) != 0) == hub::Park::TimedOut {
            return libc::ETIMEDOUT;
        }
    }
}

/// Unlocks an emulated mutex; `full` releases every recursion level and
/// returns the count it had (for condvar waits).
///
/// # Safety
/// `m` is a live mutex.
unsafe fn mutex_release(m: *mut pthread_mutex_t, full: bool) -> Result<i32, c_int> {
    let a = m as usize;
    // SAFETY: per the contract.
    let (lock, count, owner) = unsafe { (word(a, LOCK), word(a, COUNT), word(a, OWNER)) };
    // SAFETY: per the contract.
    let k = unsafe { kind(a) };
    let mine = owner.load(Ordering::Relaxed) == owner_id() && lock.load(Ordering::Relaxed) != 0;
    if (k == KIND_RECURSIVE || k == KIND_ERRORCHECK) && !mine {
        return Err(libc::EPERM);
    }
    let c = count.load(Ordering::Relaxed);
    if k == KIND_RECURSIVE && !full && c > 1 {
        count.store(c - 1, Ordering::Relaxed);
        return Ok(c - 1);
    }
    // SAFETY: per the contract.
    if unsafe { word(a, KIND) }.load(Ordering::Relaxed) & KIND_ROBUST_FLAG != 0 {
        let me = owner.load(Ordering::Relaxed);
        ROBUST_HELD.with(|h| {
            if let Some(v) = h.borrow_mut().get_mut(&me) {
                v.retain(|&x| x != a);
            }
        });
        // SAFETY: per the contract.
        let robust = unsafe { word(a, ROBUST) };
        if robust.load(Ordering::Relaxed) == ROBUST_DIED {
            robust.store(ROBUST_UNRECOVERABLE, Ordering::Relaxed);
        }
    }
    owner.store(0, Ordering::Relaxed);
    count.store(0, Ordering::Relaxed);
    lock.store(0, Ordering::Release);
    hub::unpark(a, 1);
    Ok(c)
}

thread_local! {
    /// Robust mutexes held, by owner id.
    static ROBUST_HELD: RefCell<HashMap<i32, Vec<usize>>> = RefCell::new(HashMap::new());
}

/// The calling fiber is ending: its robust mutexes become "owner died" and
/// are released (the next locker gets EOWNERDEAD).
pub(crate) fn owner_died() {
    let me = owner_id();
    let held = ROBUST_HELD.with(|h| h.borrow_mut().remove(&me)).unwrap_or_default();
    for a in held {
        // SAFETY: a robust mutex this fiber locked and never unlocked; the
        // program must keep it alive while it may be locked.
        unsafe {
            word(a, ROBUST).store(ROBUST_DIED, Ordering::Relaxed);
            word(a, OWNER).store(0, Ordering::Relaxed);
            word(a, COUNT).store(0, Ordering::Relaxed);
            word(a, LOCK).store(0, Ordering::Release);
        }
        hub::unpark(a, 1);
    }
}

/// `pthread_mutex_consistent`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_consistent")]
pub unsafe extern "C" fn pthread_mutex_consistent(m: *mut pthread_mutex_t) -> c_int {
    crate::real::guard("pthread_mutex_consistent", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_mutex_consistent(m) };
        }
        let a = m as usize;
        // SAFETY: the caller's mutex.
        let (robust, owner, kind) = unsafe { (word(a, ROBUST), word(a, OWNER), word(a, KIND)) };
        if kind.load(Ordering::Relaxed) & KIND_ROBUST_FLAG == 0
            || robust.load(Ordering::Relaxed) != ROBUST_DIED
            || owner.load(Ordering::Relaxed) != owner_id()
        {
            return libc::EINVAL;
        }
        robust.store(0, Ordering::Relaxed);
        0
    })
}

/// `pthread_mutex_lock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_lock")]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    crate::real::guard("pthread_mutex_lock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_mutex_lock(m) };
        }
        // SAFETY: the caller's mutex.
        unsafe { mutex_acquire(m, Ok(None)) }
    })
}

/// `pthread_mutex_trylock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_trylock")]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    crate::real::guard("pthread_mutex_trylock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_mutex_trylock(m) };
        }
        // SAFETY: the caller's mutex.
        unsafe { mutex_acquire(m, Err(())) }
    })
}

unsafe fn mutex_timed(m: *mut pthread_mutex_t, clock: clockid_t, t: *const timespec) -> c_int {
    // SAFETY: the caller's mutex.
    match unsafe { mutex_acquire(m, Err(())) } {
        libc::EBUSY => {}
        r => return r,
    }
    match crate::deadline::absolute_bounded(clock, t) {
        // SAFETY: the caller's mutex.
        Ok(d) => unsafe { mutex_acquire(m, Ok(d)) },
        Err(e) => e,
    }
}

/// `pthread_mutex_timedlock` (CLOCK_REALTIME).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_timedlock")]
pub unsafe extern "C" fn pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
    crate::real::guard("pthread_mutex_timedlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_mutex_timedlock(m, t) };
        }
        // SAFETY: the caller's mutex.
        unsafe { mutex_timed(m, libc::CLOCK_REALTIME, t) }
    })
}

/// `pthread_mutex_clocklock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_clocklock")]
pub unsafe extern "C" fn pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int {
    crate::real::guard("pthread_mutex_clocklock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_mutex_clocklock(m, c, t) };
        }
        // SAFETY: the caller's mutex.
        unsafe { mutex_timed(m, c, t) }
    })
}

/// `pthread_mutex_unlock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_unlock")]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    crate::real::guard("pthread_mutex_unlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_mutex_unlock(m) };
        }
        // SAFETY: the caller's mutex.
        match unsafe { mutex_release(m, false) } {
            Ok(_) => 0,
            Err(e) => e,
        }
    })
}

/// `pthread_mutex_destroy`: EBUSY while locked.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_mutex_destroy")]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    crate::real::guard("pthread_mutex_destroy", || {
        // SAFETY: the caller's mutex.
        if crate::gate::emulating() && unsafe { word(m as usize, LOCK) }.load(Ordering::Relaxed) != 0 {
            return libc::EBUSY;
        }
        // SAFETY: pass-through.
        unsafe { next::pthread_mutex_destroy(m) }
    })
}

// ---------- condition variables ----------

/// The clock chosen with `pthread_condattr_setclock` (bit 1 of `__wrefs`,
/// at byte 36 in glibc's layout).
///
/// # Safety
/// `c` is a live condvar.
unsafe fn cond_clock(c: *mut pthread_cond_t) -> clockid_t {
    // SAFETY: per the contract; word 9 is __wrefs.
    if unsafe { word(c as usize, 9) }.load(Ordering::Relaxed) & 2 != 0 {
        libc::CLOCK_MONOTONIC
    } else {
        libc::CLOCK_REALTIME
    }
}

/// Waits on an emulated condvar; `timeout`: None = forever, Some((clock, ts)).
unsafe fn cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    timeout: Option<(clockid_t, *const timespec)>,
) -> c_int {
    crate::thread::testcancel();
    let deadline = match timeout {
        None => None,
        Some((clock, ts)) => match crate::deadline::absolute_bounded(clock, ts) {
            Ok(d) => d,
            Err(e) => return e,
        },
    };
    // SAFETY: the caller's mutex.
    let saved = match unsafe { mutex_release(m, true) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    let r = park("condvar", c as usize, deadline, || true);
    // SAFETY: the caller's mutex.
    unsafe { mutex_acquire(m, Ok(None)) };
    if saved > 1 {
        // SAFETY: the caller's mutex, which we own again.
        unsafe { word(m as usize, COUNT) }.store(saved, Ordering::Relaxed);
    }
    crate::thread::testcancel();
    if r == hub::Park::TimedOut {
        libc::ETIMEDOUT
    } else {
        0
    }
}

/// `pthread_cond_wait`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_cond_wait")]
pub unsafe extern "C" fn pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int {
    crate::real::guard("pthread_cond_wait", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_cond_wait(c, m) };
        }
        // SAFETY: the caller's objects.
        unsafe { cond_wait(c, m, None) }
    })
}

/// `pthread_cond_timedwait`, on the condvar's clock.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_cond_timedwait")]
pub unsafe extern "C" fn pthread_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    t: *const timespec,
) -> c_int {
    crate::real::guard("pthread_cond_timedwait", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_cond_timedwait(c, m, t) };
        }
        // SAFETY: the caller's objects.
        unsafe { cond_wait(c, m, Some((cond_clock(c), t))) }
    })
}

/// `pthread_cond_clockwait`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_cond_clockwait")]
pub unsafe extern "C" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    k: clockid_t,
    t: *const timespec,
) -> c_int {
    crate::real::guard("pthread_cond_clockwait", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_cond_clockwait(c, m, k, t) };
        }
        // SAFETY: the caller's objects.
        unsafe { cond_wait(c, m, Some((k, t))) }
    })
}

/// `pthread_cond_signal`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_cond_signal")]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    crate::real::guard("pthread_cond_signal", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_cond_signal(c) };
        }
        hub::unpark(c as usize, 1);
        0
    })
}

/// `pthread_cond_broadcast`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_cond_broadcast")]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    crate::real::guard("pthread_cond_broadcast", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_cond_broadcast(c) };
        }
        hub::unpark(c as usize, usize::MAX);
        0
    })
}

// ---------- rwlocks ----------

const RW_STATE: usize = 0;
const RW_WRITER: usize = 6;

/// Locks an emulated rwlock; `wait` as in [`mutex_acquire`].
unsafe fn rw_acquire(l: *mut libc::pthread_rwlock_t, write: bool, wait: Result<Option<Instant>, ()>) -> c_int {
    let a = l as usize;
    // SAFETY: the caller's rwlock (56 bytes).
    let (state, writer) = unsafe { (word(a, RW_STATE), word(a, RW_WRITER)) };
    let me = owner_id();
    loop {
        let s = state.load(Ordering::Relaxed);
        if s == -1 && wait.is_ok() && writer.load(Ordering::Relaxed) == me {
            return libc::EDEADLK;
        }
        let ok = if write {
            s == 0
                && state
                    .compare_exchange(0, -1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        } else if s >= 0 {
            if s == i32::MAX {
                return libc::EAGAIN;
            }
            state
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        } else {
            false
        };
        if ok {
            if write {
                writer.store(me, Ordering::Relaxed);
            }
            return 0;
        }
        let deadline = match wait {
            Err(()) => return libc::EBUSY,
            Ok(d) => d,
        };
        let busy = || {
            let s = state.load(Ordering::Relaxed);
            if write {
                s != 0
            } else {
                s < 0
            }
        };
        if park("rwlock", a, deadline, busy) == hub::Park::TimedOut {
            return libc::ETIMEDOUT;
        }
    }
}

unsafe fn rw_timed(l: *mut libc::pthread_rwlock_t, write: bool, clock: clockid_t, t: *const timespec) -> c_int {
    // SAFETY: the caller's rwlock.
    match unsafe { rw_acquire(l, write, Err(())) } {
        libc::EBUSY => {}
        r => return r,
    }
    match crate::deadline::absolute_bounded(clock, t) {
        // SAFETY: the caller's rwlock.
        Ok(d) => unsafe { rw_acquire(l, write, Ok(d)) },
        Err(e) => e,
    }
}

macro_rules! rw_hook {
    ($name:ident, $write:expr, $wait:expr) => {
        /// Fiber-aware rwlock operation of the same name.
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        pub unsafe extern "C" fn $name(l: *mut libc::pthread_rwlock_t) -> c_int {
            crate::real::guard(stringify!($name), || {
                if !crate::gate::emulating() {
                    // SAFETY: pass-through.
                    return unsafe { next::$name(l) };
                }
                // SAFETY: the caller's rwlock.
                unsafe { rw_acquire(l, $write, $wait) }
            })
        }
        crate::real::interpose!($name);
    };
}
rw_hook!(pthread_rwlock_rdlock, false, Ok(None));
rw_hook!(pthread_rwlock_wrlock, true, Ok(None));
rw_hook!(pthread_rwlock_tryrdlock, false, Err(()));
rw_hook!(pthread_rwlock_trywrlock, true, Err(()));

/// `pthread_rwlock_timedrdlock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_rwlock_timedrdlock")]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(l: *mut libc::pthread_rwlock_t, t: *const timespec) -> c_int {
    crate::real::guard("pthread_rwlock_timedrdlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_rwlock_timedrdlock(l, t) };
        }
        // SAFETY: the caller's rwlock.
        unsafe { rw_timed(l, false, libc::CLOCK_REALTIME, t) }
    })
}

/// `pthread_rwlock_timedwrlock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_rwlock_timedwrlock")]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(l: *mut libc::pthread_rwlock_t, t: *const timespec) -> c_int {
    crate::real::guard("pthread_rwlock_timedwrlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_rwlock_timedwrlock(l, t) };
        }
        // SAFETY: the caller's rwlock.
        unsafe { rw_timed(l, true, libc::CLOCK_REALTIME, t) }
    })
}

/// `pthread_rwlock_clockrdlock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_rwlock_clockrdlock")]
pub unsafe extern "C" fn pthread_rwlock_clockrdlock(
    l: *mut libc::pthread_rwlock_t,
    c: clockid_t,
    t: *const timespec,
) -> c_int {
    crate::real::guard("pthread_rwlock_clockrdlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_rwlock_clockrdlock(l, c, t) };
        }
        // SAFETY: the caller's rwlock.
        unsafe { rw_timed(l, false, c, t) }
    })
}

/// `pthread_rwlock_clockwrlock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_rwlock_clockwrlock")]
pub unsafe extern "C" fn pthread_rwlock_clockwrlock(
    l: *mut libc::pthread_rwlock_t,
    c: clockid_t,
    t: *const timespec,
) -> c_int {
    crate::real::guard("pthread_rwlock_clockwrlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_rwlock_clockwrlock(l, c, t) };
        }
        // SAFETY: the caller's rwlock.
        unsafe { rw_timed(l, true, c, t) }
    })
}

/// `pthread_rwlock_unlock`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_rwlock_unlock")]
pub unsafe extern "C" fn pthread_rwlock_unlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    crate::real::guard("pthread_rwlock_unlock", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_rwlock_unlock(l) };
        }
        let a = l as usize;
        // SAFETY: the caller's rwlock.
        let (state, writer) = unsafe { (word(a, RW_STATE), word(a, RW_WRITER)) };
        let s = state.load(Ordering::Relaxed);
        if s == -1 {
            if writer.load(Ordering::Relaxed) != owner_id() {
                return libc::EPERM;
            }
            writer.store(0, Ordering::Relaxed);
            state.store(0, Ordering::Release);
            hub::unpark(a, usize::MAX);
        } else if s > 0 {
            state.store(s - 1, Ordering::Release);
            if s == 1 {
                hub::unpark(a, usize::MAX);
            }
        } else {
            return libc::EPERM;
        }
        0
    })
}

// ---------- barriers ----------

const BAR_COUNT: usize = 0;
const BAR_ARRIVED: usize = 1;
const BAR_GEN: usize = 2;

/// `pthread_barrier_init` (our own layout when emulating).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_barrier_init")]
pub unsafe extern "C" fn pthread_barrier_init(
    b: *mut pthread_barrier_t,
    attr: *const libc::pthread_barrierattr_t,
    count: c_uint,
) -> c_int {
    crate::real::guard("pthread_barrier_init", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_barrier_init(b, attr, count) };
        }
        if count == 0 || count > i32::MAX as c_uint {
            return libc::EINVAL;
        }
        let a = b as usize;
        // SAFETY: the caller's barrier (32 bytes).
        unsafe {
            word(a, BAR_COUNT).store(count as i32, Ordering::Relaxed);
            word(a, BAR_ARRIVED).store(0, Ordering::Relaxed);
            word(a, BAR_GEN).store(0, Ordering::Relaxed);
        }
        0
    })
}

/// `pthread_barrier_wait`: exactly one waiter per round gets
/// `PTHREAD_BARRIER_SERIAL_THREAD`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_barrier_wait")]
pub unsafe extern "C" fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
    crate::real::guard("pthread_barrier_wait", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_barrier_wait(b) };
        }
        let a = b as usize;
        // SAFETY: the caller's barrier.
        let (count, arrived, gen) = unsafe { (word(a, BAR_COUNT), word(a, BAR_ARRIVED), word(a, BAR_GEN)) };
        let n = arrived.load(Ordering::Relaxed) + 1;
        if n >= count.load(Ordering::Relaxed) {
            arrived.store(0, Ordering::Relaxed);
            gen.fetch_add(1, Ordering::Release);
            hub::unpark(a, usize::MAX);
            return libc::PTHREAD_BARRIER_SERIAL_THREAD;
        }
        arrived.store(n, Ordering::Relaxed);
        let g = gen.load(Ordering::Relaxed);
        while gen.load(Ordering::Acquire) == g {
            park("barrier", a, None, || gen.load(Ordering::Relaxed) == g);
        }
        0
    })
}

/// `pthread_barrier_destroy`: EBUSY while fibers wait on it.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_barrier_destroy")]
pub unsafe extern "C" fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int {
    crate::real::guard("pthread_barrier_destroy", || {
        if !crate::gate::emulating() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_barrier_destroy(b) };
        }
        // SAFETY: the caller's barrier.
        if unsafe { word(b as usize, BAR_ARRIVED) }.load(Ordering::Relaxed) != 0 {
            return libc::EBUSY;
        }
        0
    })
}

// ---------- spinlocks ----------

/// `pthread_spin_lock`: in a cooperative context, yields between attempts so
/// the holder (another fiber) can run.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_pthread_spin_lock")]
pub unsafe extern "C" fn pthread_spin_lock(l: *mut libc::pthread_spinlock_t) -> c_int {
    crate::real::guard("pthread_spin_lock", || {
        if !crate::gate::cooperative() {
            // SAFETY: pass-through.
            return unsafe { next::pthread_spin_lock(l) };
        }
        loop {
            // SAFETY: the caller's spinlock; same representation as glibc's.
            if unsafe { next::pthread_spin_trylock(l) } == 0 {
                return 0;
            }
            hub::yield_now();
        }
    })
}

// ---------- semaphores ----------

/// The semaphore's value word (low half of glibc's 64-bit `data`).
///
/// # Safety
/// `s` is a live semaphore.
unsafe fn sem_value<'a>(s: *mut libc::sem_t) -> &'a AtomicU32 {
    // SAFETY: per the contract; sem_t is 8-aligned and at least 16 bytes.
    unsafe { &*(s as *const AtomicU32) }
}

/// Whether a post may come from outside this hub (another process or a
/// real thread), so waiters must re-check the value now and then.
///
/// # Safety
/// `s` is a live semaphore.
unsafe fn sem_remote(s: *mut libc::sem_t) -> bool {
    // SAFETY: per the contract; `private` is the int at byte 8 (0 = shared).
    !crate::threads_as_fibers() || unsafe { word(s as usize, 2) }.load(Ordering::Relaxed) == 0
}

const SEM_POLL: Duration = Duration::from_millis(2);

/// Waits on a semaphore as a fiber. Err is an errno value.
unsafe fn sem_wait_coop(s: *mut libc::sem_t, timeout: Option<(clockid_t, *const timespec)>) -> Result<(), c_int> {
    crate::thread::testcancel();
    // SAFETY: the caller's semaphore.
    let (v, remote) = unsafe { (sem_value(s), sem_remote(s)) };
    let mut deadline: Option<Option<Instant>> = None;
    loop {
        let cur = v.load(Ordering::Relaxed);
        if cur > 0 {
            if v.compare_exchange(cur, cur - 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(());
            }
            continue;
        }
        let d = match deadline {
            Some(d) => d,
            None => {
                let d = match timeout {
                    None => None,
                    Some((clock, ts)) => crate::deadline::absolute_bounded(clock, ts)?,
                };
                deadline = Some(d);
                d
            }
        };
        if d.is_some_and(|d| Instant::now() >= d) {
            return Err(libc::ETIMEDOUT);
        }
        let wake_at = if remote {
            let p = Instant::now() + SEM_POLL;
            Some(d.map_or(p, |d| d.min(p)))
        } else {
            d
        };
        park("semaphore", s as usize, wake_at, || v.load(Ordering::Relaxed) == 0);
        crate::thread::testcancel();
    }
}

fn sem_result(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => crate::errno::fail(e),
    }
}

/// `sem_wait`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sem_wait")]
pub unsafe extern "C" fn sem_wait(s: *mut libc::sem_t) -> c_int {
    crate::real::guard("sem_wait", || {
        if !crate::gate::cooperative() {
            // SAFETY: pass-through.
            return unsafe { next::sem_wait(s) };
        }
        // SAFETY: the caller's semaphore.
        sem_result(unsafe { sem_wait_coop(s, None) })
    })
}

/// `sem_timedwait` (CLOCK_REALTIME).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sem_timedwait")]
pub unsafe extern "C" fn sem_timedwait(s: *mut libc::sem_t, t: *const timespec) -> c_int {
    crate::real::guard("sem_timedwait", || {
        if !crate::gate::cooperative() {
            // SAFETY: pass-through.
            return unsafe { next::sem_timedwait(s, t) };
        }
        // SAFETY: the caller's semaphore.
        sem_result(unsafe { sem_wait_coop(s, Some((libc::CLOCK_REALTIME, t))) })
    })
}

/// `sem_clockwait`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sem_clockwait")]
pub unsafe extern "C" fn sem_clockwait(s: *mut libc::sem_t, c: clockid_t, t: *const timespec) -> c_int {
    crate::real::guard("sem_clockwait", || {
        if !crate::gate::cooperative() {
            // SAFETY: pass-through.
            return unsafe { next::sem_clockwait(s, c, t) };
        }
        // SAFETY: the caller's semaphore.
        sem_result(unsafe { sem_wait_coop(s, Some((c, t))) })
    })
}

/// `sem_post`: the real post (it also wakes kernel waiters in other
/// processes), then a fiber parked on this semaphore.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_sem_post")]
pub unsafe extern "C" fn sem_post(s: *mut libc::sem_t) -> c_int {
    crate::real::guard("sem_post", || {
        // SAFETY: pass-through.
        let r = unsafe { next::sem_post(s) };
        if r == 0 && crate::gate::patched() {
            hub::unpark(s as usize, 1);
        }
        r
    })
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    pthread_mutex_consistent,
    pthread_mutex_lock,
    pthread_mutex_trylock,
    pthread_mutex_timedlock,
    pthread_mutex_clocklock,
    pthread_mutex_unlock,
    pthread_mutex_destroy,
    pthread_cond_wait,
    pthread_cond_timedwait,
    pthread_cond_clockwait,
    pthread_cond_signal,
    pthread_cond_broadcast,
    pthread_rwlock_timedrdlock,
    pthread_rwlock_timedwrlock,
    pthread_rwlock_clockrdlock,
    pthread_rwlock_clockwrlock,
    pthread_rwlock_unlock,
    pthread_barrier_init,
    pthread_barrier_wait,
    pthread_barrier_destroy,
    pthread_spin_lock,
    sem_wait,
    sem_timedwait,
    sem_clockwait,
    sem_post,
}
