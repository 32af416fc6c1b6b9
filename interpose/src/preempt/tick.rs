//! Preempting code that calls nothing (x86-64 Linux, under the preload).
//!
//! A thread that computes without calling any hooked function never reaches
//! a hook's return, so the time slice of the [parent module](super) cannot
//! end there, and every other fiber of its OS thread waits for good (LTP's
//! `pthread_equal/2-1` spins on an inlined `pthread_equal` until `main`,
//! sleeping, sets a flag). The kernel preempts such a thread; so do we,
//! where that is as safe as at a hook's return.
//!
//! **When.** Each OS thread that runs fibers gets a POSIX timer on its own
//! CPU-time clock (`CLOCK_THREAD_CPUTIME_ID`, `SIGEV_THREAD_ID`), firing
//! `SIGURG` every tick of CPU time: 1 ms, or the slice (`GREENHOOK_SLICE_MS`)
//! if shorter, a slice being a whole number of ticks. The kernel checks CPU
//! timers at its scheduler tick (every 4 ms with `HZ=250`), and merges the
//! expiries in between into one signal (its overrun, which counts). A
//! thread that waits uses no CPU, so an idle process gets no signal at all.
//! The kernel fires CPU timers on the way back to user mode (task work,
//! Linux 5.10+ on x86-64), after a system call has finished: the signal
//! never cuts a call short. The handler looks at the hub's switch count:
//! when it has not moved for a slice's worth of ticks, one context ran a
//! whole slice. Before that, a context that the tick finds in a spin wait
//! (a short loop that only reads memory, [`super::spin`]) is preempted at
//! once: it waits for another fiber, which cannot run until it yields.
//!
//! **Where.** Only where the interrupted code is the program's own and no
//! libc lock can be held on its behalf:
//! 1. In the handler: not in greenhook's code (hook depth, machinery, the
//!    hub's loop), not in a program signal handler, only in a context with
//!    thread-locals of its own (with shared TLS, a per-thread structure of
//!    the program's without a lock, like a statically linked allocator's
//!    cache, would be met half updated by the next fiber), and the interrupted
//!    instruction is not in libc, ld.so, greenhook or the library of a
//!    `malloc` that is not glibc's (libc's internal locks are taken
//!    inline: a fiber switched away inside `malloc` would leave the arena
//!    locked, and the next fiber to call `malloc` would block the whole OS
//!    thread in the kernel; another allocator's locks go through the
//!    hooks, but greenhook's own bookkeeping allocates where it cannot
//!    wait for a fiber). With such a `malloc` linked into the program,
//!    whose code cannot be told from the program's, nothing is preempted.
//!    Then the handler makes the interrupted code call [`__greenhook_preempt_trampoline`] at once, the
//!    way Go's asynchronous preemption does: after `sigreturn` the thread
//!    runs the trampoline below the interrupted frame's red zone.
//! 2. In the trampoline, which saved every register and the whole
//!    extended state (`xsave`), the stack is unwound (libgcc's unwinder,
//!    using the frames' own CFI): every frame must be the program's until
//!    the first frame of one of those objects, and from there on only
//!    theirs, down to the context's start (a fiber's entry, or the main
//!    thread's `_start`: another thread's root is not preempted).
//!    A program frame called back from libc (a `qsort` comparator, a
//!    `dl_iterate_phdr` callback, a stdio cookie function, an `atexit`
//!    handler, a handler on a kernel signal frame) fails that, and so does
//!    a frame the unwinder cannot read (no CFI): no switch then.
//! 3. Then the same yield as a slice's end at a hook's return, with
//!    `errno` kept, and back: the trampoline restores everything and
//!    returns to the interrupted instruction.
//!
//! A program's own `SIGURG` still reaches its handler (through the signal
//! module's trampoline); the program's `sigaction` for it is recorded but
//! the kernel keeps ours, and the real signal mask never blocks it.
//! `GREENHOOK_PREEMPT=0` turns all of this off.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use libc::{c_int, c_void, siginfo_t};

/// The signal: ignored by default, so a program that resets every
/// disposition (before `exec`, say) is not killed by a stray tick.
pub(crate) const SIGNAL: c_int = libc::SIGURG;
/// The timer's `sigev_value`: tells our ticks from a program's `SIGURG`.
const COOKIE: usize = 0x6772_6565_6e68_6f6f;
/// Stack a fiber must have left below the interrupted frame for the
/// trampoline, its `xsave` area, the unwinder and the switch.
const ROOM: usize = 16 * 1024;

