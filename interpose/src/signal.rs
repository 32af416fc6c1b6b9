//! Signals under N:1 fibers: per-fiber masks, `EINTR` only where the kernel
//! would give it, and signal waits that suspend only the calling fiber.
//!
//! Active when pthreads are fibers (the preload default); otherwise every
//! hook here passes straight through.
//!
//! **Masks.** `pthread_sigmask`/`sigprocmask` keep a *virtual* mask per
//! context (the root and each fiber). The OS thread's real mask is the
//! intersection of all of them, recomputed (one `pthread_sigmask`) only when
//! a mask changes, never at a switch: a signal reaches its handler as soon
//! as *some* context accepts it, and the handler runs on whatever context is
//! current (usually the hub's idle loop), because N:1 has only one kernel
//! thread to run it on. A fiber's mask decides whether it may be the
//! *recipient* (the one that sees `EINTR` or wakes from `pause`). A new
//! thread starts with its creator's mask ([`inherit_mask`]); a fiber
//! without a mask of its own has the root's, and keeps it when the root
//! changes its own. A signal every context blocks stays pending in the
//! kernel, as it would.
//!
//! **Handlers.** `sigaction`/`signal` install a trampoline in front of the
//! user's handler (same flags plus `SA_SIGINFO`) and report the user's
//! action back (fault signals such as SIGSEGV are installed unchanged). The
//! trampoline calls the handler at once, and when the signal arrived while
//! the hub was in its loop (no user code running), it notes the signal for
//! the hub, which acts on it at the end of the loop turn (an interrupted
//! `epoll_wait` ends the turn early).
//!
//! **Who sees `EINTR`.** The kernel gives a process-directed signal to one
//! thread, preferring the main thread, and interrupts only that thread's
//! call. The same rule here, with exactly one recipient: a signal that
//! arrived while a context was running is that context's (it is not in a
//! blocking call, so nobody sees `EINTR`) unless a fiber that does not mask
//! it waits in `pause`/`sigsuspend` (then that fiber is woken: the running
//! context may well mask it, and we cannot read its mask from a handler);
//! one that arrived while the hub waited goes to the first context that
//! does not mask it, in this order: fibers in `pause`/`sigsuspend`, the
//! root, the other fibers. The recipient
//! is interrupted when it is blocked in a call the handler's flags would
//! not restart: sleeps, `pause` and `sigsuspend` always (the kernel never
//! restarts those), fd waits (`read`, `write`, `accept`, `connect`, and also
//! `poll`/`select`/`epoll_wait`, which the kernel never restarts but which
//! look the same to the hub) and `waitpid`-family waits only when the
//! handler lacks `SA_RESTART`. Lock and condition waits are never
//! interrupted (their POSIX calls never fail with `EINTR`). So an
//! `SA_RESTART` handler never causes a spurious `EINTR`.
//!
//! **Waits.** `pause` and `sigsuspend` suspend the calling fiber until it is
//! chosen as a recipient. `sigwait`, `sigwaitinfo` and `sigtimedwait` try
//! the real call with a zero timeout, then wait on the hub for a
//! `signalfd` over the same set to poll readable, and try again. `alarm`
//! and `setitimer` are untouched: their signals reach handlers as above.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use libc::{c_int, c_void, sigaction as SigAction, siginfo_t, sigset_t, timespec};

use crate::errno;
use crate::gate::{can_yield, emulating};
use crate::hook::hook;

const NSIG: usize = 65;
/// The flag glibc adds to every action it installs (x86-64 and AArch64).
const SA_RESTORER: c_int = 0x0400_0000;
/// Signals that cannot be blocked, and glibc's two internal ones (which its
/// `pthread_sigmask` never blocks either).
const UNBLOCKABLE: u64 = bit(libc::SIGKILL) | bit(libc::SIGSTOP) | bit(32) | bit(33);

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

/// The user's handler (`sa_sigaction` word) and flags, per signal, for
/// signals where our trampoline is installed (handler 0 otherwise).
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
static FLAGS: [AtomicI32; NSIG] = [const { AtomicI32::new(0) }; NSIG];
/// Signals whose handler ran since the hub last looked.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones that arrived while the hub was in its loop.
static IDLE: AtomicU64 = AtomicU64::new(0);
/// Handlers run so far (any signal).
static HANDLED: AtomicU64 = AtomicU64::new(0);

