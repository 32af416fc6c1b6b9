//! Fiber-aware pthread synchronisation: one file per primitive
//! ([`mutex`], [`cond`], [`rwlock`], [`barrier`], [`spin`], [`sem`]), and
//! here what they share: the words of the caller's object, owner ids,
//! the wait ([`park`], which names the object in deadlock reports) and the
//! timed-lock rule.
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
//!
//! Condition and semaphore waits are cancellation points; they reach
//! cancellation the way every hook does, through [`crate::cancel_point`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Instant;

use libc::{c_int, clockid_t, timespec};

pub mod barrier;
pub mod cond;
pub mod mutex;
pub mod rwlock;
pub mod sem;
pub mod spin;

pub(crate) use mutex::owner_died;

/// The `i`th 32-bit word of the object at `p`.
///
/// # Safety
/// `p` must point at a live, 4-aligned object at least `4 * (i + 1)` bytes long.
#[inline]
unsafe fn word<'a>(p: usize, i: usize) -> &'a AtomicI32 {
    // SAFETY: per the contract.
    unsafe { &*(p as *const AtomicI32).add(i) }
}

/// The caller's owner id: the fiber id, or minus the tid in a root context.
fn owner_id() -> i32 {
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

/// How long a lock operation may wait.
#[derive(Clone, Copy)]
enum Wait {
    /// Not at all (`trylock`): `EBUSY` when taken.
    Try,
    /// Until the deadline; `None` waits forever.
    Until(Option<Instant>),
}

/// A timed lock (`timedlock`, `clocklock`): a free lock is taken whatever
/// the time says, as in glibc; only then is the time read (`EINVAL`,
/// `EFAULT`) and the lock waited for until then on `clock`.
fn timed(clock: clockid_t, t: *const timespec, lock: impl Fn(Wait) -> c_int) -> c_int {
    match lock(Wait::Try) {
        libc::EBUSY => {}
        r => return r,
    }
    match crate::deadline::absolute_bounded(clock, t) {
        Ok(d) => lock(Wait::Until(d)),
        Err(e) => e,
    }
}

/// What a parked task waits on, as deadlock reports name it.
#[derive(Clone, Copy)]
enum Kind {
    Mutex,
    Condvar,
    Rwlock,
    Barrier,
    Semaphore,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Condvar => "condvar",
            Kind::Rwlock => "rwlock",
            Kind::Barrier => "barrier",
            Kind::Semaphore => "semaphore",
        }
    }

    /// The word of the object that holds its owner id, for kinds that have one.
    fn owner_word(self) -> Option<usize> {
        match self {
            Kind::Mutex => Some(mutex::OWNER),
            Kind::Rwlock => Some(rwlock::WRITER),
            _ => None,
        }
    }
}

thread_local! {
    /// The kind of every object a task has parked on, by address.
    static KINDS: RefCell<HashMap<usize, Kind>> = RefCell::new(HashMap::new());
}
static DESCRIBER_SET: AtomicBool = AtomicBool::new(false);

/// Names a wait-queue key for a deadlock report ("mutex 0x… held by fiber 2").
fn describe(key: usize) -> Option<String> {
    let kind = KINDS.with(|k| k.try_borrow().ok().and_then(|m| m.get(&key).copied()))?;
    // SAFETY: the key is the address of a live object of that kind (a task
    // is parked on it right now), and its owner word is inside it.
    let owner = kind
        .owner_word()
        .map(|w| unsafe { word(key, w) }.load(Ordering::Relaxed));
    let kind = kind.name();
    Some(match owner {
        Some(o) if o != 0 => format!("{kind} {key:#x} held by {}", owner_name(o)),
        _ => format!("{kind} {key:#x}"),
    })
}

/// Parks on `key` (an object of `kind`), noting the kind for deadlock reports.
fn park(kind: Kind, key: usize, deadline: Option<Instant>, validate: impl FnOnce() -> bool) -> hub::Park {
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