static ENABLED: AtomicBool = AtomicBool::new(false);
/// Whether fibers get thread-locals of their own (so the root's are its own).
static OWN_TLS: AtomicBool = AtomicBool::new(false);
/// Bytes `xsave` writes for the features the OS enabled (CPUID 0xD),
/// rounded up for the alignment: read by the trampoline.
static XSAVE_AREA: AtomicUsize = AtomicUsize::new(0);
/// Preemptions so far (for the stats table and tests).
pub(crate) static PREEMPTIONS: AtomicU64 = AtomicU64::new(0);
/// Of which at a spin wait, before the slice's end (see `super::spin`).
pub(crate) static SPIN_PREEMPTIONS: AtomicU64 = AtomicU64::new(0);
/// The tick's period is at most this, so that a spin wait ends soon
/// (within a tick's CPU time); a slice is a whole number of ticks.
const TICK_AT_MOST_NS: u64 = 1_000_000;
/// Ticks in a slice (see [`ticks`]).
static TICKS_PER_SLICE: AtomicU32 = AtomicU32::new(1);

/// The ticks a slice of `slice_ns` is cut into, and the tick's period:
/// as many as make a tick at most [`TICK_AT_MOST_NS`] (one tick for a
/// slice as short or shorter).
fn ticks(slice_ns: u64) -> (u32, u64) {
    let n = (slice_ns / TICK_AT_MOST_NS).clamp(1, u64::from(u32::MAX));
    (n as u32, slice_ns / n)
}

/// Per OS thread (shared by its fibers).
struct Thread {
    /// The kernel's id of this thread's timer.
    timer: Cell<Option<c_int>>,
    /// The hub's switch count at the last tick.
    last: Cell<u64>,
    /// Ticks in a row at which it had not moved.
    quiet: Cell<u32>,
    /// A redirect for a spin wait found no safe switch: none again for a
    /// spin wait until the switch count moves (each try walks the stack).
    hold: Cell<bool>,
    /// Whether the redirect under way is for a spin wait.
    spin: Cell<bool>,
    /// Where the interrupted code resumes, from the handler's redirect
    /// until the trampoline takes it (0: no redirect under way; while one
    /// is, no other is made on this thread).
    resume: Cell<usize>,
    /// The interrupted `%rsp` of the redirect under way.
    resume_sp: Cell<usize>,
    /// The interrupted `%r11` of the redirect under way: the redirect
    /// hands the trampoline the interrupted `%rip` in that register.
    resume_r11: Cell<usize>,
}

static THREAD: hub::PerThread<Thread> = hub::PerThread::new(|| Thread {
    timer: Cell::new(None),
    last: Cell::new(u64::MAX),
    quiet: Cell::new(0),
    hold: Cell::new(false),
    spin: Cell::new(false),
    resume: Cell::new(0),
    resume_sp: Cell::new(0),
    resume_r11: Cell::new(0),
});

/// Whether preemption by signal is on: read once at load.
pub(crate) fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Sets it up at load time (see [`super::init`]): only under the preload
/// (in a Rust program greenhook's code is the program's), with `xsave`,
/// with a slice, and unless `GREENHOOK_PREEMPT=0`.
pub(crate) fn init(slice_ns: u64) {
    let off = std::env::var("GREENHOOK_PREEMPT").is_ok_and(|v| matches!(v.trim(), "0" | "off" | "no"));
    if off || slice_ns == 0 || !crate::is_preloaded() || !crate::threads_as_fibers() {
        return;
    }
    let Some(area) = xsave_area() else { return };
    XSAVE_AREA.store(area, Relaxed);
    if !frames::init() {
        return;
    }
    TICKS_PER_SLICE.store(ticks(slice_ns).0, Relaxed);
    // SAFETY: a zeroed sigaction filled in with a valid handler.
    let sa = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigfillset(&mut sa.sa_mask);
        sa
    };
    // Installed by libc's sigaction first, only to learn the return from a
    // handler that it gives every action (`__restore_rt`, not exported;
    // the kernel reports it back), which `frames::scan` looks for; then
    // with greenhook's own return, so that the frames of the ticks, every
    // millisecond of CPU time, do not leave that word on the stacks (see
    // `crate::signal::restorer`).
    // SAFETY: a valid action and out buffer; the real sigaction, not our hook.
    let libc_restorer = unsafe {
        let mut back: libc::sigaction = std::mem::zeroed();
        let r = crate::signal::sigaction::real(SIGNAL, &sa, std::ptr::null_mut());
        if r != 0 || crate::signal::sigaction::real(SIGNAL, std::ptr::null(), &mut back) != 0 {
            return;
        }
        back.sa_restorer.map_or(0, |f| f as usize)
    };
    // SAFETY: `on_signal` handles SIGNAL with these flags.
    if unsafe { crate::signal::restorer::install(SIGNAL, &sa, std::ptr::null_mut()) } == 0 {
        ENABLED.store(true, Relaxed);
        frames::init_scan(libc_restorer);
    }
}

/// `xsave`'s area size, if the CPU and OS have it.
fn xsave_area() -> Option<usize> {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // CPUID leaf 1 exists on every x86-64 CPU.
    let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
    if !osxsave {
        return None;
    }
    // Leaf 0xD exists when OSXSAVE is set.
    let size = __cpuid_count(0xD, 0).ebx as usize;
    (size >= 576).then(|| size.next_multiple_of(64))
}

