//! The one shape of every hook, written once: [`hook!`].
//!
//! ```ignore
//! hook! {
//!     /// `usleep(3)`.
//!     #[gate(crate::gate::cooperative())]
//!     [time] fn usleep(us: useconds_t) -> c_int {
//!         /* sleep on the hub */
//!     }
//!
//!     /// `read(2)`.
//!     [io] fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
//!         match crate::fdwait::path(fd) {
//!             // SAFETY: forwarded unchanged.
//!             Path::Pass => unsafe { read::real(fd, buf, n) },
//!             /* try, wait on the hub on EAGAIN, retry */
//!         }
//!     }
//! }
//! ```
//!
//! For each function the macro generates:
//! - the gate: where `#[gate(..)]` is false, the call goes to the real
//!   function unchanged (the gates are [`crate::gate`]'s; a gate that needs
//!   a value the body uses, like `read`'s fd path, is written in the body);
//! - the export: `#[no_mangle]` under the libc name, or, in an interpose
//!   table build (macOS, or Linux with `--cfg greenhook_interpose_table`),
//!   `greenhook_<name>` plus an entry in the image's interpose table next to
//!   libc's `<name>`;
//! - `<name>::real`, the next definition of the function (resolved once
//!   with `dlsym(RTLD_NEXT)` and cached), for the pass-through and for any
//!   other code that needs the function itself rather than our hook;
//! - the entry every hook goes through ([`Entered`]): the call is counted
//!   under its declared stats family (`[io]` above) when `GREENHOOK_STATS`
//!   is set, a panic inside the body aborts the process with the hook's
//!   name instead of crossing into C, and the running context's **hook
//!   depth** goes up by one until the hook returns.
//!
//! The hook depth tells greenhook's code from the program's: a signal that
//! arrives while it is not 0 (or in the hub's loop, or in machinery) is
//! held, never handled there, and its handler runs at a safe point: when
//! the depth goes back to 0 (the hook's way out checks one word, see
//! [`crate::signal`]) or in the wait loop the signal interrupted. So a
//! hook entered from a signal handler always finds greenhook's state whole.
//! The rule for every hook: what it runs of the program's own code (a
//! start routine, a destructor, a `pthread_once` routine, a cleanup
//! handler, a signal handler) runs at depth 0, through [`program`]; and
//! a blocking real call that the kernel may interrupt with a handler is
//! made through [`program`] too, so the handler runs there as it would
//! without us.
//!
//! Hooks are `extern "C-unwind"` and the panic check is a drop guard, not a
//! `catch_unwind`: glibc's own unwinding (`pthread_exit`, cancellation of a
//! real thread blocked in a hooked call) is not a Rust panic, so it passes
//! through our frames, running their destructors, as it passes through C
//! frames. A `catch_unwind` would catch it and glibc would abort ("FATAL:
//! exception not rethrown").

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The stats family a hook is counted under (`GREENHOOK_STATS`), declared
/// in each `hook!`. Lower case: they are the labels printed.
#[allow(non_camel_case_types)]
#[cfg_attr(not(greenhook_linux_hooks), allow(dead_code))] // portable build: sleeps only
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// Sleeps and yields.
    time,
    /// Reads, writes and connections on sockets, pipes and ttys.
    io,
    /// Creating, duplicating, closing and configuring fds.
    fd,
    /// `poll`, `select`, `epoll_wait`.
    poll,
    /// Thread life cycle, keys, once, cancellation.
    thread,
    /// Mutexes, condvars, rwlocks, barriers, spinlocks, semaphores.
    sync,
    /// The raw `syscall` entry (futexes).
    futex,
    /// Regular files, and waits epoll cannot watch (file locks, IPC).
    file,
    /// Name resolution.
    dns,
    /// `FILE` streams and formatted output.
    stdio,
    /// Child processes.
    process,
    /// Signals.
    signal,
    /// Clock reads (`clock_gettime`: thread CPU clocks are per fiber).
    clock,
}

const FAMILIES: usize = Family::clock as usize + 1;
const NAMES: [&str; FAMILIES] = [
    "time", "io", "fd", "poll", "thread", "sync", "futex", "file", "dns", "stdio", "process", "signal", "clock",
];

