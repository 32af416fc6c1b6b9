//! Fiber-aware pthread synchronisation: one file per primitive
//! ([`mutex`], [`cond`], [`rwlock`], [`barrier`], [`spin`], [`sem`]),
//! process-shared objects in [`pshared`], and here what they share: the
//! words of the caller's object, owner ids, where waiters wait
//! ([`Waiters`]) and the timed-lock rule.
//!
//! A blocked waiter parks on the hub ([`hub::park_object`], keyed by the
//! object's address) instead of blocking the only OS thread, so a fiber
//! that sleeps while holding a lock cannot deadlock the hub. The hub's
//! queues are linked through the parked fibers' stacks: a lock, condvar or
//! semaphore hand-over allocates nothing and makes no system call, and the
//! object's own memory holds nothing of ours (glibc's functions, a real
//! thread or another process may still read it as glibc's).
//!
//! ## Decision: when we emulate
//! With `threads_as_fibers` (the preload default) mutexes, condition
//! variables, rwlocks and barriers are **always** emulated while patched,
//! in fibers and in the root alike, so one object never sees two
//! representations (main may lock a mutex before it creates threads). The
//! preload library patches in its constructor, before `main`. The emulated
//! state lives in the caller's object, in fields the static initialisers
//! zero, and it keeps the fields glibc's `*_init`/`*_destroy` read:
//! - mutex: `__lock` 0 (free), 1 (locked) or 2 (locked, maybe waiters),
//!   as glibc's, so an unlock with nobody waiting looks no further;
//!   `__count` (recursion), `__owner` (our owner id: the fiber id, or minus
//!   the tid for a root context), `__kind` read back from what the real
//!   `pthread_mutex_init` or the initialiser wrote; `__nusers` stays 0, so
//!   the real `pthread_mutex_destroy` works;
//! - condvar: no state at all; the clock is read from bit 1 of `__wrefs`,
//!   written by the real `pthread_cond_init`. A thread that is not a fiber
//!   signals through our hook too, which wakes the fibers' waiters from
//!   the hub's inbox: their waits never look again on their own (which
//!   would end them as spurious wake-ups);
//! - rwlock: `__readers` is -1 (writer) or the reader count, `__cur_writer`
//!   the writing owner, `__writers` whether a fiber may wait,
//!   `__writers_futex` how many threads that are not fibers may sleep in
//!   the kernel (they use these words too: see [`rwlock`]); readers are
//!   preferred (glibc's default);
//! - barrier: our own count/arrived/generation words (init is ours too).
//!
//! Spinlocks and semaphores keep glibc's own representation (a word that is
//! 0 when free; a semaphore's value in the low half of its first 64-bit
//! word), so the real `trylock`/`sem_post`/`sem_getvalue`/`sem_open` work on
//! them and they cooperate in every mode. (A post to a fiber waiting on a
//! private semaphore is handed to it, counted past glibc's fields: see
//! [`sem`]; our `sem_getvalue` and `sem_trywait` count those too.) A semaphore that
//! another process or a real thread may post (process-shared, e.g.
//! `sem_open`, or any semaphore when threads stay native) is waited for as
//! one of glibc's waiters, in the kernel, since such a post cannot reach
//! this hub ([`pshared`]).
//!
//! ## Process-shared objects
//! A mutex, condvar, rwlock or barrier initialised `PTHREAD_PROCESS_SHARED`
//! is not emulated at all: another process can meet it only through its
//! memory and the kernel's futex, so it stays glibc's, and [`pshared`]
//! (one file per primitive again) keeps beside it which fiber holds it and
//! makes a fiber's blocking wait on a waiter thread. Such objects are told
//! apart by what glibc's init writes: the mutex's `__kind` bit 128, the
//! condvar's `__wrefs` bit 0, the rwlock's `__shared`, the barrier's
//! `shared` word (128; our own barrier init writes 0 there, as glibc's
//! private one does).
//!
//! With `GREENHOOK_THREADS=native` and in `patch_all()` mode, mutexes,
//! condvars, rwlocks and barriers pass through to glibc (real threads share
//! them); a fiber blocking on one then blocks its hub.
//!
//! Robust mutexes: a fiber that ends holding one releases it and marks it
//! "owner died" (word `__spins`/`__elision`, zero in every initialiser), so
//! the next locker gets `EOWNERDEAD`; `pthread_mutex_consistent` clears it,
//! an unlock without it makes the mutex `ENOTRECOVERABLE`.
//! Limits: priority-inheritance mutexes that are not process-shared are
//! emulated like plain ones; the fibers waiting on an emulated object
//! are all on one OS thread (true when threads are fibers), and a thread
//! that is not one of them waits in the kernel (see
//! `gate::foreign_threads`).
//!
//! Condition and semaphore waits are cancellation points; they reach
//! cancellation the way every hook does, through [`crate::cancel_point`].

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use hub::Deadline;