/// Gives the calling OS thread its timer, once (called as it makes a
/// fiber: a thread with one context has no one to switch to).
pub(crate) fn arm() {
    if !enabled() {
        return;
    }
    THREAD.with(|t| {
        if t.timer.get().is_none() {
            // Before the first tick can look for a spin wait: a process
            // that never makes a fiber never builds the decoder's tables
            // (~130 KiB of heap).
            super::spin::warm();
            OWN_TLS.store(fiber::tls::enabled(), Relaxed);
            t.timer.set(start_timer());
            t.last.set(u64::MAX);
            t.quiet.set(0);
        }
    });
}

/// In the child of `fork()`: timers are not inherited; the next fiber
/// made arms a new one.
pub(crate) fn after_fork_child() {
    if enabled() {
        let _ = THREAD.with_existing(|t| {
            t.timer.set(None);
            t.resume.set(0);
        });
    }
}

fn start_timer() -> Option<c_int> {
    // SAFETY: a zeroed sigevent is valid; the fields are set below.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = SIGNAL;
    sev.sigev_value = libc::sigval {
        sival_ptr: COOKIE as *mut c_void,
    };
    sev.sigev_notify_thread_id = hub::internal::os_tid();
    let mut id: c_int = 0;
    // Raw system calls: the kernel's own timer id, and no hook of ours
    // (greenhook emulates per-fiber CPU clocks) in between.
    // SAFETY: valid pointers to a sigevent and an int.
    let r = unsafe { libc::syscall(libc::SYS_timer_create, libc::CLOCK_THREAD_CPUTIME_ID, &sev, &mut id) };
    if r != 0 {
        return None;
    }
    let ns = ticks(super::slice_ns()).1;
    let period = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: period,
        it_value: period,
    };
    // SAFETY: our timer id and a valid itimerspec.
    let r = unsafe { libc::syscall(libc::SYS_timer_settime, id, 0, &spec, std::ptr::null_mut::<c_void>()) };
    if r != 0 {
        // SAFETY: our timer id.
        unsafe { libc::syscall(libc::SYS_timer_delete, id) };
        return None;
    }
    // Our signal is never blocked in the real mask (see the signal module).
    // SAFETY: a valid set, the real pthread_sigmask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, SIGNAL);
        crate::signal::pthread_sigmask::real(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    Some(id)
}

/// What the kernel calls for `SIGURG` while preemption is on.
extern "C-unwind" fn on_signal(sig: c_int, info: *mut siginfo_t, uc: *mut c_void) {
    // SAFETY: SA_SIGINFO: the kernel passes a valid siginfo.
    let si = unsafe { &*info };
    // SAFETY: si_value is meaningful for SI_TIMER, the only code tested with it.
    let tick = si.si_code == libc::SI_TIMER && unsafe { si.si_value() }.sival_ptr as usize == COOKIE;
    if !tick {
        crate::signal::program_preempt_signal(sig, info, uc);
        return;
    }
    // Expiries the kernel merged into this one: CPU timers fire at the
    // scheduler's tick (every 4 ms with HZ=250), so a shorter period
    // arrives as fewer signals that each stand for more ticks.
    // SAFETY: a timer's siginfo, as tested above.
    let overrun = unsafe { si.si_overrun() }.max(0) as u32;
    let e = crate::errno::get();
    // SAFETY: the kernel's ucontext for this signal.
    unsafe { on_tick(uc.cast(), 1 + overrun) };
    crate::errno::set(e);
}

/// A tick: redirects the interrupted code to the trampoline when the same
/// context ran the whole slice, or is in a spin wait, and may be switched
/// here (see the module docs, step 1).
///
/// `expiries`: the timer's expiries this signal stands for (1 and its overrun).
///
/// # Safety
/// `uc` is the kernel's ucontext of the signal being handled.
unsafe fn on_tick(uc: *mut libc::ucontext_t, expiries: u32) {
    // (whether a slice has passed without a switch, whether a spin wait
    // may be looked for), when no redirect is under way.
    let state = THREAD.with_existing(|t| {
        let now = hub::switch_count();
        if now != t.last.get() {
            t.last.set(now);
            t.quiet.set(0);
            t.hold.set(false);
        } else {
            t.quiet.set(t.quiet.get().saturating_add(expiries));
        }
        let slice = t.quiet.get() >= TICKS_PER_SLICE.load(Relaxed);
        (t.resume.get() == 0).then_some((slice, !t.hold.get()))
    });
    let Some(Some((slice, spin))) = state else { return };
    if !(slice || spin) || hub::internal::in_greenhook() || !super::may_switch_here() {
        return;
    }
    // SAFETY: the caller's contract.
    let g = unsafe { &mut (*uc).uc_mcontext.gregs };
    let (rip, rsp) = (g[libc::REG_RIP as usize] as usize, g[libc::REG_RSP as usize] as usize);
    if frames::foreign(rip) {
        return;
    }
    // A context whose thread-locals another shares (shared TLS, or the root
    // while fibers run on its TLS) may be inside a per-thread structure of
    // the program's that has no lock (a statically linked allocator's
    // cache): the other would find it half updated.
    let (lo, own_tls) = hub::with_current_fiber(|f| match f {
        Some(f) => (f.stack_bounds().0, f.has_own_tls()),
        None => (0, OWN_TLS.load(Relaxed)),
    });
    if !own_tls || (lo != 0 && rsp.saturating_sub(lo) < ROOM) {
        return;
    }
    if !slice && !super::spin::waits(rip) {
        return;
    }
    let r11 = g[libc::REG_R11 as usize] as usize;
    let _ = THREAD.with_existing(|t| {
        t.resume.set(rip);
        t.resume_sp.set(rsp);
        t.resume_r11.set(r11);
        t.spin.set(!slice);
    });
    // Below the red zone the interrupted function may be using; the
    // interrupted `%rip` in `%r11`, where the trampoline's unwind tables
    // find it until its first instruction has pushed it (a signal that
    // arrives there, whose handler walks the stack, must find the way
    // into the interrupted frames: haproxy's watchdog does).
    g[libc::REG_RSP as usize] = (rsp - 128) as i64;
    g[libc::REG_R11 as usize] = rip as i64;
    g[libc::REG_RIP as usize] = __greenhook_preempt_trampoline as *const () as usize as i64;
}

