//! The kick: greenhook's own signal (`SIGRTMAX-1`), sent to an offload
//! worker to end the system call it makes for a fiber (a file lock, a
//! System V IPC or message queue wait, `tcdrain`: see `crate::blocking`)
//! with `EINTR` when a signal or a cancellation reaches that fiber: the
//! handler then runs in the fiber once the call is over, and the call is
//! made again where the kernel would have restarted it.
//!
//! Its handler is installed without `SA_RESTART` (so the worker's call is
//! not restarted) at the first call that needs it. Workers block every
//! signal, and unblock this one only while they make such a call
//! ([`Job`]); a kick that comes late stays pending and is thrown away
//! before the worker's next such call, or, if it interrupts one that no
//! one asked to end, that call is made again (nothing was done: the kernel
//! would have restarted it).
//!
//! **The program's own signals of that number** reach its handler as any
//! other signal does (the kernel keeps ours, which hands them to the
//! trampoline, as preemption's does for `SIGURG`): `sigaction` records the
//! program's action and reports it back. Without a handler, its default
//! action (the process ends) or `SIG_IGN` is applied. What differs: a
//! system call the signal interrupts outside any hook is not restarted,
//! whatever `SA_RESTART` the program asked for.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering::SeqCst};

use libc::{c_int, siginfo_t};

use super::{deliver, set_to_bits, SigAction, FLAGS, HANDLERS, MASKS, UNBLOCKABLE};

/// The kick's number.
pub(crate) fn signal() -> c_int {
    libc::SIGRTMAX() - 1
}

/// 0: not installed yet; 1: installed; 2: could not be.
static STATE: AtomicU8 = AtomicU8::new(0);

/// The program's disposition of the kick's number when it is not a handler
/// (`SIG_DFL` or `SIG_IGN`): what `sigaction` reports back.
pub(super) static WORD: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

/// Whether our handler is the kernel's for the kick's number.
pub(super) fn installed() -> bool {
    STATE.load(SeqCst) == 1
}

thread_local! {
    /// On a worker: it is making a call that a kick may end.
    static IN_CALL: Cell<bool> = const { Cell::new(false) };
}

/// Installs our handler once (on the hub's thread, outside any signal
/// handler); whether kicks can be sent.
pub(crate) fn ready() -> bool {
    match STATE.load(SeqCst) {
        1 => true,
        2 => false,
        _ => install(),
    }
}

#[cold]
fn install() -> bool {
    let sig = signal();
    let s = sig as usize;
    // SAFETY: zeroed sigactions are valid; ours is filled in below; the
    // real sigaction, not the hook.
    let ok = unsafe {
        let mut sa: SigAction = std::mem::zeroed();
        sa.sa_sigaction = on_kick as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigfillset(&mut sa.sa_mask);
        let mut was: SigAction = std::mem::zeroed();
        let ok = super::sigaction::real(sig, &sa, &mut was) == 0;
        if ok && HANDLERS[s].load(SeqCst) == 0 {
            // What the program had (installed before the hooks were, or
            // SIG_DFL/SIG_IGN through them) stays its action.
            match was.sa_sigaction {
                libc::SIG_DFL | libc::SIG_IGN => WORD.store(was.sa_sigaction, SeqCst),
                h if h != deliver::trampoline as *const () as usize => {
                    MASKS[s].store(set_to_bits(&was.sa_mask) & !UNBLOCKABLE, SeqCst);
                    FLAGS[s].store(was.sa_flags, SeqCst);
                    HANDLERS[s].store(h, SeqCst);
                }
                _ => {}
            }
        }
        ok
    };
    STATE.store(if ok { 1 } else { 2 }, SeqCst);
    ok
}

/// What the kernel calls for the kick's number.
extern "C-unwind" fn on_kick(sig: c_int, info: *mut siginfo_t, uc: *mut libc::c_void) {
    if IN_CALL.try_with(Cell::get).unwrap_or(false) {
        // SAFETY: SA_SIGINFO: the kernel passes a valid siginfo.
        let si = unsafe { &*info };
        // SAFETY: si_pid is meaningful for SI_TKILL.
        if si.si_code == libc::SI_TKILL && unsafe { si.si_pid() } == std::process::id() as libc::pid_t {
            // A kick: returning is all it takes (the call fails with EINTR).
            return;
        }
    }
    program_signal(sig, info, uc);
}