use libc::{c_int, clockid_t, timespec};

pub mod barrier;
pub mod cond;
pub mod mutex;
mod pshared;
pub mod rwlock;
pub mod sem;
pub mod spin;

pub(crate) use pshared::after_fork_child;
// `mtx_init` ends in this (see `crate::thread::c11`).
pub(crate) use pshared::mutex::pthread_mutex_init;

/// The calling fiber is ending: the robust mutexes it holds become "owner
/// died" (emulated ones, and process-shared ones).
pub(crate) fn owner_died() {
    mutex::owner_died();
    pshared::mutex::owner_died();
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

/// How long a lock operation may wait.
#[derive(Clone, Copy)]
enum Wait {
    /// Not at all (`trylock`): `EBUSY` when taken.
    Try,
    /// Until the deadline; `None` waits forever.
    Until(Option<Deadline>),
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
    #[inline(always)]
    fn name(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Condvar => "condvar",
            Kind::Rwlock => "rwlock",
            Kind::Barrier => "barrier",
            Kind::Semaphore => "semaphore",
        }
    }
}

/// Who holds the object a deadlock report names: the owner word of a
/// mutex or a write-locked rwlock (registered with the hub at setup).
pub(crate) fn owner_of(kind: &'static str, addr: usize) -> Option<String> {
    // SAFETY: a task is parked on the object right now, so it is alive.
    if kind == "mutex" && pshared::mutex::kind_is_shared(unsafe { word(addr, 4) }.load(Ordering::Relaxed)) {
        return pshared::describe_holder(addr);
    }
    let w = match kind {
        "mutex" => mutex::OWNER,
        "rwlock" => rwlock::WRITER,
        _ => return None,
    };
    // SAFETY: a task is parked on the object right now, so it is alive,
    // and its owner word is inside it.
    let o = unsafe { word(addr, w) }.load(Ordering::Relaxed);
    Some(match o {
        0 => return None,
        o if o > 0 => format!("fiber {o}"),
        _ => "main (root)".to_string(),
    })
}

/// The bits of a waiter's tag that hold its scheduling priority (the low
/// bit is the rwlock's "writer").
const PRIORITY_SHIFT: u32 = 1;

/// A waiter's tag: its priority, and `low` (the rwlock's writer bit).
#[inline]
fn tag(low: u32) -> u32 {
    // The calling context's SCHED_FIFO/SCHED_RR priority, 0 otherwise (and
    // for everyone until a program gives a thread one).
    hub::internal::priority() << PRIORITY_SHIFT | low
}

/// The priority in a waiter's tag.
fn tag_priority(tag: u32) -> u32 {
    tag >> PRIORITY_SHIFT
}

/// Wakes one waiter of the object at `addr`: the oldest, or, once threads
/// have priorities, the oldest of the highest priority (a `SCHED_FIFO`
/// thread before a `SCHED_OTHER` one, as the kernel orders futex waiters).
/// Returns whether one was woken.
#[inline]
fn wake_one(addr: usize) -> bool {
    if hub::internal::priorities_differ() {
        hub::unpark_best(addr, |t| Some(tag_priority(t)))
    } else {
        // One waiter, with no loop for the caller to inline (as `unpark`'s).
        hub::unpark_where(addr, |_| true)
    }
}

/// Wakes every waiter of the object at `addr`, highest priority first.
/// Never inlined: the unlocks that call it when someone waits keep their
/// uncontended path small (inlined, it made the rwlock unlock hook save
/// every callee-saved register: 11 more instructions a pair).
#[inline(never)]
fn wake_all(addr: usize) {
    if hub::internal::priorities_differ() {
        while hub::unpark_best(addr, |t| Some(tag_priority(t))) {}
    } else {
        hub::unpark(addr, usize::MAX);
    }
}

/// Wakes every fiber parked on the object at `addr`, from the fibers' own
/// thread or from a thread that is not a fiber (through the hub's inbox).
fn wake_all_fibers(addr: usize) {
    if hub::is_fiber_thread() {
        wake_all(addr);
    } else {
        foreign_release(addr, usize::MAX);
    }
}