extern "C" {
    /// See the `global_asm!` below.
    fn __greenhook_preempt_trampoline();
}

/// What the trampoline calls, its registers saved: puts the interrupted
/// `%r11` back in its save slot (the redirect lent the register to the
/// interrupted `%rip`, which the return slot now holds), then switches if
/// the stack allows it (module docs, steps 2-3).
///
/// `C-unwind`: a cancellation at the switch (an asynchronous one, or a
/// handler that calls `pthread_exit`) unwinds through the trampoline into
/// the interrupted frames, whose cleanups run.
///
/// # Safety
/// Called only by the trampoline, with its return slot (the saved `%r11`
/// is 12 words below it: see the trampoline's pushes).
unsafe extern "C-unwind" fn preempted(slot: *mut usize) {
    /// A Rust panic must not cross into the program's frames.
    struct NoPanic;
    impl Drop for NoPanic {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let _g = hub::internal::Guard::new();
                eprintln!("greenhook: panic inside the preemption trampoline; aborting");
                std::process::abort();
            }
        }
    }
    let _np = NoPanic;
    let (rip, sp, r11) = THREAD
        .with_existing(|t| (t.resume.replace(0), t.resume_sp.get(), t.resume_r11.get()))
        .unwrap_or((0, 0, 0));
    // SAFETY: the trampoline's return slot, on its own frame.
    if rip == 0 || unsafe { *slot } != rip {
        let _g = hub::internal::Guard::new();
        eprintln!("greenhook: preemption trampoline without its return address; aborting");
        std::process::abort();
    }
    // SAFETY: the trampoline's save slot of `%r11`, on its own frame.
    unsafe { *slot.sub(12) = r11 };
    let e = crate::errno::get();
    let spin = THREAD.with_existing(|t| t.spin.get()).unwrap_or(false);
    if frames::switch_is_safe(sp) {
        PREEMPTIONS.fetch_add(1, Relaxed);
        if spin {
            SPIN_PREEMPTIONS.fetch_add(1, Relaxed);
        }
        super::switch_at_return(hub::yield_to_hub);
    } else {
        // Not here: a spin wait is not looked for again until a switch,
        // a slice's end is tried again a slice later.
        let _ = THREAD.with_existing(|t| {
            if spin {
                t.hold.set(true);
            } else {
                t.quiet.set(0);
            }
        });
    }
    crate::errno::set(e);
}

