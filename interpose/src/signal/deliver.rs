//! Where and when a signal's action runs: the trampoline, the safe points,
//! the choice of a recipient, and the action itself.
//!
//! **The rule.** A handler runs only in a context that does not mask its
//! signal, only while that context runs the program's own code, and a
//! thread-directed signal only in the context it was sent to. The
//! trampoline (what the kernel calls) runs the handler at once when all
//! three hold for the code it interrupted; otherwise it copies the signal
//! into the [`table`](super::table) and returns, and the signal waits for
//! a safe point:
//! - a hook returning to the program (its hook depth back at 0): the
//!   hooks' way out reads one word ([`WORK`]) and only then comes here;
//! - a wait inside a hook that was interrupted for it (lock, join and
//!   `sigsuspend` waits run the handler and go on; fd and child waits go
//!   on or end with `EINTR` as `SA_RESTART` says);
//! - the hub's loop, at every poller turn: it places what arrived (gives
//!   each signal its recipient) and wakes the recipients.
//!
//! "The program's own code" is everything but greenhook's: not inside a
//! hook (the hook depth, per context, see `hub::internal::enter_hook`),
//! not machinery, not the hub's loop. So no handler ever runs in the
//! middle of greenhook's bookkeeping: a hook it calls finds the hub as it
//! would anywhere in the program.
//!
//! A handler run at a safe point is a plain call on the context's own
//! stack, at hook depth 0, with the handler's mask added to the context's
//! virtual mask for its duration and `errno` kept: it may sleep, block on a
//! lock, or `siglongjmp` out, as it could in a thread of its own.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use libc::{c_int, c_void, siginfo_t};

use super::state::{self, Wait, ROOT};
use super::table::{self, Added, Entry, Via, PROCESS, WORK};
use super::{bit, bits_to_set, set_to_bits, valid, FLAGS, HANDLERS, MASKS, UNBLOCKABLE};
use crate::errno;

/// What a signal's action does when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Ignore,
    /// SIG_DFL for a signal whose default is not "ignore".
    Default,
    Handler(Via),
}

/// Signals whose default action is to do nothing.
fn ignored_by_default(sig: c_int) -> bool {
    matches!(sig, libc::SIGCHLD | libc::SIGCONT | libc::SIGURG | libc::SIGWINCH)
}

/// The action `sig` has now: the user's handler behind our trampoline,
/// or the kernel's disposition (SIG_DFL, SIG_IGN, or a fault handler
/// installed unchanged).
pub(super) fn action_of(sig: c_int) -> Action {
    let s = sig as usize;
    let h = HANDLERS[s].load(SeqCst);
    if h != 0 {
        return Action::Handler(Via {
            handler: h,
            flags: FLAGS[s].load(SeqCst),
            mask: MASKS[s].load(SeqCst),
        });
    }
    // SAFETY: a zeroed sigaction is a valid out buffer; query only.
    let mut k: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { super::sigaction::real(sig, std::ptr::null(), &mut k) };
    match k.sa_sigaction {
        libc::SIG_IGN => Action::Ignore,
        libc::SIG_DFL if ignored_by_default(sig) => Action::Ignore,
        libc::SIG_DFL => Action::Default,
        h if h == trampoline as *const () as usize => Action::Ignore,
        // Preemption's handler: the program's SIGURG is SIG_DFL or SIG_IGN.
        _ if super::never_blocked() & bit(sig) != 0 => Action::Ignore,
        // The kick's handler: the program's action is in its word.
        _ if super::kick::is_kick(sig) => match super::kick::WORD.load(SeqCst) {
            libc::SIG_IGN => Action::Ignore,
            _ => Action::Default,
        },
        h => Action::Handler(Via {
            handler: h,
            flags: k.sa_flags,
            mask: set_to_bits(&k.sa_mask) & !UNBLOCKABLE,
        }),
    }
}

/// The mask a handler runs under, added to its context's.
fn handler_mask(sig: c_int, v: &Via) -> u64 {
    let own = if v.flags & libc::SA_NODEFER != 0 { 0 } else { bit(sig) };
    (v.mask | own) & !UNBLOCKABLE
}