// Per OS thread, shared by its fibers (see `hub::PerThread`).
/// The root's virtual mask, once fibers made masks virtual.
static ROOT_MASK: hub::PerThread<Cell<Option<u64>>> = hub::PerThread::new(|| Cell::new(None));
/// Virtual masks of fibers that set one, by fiber id.
static MASKS: hub::PerThread<RefCell<HashMap<u64, u64>>> = hub::PerThread::new(|| RefCell::new(HashMap::new()));
/// Fibers in pause/sigsuspend, with the mask they wait under.
#[allow(clippy::type_complexity)]
static WAITERS: hub::PerThread<RefCell<Vec<(Rc<hub::Task>, u64)>>> = hub::PerThread::new(|| RefCell::new(Vec::new()));
/// Tasks in a wait that a non-restarting handler may end (waitpid).
static INTERRUPTIBLE: hub::PerThread<RefCell<Vec<*const hub::Task>>> = hub::PerThread::new(|| RefCell::new(Vec::new()));

fn valid(sig: c_int) -> bool {
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

extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    if !valid(sig) {
        return;
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
    if hub::in_loop() {
        IDLE.fetch_or(bit(sig), Ordering::SeqCst);
    }
    PENDING.fetch_or(bit(sig), Ordering::SeqCst);
    let s = sig as usize;
    let h = HANDLERS[s].load(Ordering::SeqCst);
    let flags = FLAGS[s].load(Ordering::SeqCst);
    if flags & libc::SA_RESETHAND != 0 {
        // The kernel reset the disposition before calling us.
        HANDLERS[s].store(0, Ordering::SeqCst);
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the user installed this word as an sa_sigaction handler.
        let f: extern "C" fn(c_int, *mut siginfo_t, *mut c_void) = unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the user installed this word as an sa_handler.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

/// Installs `act` (when non-null) through the trampoline and reports the
/// previous user-visible action in `old`.
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction(2)`.
unsafe fn install(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int {
    hub::set_poll_hook(on_poll);
    let s = sig as usize;
    let mut mine: SigAction;
    let mut act_p = act;
    let mut user = None;
    // SAFETY: caller's contract.
    if let Some(a) = unsafe { act.as_ref() } {
        if a.sa_sigaction != libc::SIG_DFL && a.sa_sigaction != libc::SIG_IGN {
            mine = *a;
            mine.sa_sigaction = trampoline as *const () as usize;
            mine.sa_flags |= libc::SA_SIGINFO;
            act_p = &mine;
            user = Some((a.sa_sigaction, a.sa_flags));
        }
    }
    // SAFETY: a zeroed sigaction is a valid out buffer.
    let mut k: SigAction = unsafe { std::mem::zeroed() };
    let (prev_h, prev_f) = (HANDLERS[s].load(Ordering::SeqCst), FLAGS[s].load(Ordering::SeqCst));
    // SAFETY: valid pointers.
    let r = unsafe { sigaction::real(sig, act_p, &mut k) };
    if r != 0 {
        return r;
    }
    if k.sa_sigaction == trampoline as *const () as usize {
        k.sa_sigaction = prev_h;
        // glibc reports the SA_RESTORER it added; keep that as it would.
        k.sa_flags = prev_f | (k.sa_flags & SA_RESTORER);
    }
    if !act.is_null() {
        let (h, f) = user.unwrap_or((0, 0));
        FLAGS[s].store(f, Ordering::SeqCst);
        HANDLERS[s].store(h, Ordering::SeqCst);
    }
    if !old.is_null() {
        // SAFETY: caller's out pointer.
        unsafe { *old = k };
    }
    0
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
    /// `sigaction(2)`: the user's handler runs behind a trampoline.
    #[gate(emulating() && valid(sig) && bit(sig) & (UNBLOCKABLE | SYNCHRONOUS) == 0)]
    [signal] fn sigaction(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int {
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

// ---------- recipients ----------

/// Runs `f` (a wait) marked as interruptible by non-restarting handlers.
pub(crate) fn interruptible<R>(f: impl FnOnce() -> R) -> R {
    let me = Rc::as_ptr(&hub::current());
    INTERRUPTIBLE.with(|v| v.borrow_mut().push(me));
    let r = f();
    INTERRUPTIBLE.with(|v| {
        let mut v = v.borrow_mut();
        if let Some(i) = v.iter().rposition(|&p| p == me) {
            v.swap_remove(i);
        }
    });
    r
}

fn mask_of(t: &hub::Task) -> u64 {
    let root = root_mask();
    if t.is_root() {
        return root;
    }
    MASKS.with(|m| m.borrow().get(&t.id()).copied().unwrap_or(root))
}

/// The hub's end-of-turn hook: picks one recipient per noted signal.
fn on_poll() {
    let p = PENDING.swap(0, Ordering::SeqCst);
    if p == 0 {
        return;
    }
    let idle = IDLE.swap(0, Ordering::SeqCst);
    for sig in 1..NSIG as c_int {
        if p & bit(sig) != 0 {
            deliver(sig, idle & bit(sig) != 0);
        }
    }
}

/// Picks the recipient of `sig` (see the module docs); `idle`: it arrived
/// while the hub was in its loop rather than while a context ran.
fn deliver(sig: c_int, idle: bool) {
    let b = bit(sig);
    let restart = FLAGS[sig as usize].load(Ordering::SeqCst) & libc::SA_RESTART != 0;
    let waiter = WAITERS.with(|w| w.borrow().iter().find(|(_, m)| m & b == 0).map(|(t, _)| t.clone()));
    if waiter.is_none() && !idle {
        // The context that was running took it; it was in no blocking call.
        return;
    }
    let target = waiter.or_else(|| {
        let root = hub::current();
        if root.is_root() && mask_of(&root) & b == 0 {
            return Some(root);
        }
        let mut found = None;
        hub::for_each_task(|t| {
            if found.is_none() && mask_of(t) & b == 0 {
                found = Some(t.clone());
            }
        });
        found
    });
    if let Some(t) = target {
        interrupt_if_due(&t, restart);
    }
}

/// Interrupts `t` if it is blocked in a call that a handler with these
/// flags would end (see the module docs).
fn interrupt_if_due(t: &Rc<hub::Task>, restart: bool) {
    if t.state() != hub::State::Blocked {
        return;
    }
    let interrupt = match t.waiting() {
        hub::Waiting::Sleep => true,
        hub::Waiting::Fd(..) => !restart,
        hub::Waiting::Park(_) => !restart && INTERRUPTIBLE.with(|v| v.borrow().contains(&Rc::as_ptr(t))),
        _ => false,
    };
    if interrupt {
        t.interrupt();
    }
}

/// `pthread_kill(t, sig)` for a fiber `t` of this hub (for the hook in
/// [`crate::thread`]): the kernel runs the handler (or the default action)
/// on our one OS thread at once, and then `t` is treated as the recipient:
/// woken from `pause`/`sigsuspend`, or interrupted as the handler's flags
/// say. As well as N:1 allows: the handler runs on the sender's stack,
/// before the target runs again, even if the target's mask blocks the
/// signal (then the target is not interrupted); a signal every context
/// blocks stays pending in the kernel and goes to whoever unblocks it
/// first. Returns an error number.
pub(crate) fn kill_fiber(t: &Rc<hub::Task>, sig: c_int) -> c_int {
    if !valid(sig) {
        return libc::EINVAL;
    }
    hub::set_poll_hook(on_poll);
    let before = HANDLED.load(Ordering::SeqCst);
    // SAFETY: plain integer arguments; signals our own OS thread.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), sig) };
    if r != 0 {
        return errno::get();
    }
    if HANDLED.load(Ordering::SeqCst) != before {
        // Ran now, for `t`: nobody else is its recipient.
        PENDING.fetch_and(!bit(sig), Ordering::SeqCst);
        IDLE.fetch_and(!bit(sig), Ordering::SeqCst);
        let is_current = Rc::ptr_eq(t, &hub::current());
        if !is_current && mask_of(t) & bit(sig) == 0 {
            let restart = FLAGS[sig as usize].load(Ordering::SeqCst) & libc::SA_RESTART != 0;
            interrupt_if_due(t, restart);
        }
    }
    0
}

// ---------- masks ----------

fn root_mask() -> u64 {
    ROOT_MASK.with(|r| {
        r.get().unwrap_or_else(|| {
            // SAFETY: a zeroed sigset is a valid out buffer.
            let mut cur: sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: query only.
            unsafe { pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), &mut cur) };
            let m = set_to_bits(&cur);
            r.set(Some(m));
            m
        })
    })
}

/// Sets the real mask to what every live context blocks.
fn apply_real_mask() {
    let root = root_mask();
    let mut live = Vec::new();
    hub::for_each_task(|t| live.push(t.id()));
    let all = MASKS.with(|m| {
        let mut m = m.borrow_mut();
        m.retain(|id, _| live.contains(id));
        m.values().fold(root, |acc, &v| acc & v)
    });
    // SAFETY: a zeroed sigset is valid; bits_to_set initialises it.
    let mut set: sigset_t = unsafe { std::mem::zeroed() };
    bits_to_set(all, &mut set);
    // SAFETY: a valid set.
    unsafe { pthread_sigmask::real(libc::SIG_SETMASK, &set, std::ptr::null_mut()) };
}

/// The calling context's signal mask (virtual when masks are per fiber).
pub(crate) fn current_mask() -> sigset_t {
    // SAFETY: a zeroed sigset is a valid out buffer.
    let mut set: sigset_t = unsafe { std::mem::zeroed() };
    if virtual_masks() {
        bits_to_set(mask_of(&hub::current()), &mut set);
    } else {
        // SAFETY: query only.
        unsafe { pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), &mut set) };
    }
    set
}

fn set_current_mask(m: u64) {
    let cur = hub::current();
    if cur.is_root() {
        // Fibers that have "the root's" mask keep the one they have.
        let old = root_mask();
        MASKS.with(|x| {
            let mut x = x.borrow_mut();
            hub::for_each_task(|t| {
                x.entry(t.id()).or_insert(old);
            });
        });
        ROOT_MASK.with(|r| r.set(Some(m)));
    } else {
        MASKS.with(|x| x.borrow_mut().insert(cur.id(), m));
    }
    apply_real_mask();
}

/// A new thread's mask is its creator's (POSIX): `child`, just created by
/// the calling context, gets a copy of the caller's if it has one of its
/// own; otherwise both have the root's (see [`set_current_mask`]).
pub(crate) fn inherit_mask(child: &hub::Task) {
    if !hub::in_fiber() {
        return;
    }
    let cur = hub::current();
    MASKS.with(|x| {
        let mut x = x.borrow_mut();
        if let Some(&m) = x.get(&cur.id()) {
            x.insert(child.id(), m);
        }
    });
}

/// The ending fiber `t` no longer counts among the masks. Should it have
/// unblocked a signal the root blocks, the real mask is recomputed (the
/// signal may now be blocked by every context left).
pub(crate) fn forget_mask(t: &hub::Task) {
    let removed = MASKS.with(|x| {
        let mut x = x.borrow_mut();
        // Most programs never set a mask: no hashing at every thread's end.
        if x.is_empty() {
            None
        } else {
            x.remove(&t.id())
        }
    });
    let Some(m) = removed else { return };
    let root = root_mask();
    if m & root != root {
        apply_real_mask();
    }
}

fn virtual_masks() -> bool {
    emulating() && (can_yield() || ROOT_MASK.with(|r| r.get().is_some()))
}

/// The shared body of `pthread_sigmask`/`sigprocmask`: an errno value.
fn change_mask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let cur = mask_of(&hub::current());
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
        hub::set_poll_hook(on_poll);
        set_current_mask(new);
    }
    0
}

hook! {
    /// `pthread_sigmask(3)`: per fiber.
    #[gate(virtual_masks())]
    [signal] fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
        change_mask(how, set, old)
    }

    /// `sigprocmask(2)`: the calling fiber's mask (as in a threaded process).
    #[gate(virtual_masks())]
    [signal] fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
        match change_mask(how, set, old) {
            0 => 0,
            e => errno::fail(e),
        }
    }
}

// ---------- waits ----------

/// Suspends the calling context until it is chosen as a signal's recipient.
fn wait_for_handler(mask: u64) {
    let me = hub::current();
    WAITERS.with(|w| w.borrow_mut().push((me.clone(), mask)));
    hub::sleep_forever();
    WAITERS.with(|w| w.borrow_mut().retain(|(t, _)| !Rc::ptr_eq(t, &me)));
    crate::cancel_point();
}

hook! {
    /// `pause(2)`: suspends only the calling fiber.
    #[gate(emulating() && can_yield())]
    [signal] fn pause() -> c_int {
        hub::set_poll_hook(on_poll);
        crate::cancel_point();
        wait_for_handler(mask_of(&hub::current()));
        errno::fail(libc::EINTR)
    }

    /// `sigsuspend(2)`: the fiber's mask is replaced while it waits.
    #[gate(emulating() && can_yield())]
    [signal] fn sigsuspend(mask: *const sigset_t) -> c_int {
        // SAFETY: caller's contract.
        let Some(m) = (unsafe { mask.as_ref() }) else {
            return errno::fail(libc::EFAULT);
        };
        hub::set_poll_hook(on_poll);
        crate::cancel_point();
        let m = set_to_bits(m) & !UNBLOCKABLE;
        let saved = mask_of(&hub::current());
        let before = HANDLED.load(Ordering::SeqCst);
        set_current_mask(m);
        // A signal left pending and now unblocked ran its handler during
        // that change: that is the one we were waiting for.
        if HANDLED.load(Ordering::SeqCst) == before {
            wait_for_handler(m);
        }
        set_current_mask(saved);
        errno::fail(libc::EINTR)
    }
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

/// `sigtimedwait` on the hub; `ts` None waits forever. Returns the signal
/// or -1 with errno.
fn timed_wait(set: *const sigset_t, info: *mut siginfo_t, deadline: Option<Instant>) -> c_int {
    crate::cancel_point();
    let zero = timespec { tv_sec: 0, tv_nsec: 0 };
    let mut sfd = None;
    let r = loop {
        // SAFETY: the caller's set and info; a zero timeout never blocks.
        let r = unsafe { sigtimedwait::real(set, info, &zero) };
        if r > 0 || errno::get() != libc::EAGAIN {
            break Ok(r);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Err(libc::EAGAIN);
        }
        if sfd.is_none() {
            sfd = signalfd_of(set);
        }
        let Some(fd) = sfd else {
            // No signalfd: poll gently.
            if !hub::sleep_interruptible(Instant::now() + std::time::Duration::from_millis(5)) {
                break Err(libc::EINTR);
            }
            continue;
        };
        match hub::wait_fd(fd, hub::Interest::Readable, deadline) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => break Err(libc::EINTR),
            Err(_) => sfd = None,
        }
    };
    let e = errno::get();
    if let Some(fd) = sfd {
        hub::forget_fd(fd);
        // SAFETY: our own signalfd.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }
    match r {
        Ok(r) => {
            errno::set(e);
            r
        }
        Err(e) => {
            crate::cancel_point();
            errno::fail(e)
        }
    }
}

hook! {
    /// `sigtimedwait(2)`.
    #[gate(emulating() && can_yield() && !set.is_null())]
    [signal] fn sigtimedwait(set: *const sigset_t, info: *mut siginfo_t, ts: *const timespec) -> c_int {
        let deadline = match crate::deadline::relative(ts) {
            Ok(d) => d,
            Err(e) => return errno::fail(e),
        };
        timed_wait(set, info, deadline)
    }

    /// `sigwaitinfo(2)`.
    #[gate(emulating() && can_yield() && !set.is_null())]
    [signal] fn sigwaitinfo(set: *const sigset_t, info: *mut siginfo_t) -> c_int {
        timed_wait(set, info, None)
    }

    /// `sigwait(3)`: returns an error number; never fails with EINTR.
    #[gate(emulating() && can_yield() && !set.is_null())]
    [signal] fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
        let saved = errno::get();
        let r = loop {
            let r = timed_wait(set, std::ptr::null_mut(), None);
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

/// In the child of `fork()`: only the calling context is left.
pub(crate) fn after_fork_child() {
    PENDING.store(0, Ordering::SeqCst);
    IDLE.store(0, Ordering::SeqCst);
    WAITERS.with(|w| std::mem::forget(std::mem::take(&mut *w.borrow_mut())));
    INTERRUPTIBLE.with(|v| v.borrow_mut().clear());
    if emulating() && ROOT_MASK.with(|r| r.get().is_some()) {
        let mine = mask_of(&hub::current());
        let cur = hub::current();
        MASKS.with(|m| m.borrow_mut().retain(|&id, _| id == cur.id()));
        if !cur.is_root() {
            // The root is gone in spirit: it must not widen or narrow the mask.
            ROOT_MASK.with(|r| r.set(Some(mine)));
        }
        apply_real_mask();
    }
}
