//! Signals under N:1 fibers: per-thread masks and pending signals,
//! handlers that run in the thread a signal is for, `EINTR` only where the
//! kernel would give it, and signal waits that suspend only the calling
//! fiber.
//!
//! Active when pthreads are fibers (the preload default) on the fibers' OS
//! thread; elsewhere every hook here passes straight through.
//!
//! **Masks.** `pthread_sigmask`/`sigprocmask` keep a *virtual* mask per
//! context (the root and each fiber; see [`state`]) from the moment the
//! first fiber is made (until then the real mask is the root's). The OS
//! thread's real mask is their intersection, set (one `pthread_sigmask`)
//! only when it changes, never at a switch: a signal reaches our trampoline
//! as soon as *some* context accepts it, and one that every context blocks
//! stays pending in the kernel, as it would (for `sigwait`, `signalfd`). A
//! new thread starts with its creator's mask and nothing pending.
//!
//! **Handlers and pending signals** ([`deliver`]). `sigaction`/`signal`
//! install a trampoline in front of the program's handler (same flags plus
//! `SA_SIGINFO`) and report the program's action back (fault signals such
//! as SIGSEGV are installed unchanged). A handler runs only in a context
//! that does not mask its signal, only while that context runs the
//! program's own code (never inside a hook, the hub's loop or other
//! greenhook code), and a thread-directed signal only in the context it was
//! sent to. When the trampoline finds that true of the code it interrupted,
//! the handler runs at once; otherwise the signal is held (a fixed table,
//! [`table`]: the trampoline never allocates) until a safe point of its
//! recipient: a hook returning to the program, an interrupted wait inside
//! a hook, or the hub's loop, which gives process-directed signals a
//! recipient and wakes it. Each context thus has a pending set of its own
//! (`sigpending`), and the process one for signals no context accepts yet.
//!
//! **Who takes a process-directed signal.** A context waiting for it in
//! the `sigwait` family, then one in `pause`/`sigsuspend` that accepts it,
//! then the context that was running (if it accepts it), the root, any
//! other fiber. `pthread_kill`/`pthread_sigqueue`/`raise` go to their
//! thread only.
//!
//! **How a blocked recipient is woken.** Its wait is interrupted, and each
//! wait does what the kernel does to that call: sleeps, `pause` and
//! `sigsuspend` end with `EINTR` after the handler ran; fd waits
//! (`read`, `accept`, `connect`...) and child waits run the handler and go
//! on, or end with `EINTR` when the handler lacks `SA_RESTART`;
//! `poll`/`select`/`epoll_wait` and `io_uring` waits end with `EINTR` (the
//! kernel never restarts them); lock, condition, rwlock, barrier, join and
//! `pthread_once` waits run the handler and go on waiting (those calls
//! never fail with `EINTR`); the blocking calls on the offload pool (file
//! locks, System V IPC, message queues, `tcdrain`: see `blocking`) have
//! the worker's call ended by greenhook's own signal ([`kick`]), run the
//! handler, and make the call again or end with `EINTR` as the kernel's
//! would; other offloaded calls cannot be ended, so their handler runs
//! when the call is done. A handler may leave by `siglongjmp`, which gives
//! back the mask `sigsetjmp` saved ([`jump`]).
//!
//! **Waits.** `pause` and `sigsuspend` suspend the calling fiber until a
//! handler ran in it. `sigwait`, `sigwaitinfo` and `sigtimedwait` take a
//! signal held for the caller or the process, else try the real call with
//! a zero timeout, then wait on the hub for a `signalfd` over the same set
//! to poll readable (or to be interrupted: a signal held for it), and try
//! again. `alarm` and `setitimer` are untouched: their signals reach
//! handlers as above.

mod altstack;
mod compat;
mod deliver;
mod jump;
pub(crate) mod kick;
#[cfg(target_arch = "x86_64")]
pub(crate) mod restorer;
mod state;
mod table;

use std::rc::Rc;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use libc::{c_int, sigaction as SigAction, siginfo_t, sigset_t, timespec};

use crate::errno;
use crate::gate::{can_yield, emulating};
use crate::hook::hook;
pub(crate) use deliver::{interruptions, run_pending, work_pending, Ran};
use state::Wait;

const NSIG: usize = 65;
/// The flag glibc adds to every action it installs (x86-64 and AArch64).
const SA_RESTORER: c_int = 0x0400_0000;
/// Signals that cannot be blocked, and glibc's two internal ones (which its
/// `pthread_sigmask` never blocks either).
const UNBLOCKABLE: u64 = bit(libc::SIGKILL) | bit(libc::SIGSTOP) | bit(32) | bit(33);
/// Every signal number.
const ALL: u64 = u64::MAX;

/// Faults, always directed at the context that caused them: their handlers
/// are installed unchanged (no recipient to choose, and the stack overflow
/// reporter chains to them directly).
const SYNCHRONOUS: u64 = bit(libc::SIGSEGV)
    | bit(libc::SIGBUS)
    | bit(libc::SIGFPE)
    | bit(libc::SIGILL)
    | bit(libc::SIGTRAP)
    | bit(libc::SIGSYS);

const fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

/// The program's handler (`sa_sigaction` word), flags and mask, per
/// signal, for signals where our trampoline is installed (handler 0
/// otherwise).
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
static FLAGS: [AtomicI32; NSIG] = [const { AtomicI32::new(0) }; NSIG];
static MASKS: [AtomicU64; NSIG] = [const { AtomicU64::new(0) }; NSIG];

pub(crate) fn valid(sig: c_int) -> bool {
    (1..NSIG as c_int).contains(&sig)
}

fn set_to_bits(set: &sigset_t) -> u64 {
    let mut b = 0;
    for sig in 1..NSIG as c_int {
        // SAFETY: a valid sigset and signal number.
        if unsafe { libc::sigismember(set, sig) } == 1 {
            b |= bit(sig);
        }
    }
    b
}

fn bits_to_set(b: u64, out: &mut sigset_t) {
    // SAFETY: `out` is a valid sigset to initialise.
    unsafe { libc::sigemptyset(out) };
    for sig in 1..NSIG as c_int {
        if b & bit(sig) != 0 {
            // SAFETY: as above; internal signals are never in `b`.
            unsafe { libc::sigaddset(out, sig) };
        }
    }
}

// ---------- handlers ----------

/// Installs `act` (when non-null) through the trampoline and reports the
/// previous user-visible action in `old`.
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction(2)`.
unsafe fn install(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int {
    hub::set_poll_hook(deliver::on_poll);
    hub::internal::set_signals_may_wake(a_handler_is_installed);
    // Resolves the real functions the trampoline may call, and this
    // thread's state, here rather than in a signal handler.
    state::with(|_| ());
    // SAFETY: a query of the current mask only.
    unsafe { pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), std::ptr::null_mut()) };
    if crate::preempt::signal() == Some(sig) {
        // SAFETY: caller's contract.
        return unsafe { install_beside(sig, act, old, &PREEMPT_SIGNAL_WORD) };
    }
    if kick::is_kick(sig) {
        // SAFETY: caller's contract.
        return unsafe { install_beside(sig, act, old, &kick::WORD) };
    }
    let s = sig as usize;
    let mut mine = None;
    let mut user = None;
    // SAFETY: caller's contract.
    if let Some(a) = unsafe { act.as_ref() } {
        if a.sa_sigaction != libc::SIG_DFL && a.sa_sigaction != libc::SIG_IGN {
            let mut m = *a;
            m.sa_sigaction = deliver::trampoline as *const () as usize;
            m.sa_flags |= libc::SA_SIGINFO;
            mine = Some(m);
            user = Some((a.sa_sigaction, a.sa_flags, set_to_bits(&a.sa_mask) & !UNBLOCKABLE));
        }
    }
    // SAFETY: a zeroed sigaction is a valid out buffer.
    let mut k: SigAction = unsafe { std::mem::zeroed() };
    let (prev_h, prev_f) = (HANDLERS[s].load(Ordering::SeqCst), FLAGS[s].load(Ordering::SeqCst));
    let r = match &mine {
        // The trampoline returns through greenhook's restorer (see
        // `restorer`): the frames it leaves are not taken for a handler's.
        // SAFETY: the trampoline handles every signal; valid pointers.
        #[cfg(target_arch = "x86_64")]
        Some(m) => unsafe { restorer::install(sig, m, &mut k) },
        // SAFETY: valid pointers.
        #[cfg(not(target_arch = "x86_64"))]
        Some(m) => unsafe { sigaction::real(sig, m, &mut k) },
        // SAFETY: valid pointers.
        None => unsafe { sigaction::real(sig, act, &mut k) },
    };
    if r != 0 {
        return r;
    }
    if k.sa_sigaction == deliver::trampoline as *const () as usize {
        k.sa_sigaction = prev_h;
        // glibc reports the SA_RESTORER it added; keep that as it would.
        k.sa_flags = prev_f | (k.sa_flags & SA_RESTORER);
    }
    // SAFETY: caller's contract.
    if let Some(a) = unsafe { act.as_ref() } {
        let (h, f, m) = user.unwrap_or((0, 0, 0));
        MASKS[s].store(m, Ordering::SeqCst);
        FLAGS[s].store(f, Ordering::SeqCst);
        HANDLERS[s].store(h, Ordering::SeqCst);
        let ignored = a.sa_sigaction == libc::SIG_IGN
            || (a.sa_sigaction == libc::SIG_DFL && deliver::action_of(sig) == deliver::Action::Ignore);
        if ignored {
            discard_held(sig);
        }
    }
    if !old.is_null() {
        // SAFETY: caller's out pointer.
        unsafe { *old = k };
    }
    0
}

/// A pending signal whose action becomes "ignore" is discarded (POSIX):
/// those of `sig` held in the table go.
fn discard_held(sig: c_int) {
    state::with(|st| table::discard(sig, |t| st.refresh(t)));
}

/// The program's disposition of the preemption signal when it is not a
/// handler (SIG_DFL or SIG_IGN): what `sigaction` reports back.
static PREEMPT_SIGNAL_WORD: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

/// `install` for a signal whose kernel handler is greenhook's own:
/// preemption's (`SIGURG`; its handler passes the program's own `SIGURG`s
/// to [`program_preempt_signal`]) and the kick's (see [`kick`]). The
/// program's action is recorded and reported as if installed; `word`
/// keeps it when it is `SIG_DFL` or `SIG_IGN`.
///
/// # Safety
/// As for [`install`].
unsafe fn install_beside(sig: c_int, act: *const SigAction, old: *mut SigAction, word: &AtomicUsize) -> c_int {
    let s = sig as usize;
    if !old.is_null() {
        // SAFETY: a zeroed sigaction is valid; the caller's out pointer.
        let mut k: SigAction = unsafe { std::mem::zeroed() };
        let h = HANDLERS[s].load(Ordering::SeqCst);
        k.sa_sigaction = if h != 0 { h } else { word.load(Ordering::SeqCst) };
        k.sa_flags = FLAGS[s].load(Ordering::SeqCst) | SA_RESTORER;
        bits_to_set(MASKS[s].load(Ordering::SeqCst), &mut k.sa_mask);
        // SAFETY: caller's out pointer.
        unsafe { *old = k };
    }
    // SAFETY: caller's contract.
    if let Some(a) = unsafe { act.as_ref() } {
        let handler = a.sa_sigaction != libc::SIG_DFL && a.sa_sigaction != libc::SIG_IGN;
        MASKS[s].store(set_to_bits(&a.sa_mask) & !UNBLOCKABLE, Ordering::SeqCst);
        FLAGS[s].store(a.sa_flags, Ordering::SeqCst);
        word.store(if handler { libc::SIG_DFL } else { a.sa_sigaction }, Ordering::SeqCst);
        HANDLERS[s].store(if handler { a.sa_sigaction } else { 0 }, Ordering::SeqCst);
        if !handler {
            discard_held(sig);
        }
    }
    0
}

/// A `SIGURG` that is not a preemption tick, while preemption is on: the
/// program's handler runs as for any other signal (the signal module's
/// trampoline); without one it is ignored, as by default. (A `sigwait` or
/// `signalfd` for `SIGURG` does not see it then: see README's caveats.)
pub(crate) fn program_preempt_signal(sig: c_int, info: *mut siginfo_t, uc: *mut libc::c_void) {
    if HANDLERS[sig as usize].load(Ordering::SeqCst) != 0 {
        deliver::trampoline(sig, info, uc);
    }
}

/// Signals the real mask never blocks: preemption's (see `preempt`).
pub(super) fn never_blocked() -> u64 {
    crate::preempt::signal().map_or(0, bit)
}

/// Whether the program has a handler installed for some signal: then a
/// thread whose fibers all wait may still be woken by one (its alarm, a
/// `SIGTERM` from outside), and the hub waits instead of ending the process
/// as deadlocked.
fn a_handler_is_installed() -> bool {
    HANDLERS.iter().any(|h| h.load(Ordering::Relaxed) != 0)
}

/// `SA_RESETHAND` for a signal we delivered ourselves: the disposition
/// goes back to SIG_DFL, in our table and in the kernel (where the kernel
/// keeps preemption's handler for its signal).
fn reset_to_default(sig: c_int) {
    let s = sig as usize;
    HANDLERS[s].store(0, Ordering::SeqCst);
    FLAGS[s].store(0, Ordering::SeqCst);
    if never_blocked() & bit(sig) != 0 {
        PREEMPT_SIGNAL_WORD.store(libc::SIG_DFL, Ordering::SeqCst);
        return;
    }
    if kick::is_kick(sig) {
        kick::WORD.store(libc::SIG_DFL, Ordering::SeqCst);
        return;
    }
    // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
    let dfl: SigAction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    unsafe { sigaction::real(sig, &dfl, std::ptr::null_mut()) };
}

/// `sigaction` for a fault signal: the real one, with the stack overflow
/// reporter (the fiber crate's SIGSEGV handler, installed when the first
/// fiber is made) left out of what the program sees: where it is the
/// kernel's action, `old` gets the action it replaced, which is the
/// program's, as without greenhook. A program that installs its own
/// handler replaces the reporter, which then chains to nothing.
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction(2)`.
unsafe fn fault_action(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int {
    // SAFETY: a zeroed sigaction is a valid out buffer.
    let mut k: SigAction = unsafe { std::mem::zeroed() };
    // SAFETY: caller's contract; `k` is ours.
    let r = unsafe { sigaction::real(sig, act, &mut k) };
    if r == 0 && !old.is_null() {
        // SAFETY: caller's out pointer.
        unsafe { *old = fiber::overflow_replaced_action(&k).unwrap_or(k) };
    }
    r
}

/// `signal()` with the given flags, as glibc builds it.
fn signal_with(sig: c_int, h: libc::sighandler_t, flags: c_int) -> libc::sighandler_t {
    // SAFETY: zeroed sigactions are valid; fields set below.
    let (mut act, mut old): (SigAction, SigAction) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    act.sa_sigaction = h;
    act.sa_flags = flags;
    // SAFETY: a valid sigset.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    if flags & libc::SA_NODEFER == 0 && valid(sig) {
        // SAFETY: as above.
        unsafe { libc::sigaddset(&mut act.sa_mask, sig) };
    }
    // SAFETY: valid pointers.
    if unsafe { sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

hook! {
    /// `sigaction(2)`: the user's handler runs behind a trampoline. A
    /// SIGSEGV action is installed unchanged, in every mode; where the
    /// kernel's was the stack overflow reporter, the action it replaced is
    /// reported instead.
    #[gate(valid(sig) && (sig == libc::SIGSEGV || emulating() && bit(sig) & (UNBLOCKABLE | SYNCHRONOUS) == 0))]
    [signal] fn sigaction(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int {
        if sig == libc::SIGSEGV {
            // SAFETY: caller's contract.
            return unsafe { fault_action(sig, act, old) };
        }
        // SAFETY: caller's contract.
        unsafe { install(sig, act, old) }
    }

    /// `signal(2)` (BSD semantics, like glibc: `SA_RESTART`). glibc's own
    /// `signal` reaches its internal `sigaction`, so it needs this hook.
    [signal] fn signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
        signal_with(sig, h, libc::SA_RESTART)
    }

    /// `bsd_signal(3)`: same as `signal`.
    [signal] fn bsd_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
        signal_with(sig, h, libc::SA_RESTART)
    }

    /// `sysv_signal(3)`: one-shot, not deferred, not restarting.
    [signal] fn sysv_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
        signal_with(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER)
    }
}