static COUNTING: AtomicBool = AtomicBool::new(false);
static COUNTS: [AtomicU64; FAMILIES] = [const { AtomicU64::new(0) }; FAMILIES];

/// Turns on counting when `GREENHOOK_STATS` is set, and adds the counts to
/// the hub's exit table.
pub(crate) fn init_stats() {
    if std::env::var_os("GREENHOOK_STATS").is_some_and(|v| !v.is_empty() && v != "0") {
        COUNTING.store(true, Ordering::Relaxed);
        hub::internal::set_stats_extra(|| {
            NAMES
                .iter()
                .zip(&COUNTS)
                .map(|(f, c)| (*f, c.load(Ordering::Relaxed)))
                .chain(preempted())
                .filter(|(_, n)| *n > 0)
                .collect()
        });
    }
}

/// The stats rows of preemptions by signal, and of those at a spin wait
/// (see `preempt`).
fn preempted() -> [(&'static str, u64); 2] {
    #[cfg(greenhook_linux_hooks)]
    return [
        ("preempted", crate::preempt::preemptions()),
        ("preempted spinning", crate::preempt::spin_preemptions()),
    ];
    #[cfg(not(greenhook_linux_hooks))]
    [("preempted", 0), ("preempted spinning", 0)]
}

/// A hook's name, as a type ([`hook!`] makes one per hook): what a panic
/// inside it aborts with, known at compile time, so entering a hook stores
/// nothing but its depth.
pub(crate) trait Named {
    /// The libc name of the hook.
    const NAME: &'static str;
}

/// Alive for the whole body of a hook (see [`hook!`]): counts the call on
/// entry, and is left on every normal return. Dropped instead, it is being
/// unwound: by a Rust panic it aborts with the hook's name, `N`'s.
pub(crate) struct Entered<N: Named> {
    /// # Invariant
    /// This call's hold on its context's hook depth, left once: by
    /// [`Entered::leave`] or by the drop.
    depth: hub::internal::HookDepth,
    name: std::marker::PhantomData<N>,
}

impl<N: Named> Entered<N> {
    /// Enters the hook `N` of `family`.
    #[inline(always)]
    pub(crate) fn new(family: Family) -> Entered<N> {
        let depth = hub::internal::enter_hook();
        if COUNTING.load(Ordering::Relaxed) {
            count(family);
        }
        Entered {
            depth,
            name: std::marker::PhantomData,
        }
    }

    /// The body returned normally (or the gate sends the call to the real
    /// function): back in the program's code, signals due here run.
    #[inline(always)]
    pub(crate) fn leave(self) {
        let depth = self.depth;
        std::mem::forget(self);
        // SAFETY: this hook call's own hold, in its own context, left once
        // (the guard is forgotten above).
        if unsafe { depth.leave() } == 0 {
            #[cfg(greenhook_linux_hooks)]
            {
                crate::signal::run_pending();
                crate::preempt::at_hook_return();
                if hub::internal::priorities_differ() {
                    crate::preempt::priority_point();
                }
            }
        }
    }
}

impl<N: Named> Drop for Entered<N> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: as in `leave`: unwinding through the hook, which made it.
        unsafe { self.depth.leave() };
        // Only a Rust panic aborts: glibc's forced unwinding (thread exit,
        // cancellation) is not one and goes on through.
        if std::thread::panicking() {
            abort_in(N::NAME)
        }
    }
}

/// The entry of a hook marked `#[cancel_point]`, a call glibc makes a
/// cancellation point: a pending deferred cancellation of the calling
/// thread acts here, before the gate and whatever the arguments, as
/// glibc's wrapper acts before its system call whether or not the call
/// would wait (a zero timeout, `MSG_DONTWAIT`, a non-blocking fd). Only
/// for the program's own call (the outermost hook, not one greenhook's code
/// makes from inside another): one atomic load when nothing is pending.
#[inline(always)]
pub(crate) fn cancel_point_at_entry() {
    #[cfg(greenhook_linux_hooks)]
    if crate::thread::cancel::any_pending() {
        cancel_if_outermost();
    }
}