/// Wakes the threads that are not fibers asleep in the kernel on `word`,
/// if `sleepers` counts any. The caller has changed what they wait for,
/// then made a full barrier (a locked instruction): a sleeper counts
/// itself, then looks at that, then sleeps only if it has not changed.
fn wake_sleepers(word: &AtomicI32, sleepers: &AtomicI32) {
    if sleepers.load(Ordering::SeqCst) > 0 {
        futex_wake(word, i32::MAX, false);
    }
}

/// Parks the running task on the object of `kind` at `addr` until woken,
/// the deadline passes or it is interrupted; `busy` is re-checked first
/// (the futex rule); `tag` is the waiter's word (see [`tag`]).
///
/// An interrupted wait is where an asynchronous `pthread_cancel` takes
/// effect (lock waits are no cancellation points otherwise); the callers
/// then look again and, as POSIX has it, go on waiting.
///
/// Always inlined: each caller's `kind` and `busy` fold into its park
/// (one call fewer, and no name looked up by kind, on every hand-over).
#[inline(always)]
fn park(kind: Kind, addr: usize, tag: u32, deadline: Option<Deadline>, busy: impl FnOnce() -> bool) -> hub::Park {
    let r = hub::park_object(kind.name(), addr, tag, deadline, busy);
    if r == hub::Park::Interrupted {
        crate::async_cancel_point();
    }
    r
}

/// How often a fiber re-checks an object that a thread other than the
/// fibers' own may release through glibc (see `gate::foreign_threads`).
const FOREIGN_NAP: std::time::Duration = std::time::Duration::from_millis(2);

/// The deadline of one park of a wait until `deadline`: sooner, when
/// threads that are not fibers share pthread objects with them, since their
/// wake-ups do not reach the hub.
pub(crate) fn foreign_nap(deadline: Option<Deadline>) -> Option<Deadline> {
    if !crate::gate::foreign_threads() {
        return deadline;
    }
    Some(nap_until(deadline))
}

/// The end of one [`FOREIGN_NAP`] from now, or `deadline` if sooner.
fn nap_until(deadline: Option<Deadline>) -> Deadline {
    let nap = Instant::now() + FOREIGN_NAP;
    deadline.map_or(nap.into(), |d| d.min(nap))
}

/// A thread that is not the fibers' own (it used glibc's function, and is
/// noted) has released the object at `addr`: fibers parked on it in the
/// fibers' hub are woken from here, up to `n` of them, to look again. The
/// 2 ms re-check of waits made once such threads exist stays as the net
/// for releases glibc makes internally (a condvar wait unlocking its
/// mutex), which no hook sees.
fn foreign_release(addr: usize, n: usize) {
    if crate::gate::patched() && crate::threads_as_fibers() {
        hub::unpark_from_elsewhere(addr, n);
    }
}

/// A thread that is not the fibers' own has just been noted for the first
/// time (`gate::foreign_thread`): makes the fibers' OS thread run a full
/// memory barrier, and waits until it has (`membarrier`), so that a
/// sequence of plain instructions it began before the note is seen by the
/// handshake that follows (`gate::plain`).
///
/// Without `membarrier` (a seccomp filter, a kernel before 4.14), nothing
/// is fenced: the fibers' thread's store of its flag would then have to
/// stay in its CPU's store buffer for as long as the failed system calls
/// here take, for the handshake to miss it.
pub(crate) fn fence_fibers() {
    // linux/membarrier.h.
    const GLOBAL: libc::c_long = 1;
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    let membarrier = |cmd: libc::c_long| {
        // SAFETY: membarrier takes no pointers; our own `syscall` hook is
        // not wanted for it, so the real one is called.
        unsafe { crate::futex::syscall::real(libc::SYS_membarrier, cmd, 0, 0, 0, 0, 0) == 0 }
    };
    // Registering is idempotent; the expedited barrier interrupts only the
    // CPUs running this process's threads. The global one waits for every
    // CPU to pass a scheduling point (milliseconds), once.
    if !(membarrier(REGISTER_PRIVATE_EXPEDITED) && membarrier(PRIVATE_EXPEDITED)) {
        membarrier(GLOBAL);
    }
}

/// Wakes up to `n` threads glibc put to sleep in the kernel on `word`.
pub(crate) fn futex_wake(word: &AtomicI32, n: i32, shared: bool) {
    let op = if shared {
        libc::FUTEX_WAKE
    } else {
        libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG
    };
    // SAFETY: FUTEX_WAKE on a live word only wakes; our own `syscall` hook
    // would emulate it for fibers, so the real one is called.
    unsafe {
        crate::futex::syscall::real(
            libc::SYS_futex,
            word.as_ptr() as libc::c_long,
            op as libc::c_long,
            n as libc::c_long,
            0,
            0,
            0,
        )
    };
}