// ---------- masks ----------

/// Whether masks are virtual here: on the fibers' thread, once a fiber was
/// made (see the module docs).
pub(crate) fn virtual_masks() -> bool {
    emulating() && (can_yield() || state::with(|st| st.ready()))
}

/// The calling context's virtual mask, as bits (where masks are virtual).
fn virtual_mask() -> u64 {
    state::with(|st| {
        st.ensure();
        st.mask(hub::current_id())
    })
}

/// The OS thread's kernel signal mask set to a given one until the guard
/// drops, then put back: what a thread or a program started meanwhile
/// inherits. Set by glibc's call, not our hook (which would set the
/// caller's virtual mask).
pub(crate) struct KernelMask(sigset_t);

impl KernelMask {
    pub(crate) fn set(m: &sigset_t) -> KernelMask {
        // SAFETY: a zeroed sigset is a valid out buffer.
        let mut was: sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sets.
        unsafe { pthread_sigmask::real(libc::SIG_SETMASK, m, &mut was) };
        KernelMask(was)
    }
}

impl Drop for KernelMask {
    fn drop(&mut self) {
        // SAFETY: the mask saved by `set`.
        unsafe { pthread_sigmask::real(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// The calling context's signal mask (virtual when masks are per fiber).
pub(crate) fn current_mask() -> sigset_t {
    // SAFETY: a zeroed sigset is a valid out buffer.
    let mut set: sigset_t = unsafe { std::mem::zeroed() };
    match virtual_masks().then(virtual_mask) {
        Some(m) => bits_to_set(m, &mut set),
        // SAFETY: query only.
        None => unsafe {
            pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), &mut set);
        },
    }
    set
}

/// When masks become virtual: what the kernel holds pending for this OS
/// thread alone (sent to it with `tgkill` while it blocked it, e.g. a
/// `raise` or `pthread_kill` of the main thread before any fiber existed)
/// was the root's, and becomes so in the table: otherwise a fiber that
/// unblocks it would take it. Returns whether anything was adopted. Costs
/// one `sigpending` when nothing is pending.
fn adopt_thread_pending() -> bool {
    // SAFETY: a zeroed sigset is a valid out buffer.
    let mut p: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: our own buffer.
    if unsafe { sigpending::real(&mut p) } != 0 || set_to_bits(&p) & !UNBLOCKABLE == 0 {
        return false;
    }
    let own = thread_pending() & !UNBLOCKABLE;
    let mut adopted = false;
    for sig in 1..NSIG as c_int {
        if own & bit(sig) == 0 {
            continue;
        }
        // SAFETY: zeroed sets and info are valid buffers; filled here.
        let (mut one, mut info): (sigset_t, siginfo_t) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        bits_to_set(bit(sig), &mut one);
        let zero = timespec { tv_sec: 0, tv_nsec: 0 };
        // The thread's own queue is dequeued before the process's.
        // SAFETY: valid buffers; a zero timeout never blocks.
        if unsafe { sigtimedwait::real(&one, &mut info, &zero) } == sig {
            table::add(sig, &info, state::ROOT, true, None, false);
            adopted = true;
        }
    }
    adopted
}

/// The signals pending for this OS thread alone (`SigPnd` in
/// `/proc/thread-self/status`; the process's are `ShdPnd`), read with raw
/// system calls: nothing here may reach a hook.
fn thread_pending() -> u64 {
    let path = c"/proc/thread-self/status";
    // SAFETY: a valid path; our own fd, closed below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return 0;
    }
    let mut buf = [0u8; 4096];
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reads into the rest of our buffer.
        let n = unsafe { libc::syscall(libc::SYS_read, fd, buf[len..].as_mut_ptr(), buf.len() - len) };
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    // SAFETY: our own fd.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    std::str::from_utf8(&buf[..len])
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("SigPnd:")))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0)
}