// The trampoline (AT&T syntax). On entry, from the handler's redirect:
// %rsp is the interrupted %rsp less the 128-byte red zone; the interrupted
// %rip is in %r11 (the interrupted %r11 in `THREAD.resume_r11`). It pushes
// the %rip as its return address, saves the flags and the 15 general
// registers, then the extended state with `xsave` (every feature the OS
// enabled: x87, SSE, AVX...) on a 64-byte aligned area, calls `preempted`
// with the address of its return slot (which puts the interrupted %r11 in
// its save slot), restores everything and returns with `ret $128`, which
// also gives back the red zone. Its CFI describes the interrupted frame's
// registers where they are at each instruction (the %rip in %r11 at the
// first), and marks it a signal frame (the interrupted %rip is not a
// return address), so an unwinder walks from `preempted`, or from a
// handler of a signal that came anywhere in the trampoline, into the
// program's frames. Before, the return slot was filled by `preempted`: a
// signal whose handler walked the stack (haproxy's watchdog, with
// `backtrace`) in the ~20 instructions before read a stale word there as
// the return address and crashed.
std::arch::global_asm!(
    ".pushsection .text.greenhook_preempt,\"ax\",@progbits",
    ".p2align 4",
    ".globl __greenhook_preempt_trampoline",
    ".hidden __greenhook_preempt_trampoline",
    ".type __greenhook_preempt_trampoline,@function",
    "__greenhook_preempt_trampoline:",
    ".cfi_startproc",
    ".cfi_signal_frame",
    ".cfi_def_cfa %rsp, 128",
    ".cfi_register %rip, %r11",
    // A push, which leaves the flags as the interrupted code's.
    "pushq %r11",
    ".cfi_def_cfa_offset 136",
    ".cfi_offset %rip, -136",
    "pushfq",
    ".cfi_adjust_cfa_offset 8",
    "pushq %rax",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rax, -152",
    "pushq %rbx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rbx, -160",
    "pushq %rcx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rcx, -168",
    "pushq %rdx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rdx, -176",
    "pushq %rsi",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rsi, -184",
    "pushq %rdi",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rdi, -192",
    "pushq %rbp",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rbp, -200",
    "pushq %r8",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r8, -208",
    "pushq %r9",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r9, -216",
    "pushq %r10",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r10, -224",
    "pushq %r11",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r11, -232",
    "pushq %r12",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r12, -240",
    "pushq %r13",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r13, -248",
    "pushq %r14",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r14, -256",
    "pushq %r15",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %r15, -264",
    "movq %rsp, %rbx",
    ".cfi_def_cfa_register %rbx",
    "subq {area}(%rip), %rsp",
    "andq $-64, %rsp",
    // The xsave header (bytes 512-575) must be zero but for what xsave writes.
    "xorl %eax, %eax",
    "movq %rax, 512(%rsp)",
    "movq %rax, 520(%rsp)",
    "movq %rax, 528(%rsp)",
    "movq %rax, 536(%rsp)",
    "movq %rax, 544(%rsp)",
    "movq %rax, 552(%rsp)",
    "movq %rax, 560(%rsp)",
    "movq %rax, 568(%rsp)",
    "movl $-1, %eax",
    "movl $-1, %edx",
    "xsave64 (%rsp)",
    "cld",
    "leaq 128(%rbx), %rdi",
    "call {preempted}",
    "movl $-1, %eax",
    "movl $-1, %edx",
    "xrstor64 (%rsp)",
    "movq %rbx, %rsp",
    ".cfi_def_cfa_register %rsp",
    "popq %r15",
    ".cfi_adjust_cfa_offset -8",
    "popq %r14",
    ".cfi_adjust_cfa_offset -8",
    "popq %r13",
    ".cfi_adjust_cfa_offset -8",
    "popq %r12",
    ".cfi_adjust_cfa_offset -8",
    "popq %r11",
    ".cfi_adjust_cfa_offset -8",
    "popq %r10",
    ".cfi_adjust_cfa_offset -8",
    "popq %r9",
    ".cfi_adjust_cfa_offset -8",
    "popq %r8",
    ".cfi_adjust_cfa_offset -8",
    "popq %rbp",
    ".cfi_adjust_cfa_offset -8",
    "popq %rdi",
    ".cfi_adjust_cfa_offset -8",
    "popq %rsi",
    ".cfi_adjust_cfa_offset -8",
    "popq %rdx",
    ".cfi_adjust_cfa_offset -8",
    "popq %rcx",
    ".cfi_adjust_cfa_offset -8",
    "popq %rbx",
    ".cfi_adjust_cfa_offset -8",
    "popq %rax",
    ".cfi_adjust_cfa_offset -8",
    "popfq",
    ".cfi_adjust_cfa_offset -8",
    "ret $128",
    ".cfi_endproc",
    ".globl __greenhook_preempt_trampoline_end",
    ".hidden __greenhook_preempt_trampoline_end",
    "__greenhook_preempt_trampoline_end:",
    ".size __greenhook_preempt_trampoline, . - __greenhook_preempt_trampoline",
    ".popsection",
    area = sym XSAVE_AREA,
    preempted = sym preempted,
    options(att_syntax)
);

thread_local! {
    /// In a fiber with thread-locals of its own: the address of the return
    /// address of its start routine's call (see `call_start`); its program
    /// frames lie below. 0 elsewhere. Per fiber, because a Rust
    /// thread-local is in the fiber's own block (preemption by signal needs
    /// one), and with no destructor it can be read at any time.
    static PROGRAM_BASE: Cell<usize> = const { Cell::new(0) };
    /// How many calls of the program's code from greenhook's
    /// (`hook::program`) this context is inside: 1 in a fiber's start
    /// routine, more in a handler, a destructor or a `pthread_once`
    /// routine it runs.
    static NESTED: Cell<u32> = const { Cell::new(0) };
}

/// A call of the program's code from greenhook's, counted while it lasts
/// (see `NESTED`).
pub(super) struct Nested(());

impl Nested {
    #[inline]
    pub(super) fn enter() -> Nested {
        NESTED.with(|n| n.set(n.get() + 1));
        Nested(())
    }
}