/// The program's own signal of the kick's number: its handler through the
/// trampoline, or its default action or `SIG_IGN`.
fn program_signal(sig: c_int, info: *mut siginfo_t, uc: *mut libc::c_void) {
    if HANDLERS[sig as usize].load(SeqCst) != 0 {
        deliver::trampoline(sig, info, uc);
    } else if WORD.load(SeqCst) == libc::SIG_DFL {
        default_action(sig);
    }
}

/// Applies the kick number's default action (the process ends): the
/// kernel's disposition goes back to `SIG_DFL` first, so that the signal
/// [`deliver::default_action`] sends again meets it rather than us.
fn default_action(sig: c_int) {
    // SAFETY: a zeroed sigaction is SIG_DFL; the real sigaction.
    unsafe {
        let dfl: SigAction = std::mem::zeroed();
        super::sigaction::real(sig, &dfl, std::ptr::null_mut());
    }
    deliver::default_action(sig);
}

/// One call on a worker that the fiber waiting for it may end early: the
/// fiber asks ([`Job::end`]); the worker's call ([`Job::run`]) then fails
/// with `EINTR` (or is not made).
#[derive(Default)]
pub(crate) struct Job {
    /// The worker's thread id while it runs the call, else 0.
    tid: AtomicI32,
    /// The fiber asked for the call to end.
    wanted: AtomicBool,
}

impl Job {
    /// On the worker: makes `call` (the C call, -1 and errno on failure),
    /// with the kick unblocked; `(result, errno)`.
    pub(crate) fn run<R: Copy + PartialEq + From<i8>>(&self, call: impl Fn() -> R) -> (R, c_int) {
        let one = kick_set();
        // Kicks meant for an earlier call go (they are pending: workers
        // block the kick outside these calls).
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid set and timeout; a raw system call (the hooks
        // pass machinery threads through anyway).
        while unsafe {
            libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &one,
                std::ptr::null_mut::<siginfo_t>(),
                &zero,
                8,
            )
        } > 0
        {}
        let _ = IN_CALL.try_with(|c| c.set(true));
        self.tid.store(hub::internal::os_tid(), SeqCst);
        let out = loop {
            if self.wanted.load(SeqCst) {
                break (R::from(-1), libc::EINTR);
            }
            // SAFETY: this thread's own mask, a valid set.
            unsafe { super::pthread_sigmask::real(libc::SIG_UNBLOCK, &one, std::ptr::null_mut()) };
            let r = call();
            let e = crate::errno::get();
            // SAFETY: as above.
            unsafe { super::pthread_sigmask::real(libc::SIG_BLOCK, &one, std::ptr::null_mut()) };
            if r == R::from(-1) && e == libc::EINTR && !self.wanted.load(SeqCst) {
                // A late kick, meant for an earlier call: nothing was
                // done, make it again (the kernel's restart).
                continue;
            }
            break (r, e);
        };
        self.tid.store(0, SeqCst);
        let _ = IN_CALL.try_with(|c| c.set(false));
        out
    }

    /// In the waiting fiber: asks for the call to end.
    pub(crate) fn end(&self) {
        self.wanted.store(true, SeqCst);
    }

    /// In the waiting fiber: if the call is to end and is being made,
    /// kicks its worker (again: one that came before the call began was
    /// thrown away).
    pub(crate) fn kick_if_wanted(&self) {
        if !self.wanted.load(SeqCst) {
            return;
        }
        let tid = self.tid.load(SeqCst);
        if tid != 0 {
            // SAFETY: a signal to one of our own workers, with our handler
            // installed (`ready`).
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signal()) };
        }
    }
}

fn kick_set() -> libc::sigset_t {
    // SAFETY: a zeroed sigset, initialised here.
    let mut s: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        libc::sigemptyset(&mut s);
        libc::sigaddset(&mut s, signal());
    }
    s
}

/// Whether `sig` is the kick's number with our handler installed: its
/// program-side action is kept by [`super::install_beside`].
pub(super) fn is_kick(sig: c_int) -> bool {
    installed() && sig == signal()
}
