//! Stack overflow reports.
//!
//! A SIGSEGV handler, running on an alternate signal stack, checks whether
//! the faulting address lies in the guard page of the fiber running on this
//! thread. If so it prints
//! `greenhook: fiber <id> '<name>' overflowed its <size> KiB stack` and
//! aborts. Any other fault goes to the handler that was installed before ours
//! (or the default action), so ordinary crashes look as they always did, and
//! so does a SIGSEGV that was sent rather than caused (`raise`, `kill`):
//! ignored or handled as the program said, or sent again to the default
//! action, since no instruction runs again to fault.
//!
//! Which fiber runs is the scheduler's knowledge, not this crate's: the
//! scheduler names a function that says ([`set_running_hook`]). Without one
//! no fault is recognised as an overflow.
//!
//! Everything in the handler is async-signal-safe: it calls the hook (which
//! must itself be: the hub's reads one thread-local pointer), formats into a
//! stack buffer and calls `write(2)` and `abort(3)`.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::Fiber;

/// The scheduler's [`set_running_hook`] function. Reading a set `OnceLock`
/// is one atomic load, so the signal handler may.
static RUNNING_HOOK: OnceLock<fn() -> *const Fiber> = OnceLock::new();

/// Tells the overflow handler how to find the fiber running on the calling
/// thread: `hook` returns it, or null outside any fiber. The handler calls
/// it from a signal handler, so it must be async-signal-safe (reading a
/// thread-local pointer is).
///
/// The first registration wins and later ones are ignored: there is one
/// scheduler per process, and the hub registers the same function each
/// time it creates a thread's hub.
pub fn set_running_hook(hook: fn() -> *const Fiber) {
    let _ = RUNNING_HOOK.set(hook);
}

/// The fiber running on this thread, per the scheduler's hook.
fn running() -> *const Fiber {
    RUNNING_HOOK.get().map_or(std::ptr::null(), |hook| hook())
}

/// 0 = not installed, 1 = installing, 2 = installed.
static STATE: AtomicU8 = AtomicU8::new(0);
static mut PREVIOUS: MaybeUninit<libc::sigaction> = MaybeUninit::uninit();

const ALTSTACK_SIZE: usize = 64 * 1024;

/// Installs the process-wide handler (once). Cheap after the first call.
/// Each thread's alternate signal stack comes with its stack pool
/// ([`StackPool::take`](crate::StackPool::take)), which is per OS thread.
pub(crate) fn ensure_installed() {
    if STATE.load(Ordering::Acquire) == 2 {
        return;
    }
    if STATE
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: zeroed sigaction is a valid value to fill in; PREVIOUS is
        // written once, here, before STATE becomes 2 and before our handler
        // can run (it is installed by this same call).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let prev = &raw mut PREVIOUS;
            libc::sigaction(libc::SIGSEGV, &sa, (*prev).as_mut_ptr());
        }
        STATE.store(2, Ordering::Release);
    } else {
        while STATE.load(Ordering::Acquire) != 2 {
            std::hint::spin_loop();
        }
    }
}

/// Gives the calling thread an alternate signal stack, unless it has one.
pub(crate) fn install_altstack() {
    // SAFETY: querying the current alternate stack has no preconditions.
    unsafe {
        let mut old: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut old) == 0 && old.ss_flags & libc::SS_DISABLE == 0 {
            return; // the thread already has one (std installs one on its threads)
        }
        let mem = libc::mmap(
            std::ptr::null_mut(),
            ALTSTACK_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if mem == libc::MAP_FAILED {
            return;
        }
        let st = libc::stack_t {
            ss_sp: mem,
            ss_flags: 0,
            ss_size: ALTSTACK_SIZE,
        };
        // The alternate stack is leaked with the thread; it is 64 KiB once
        // per OS thread that runs fibers.
        libc::sigaltstack(&st, std::ptr::null_mut());
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // A SIGSEGV sent by `kill`, `raise`, `sigqueue`… (a code of 0 or
    // below) is no fault: its siginfo holds a sender, not an address.
    let sent = code <= 0;
    let cur = running();
    // SAFETY: the hook returns the fiber running on this thread (or null),
    // alive while it runs; the fault happened while it ran.
    if let Some(f) = unsafe { cur.as_ref() }.filter(|_| !sent) {
        // Anything from the guard page up to a little below it counts: a
        // large frame can skip past a single guard page.
        if addr >= f.guard.0.saturating_sub(64 * 1024) && addr < f.guard.1 {
            // SAFETY: the arguments the kernel gave this handler.
            if !unsafe { previous_takes_overflow(sig, info, ctx) } {
                report(f, "");
            }
            return;
        }
    }
    // Not ours: the signal gets what the action installed before ours
    // says, as it would have without us.
    let prev = previous();
    if prev.sa_sigaction == libc::SIG_IGN && sent {
        // Ignored, as the kernel ignores a sent signal (a fault it does
        // not: it kills, as below).
        return;
    }
    if prev.sa_sigaction == libc::SIG_DFL || prev.sa_sigaction == libc::SIG_IGN {
        // Restore the default and return: a faulting instruction runs
        // again and the process dies of SIGSEGV as it would have.
        // SAFETY: a zeroed sigaction with SIG_DFL is a valid action.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        if sent {
            // Nothing runs again: the signal is sent once more, now to
            // its default action, which ends the process once this
            // handler has returned and unblocked it (or at once, in
            // another thread that takes it).
            resend(sig);
        }
    } else {
        // SAFETY: the arguments the kernel gave this handler.
        unsafe { call(prev, sig, info, ctx) };
    }
}