impl Drop for Nested {
    #[inline]
    fn drop(&mut self) {
        NESTED.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

extern "C" {
    /// See the `global_asm!` below.
    fn __greenhook_call_start(
        f: extern "C" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void,
        base: *mut usize,
    ) -> *mut c_void;
}

/// Calls a fiber's start routine `f(arg)`, recording in `PROGRAM_BASE`
/// where its frames begin.
pub(super) fn call_start(f: extern "C" fn(*mut c_void) -> *mut c_void, arg: *mut c_void) -> *mut c_void {
    let base = PROGRAM_BASE.with(|b| b.as_ptr());
    // SAFETY: `base` is this context's thread-local, alive for its whole
    // life; the stub calls `f(arg)` and returns its value.
    unsafe { __greenhook_call_start(f, arg, base) }
}

extern "C" {
    fn __greenhook_call_start_end();
}

/// Whether `pc` is inside the stub: a frame an unwinder finds below a
/// start routine's (the last: see the stub's CFI).
pub(super) fn is_start_stub(pc: usize) -> bool {
    (__greenhook_call_start as *const () as usize..__greenhook_call_start_end as *const () as usize).contains(&pc)
}

// `__greenhook_call_start(f, arg, base)`: stores its own `%rsp` (the address
// of its return address) at `base`, then calls `f(arg)` and returns its
// value. Its CFI leaves `%rip` undefined, as glibc's `clone` does for a
// thread's first frame: an unwinder going up from `f` ends here, as it
// ends at a native thread's start. So a C++ exception nobody catches
// reaches `std::terminate` (a search past it would go on into greenhook's
// frames and whoever resumed the fiber), `backtrace` lists the thread's
// frames only, and a fiber's exit unwinds its program frames and no more
// (`thread::exit`).
std::arch::global_asm!(
    ".pushsection .text.greenhook_call_start,\"ax\",@progbits",
    ".p2align 4",
    ".globl __greenhook_call_start",
    ".hidden __greenhook_call_start",
    ".type __greenhook_call_start,@function",
    "__greenhook_call_start:",
    ".cfi_startproc",
    ".cfi_undefined %rip",
    "mov %rsp, (%rdx)",
    "sub $8, %rsp",
    ".cfi_adjust_cfa_offset 8",
    "mov %rdi, %rax",
    "mov %rsi, %rdi",
    "call *%rax",
    "add $8, %rsp",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_endproc",
    ".globl __greenhook_call_start_end",
    ".hidden __greenhook_call_start_end",
    "__greenhook_call_start_end:",
    ".size __greenhook_call_start, .-__greenhook_call_start",
    ".popsection",
    options(att_syntax)
);

/// Which code is whose, and the unwinding check.
mod frames {
    use std::sync::OnceLock;

    use libc::{c_int, c_void};

    /// Executable segments of libc, ld.so, greenhook and another
    /// allocator's library: code that may hold a libc lock taken inline or
    /// an allocator's lock, or is greenhook's own.
    static FOREIGN: OnceLock<Vec<(usize, usize)>> = OnceLock::new();
    /// `_start`, the bottom frame of the main thread's stack.
    static START: OnceLock<usize> = OnceLock::new();

    extern "C" {
        fn __greenhook_preempt_trampoline_end();
    }

    fn trampoline() -> (usize, usize) {
        (
            super::__greenhook_preempt_trampoline as *const () as usize,
            __greenhook_preempt_trampoline_end as *const () as usize,
        )
    }

    /// Finds those objects' executable segments; false if one is missing,
    /// or `malloc` is the program's own (then no preemption).
    pub(super) fn init() -> bool {
        let probe = |name: &std::ffi::CStr| {
            // SAFETY: RTLD_DEFAULT searches every object.
            unsafe { fiber::tls::dlsym_quietly(libc::RTLD_DEFAULT, name) as usize }
        };
        let libc_fn = probe(c"gnu_get_libc_version");
        let ld_fn = probe(c"_dl_get_tls_static_info");
        let ours = trampoline().0;
        if libc_fn == 0 || ld_fn == 0 {
            return false;
        }
        // Nor is a `malloc` that is not glibc's (see `super::allocator`);
        // with one linked into the program, nothing is.
        let Some(alloc) = super::super::allocator::code() else {
            return false;
        };
        let (mut found, hits) = super::super::code::executable(&[libc_fn, ld_fn, ours]);
        if hits != 3 {
            return false;
        }
        found.extend_from_slice(alloc);
        let _ = FOREIGN.set(found);
        // SAFETY: getauxval has no preconditions.
        let _ = START.set(unsafe { libc::getauxval(libc::AT_ENTRY) } as usize);
        true
    }

    /// Whether `pc` is in libc, ld.so, greenhook or another allocator's library.
    pub(super) fn foreign(pc: usize) -> bool {
        FOREIGN
            .get()
            .is_none_or(|v| v.iter().any(|&(lo, hi)| (lo..hi).contains(&pc)))
    }

    fn is_start(pc: usize) -> bool {
        START.get().is_some_and(|&s| s != 0 && (s..s + 64).contains(&pc))
    }

    use crate::unwind::*;

    #[derive(PartialEq)]
    enum Seen {
        /// Our own frames, up to the trampoline.
        Ours,
        /// The program's frames, from the interrupted one.
        Program,
        /// libc, ld.so, greenhook or the allocator below them: the context's bottom.
        Bottom,
    }

    struct Walk {
        seen: Seen,
        /// The last frame was a valid bottom (libc/ld.so/greenhook, or `_start`).
        at_bottom: bool,
        verdict: Option<bool>,
        /// The root context: its stack's bounds are not known.
        root: bool,
        stack: (usize, usize),
        frames: u32,
    }

    extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the Walk of `switch_is_safe`, alive during the walk.
        let w = unsafe { &mut *(arg as *mut Walk) };
        // SAFETY: the unwinder's context for this frame.
        let Some(pc) = (unsafe { frame_pc(ctx) }) else {
            // Past the outermost frame (`_start` leaves %rip undefined).
            w.verdict = Some(w.at_bottom);
            return URC_NORMAL_STOP;
        };
        w.frames += 1;
        if w.frames > 1024 {
            w.verdict = Some(false);
            return URC_NORMAL_STOP;
        }
        if w.seen == Seen::Ours {
            let (lo, hi) = trampoline();
            if (lo..hi).contains(&pc) {
                w.seen = Seen::Program;
            }
            return URC_NO_REASON;
        }
        // SAFETY: as above.
        let cfa = unsafe { _Unwind_GetCFA(ctx) };
        if !(w.stack.0..=w.stack.1).contains(&cfa) {
            // The frames beyond are whoever resumed this fiber.
            w.verdict = Some(w.at_bottom);
            return URC_NORMAL_STOP;
        }
        if foreign(pc) {
            w.seen = Seen::Bottom;
            // A fiber's stack ends in greenhook; the root's must end at
            // `_start` (not, say, at the `__start_context` of a
            // `makecontext` stack of the program's).
            w.at_bottom = !w.root;
        } else if w.seen == Seen::Bottom && !is_start(pc) {
            // The program called back from libc or greenhook.
            w.verdict = Some(false);
            return URC_NORMAL_STOP;
        } else {
            w.at_bottom = w.seen == Seen::Bottom;
        }
        URC_NO_REASON
    }

    /// Whether the running context's stack, below the trampoline, is the
    /// program's down to its start (see the module docs, step 2).
    pub(super) fn switch_is_safe(sp: usize) -> bool {
        let (lo, hi) = hub::with_current_fiber(|f| f.map_or((0, 0), |f| f.stack_bounds()));
        let stack = if lo == 0 { (0, usize::MAX) } else { (lo, hi) };
        let mut w = Walk {
            seen: Seen::Ours,
            at_bottom: false,
            verdict: None,
            root: lo == 0,
            stack,
            frames: 0,
        };
        // SAFETY: a valid callback; `w` outlives the walk.
        let r = unsafe { _Unwind_Backtrace(step, (&mut w as *mut Walk).cast()) };
        match w.verdict {
            Some(v) => v,
            None if r != URC_END_OF_STACK || w.seen == Seen::Ours => false,
            None if w.at_bottom => true,
            // The walk ran out in the program's code: a frame without
            // unwind tables (a JIT's code, an interpreter's generated one).
            None if w.seen == Seen::Program => scan(sp, w.stack, w.root),
            None => false,
        }
    }

    /// The most stack [`scan`] reads (a deep JVM stack is well below it).
    const MOST_SCANNED: usize = 2 << 20;

    /// The rule for a context whose walk ran out in the program's code: a
    /// frame without unwind tables (a JIT's code, an interpreter's
    /// generated one), beyond which the unwinder cannot see.
    ///
    /// What the walk guards against is a frame of libc, ld.so, greenhook or
    /// an allocator under the program's, holding a lock. What is left of
    /// that beyond such a frame is known otherwise:
    /// - greenhook's: program code called from greenhook (a cleanup
    ///   handler, a key destructor, a `pthread_once` routine, a signal
    ///   handler) runs through `hook::program`, which counts it: only the
    ///   start routine's may be under way (`NESTED` is 1). A hook that calls
    ///   libc, which calls the program back (a stdio cookie under `fwrite`),
    ///   is at a hook depth the handler has already refused;
    /// - libc's callbacks outside any hook: of those that call the program
    ///   while holding a lock, `dl_iterate_phdr` (the loader's) and a
    ///   kernel signal frame of a handler greenhook does not run (a fault's,
    ///   installed unchanged: its return is libc's `__restore_rt`) are
    ///   looked for on the stack, every word between the interrupted
    ///   `%rsp` and the start routine's call (`PROGRAM_BASE`). The others
    ///   (`qsort`, `bsearch`, `tsearch`, `ftw`, `scandir`, `glob`) hold none.
    ///
    /// A stack word is not a frame: a search for every return address into
    /// libc found stale ones in every JVM thread (a `clock_gettime`'s call
    /// into the vDSO, left in a slot no later frame wrote), and refused
    /// every switch. A stale word of the two looked for here refuses every
    /// switch for as long as the frame that holds it lives, so greenhook's
    /// own handlers (the ticks, the trampoline in front of the program's)
    /// leave none: they return through a restorer of greenhook's
    /// (`crate::signal::restorer`). When they returned through libc's,
    /// each tick left a `__restore_rt` below the interrupted code, and
    /// node's main thread, spinning in JavaScript for a worker's store,
    /// hung now and then (9 runs of 40): libuv's `uv__io_poll`, below it,
    /// keeps 1,024 `epoll_event`s on its stack, fills a few, and held such
    /// a word from a tick taken at that depth before. The program's own
    /// stale words are rare.
    ///
    /// The root's frames are the main thread's, down to the stack's top
    /// (`__libc_stack_end`): the scan goes on over a few of libc's frames
    /// (`__libc_start_main`'s), which hold neither word. No greenhook call
    /// of program code may be under way there (`NESTED` is 0). A root
    /// that is not the main thread's, or runs on a stack of the program's
    /// own (`makecontext`), is not within `MOST_SCANNED` below that top
    /// (nothing else is mapped so near it): refused.
    fn scan(sp: usize, (lo, hi): (usize, usize), root: bool) -> bool {
        let (base, nested) = if root {
            (MAIN_STACK_END.get().copied().unwrap_or(0), 0)
        } else {
            (super::PROGRAM_BASE.with(|b| b.get()), 1)
        };
        let sp = (sp + 7) & !7;
        if super::NESTED.with(|n| n.get()) != nested
            || base == 0
            || !(lo <= sp && sp <= base && base <= hi)
            || base - sp > MOST_SCANNED
        {
            return false;
        }
        let Some(callbacks) = CALLBACKS.get() else {
            return false;
        };
        (sp..base).step_by(8).all(|p| {
            // SAFETY: within the running fiber's stack, above the
            // interrupted `%rsp`: mapped, and the program's own frames.
            let v = unsafe { (p as *const usize).read() };
            !callbacks.holds(v)
        })
    }

    /// What [`scan`] looks for.
    struct Callbacks {
        /// `dl_iterate_phdr`'s code.
        iterate: (usize, usize),
        /// libc's return from a signal handler (`__restore_rt`), 0 if unknown.
        restorer: usize,
    }

    impl Callbacks {
        fn holds(&self, v: usize) -> bool {
            v != 0 && (v == self.restorer || (self.iterate.0 < v && v <= self.iterate.1))
        }
    }

    static CALLBACKS: OnceLock<Callbacks> = OnceLock::new();

    /// The top of the main thread's stack (ld.so's `__libc_stack_end`,
    /// where `_start` began), rounded up to a word.
    static MAIN_STACK_END: OnceLock<usize> = OnceLock::new();

    /// Finds what [`scan`] needs: the main stack's top, `dl_iterate_phdr`'s
    /// code and libc's return from a signal handler (`restorer`, read back
    /// from the kernel's action for greenhook's signal as libc installed
    /// it); without the second, frames without unwind tables are never
    /// switched from.
    pub(super) fn init_scan(restorer: usize) {
        // SAFETY: RTLD_DEFAULT searches every object.
        let end = unsafe { fiber::tls::dlsym_quietly(libc::RTLD_DEFAULT, c"__libc_stack_end") } as *const usize;
        if !end.is_null() {
            // SAFETY: ld.so's variable, set before any program code ran.
            let _ = MAIN_STACK_END.set((unsafe { end.read() } + 7) & !7);
        }
        /// glibc's `dladdr1` flag for the symbol's table entry (`<dlfcn.h>`).
        const RTLD_DL_SYMENT: c_int = 1;
        // SAFETY: RTLD_DEFAULT searches every object.
        let f = unsafe { fiber::tls::dlsym_quietly(libc::RTLD_DEFAULT, c"dl_iterate_phdr") } as usize;
        if f == 0 {
            return;
        }
        // SAFETY: a plain C struct of pointers, for which zero is valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        let mut sym: *const libc::Elf64_Sym = std::ptr::null();
        // SAFETY: a code address, valid out-parameters; RTLD_DL_SYMENT
        // stores a pointer to the symbol's table entry in `sym`.
        let ok = unsafe { libc::dladdr1(f as *const c_void, &mut info, (&raw mut sym).cast(), RTLD_DL_SYMENT) };
        let size = if ok != 0 && !sym.is_null() {
            // SAFETY: set by a successful dladdr1 to the symbol's entry.
            (unsafe { (*sym).st_size }) as usize
        } else {
            0
        };
        if size == 0 {
            return;
        }
        let _ = CALLBACKS.set(Callbacks {
            iterate: (f, f + size),
            restorer,
        });
    }
}