thread_local! {
    /// Handlers without `SA_RESTART` run on this thread so far: a blocking
    /// call the kernel restarted under us (see `fdwait`) ends with `EINTR`
    /// when this moved.
    static INTERRUPTING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many handlers without `SA_RESTART` ran on this thread (compare two
/// readings around a blocking call).
pub(crate) fn interruptions() -> u64 {
    INTERRUPTING.try_with(|c| c.get()).unwrap_or(0)
}

/// Calls the handler `v` for `sig` (no bookkeeping: the caller's).
fn call(sig: c_int, v: &Via, info: *mut siginfo_t, uc: *mut c_void) {
    if v.flags & libc::SA_RESTART == 0 {
        let _ = INTERRUPTING.try_with(|c| c.set(c.get() + 1));
    }
    if v.flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this word as an sa_sigaction handler.
        let f: extern "C-unwind" fn(c_int, *mut siginfo_t, *mut c_void) = unsafe { std::mem::transmute(v.handler) };
        f(sig, info, uc);
    } else {
        // SAFETY: the program installed this word as an sa_handler.
        let f: extern "C-unwind" fn(c_int) = unsafe { std::mem::transmute(v.handler) };
        f(sig);
    }
}

// ---------- the trampoline ----------

/// The context a signal from the kernel is directed at, if it is one
/// thread's: `raise`/`tgkill` from this process (the running context
/// raised it), and the signals a system call sends to its own caller
/// (`SIGPIPE`, `SIGXFSZ`).
fn directed_at(sig: c_int, info: &siginfo_t) -> Option<u64> {
    // SAFETY: the kernel writes the whole siginfo; the pid field means
    // something only for the codes tested with it below.
    let ours = unsafe { info.si_pid() } == std::process::id() as libc::pid_t;
    let tkill = info.si_code == libc::SI_TKILL;
    let own_call = matches!(sig, libc::SIGPIPE | libc::SIGXFSZ) && info.si_code == libc::SI_USER;
    (ours && (tkill || own_call)).then(hub::current_id)
}

/// What the kernel calls for every signal whose handler is the program's
/// (installed through `sigaction`). See the module docs.
pub(crate) extern "C-unwind" fn trampoline(sig: c_int, info: *mut siginfo_t, uc: *mut c_void) {
    if !valid(sig) {
        return;
    }
    let e = errno::get();
    let s = sig as usize;
    let v = Via {
        handler: HANDLERS[s].load(SeqCst),
        flags: FLAGS[s].load(SeqCst),
        mask: MASKS[s].load(SeqCst),
    };
    // With SA_RESETHAND the kernel reset the disposition before calling
    // us: this one signal still goes to the handler.
    let via = (v.flags & libc::SA_RESETHAND != 0).then(|| {
        HANDLERS[s].store(0, SeqCst);
        FLAGS[s].store(0, SeqCst);
        v
    });
    if v.handler == 0 {
        return errno::set(e);
    }
    if !(crate::threads_as_fibers() && hub::is_fiber_thread()) {
        // A thread of its own (a library's): the kernel chose it as it
        // would natively.
        call(sig, &v, info, uc);
        return errno::set(e);
    }
    let ours = hub::internal::in_greenhook();
    // From here nested signals are deferred: this is greenhook's code.
    let depth = hub::internal::enter_hook();
    // SAFETY: the kernel passes a valid siginfo (SA_SIGINFO is always set).
    let si = unsafe { &*info };
    let directed = directed_at(sig, si);
    if ours || (directed.is_none() && root_may_take(sig)) || !run_now(sig, &v, info, uc) {
        let target = directed.unwrap_or(PROCESS);
        if table::add(sig, si, target, directed.is_some(), via, true) == Added::Full {
            table::LOST.fetch_add(1, Relaxed);
        }
        if hub::in_loop() {
            // The loop may be about to wait in its poller: make it look.
            hub::internal::wake_loop();
        }
    }
    // SAFETY: ours, in the context we interrupted, left once.
    unsafe { depth.leave() };
    errno::set(e);
}

/// The trampoline's fast way: the running context runs the program's code
/// and accepts `sig`, so the handler runs now, on the signal's frame.
/// Returns false (nothing done) when it does not accept it.
///
/// The handler's mask is added to the context's virtual mask, and the
/// real mask set to what all contexts then block, so that a handler that
/// sleeps or blocks leaves the other contexts able to take signals; at its
/// return both are put back, the real one through the saved context
/// (`uc_sigmask`, which the kernel restores).
fn run_now(sig: c_int, v: &Via, info: *mut siginfo_t, uc: *mut c_void) -> bool {
    /// What the state says about the running context.
    enum Plan {
        /// Masks are not virtual (yet, or any more): the kernel's choice is ours.
        Plain,
        /// It accepts the signal; its mask was this before the handler's.
        Virtual(u64),
        /// It masks the signal (or the state is in use): defer.
        Defer,
    }
    let id = hub::current_id();
    let plan = state::existing(|st| {
        match st.try_ready() {
            None => return Plan::Defer,
            Some(false) => return Plan::Plain,
            Some(true) => {}
        }
        match st.try_mask(id) {
            Some(mask) if mask & bit(sig) == 0 => {
                st.set_mask_of(id, mask | handler_mask(sig, v));
                st.apply_real();
                Plan::Virtual(mask)
            }
            Some(_) if st.real_mask().is_some_and(|r| temporary_mask(sig, v, r)) => Plan::Plain,
            _ => Plan::Defer,
        }
    })
    .unwrap_or(Plan::Plain);
    if let Plan::Defer = plan {
        return false;
    }
    // It interrupted the program anywhere (in `malloc`, say): no
    // time-slice yield while it runs (see `preempt`). A handler run at a
    // safe point (`run_action`) interrupted nothing, and may be.
    crate::hook::program(|| crate::preempt::in_handler(|| call(sig, v, info, uc)));
    if let Plan::Virtual(old) = plan {
        state::with(|st| {
            st.note_handler(id, v.flags & libc::SA_RESTART != 0);
            st.set_mask_of(id, old);
            let now = st.intersection();
            if uc.is_null() {
                st.apply_real();
            } else {
                // SAFETY: the kernel's saved context for this signal.
                bits_to_set(now, unsafe { &mut (*uc.cast::<libc::ucontext_t>()).uc_sigmask });
                st.real_is(now);
            }
        });
        // What no context accepted while the handler masked it may be ours
        // now (held: it runs at our next safe point). Not the reverse on the
        // way in: re-homing may wake a task, which may allocate, and the
        // code this handler interrupted may be the allocator.
        claim(id, handler_mask(sig, v) & !old);
    }
    true
}

/// Whether the program's code was interrupted inside a system call that
/// replaced the thread's real mask for its duration (`ppoll`, `pselect`,
/// `epoll_pwait`, `sigsuspend` called for real): the kernel chose to
/// deliver under the mask the program gave it, and that choice stands.
/// Seen from the handler, the real mask is then not ours (`real`) plus the
/// handler's: the kernel added the handler's mask to the call's. One
/// `pthread_sigmask` query, made only for a signal the running context
/// masks.
fn temporary_mask(sig: c_int, v: &Via, real: u64) -> bool {
    // SAFETY: a zeroed sigset is a valid out buffer.
    let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a query only.
    unsafe { super::pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), &mut now) };
    let handler = handler_mask(sig, v) | UNBLOCKABLE;
    set_to_bits(&now) & !handler != real & !handler
}