/// The way out of a hook marked `#[cancel_point]`: a deferred cancellation
/// that came while the call waited acts here, before the call returns, as
/// it acts in glibc's wrapper anywhere between its entry and its return,
/// also once the system call itself has returned (glibc 2.36 turns
/// asynchronous cancellation on around the call and acts on a cancellation
/// that arrives before it is turned off; its result is lost, as natively).
/// Under greenhook that stretch includes the time a woken fiber waits for
/// its turn: a `select` whose timeout had fired, cancelled before its
/// fiber ran again, returned 0, and the cancellation acted at the next
/// point, in rsyslog's case a `write` under a mutex no cleanup handler
/// unlocks (its shutdown then waited for good). A cancellation pending at
/// the entry acted there, so one that acts here came during the call.
#[inline(always)]
pub(crate) fn cancel_point_at_exit() {
    cancel_point_at_entry();
}

#[cfg(greenhook_linux_hooks)]
#[cold]
#[inline(never)]
fn cancel_if_outermost() {
    if hub::internal::hook_depth() == 1 && crate::gate::patched() {
        crate::thread::cancel::act();
    }
}

/// Runs the program's code `f` from inside a hook (see the module docs):
/// at hook depth 0, so that signals reach it as they reach the program
/// anywhere else, and the depth given back afterwards, also when `f` is
/// left by glibc's forced unwind (a cancellation or `pthread_exit` inside
/// it unwinds through the hook, whose own exit then lowers the depth it
/// raised). Code that leaves by `longjmp` stays at 0, which is right: it
/// lands in the program.
#[inline]
#[cfg_attr(not(greenhook_linux_hooks), allow(dead_code))] // portable build: sleeps only
pub(crate) fn program<R>(f: impl FnOnce() -> R) -> R {
    /// Gives the depth back when dropped, on return or unwind.
    struct GiveBack(u32);
    impl Drop for GiveBack {
        #[inline(always)]
        fn drop(&mut self) {
            hub::internal::set_hook_depth(self.0);
        }
    }
    let _back = GiveBack(hub::internal::hook_depth());
    hub::internal::set_hook_depth(0);
    #[cfg(greenhook_linux_hooks)]
    let _nested = crate::preempt::Nested::enter();
    // The program's code is no part of a call that is not a cancellation
    // point (`sendfile`): its own points act.
    #[cfg(greenhook_linux_hooks)]
    let _lifted = crate::thread::cancel::NotAPoint::lift();
    f()
}

/// Runs the fast path `f` (see [`hook!`]'s `#[fast_path]`) shielded from
/// signal handlers (`hub::internal::shield`: one arriving meanwhile is
/// held, as inside a hook), so that none comes between its loads and
/// stores, then leaves as a hook does: held signals run and the time slice
/// is counted. `None` when the caller is not the program's code on the
/// fibers' thread, or `f` gave none (the full hook then answers, and its
/// way out runs what was held).
#[cfg(greenhook_linux_hooks)]
#[inline(always)]
pub(crate) fn lean<R>(f: impl FnOnce() -> Option<R>) -> Option<R> {
    let shield = hub::internal::shield()?;
    let r = f();
    // SAFETY: made just above in this context, which `f` does not leave.
    unsafe { shield.lift() };
    let look = crate::preempt::count_return();
    // Without an answer the full hook runs next, and its own way out
    // looks (so nothing needs keeping across a call here for it).
    if r.is_some() && (look || crate::signal::work_pending()) {
        return lean_exit(r, look);
    }
    r
}

/// [`lean`]'s way out when a signal or the clock needs a look: out of
/// line, so that the fast path keeps nothing for it. Only back in the
/// program's code: called from inside a hook, that hook's own way out
/// does this.
#[cfg(greenhook_linux_hooks)]
#[cold]
#[inline(never)]
fn lean_exit<R>(r: R, look: bool) -> R {
    if hub::internal::hook_depth() == 0 {
        crate::signal::run_pending();
        if look {
            crate::preempt::look();
        }
    }
    r
}

/// Whether hook calls are being counted (`GREENHOOK_STATS`): a fast path
/// (see [`hook!`]) counts nothing, so it gives way to the full hook then.
#[inline(always)]
pub(crate) fn counting() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

#[cold]
fn count(family: Family) {
    COUNTS[family as usize].fetch_add(1, Ordering::Relaxed);
}