/// Sends `sig` to this process again, by a system call made inline (the
/// libc symbols may be greenhook's hooks, which a signal handler must not
/// enter).
#[cfg(target_os = "linux")]
fn resend(sig: libc::c_int) {
    if let Some(s) = rustix::process::Signal::from_named_raw(sig) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), s);
    }
}

#[cfg(not(target_os = "linux"))]
fn resend(sig: libc::c_int) {
    // SAFETY: kill(2) is async-signal-safe.
    unsafe { libc::kill(libc::getpid(), sig) };
}

/// What the program set for SIGSEGV, when `kernel`, the action the kernel
/// has, is the overflow handler installed over it: `sigaction` reports
/// that one (the program never installed ours), as greenhook's hook does.
/// None when `kernel` is anything else.
pub fn replaced_action(kernel: &libc::sigaction) -> Option<libc::sigaction> {
    (STATE.load(Ordering::Acquire) == 2 && kernel.sa_sigaction == handler as *const () as usize).then(|| *previous())
}

/// The action installed before ours.
fn previous() -> &'static libc::sigaction {
    let p: *const MaybeUninit<libc::sigaction> = &raw const PREVIOUS;
    // SAFETY: PREVIOUS was filled before the handler was installed, and
    // never changes after.
    unsafe { (*p).assume_init_ref() }
}

/// Calls the handler of `act` (not `SIG_DFL` nor `SIG_IGN`) as the kernel
/// would, by its flags.
///
/// # Safety
/// The arguments of a SIGSEGV handler's call by the kernel; `act` is the
/// program's action for that signal.
unsafe fn call(act: &libc::sigaction, sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let h = act.sa_sigaction;
    // SAFETY: the program installed `h` for this signal, with these flags.
    unsafe {
        if act.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
            f(sig);
        }
    }
}

/// An overflow goes first to the handler installed before ours, if the
/// program made it able to run then (`SA_ONSTACK`), as the kernel would
/// give it the fault natively: a program that catches its own overflow on
/// an alternate stack (and `siglongjmp`s out) goes on as without us. True
/// when that handler took it: it returned with itself still installed, so
/// the faulting instruction runs again, as natively. False when there is
/// none, or it declined by setting the default action back and returning
/// (Rust's std does so for a fault outside the guard it knows of): then
/// the report is ours.
///
/// # Safety
/// The arguments of a SIGSEGV handler's call by the kernel.
unsafe fn previous_takes_overflow(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    let prev = previous();
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN || prev.sa_flags & libc::SA_ONSTACK == 0 {
        return false;
    }
    // SAFETY: per the contract.
    unsafe { call(prev, sig, info, ctx) };
    // SAFETY: a query of the current action into a local.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut now) == 0
            && now.sa_sigaction != libc::SIG_DFL
            && now.sa_sigaction != libc::SIG_IGN
    }
}

/// Prints the overflow report for `f` and aborts. Async-signal-safe.
pub(crate) fn report(f: &Fiber, extra: &str) -> ! {
    let mut buf = Buf { b: [0; 512], n: 0 };
    buf.s("greenhook: fiber ");
    buf.num(f.id);
    buf.s(" '");
    buf.s(f.name().unwrap_or("<unnamed>"));
    buf.s("' overflowed its ");
    buf.num((f.stack_size() / 1024) as u64);
    buf.s(" KiB stack");
    if !extra.is_empty() {
        buf.s(" (");
        buf.s(extra);
        buf.s(")");
    }
    buf.s("; raise it with GREENHOOK_STACK_SIZE or a per-fiber stack size\n");
    raw_write_stderr(&buf.b[..buf.n]);
    // SAFETY: abort(3) is async-signal-safe.
    unsafe { libc::abort() }
}

struct Buf {
    b: [u8; 512],
    n: usize,
}

impl Buf {
    fn s(&mut self, s: &str) {
        for &c in s.as_bytes() {
            if self.n < self.b.len() {
                self.b[self.n] = c;
                self.n += 1;
            }
        }
    }
    fn num(&mut self, mut v: u64) {
        let mut d = [0u8; 20];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        for &c in &d[i..] {
            self.s(std::str::from_utf8(&[c]).unwrap_or("?"));
        }
    }
}

/// Writes to fd 2 with a raw system call: the libc `write` symbol may be
/// greenhook's own hook, which is not async-signal-safe on first use.
#[cfg(target_os = "linux")]
fn raw_write_stderr(b: &[u8]) {
    // rustix issues the system call inline: no libc symbol (`write` and
    // `syscall` may both be greenhook hooks), no libc state.
    let _ = rustix::io::write(rustix::stdio::stderr(), b);
}

#[cfg(not(target_os = "linux"))]
fn raw_write_stderr(b: &[u8]) {
    // SAFETY: write(2) is async-signal-safe; the buffer is valid.
    unsafe {
        libc::write(2, b.as_ptr().cast(), b.len());
    }
}