// ---------- recipients ----------

/// Whether the kernel gives a process-directed `sig` to the thread group's
/// leader, main, first: it does for what is sent to the process (`kill`,
/// `sigqueue`, `alarm` and POSIX timers, the terminal's signals, an fd
/// owner's `SIGIO`), whenever main accepts it and has none pending, so a
/// `kill(getpid(), …)` from a thread interrupts main's `poll` or
/// `sem_wait` (CPython's Ctrl-C). Not for what it raises for the thread
/// whose CPU time ran out (`SIGPROF`, `SIGVTALRM`, `SIGXCPU`: the running
/// thread) nor `SIGCHLD` (the thread that forked the child).
fn leader_first(sig: c_int) -> bool {
    !matches!(sig, libc::SIGPROF | libc::SIGVTALRM | libc::SIGXCPU | libc::SIGCHLD)
}

/// The trampoline's look before it runs a handler in the running context:
/// a fiber defers a [`leader_first`] signal the root may take (the placing
/// at its next safe point decides: [`recipient`]). From a signal handler:
/// allocates nothing, and defers when the state is in use or has no root
/// entry yet (the placing makes it, with the root's mask).
fn root_may_take(sig: c_int) -> bool {
    if !leader_first(sig) || hub::current_id() == ROOT {
        return false;
    }
    state::existing(|st| st.try_mask(ROOT).is_none_or(|m| m & bit(sig) == 0)).unwrap_or(false)
}