/// Gives the running context `task` the mask `new` (it had `old`): what it
/// unblocked and is held for the process becomes its own, what it blocked
/// and was given to it as a process-directed signal goes to someone else,
/// and the real mask follows.
fn switch_mask(task: &Rc<hub::Task>, old: u64, new: u64) {
    // A fiber without an entry gets one, with the root's mask.
    state::with(|st| st.set_mask(task, old));
    deliver::remask(task.id(), old, new);
}

/// A new thread's mask is its creator's (POSIX), and its pending set empty:
/// `child`, just made by the calling context, gets its own entry.
pub(crate) fn inherit_mask(child: &Rc<hub::Task>) {
    if !emulating() {
        return;
    }
    hub::set_poll_hook(deliver::on_poll);
    let m = state::with(|st| {
        st.ensure();
        let m = st.mask(hub::current_id());
        st.add(child, m);
        m
    });
    // What no context accepted until now, it may.
    deliver::claim(child.id(), !m);
}

/// The ending fiber `t` no longer counts: the process-directed signals
/// given to it go to another context, those sent to it are dropped (as the
/// kernel drops them with the thread), and the real mask is recomputed
/// (it may have been the only one to accept a signal).
pub(crate) fn thread_ended(t: &hub::Task) {
    let id = t.id();
    altstack::thread_ended(id);
    if state::with(|st| st.remove(id)).is_none() {
        return;
    }
    deliver::rehome(id, ALL);
    table::retarget(id, ALL, false, None);
    state::with(|st| st.apply_real());
}