/// Aborts the process for a panic inside the hook `name`: a panic must not
/// cross into C.
#[cold]
pub(crate) fn abort_in(name: &'static str) -> ! {
    let _g = hub::internal::Guard::new();
    eprintln!("greenhook: panic inside the {name} hook; aborting");
    std::process::abort()
}

/// Defines hooks in the one shape (see the [module](self) docs).
///
/// Each entry: doc comments, optional `#[cfg(..)]`s, an optional
/// `#[gate(expr)]`, the stats family in brackets, then the function with its
/// libc signature (written without `unsafe extern`: every hook is
/// `pub unsafe extern "C-unwind"`) and its body. When the gate is false the
/// arguments go to the real function unchanged and the body does not run.
/// In the body, `<name>::real(..)` is the next definition.
///
/// `#[fast_path(f)]` tries `f(args) -> Option<R>` first of all, before
/// the hook's entry (and before a cancellation point's check: not for
/// those): an answer is the hook's, with no depth raised and nothing
/// counted, so `f` may only do what needs neither (see [`lean`]); `None`
/// runs the rest of the hook, made out of line so that the fast path keeps
/// no registers for it.
///
/// A `#[cancel_point]` hook also acts on a cancellation at its way out
/// ([`cancel_point_at_exit`]).
///
/// `#[return_by_jump(stub)]`, after the gate, exports the hook through a
/// stub of that name that goes back to the caller by jump when its context
/// switched meanwhile (see [`Jumped`]; x86-64 Linux, not the table build).
macro_rules! hook {
    ($(
        $(#[doc = $doc:expr])*
        $(#[cfg($cfg:meta)])*
        $(#[cancel_point $(($cp:expr))?])?
        $(#[fast_path($fast:path)])?
        $(#[gate($gate:expr)])?
        $(#[return_by_jump($stub:ident)])?
        [$family:ident] fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    )*) => {$(
        $(#[doc = $doc])*
        $(#[cfg($cfg)])*
        #[cfg_attr(not(greenhook_table), export_name = $crate::hook::hook!(@export [$($stub)?] $name))]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        #[allow(clippy::too_many_arguments, clippy::redundant_closure_call, unreachable_code, non_snake_case)]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) $(-> $ret)? {
            $crate::hook::hook!(@fast [$($fast)?] ($($arg: $ty),*) $(-> $ret)? {
                struct Name;
                impl $crate::hook::Named for Name {
                    const NAME: &'static str = stringify!($name);
                }
                let entered = $crate::hook::Entered::<Name>::new($crate::hook::Family::$family);
                $crate::hook::hook!(@cancel cancel_point_at_entry [$([$($cp)?])?]);
                $crate::hook::hook!(@gate entered, [$($gate)?], $name($($arg),*));
                // A closure, so that a `return` in the body leaves it and
                // not the hook: `leave` must run on every normal way out.
                let r = (move || $(-> $ret)? { $body })();
                $crate::hook::hook!(@cancel cancel_point_at_exit [$([$($cp)?])?]);
                entered.leave();
                r
            })
        }

        #[doc = concat!("The next definition of `", stringify!($name), "` (libc's, under the preload).")]
        $(#[cfg($cfg)])*
        #[allow(dead_code, non_snake_case)]
        pub(crate) mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::real::real_fn!(real = $name($($arg: $ty),*) $(-> $ret)?);
        }

        $(#[cfg($cfg)])*
        $crate::real::interpose!($name);

        $(#[cfg($cfg)])*
        $crate::hook::hook!(@by_jump [$($stub)?] $name($($arg: $ty),*) $(-> $ret)?);
    )*};
    (@export [] $name:ident) => { stringify!($name) };
    (@export [$stub:ident] $name:ident) => { $crate::hook::by_jump_body_name!($name) };
    (@by_jump [] $($rest:tt)*) => {};
    (@by_jump [$stub:ident] $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(greenhook_table)))]
        const _: () = {
            // The answer must come back in `rax` alone, `switched` in `rdx`.
            assert!(std::mem::size_of::<$crate::hook::Jumped<$ret>>() == 16);

            /// The hook, and whether its caller's context switched while
            /// it ran.
            unsafe extern "C-unwind" fn body($($arg: $ty),*) -> $crate::hook::Jumped<$ret> {
                let before = hub::switch_count();
                // SAFETY: the caller's arguments, unchanged, to the hook.
                let r = unsafe { $name($($arg),*) };
                $crate::hook::Jumped { r, switched: usize::from(hub::switch_count() != before) }
            }

            /// The exported symbol: calls [`body`]; goes back by `ret`,
            /// or by `pop`/`jmp` when the context switched (see
            /// [`Jumped`](crate::hook::Jumped)). The unwind information
            /// covers the call, which a cancellation unwinds through.
            #[unsafe(naked)]
            #[unsafe(export_name = stringify!($name))]
            unsafe extern "C-unwind" fn $stub($($arg: $ty),*) -> $ret {
                std::arch::naked_asm!(
                    ".cfi_startproc",
                    "sub rsp, 8",
                    ".cfi_adjust_cfa_offset 8",
                    "call {body}",
                    "add rsp, 8",
                    ".cfi_adjust_cfa_offset -8",
                    "test rdx, rdx",
                    "jnz 2f",
                    "ret",
                    "2:",
                    "pop r11",
                    ".cfi_adjust_cfa_offset -8",
                    ".cfi_register rip, r11",
                    "jmp r11",
                    ".cfi_endproc",
                    body = sym body,
                )
            }
        };
    };
    (@fast [] ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $full:block) => { $full };
    (@fast [$fast:path] ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $full:block) => {{
        // SAFETY: the caller's arguments, unchanged, to the fast path of
        // this very function.
        if let Some(r) = unsafe { $fast($($arg),*) } {
            return r;
        }
        /// The hook past its fast path: out of line, so that the fast
        /// path saves no registers for it and reaches it by a jump.
        #[inline(never)]
        unsafe fn full($($arg: $ty),*) $(-> $ret)? $full
        // SAFETY: the caller's arguments, unchanged.
        unsafe { full($($arg),*) }
    }};
    (@cancel $at:ident []) => {};
    (@cancel $at:ident [[]]) => {
        $crate::hook::$at();
    };
    (@cancel $at:ident [[$cp:expr]]) => {
        if $cp {
            $crate::hook::$at();
        }
    };
    (@gate $entered:ident, [], $name:ident($($arg:ident),*)) => {};
    (@gate $entered:ident, [$gate:expr], $name:ident($($arg:ident),*)) => {
        if !$gate {
            $entered.leave();
            // SAFETY: the caller's arguments, unchanged, to the function the
            // caller meant to call.
            return unsafe { $name::real($($arg),*) };
        }
    };
}
pub(crate) use hook;

/// The Rust function of a `#[return_by_jump]` hook is exported under
/// another name (its stub takes the libc one) where stubs are made. Unused
/// in the interpose-table build, which names every hook its own way.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[cfg_attr(greenhook_table, allow(unused_macros))]
macro_rules! by_jump_body_name {
    ($name:ident) => {
        concat!("greenhook_by_jump_", stringify!($name))
    };
}
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
macro_rules! by_jump_body_name {
    ($name:ident) => {
        stringify!($name)
    };
}
#[cfg_attr(greenhook_table, allow(unused_imports))]
pub(crate) use by_jump_body_name;

/// What the body of a `#[return_by_jump]` hook gives its stub: the answer
/// in `rax`, and in `rdx` whether the caller's context switched away and
/// back while the hook ran.
///
/// Why by jump: after a switch the CPU's return stack buffer holds the
/// entries the other context pushed. Both contexts switch in the same
/// function of the same hook, so the entries for the frames inside the
/// hook and the stub match, but the one for the stub's own return is the
/// other context's caller's, unless both called from the same place. A
/// `ret` would pop it and mispredict; `pop`/`jmp` goes through the
/// indirect predictor, which keys on the path, and leaves the entry to be
/// overwritten. Without a switch the buffer is ours and `ret` is right.
/// docs/DESIGN.md ("Locks at the cost of a switch") has the measurements.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(greenhook_table)))]
#[repr(C)]
pub struct Jumped<R> {
    /// The hook's answer (`rax`: at most 8 bytes, which each stub
    /// asserts).
    pub r: R,
    /// 1 if the context switched (`rdx`).
    pub switched: usize,
}