/// Whether the root takes a [`leader_first`] `sig` as the kernel's leader
/// would: it has not begun to exit, accepts `sig` (or waits for it in the
/// `sigwait` family), and is running (`me`) or has no signal due yet.
fn root_wants(st: &state::State, sig: c_int, me: Option<u64>) -> bool {
    let b = bit(sig);
    st.has(ROOT)
        && !crate::thread::root_exiting()
        && (st.mask(ROOT) & b == 0 || matches!(st.wait_of(ROOT), Wait::Set(set) if set & b != 0))
        && (me == Some(ROOT) || !st.due(ROOT))
}

/// The context that should take a process-directed `sig`, the kernel's way
/// as far as N:1 allows: the root if the kernel's leader would take it
/// ([`leader_first`], [`root_wants`]), then a context waiting for it in the `sigwait` family,
/// then one in `pause`/`sigsuspend` that accepts it, then `me` (the
/// context at its safe point), in the hub's loop once priorities differ
/// the runnable fiber that outranks the root most (what runs next: the
/// kernel gives a signal it raises for the running thread, a CPU timer's,
/// to that thread, and the root would run its handler only once every
/// fiber above it waits), the root, any fiber. None: every context blocks
/// it.
fn recipient(st: &state::State, sig: c_int, me: Option<u64>) -> Option<u64> {
    if leader_first(sig) && root_wants(st, sig, me) {
        return Some(ROOT);
    }
    let b = bit(sig);
    let waiter = st.find_waiter(|w, _| match w {
        Wait::Set(set) => set & b != 0,
        _ => false,
    });
    if waiter.is_some() {
        return waiter;
    }
    if st.acceptors(sig) == 0 {
        return None;
    }
    st.find_waiter(|w, mask| w == Wait::Handler && mask & b == 0)
        .or_else(|| me.filter(|&id| st.has(id) && st.mask(id) & b == 0))
        .or_else(|| {
            let ranked = me.is_none() && hub::internal::priorities_differ() && hub::has_hub();
            ranked.then(|| st.best_runnable(b, hub::root().priority())).flatten()
        })
        .or_else(|| (st.mask(ROOT) & b == 0).then_some(ROOT))
        .or_else(|| st.find_fiber(|c| c.mask & b == 0))
}

/// Tells context `id` that something was held for it: if it may act on it
/// now (a signal due, or one its `sigwait` waits for) and is blocked in a
/// wait, the wait is interrupted; its wait loop (or its hook's way out)
/// takes it. The running context is not touched: it is at a safe point.
fn nudge(st: &state::State, id: u64) {
    let wanted = match st.wait_of(id) {
        Wait::Set(set) => table::held(id) & set != 0,
        _ => false,
    };
    if !(st.due(id) || wanted) {
        return;
    }
    // The running context is left alone: it is at a safe point (the root
    // in the hub's loop is not: it is blocked in some call). A context
    // woken from its wait but not yet back in it (its timer fired in the
    // turn this signal arrived in) would miss this, and, in a hook that
    // waits again (a retry loop), keep the signal held until the hook
    // returns: its next wait ends at once instead.
    if let Some(t) = st.task(id) {
        t.interrupt_soon();
    }
}