/// The shared body of `pthread_sigmask`/`sigprocmask`: an errno value.
fn change_mask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let me = hub::current();
    let cur = state::with(|st| {
        st.ensure();
        st.mask(me.id())
    });
    // SAFETY: caller's contract: null or a valid set.
    let new = match unsafe { set.as_ref() } {
        None => cur,
        Some(s) => {
            let b = set_to_bits(s) & !UNBLOCKABLE;
            match how {
                libc::SIG_BLOCK => cur | b,
                libc::SIG_UNBLOCK => cur & !b,
                libc::SIG_SETMASK => b,
                _ => return libc::EINVAL,
            }
        }
    };
    if !old.is_null() {
        // SAFETY: caller's out pointer.
        bits_to_set(cur, unsafe { &mut *old });
    }
    if new != cur {
        hub::set_poll_hook(deliver::on_poll);
        switch_mask(&me, cur, new);
    }
    // A signal it unblocked runs at this hook's way out, before the call
    // returns (as the kernel delivers it before `sigprocmask` returns).
    0
}

hook! {
    /// `pthread_sigmask(3)`: per thread.
    #[gate(virtual_masks())]
    [signal] fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
        change_mask(how, set, old)
    }

    /// `sigprocmask(2)`: the calling thread's mask (as in a threaded process).
    #[gate(virtual_masks())]
    [signal] fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
        match change_mask(how, set, old) {
            0 => 0,
            e => errno::fail(e),
        }
    }

    /// `sigpending(2)`: what is pending for the calling thread: its own
    /// held signals, the process's, and the kernel's for this OS thread
    /// (signals every context blocks).
    #[gate(virtual_masks())]
    [signal] fn sigpending(set: *mut sigset_t) -> c_int {
        // SAFETY: the caller's set; the kernel checks it.
        let r = unsafe { sigpending::real(set) };
        if r != 0 {
            return r;
        }
        let ours = table::held(hub::current_id()) | table::held(table::PROCESS);
        if ours != 0 {
            // SAFETY: the kernel just wrote it: a valid set.
            let s = unsafe { &mut *set };
            let all = set_to_bits(s) | ours;
            bits_to_set(all, s);
        }
        0
    }
}

// ---------- thread-directed signals ----------