/// Gives every signal the trampoline deferred its context: a directed one
/// to the context it was sent to (dropped if that ended, as the kernel
/// drops it with its thread), a process-directed one to [`recipient`].
/// `me`: the running context, at its safe point (None in the hub's loop).
/// Allocates nothing: this may run at the way out of a lock hook that an
/// allocator called.
pub(super) fn place(me: Option<u64>) {
    if !table::any_raw() {
        return;
    }
    state::with(|st| {
        st.ensure();
        table::place_raw(
            |sig, target, directed| {
                if directed {
                    st.has(target).then_some(target)
                } else {
                    Some(recipient(st, sig, me).unwrap_or(PROCESS))
                }
            },
            |t| {
                st.refresh(t);
                nudge(st, t);
            },
        );
    });
}

/// Re-homes the process-directed signals held for `from` in `sigs` (it
/// masked them, or it ended): to another recipient, or to the process.
pub(super) fn rehome(from: u64, sigs: u64) {
    let moved = table::retarget(from, sigs, true, Some(PROCESS));
    if moved == 0 {
        return;
    }
    state::with(|st| {
        st.refresh(from);
        for sig in 1..super::NSIG as c_int {
            if moved & bit(sig) == 0 {
                continue;
            }
            if let Some(to) = recipient(st, sig, None).filter(|&to| to != from) {
                table::retarget(PROCESS, bit(sig), true, Some(to));
                st.refresh(to);
                nudge(st, to);
            }
        }
    });
}

/// Changes the mask of context `id` from `from` to `to`, with what follows:
/// the real mask, the process-directed signals it now accepts, and those
/// held for it that it now masks (they go to another context).
pub(super) fn remask(id: u64, from: u64, to: u64) {
    state::with(|st| {
        st.set_mask_of(id, to);
        st.apply_real();
    });
    claim(id, from & !to);
    rehome(id, to & !from);
}

/// Gives `id` the process-directed signals no context accepted until now
/// that its mask lets through (it just unblocked them).
pub(super) fn claim(id: u64, unblocked: u64) {
    if unblocked == 0 {
        return;
    }
    if table::retarget(PROCESS, unblocked, true, Some(id)) != 0 {
        state::with(|st| st.refresh(id));
    }
}

/// Sends `sig` to context `to` alone (a fiber, or the root), with `info`:
/// held for it, and it is nudged. Returns an error number (`EAGAIN` when
/// too many signals are pending).
pub(super) fn send(id: u64, sig: c_int, info: &siginfo_t) -> c_int {
    let known = state::with(|st| {
        st.ensure();
        st.has(id).then(|| st.mask(id))
    });
    let Some(mask) = known else {
        // A fiber made without pthread_create: no state of its own.
        return libc::ESRCH;
    };
    let accepts = mask & bit(sig) == 0;
    match action_of(sig) {
        // Discarded when generated, as the kernel does, unless blocked
        // (the action may change before it is unblocked).
        Action::Ignore if accepts => return 0,
        // The default action acts on the whole process, whoever the target.
        Action::Default if accepts => {
            default_action(sig);
            return 0;
        }
        _ => {}
    }
    match table::add(sig, info, id, true, None, false) {
        Added::Full => return libc::EAGAIN,
        Added::Coalesced => return 0,
        Added::Yes => {}
    }
    state::with(|st| {
        st.refresh(id);
        nudge(st, id);
    });
    0
}

// ---------- running actions ----------

/// What running the due signals did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ran {
    /// A handler ran.
    pub(crate) handler: bool,
    /// A handler without `SA_RESTART` ran: an interrupted call ends with
    /// `EINTR`.
    pub(crate) interrupts: bool,
}