/// The `siginfo_t` of a signal sent by `pthread_kill` (no value) or
/// `pthread_sigqueue` from this process, as the kernel fills it.
fn sent_info(sig: c_int, value: Option<libc::sigval>) -> siginfo_t {
    /// The kernel's layout of the fields `tgkill`/`rt_tgsigqueueinfo` set.
    #[repr(C)]
    struct Sent {
        signo: c_int,
        errno: c_int,
        code: c_int,
        _pad: c_int,
        pid: libc::pid_t,
        uid: libc::uid_t,
        value: usize,
        _rest: [u64; 12],
    }
    const _: () = assert!(std::mem::size_of::<Sent>() == std::mem::size_of::<siginfo_t>());
    let sent = Sent {
        signo: sig,
        errno: 0,
        code: if value.is_some() {
            libc::SI_QUEUE
        } else {
            libc::SI_TKILL
        },
        _pad: 0,
        pid: std::process::id() as libc::pid_t,
        // SAFETY: no arguments.
        uid: unsafe { libc::getuid() },
        value: value.map_or(0, |v| v.sival_ptr as usize),
        _rest: [0; 12],
    };
    // SAFETY: same size (checked above), and siginfo_t is plain data.
    unsafe { std::mem::transmute::<Sent, siginfo_t>(sent) }
}

/// The root context's id, for [`send_to`].
pub(crate) const ROOT: u64 = state::ROOT;

/// `pthread_kill`/`pthread_sigqueue` (with `value`) to context `to`, a
/// fiber of this hub or its root ([`ROOT`]): the signal is held for `to` alone, and its action
/// runs in `to` (its `pthread_self`, its stack) at `to`'s next safe point:
/// at once when `to` is the caller (at this hook's way out), else when it
/// is woken from the wait it is blocked in, or next returns from a hook.
/// SIGKILL and SIGSTOP act on the process at once. Returns an error number.
pub(crate) fn send_to(to: u64, sig: c_int, value: Option<libc::sigval>) -> c_int {
    if !valid(sig) {
        return libc::EINVAL;
    }
    hub::set_poll_hook(deliver::on_poll);
    if bit(sig) & UNBLOCKABLE != 0 {
        // SAFETY: plain integer arguments; signals our own OS thread.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), hub::internal::os_tid(), sig) };
        return if r == 0 { 0 } else { errno::get() };
    }
    deliver::send(to, sig, &sent_info(sig, value))
}

hook! {
    /// `raise(3)`: `pthread_kill` of the calling thread (glibc's would
    /// signal the OS thread, whichever context accepts it first), once
    /// masks are per thread.
    #[gate(virtual_masks())]
    [signal] fn raise(sig: c_int) -> c_int {
        match send_to(hub::current_id(), sig, None) {
            0 => 0,
            e => errno::fail(e),
        }
    }

    /// `kill(2)`, made as it is; a signal it sends this process is placed
    /// at the hook's way out (the kernel gave it to the caller's OS thread
    /// on the call's return): the root takes it if the kernel's leader
    /// would (see `deliver::leader_first`), and is interrupted at once,
    /// not at the caller's next safe point.
    /// A live fiber's thread id names the process, as a thread's does.
    #[gate(virtual_masks() || crate::thread::tid::is_fiber_id(pid))]
    [signal] fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
        // SAFETY: forwarded unchanged, but for a fiber's id.
        unsafe { kill::real(crate::thread::tid::for_kill(pid), sig) }
    }

    /// `killpg(3)`, as `kill`.
    #[gate(virtual_masks())]
    [signal] fn killpg(pgrp: libc::pid_t, sig: c_int) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { killpg::real(pgrp, sig) }
    }

    /// `sigqueue(3)`, as `kill`.
    #[gate(virtual_masks())]
    [signal] fn sigqueue(pid: libc::pid_t, sig: c_int, value: libc::sigval) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { sigqueue::real(pid, sig, value) }
    }
}

/// After a wait inside a hook was interrupted: runs the handlers due for
/// the caller, and says whether the call goes on (true) or ends with
/// `EINTR` (false): a handler without `SA_RESTART` ran, or a cancellation
/// is due (the caller's cancellation point acts on it). An interruption
/// that ran no handler (a signal since taken elsewhere, a cancellation
/// that is disabled) goes on.
pub(crate) fn restart_after_interrupt() -> bool {
    !run_pending().interrupts && !crate::thread::cancel::due_here()
}

/// After a wait in the kernel that stands for a blocking call ended with
/// `EINTR` and no handler behind our trampoline counted: whether the call
/// would have ended with `EINTR` too. Such a handler is the program's own,
/// installed as it is (pthreads stay OS threads, `GREENHOOK_THREADS=native`,
/// or an OS thread that is not the fibers' installed it), and which signal
/// interrupted is not known: the call ends if any signal this OS thread
/// accepts has a handler without `SA_RESTART`, and goes on otherwise (the
/// kernel restarts the blocking call after a handler with it). Faults,
/// greenhook's own kick and the preemption signal are left out.
pub(crate) fn direct_handler_ends_call() -> bool {
    // SAFETY: a zeroed sigset is a valid out buffer; a query only.
    let mut mask: sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), &mut mask) };
    let skip = set_to_bits(&mask) | UNBLOCKABLE | SYNCHRONOUS;
    (1..NSIG as c_int).any(|sig| {
        if skip & bit(sig) != 0
            || HANDLERS[sig as usize].load(Ordering::Relaxed) != 0
            || kick::is_kick(sig)
            || crate::preempt::signal() == Some(sig)
        {
            return false;
        }
        // SAFETY: a zeroed sigaction is a valid out buffer; a query only.
        let mut k: SigAction = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = unsafe { sigaction::real(sig, std::ptr::null(), &mut k) };
        r == 0
            && k.sa_sigaction != libc::SIG_DFL
            && k.sa_sigaction != libc::SIG_IGN
            && k.sa_flags & libc::SA_RESTART == 0
    })
}