/// Performs the default action of `sig` (the process ends, dumps core or
/// stops): the kernel does it, when the signal reaches this thread with
/// its disposition SIG_DFL and unblocked for a moment.
pub(super) fn default_action(sig: c_int) {
    if ignored_by_default(sig) {
        return;
    }
    // SAFETY: local sets, filled here; plain integer arguments.
    unsafe {
        let mut one: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        super::pthread_sigmask::real(libc::SIG_UNBLOCK, &one, &mut old);
        libc::syscall(libc::SYS_tgkill, libc::getpid(), hub::internal::os_tid(), sig);
        // Still here: it stopped the process and a SIGCONT went on.
        super::pthread_sigmask::real(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Runs the action of `e`, taken for the running context `id`.
fn run_action(id: u64, e: Entry) -> Ran {
    let sig = e.sig;
    let act = match e.via {
        Some(v) => Action::Handler(v),
        None => action_of(sig),
    };
    let v = match act {
        Action::Ignore => return Ran::default(),
        Action::Default => {
            default_action(sig);
            return Ran::default();
        }
        Action::Handler(v) => v,
    };
    if e.via.is_none() && v.flags & libc::SA_RESETHAND != 0 {
        super::reset_to_default(sig);
    }
    let old = state::with(|st| st.mask(id));
    let during = old | handler_mask(sig, &v);
    remask(id, old, during);
    // The context the handler gets, as sigreturn would use it: the mask to
    // go back to (a handler may change it there).
    // SAFETY: a zeroed ucontext_t is valid plain data.
    let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
    bits_to_set(old, &mut uc.uc_sigmask);
    let mut info = e.info;
    let saved = errno::get();
    crate::hook::program(|| call(sig, &v, &mut info, (&raw mut uc).cast()));
    errno::set(saved);
    let back = set_to_bits(&uc.uc_sigmask) & !UNBLOCKABLE;
    state::with(|st| st.note_handler(id, v.flags & libc::SA_RESTART != 0));
    remask(id, during, back);
    Ran {
        handler: true,
        interrupts: v.flags & libc::SA_RESTART == 0,
    }
}

/// Runs, in the running context, every signal due for it.
fn run_due() -> Ran {
    let id = hub::current_id();
    let mut ran = Ran::default();
    while let Some(mask) = state::with(|st| st.has(id).then(|| st.mask(id))) {
        let Some(e) = table::take(id, !mask) else { break };
        state::with(|st| st.refresh(id));
        let r = run_action(id, e);
        ran.handler |= r.handler;
        ran.interrupts |= r.interrupts;
    }
    ran
}

/// The safe point of the running context: places what the trampoline
/// deferred, then runs the signals due here. Cheap when there is nothing
/// to do (one load).
#[inline]
pub(crate) fn run_pending() -> Ran {
    if !work_pending() {
        return Ran::default();
    }
    run_pending_slow()
}

/// Whether [`run_pending`] has anything to look at (one load).
#[inline(always)]
pub(crate) fn work_pending() -> bool {
    WORK.load(Relaxed) != 0
}

#[cold]
#[inline(never)]
fn run_pending_slow() -> Ran {
    if !crate::gate::emulating() {
        return Ran::default();
    }
    let e = errno::get();
    let depth = hub::internal::enter_hook();
    place(Some(hub::current_id()));
    let ran = run_due();
    // What was due here has run: a wait need not end for it any more.
    hub::current().clear_interrupt();
    // SAFETY: ours, in this context (the handlers ran in it), left once.
    unsafe { depth.leave() };
    errno::set(e);
    ran
}

/// The hub's turn: places what arrived and wakes the recipients.
pub(super) fn on_poll() {
    // One load on every poller turn of every threaded program.
    if WORK.load(Relaxed) != 0 && table::any_raw() {
        // Greenhook's code, even where the loop runs outside any hook.
        let depth = hub::internal::enter_hook();
        place(None);
        // SAFETY: ours, in the loop's context, left once.
        unsafe { depth.leave() };
    }
}