/// The handlers that have run in the calling thread so far: a wait that
/// the kernel ends with `EINTR` after a handler, where the hub's wait runs
/// the handler and goes on (a lock-like wait: semaphores; the short sleeps
/// between a FIFO open's tries), compares two marks. glibc's `sem_wait` fails with `EINTR` after a handler without
/// `SA_RESTART`, `sem_timedwait` after any handler.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HandlerMark {
    ran: u64,
    interrupting: u64,
}

impl HandlerMark {
    /// The calling thread's count now.
    pub(crate) fn now() -> HandlerMark {
        let (ran, interrupting) = state::with(|st| st.handlers(hub::current_id()));
        HandlerMark { ran, interrupting }
    }

    /// What ran in the calling thread since this mark.
    pub(crate) fn since(&self) -> Ran {
        let now = HandlerMark::now();
        Ran {
            handler: now.ran != self.ran,
            interrupts: now.interrupting != self.interrupting,
        }
    }
}

// ---------- waits ----------

/// Suspends the calling context until a handler ran in it (`pause`,
/// `sigsuspend`).
fn wait_for_handler() {
    let id = hub::current_id();
    state::with(|st| {
        st.ensure();
        st.set_wait(id, Wait::Handler)
    });
    loop {
        if run_pending().handler {
            break;
        }
        hub::sleep_forever();
        crate::cancel_point();
    }
    state::with(|st| st.set_wait(id, Wait::No));
}

/// `pause`/`sigsuspend` wait on the hub: where fibers run, and wherever
/// masks are virtual (the kernel would not know the context's mask).
fn emulated_wait() -> bool {
    emulating() && (can_yield() || state::with(|st| st.ready()))
}

hook! {
    /// `pause(2)`: suspends only the calling thread.
    #[cancel_point]
    #[gate(emulated_wait())]
    [signal] fn pause() -> c_int {
        hub::set_poll_hook(deliver::on_poll);
        crate::cancel_point();
        wait_for_handler();
        errno::fail(libc::EINTR)
    }

    /// `sigsuspend(2)`: the thread's mask is replaced while it waits, and
    /// the handler runs under it.
    #[cancel_point]
    #[gate(emulated_wait())]
    [signal] fn sigsuspend(mask: *const sigset_t) -> c_int {
        // SAFETY: caller's contract.
        let Some(m) = (unsafe { mask.as_ref() }) else {
            return errno::fail(libc::EFAULT);
        };
        hub::set_poll_hook(deliver::on_poll);
        crate::cancel_point();
        let m = set_to_bits(m) & !UNBLOCKABLE;
        let me = hub::current();
        let saved = state::with(|st| {
            st.ensure();
            st.mask(me.id())
        });
        switch_mask(&me, saved, m);
        wait_for_handler();
        switch_mask(&me, m, saved);
        errno::fail(libc::EINTR)
    }
}

/// Runs `wait` (the body of `ppoll`, `pselect`, `epoll_pwait`) with `mask`
/// as the calling thread's mask, as the kernel does for the call: a signal
/// it unblocks reaches the thread meanwhile (an interrupted wait returns
/// `EINTR`), and its handler runs under that mask before the call returns.
/// One already due when the mask is set runs at once, and the call fails
/// with `EINTR` without waiting. A null `mask` (or masks that are not
/// virtual) changes nothing.
pub(crate) fn with_wait_mask(mask: *const sigset_t, wait: impl FnOnce() -> c_int) -> c_int {
    if mask.is_null() || !virtual_masks() {
        return wait();
    }
    // An unreadable mask: the real call (inside `wait`) says EFAULT.
    let Ok(m) = crate::user::read(mask) else {
        return wait();
    };
    let m = set_to_bits(&m) & !UNBLOCKABLE;
    let me = hub::current();
    let saved = state::with(|st| {
        st.ensure();
        st.mask(me.id())
    });
    switch_mask(&me, saved, m);
    let r = if run_pending().handler {
        errno::fail(libc::EINTR)
    } else {
        let r = wait();
        let e = errno::get();
        run_pending();
        errno::set(e);
        r
    };
    switch_mask(&me, m, saved);
    r
}

/// A non-blocking signalfd over `set` (raw system call: not a managed fd).
fn signalfd_of(set: *const sigset_t) -> Option<c_int> {
    // SAFETY: raw syscall with a valid set pointer and its kernel size (8).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_signalfd4,
            -1,
            set,
            8usize,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        )
    };
    (fd >= 0).then_some(fd as c_int)
}

/// Takes a signal in `want` held for the caller or the process, with its
/// info written to `info` (if not null).
fn take_held(want: u64, info: *mut siginfo_t) -> Option<c_int> {
    let id = hub::current_id();
    let e = table::take(id, want).or_else(|| table::take(table::PROCESS, want))?;
    state::with(|st| st.refresh(id));
    if !info.is_null() {
        // SAFETY: the caller's out pointer.
        unsafe { *info = e.info };
    }
    Some(e.sig)
}

/// `sigtimedwait` on the hub; `deadline` None waits forever. Returns the
/// signal or -1 with errno. Interrupted by a handler of another signal (one
/// it does not wait for and does not mask): `EINTR`.
fn timed_wait(set: *const sigset_t, info: *mut siginfo_t, deadline: Option<Instant>) -> c_int {
    crate::cancel_point();
    // SAFETY: the caller's set (checked non-null by the gate).
    let want = set_to_bits(unsafe { &*set }) & !UNBLOCKABLE;
    let id = hub::current_id();
    state::with(|st| {
        st.ensure();
        st.set_wait(id, Wait::Set(want))
    });
    let zero = timespec { tv_sec: 0, tv_nsec: 0 };
    let mut sfd = None;
    let r = loop {
        if let Some(sig) = take_held(want, info) {
            break Ok(sig);
        }
        // SAFETY: the caller's set and info; a zero timeout never blocks.
        let r = unsafe { sigtimedwait::real(set, info, &zero) };
        if r > 0 || errno::get() != libc::EAGAIN {
            break Ok(r);
        }
        if run_pending().handler {
            break Err(libc::EINTR);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Err(libc::EAGAIN);
        }
        if sfd.is_none() {
            sfd = signalfd_of(set);
        }
        let Some(fd) = sfd else {
            // No signalfd: poll gently.
            hub::sleep_interruptible(Instant::now() + std::time::Duration::from_millis(5));
            continue;
        };
        match hub::wait_fd(fd, hub::Interest::Readable, deadline) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            // Held for us, or a handler to run: both looked at above.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => crate::cancel_point(),
            Err(_) => sfd = None,
        }
    };
    state::with(|st| st.set_wait(id, Wait::No));
    let e = errno::get();
    if let Some(fd) = sfd {
        hub::forget_fd(fd);
        // SAFETY: our own signalfd.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }
    errno::after_wait(r, e)
}

/// A `sigwait`-family wait where no fiber could run meanwhile: a signal
/// held for the caller or the process, else the real blocking call (in
/// which a handler may run, as without us).
fn wait_in_kernel(set: *const sigset_t, info: *mut siginfo_t, real: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: the caller's set (checked non-null by the gate).
    let want = set_to_bits(unsafe { &*set }) & !UNBLOCKABLE;
    match take_held(want, info) {
        Some(sig) => sig,
        None => crate::hook::program(real),
    }
}

hook! {
    /// `sigtimedwait(2)`.
    #[cancel_point]
    #[gate(emulated_wait() && !set.is_null())]
    [signal] fn sigtimedwait(set: *const sigset_t, info: *mut siginfo_t, ts: *const timespec) -> c_int {
        if !can_yield() {
            // SAFETY: the caller's arguments, unchanged.
            return wait_in_kernel(set, info, || unsafe { sigtimedwait::real(set, info, ts) });
        }
        let deadline = match crate::deadline::relative(ts) {
            Ok(d) => d,
            Err(e) => return errno::fail(e),
        };
        timed_wait(set, info, deadline)
    }

    /// `sigwaitinfo(2)`.
    #[cancel_point]
    #[gate(emulated_wait() && !set.is_null())]
    [signal] fn sigwaitinfo(set: *const sigset_t, info: *mut siginfo_t) -> c_int {
        if !can_yield() {
            // SAFETY: the caller's arguments, unchanged.
            return wait_in_kernel(set, info, || unsafe { sigwaitinfo::real(set, info) });
        }
        timed_wait(set, info, None)
    }

    /// `sigwait(3)`: returns an error number; never fails with EINTR.
    #[cancel_point]
    #[gate(emulated_wait() && !set.is_null())]
    [signal] fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
        let saved = errno::get();
        let r = loop {
            let r = if can_yield() {
                timed_wait(set, std::ptr::null_mut(), None)
            } else {
                // SAFETY: the caller's set; no info wanted.
                wait_in_kernel(set, std::ptr::null_mut(), || unsafe {
                    sigwaitinfo::real(set, std::ptr::null_mut())
                })
            };
            if r > 0 {
                if !sig.is_null() {
                    // SAFETY: caller's out pointer.
                    unsafe { *sig = r };
                }
                break 0;
            }
            let e = errno::get();
            if e != libc::EINTR {
                break e;
            }
        };
        errno::set(saved);
        r
    }
}

/// In the child of `fork()`: only the calling context is left, and
/// nothing is pending (POSIX).
pub(crate) fn after_fork_child() {
    table::clear();
    state::with(|st| {
        if st.ready() {
            st.after_fork(hub::current_id());
            st.apply_real();
        }
    });
}
