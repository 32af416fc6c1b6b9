//! fd bookkeeping: `socket`, `socketpair`, `pipe`, `pipe2`, `eventfd`,
//! `timerfd_create`, `signalfd`, `inotify_init*`, `listen`, `dup`, `dup2`, `dup3`,
//! `fcntl`, `ioctl(FIONBIO)`, `setsockopt` timeouts, `close`,
//! `close_range`, `closefrom`, `posix_spawn_file_actions_adddup2`.
//!
//! While patched, pipes and the like are created non-blocking underneath
//! (`O_NONBLOCK` added to the creating call: no extra system call), and
//! sockets as the program asks, each recorded as managed in the
//! [`fdtable`](crate::fdtable), with whatever the user asked for kept on the
//! side. A data socket's tries ask for no wait per call
//! ([`crate::nowait`]); `listen` makes a listener non-blocking underneath.
//! `fcntl(F_GETFL)` shows exactly the user's flags, `F_SETFL`/`FIONBIO`
//! change only the user's view of an fd non-blocking underneath (it stays
//! so), and `close`/`dup2`
//! wake any fiber waiting on the fd with `EBADF` and drop its registration
//! before the number can be reused.
//!
//! Creating calls are gated by `gate::patched`: greenhook's own machinery (the
//! hub's poller, the offload pool) gets plain fds. Everything that keeps
//! the table true afterwards (dups, closes, flag and timeout changes) runs
//! whenever the hooks are on ([`crate::is_patched`]), whoever calls: a
//! managed fd stays non-blocking underneath and its entry follows its
//! number, even when the machinery touches it.

use libc::{c_int, c_uint, c_ulong, c_void, socklen_t};

use crate::fdtable::{self, Fd, Timeout};
use crate::gate::patched;
use crate::hook::hook;

hook! {
    /// `socket(2)`.
    #[gate(patched())]
    [fd] fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
        // SAFETY: plain value arguments.
        let fd = unsafe { socket::real(domain, ty | socket_nonblock(), proto) };
        if fd >= 0 {
            managed_socket(fd, ty & libc::SOCK_NONBLOCK != 0);
        }
        fd
    }

    /// `socketpair(2)`.
    #[gate(patched())]
    [fd] fn socketpair(domain: c_int, ty: c_int, proto: c_int, sv: *mut c_int) -> c_int {
        // SAFETY: sv is the caller's int[2]; the kernel checks it (EFAULT).
        let r = unsafe { socketpair::real(domain, ty | socket_nonblock(), proto, sv) };
        if r == 0 {
            // SAFETY: on success the kernel wrote both entries.
            let (a, b) = unsafe { (*sv, *sv.add(1)) };
            for fd in [a, b] {
                managed_socket(fd, ty & libc::SOCK_NONBLOCK != 0);
            }
        }
        r
    }

    /// `listen(2)`: `accept` has no per-call way not to wait, so a
    /// listening socket is made non-blocking underneath (see
    /// [`crate::nowait`]).
    [fd] fn listen(fd: c_int, backlog: c_int) -> c_int {
        // SAFETY: plain value arguments.
        let r = unsafe { listen::real(fd, backlog) };
        if r == 0 && crate::gate::on() {
            listening(Fd::of(fd));
        }
        r
    }

    /// `pipe2(2)`.
    #[gate(patched())]
    [fd] fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
        piped(fds, flags)
    }

    /// `pipe(2)`: `pipe2` without flags.
    #[gate(patched())]
    [fd] fn pipe(fds: *mut c_int) -> c_int {
        piped(fds, 0)
    }

    /// `eventfd(2)`.
    #[gate(patched())]
    [fd] fn eventfd(initval: c_uint, flags: c_int) -> c_int {
        // SAFETY: plain value arguments.
        created(flags, libc::EFD_NONBLOCK, |f| unsafe { eventfd::real(initval, f) })
    }

    /// `timerfd_create(2)`.
    #[gate(patched())]
    [fd] fn timerfd_create(clock: libc::clockid_t, flags: c_int) -> c_int {
        // SAFETY: plain value arguments.
        created(flags, libc::TFD_NONBLOCK, |f| unsafe { timerfd_create::real(clock, f) })
    }

    /// `signalfd(2)`: only a new signalfd (fd == -1) is created managed.
    #[gate(fd == -1 && patched())]
    [fd] fn signalfd(fd: c_int, mask: *const libc::sigset_t, flags: c_int) -> c_int {
        // SAFETY: the kernel validates the mask pointer.
        created(flags, libc::SFD_NONBLOCK, |f| unsafe { signalfd::real(fd, mask, f) })
    }

    /// `inotify_init1(2)`.
    #[gate(patched())]
    [fd] fn inotify_init1(flags: c_int) -> c_int {
        // SAFETY: plain value argument.
        created(flags, libc::IN_NONBLOCK, |f| unsafe { inotify_init1::real(f) })
    }

    /// `inotify_init(2)`: `inotify_init1` without flags.
    #[gate(patched())]
    [fd] fn inotify_init() -> c_int {
        // SAFETY: plain value argument.
        created(0, libc::IN_NONBLOCK, |f| unsafe { inotify_init1::real(f) })
    }

    /// `dup(2)`.
    [fd] fn dup(fd: c_int) -> c_int {
        // SAFETY: plain value argument.
        let r = unsafe { dup::real(fd) };
        if r >= 0 && crate::gate::on() {
            fdtable::copy(fd, r);
        }
        r
    }

    /// `dup2(2)`.
    [fd] fn dup2(old: c_int, new: c_int) -> c_int {
        if !crate::gate::on() {
            if hub::has_hub() {
                replacing(old, new); // the hub may watch `new` (Rust API users)
            }
            // SAFETY: forwarded unchanged.
            return unsafe { dup2::real(old, new) };
        }
        replacing(old, new);
        // SAFETY: plain value arguments.
        let r = unsafe { dup2::real(old, new) };
        if r >= 0 && old != new {
            duplicated(old, r);
        }
        r
    }

    /// `dup3(2)`.
    [fd] fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
        if !crate::gate::on() {
            if hub::has_hub() && old != new {
                replacing(old, new); // the hub may watch `new` (Rust API users)
            }
            // SAFETY: forwarded unchanged.
            return unsafe { dup3::real(old, new, flags) };
        }
        if old != new {
            replacing(old, new);
        }
        // SAFETY: plain value arguments.
        let r = unsafe { dup3::real(old, new, flags) };
        if r >= 0 {
            duplicated(old, r);
        }
        r
    }

    /// `fcntl(2)`; the third argument is read as a word (see `real`).
    #[cancel_point(cmd == libc::F_SETLKW || cmd == libc::F_OFD_SETLKW)]
    #[gate(crate::gate::on())]
    [fd] fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
        fcntl_on(fd, cmd, arg)
    }

    /// `fcntl64(2)`: the same call on 64-bit glibc.
    #[cancel_point(cmd == libc::F_SETLKW || cmd == libc::F_OFD_SETLKW)]
    #[gate(crate::gate::on())]
    [fd] fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
        fcntl_on(fd, cmd, arg)
    }

    /// `ioctl(2)`: `FIONBIO` on a managed fd changes the user's view only.
    [fd] fn ioctl(fd: c_int, req: c_ulong, arg: usize) -> c_int {
        // SAFETY: forwarded unchanged; for FIONBIO the kernel validates `arg`.
        let r = unsafe { ioctl::real(fd, req, arg) };
        if r != 0 || req != libc::FIONBIO || !crate::gate::on() {
            return r;
        }
        let fd = Fd::of(fd);
        let f = fd.flags();
        if f & (fdtable::MANAGED | fdtable::KNOWN) != 0 {
            // SAFETY: the kernel just read this int successfully.
            let on = unsafe { *(arg as *const c_int) } != 0;
            fd.set_user_nonblock(on);
            if on && f & fdtable::SOCKET != 0 {
                unmark(fd.raw());
            }
            if !on && f & fdtable::MANAGED != 0 && f & fdtable::NOWAIT == 0 {
                let one: c_int = 1;
                // SAFETY: a valid int for FIONBIO; keeps the fd non-blocking underneath.
                unsafe { ioctl::real(fd.raw(), req, &one as *const c_int as usize) };
            }
        }
        r
    }

    /// `setsockopt(2)`: remembers `SO_RCVTIMEO`/`SO_SNDTIMEO` on managed
    /// sockets, since the kernel does not apply them to non-blocking sockets.
    [fd] fn setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int {
        // SAFETY: forwarded unchanged; the kernel validates val/len.
        let r = unsafe { setsockopt::real(fd, level, name, val, len) };
        let which = match (level, name) {
            (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => Timeout::Recv,
            (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => Timeout::Send,
            _ => return r,
        };
        let fd = Fd::of(fd);
        if r == 0 && crate::gate::on() && fd.flags() & (fdtable::MANAGED | fdtable::KNOWN) != 0 {
            // SAFETY: the kernel accepted a timeval of `len` bytes here.
            let tv = unsafe { &*(val as *const libc::timeval) };
            let d = std::time::Duration::from_secs(tv.tv_sec.max(0) as u64)
                + std::time::Duration::from_micros(tv.tv_usec.max(0) as u64);
            fd.set_timeout(which, (!d.is_zero()).then_some(d));
        }
        r
    }

    /// `close(2)`: fibers waiting on the fd wake with `EBADF`; its
    /// registration and bookkeeping go before the number can be reused.
    #[cancel_point]
    [fd] fn close(fd: c_int) -> c_int {
        if hub::reactor::is_own(fd) {
            // The hub's own (see `hub::reactor::own`): to the program, a
            // number that is not open.
            return crate::errno::fail(libc::EBADF);
        }
        // Even unpatched: a Rust API user may have waited on this fd through
        // greenhook::io, and a registration that outlives the fd would
        // swallow the events of the next fd given the same number.
        hub::forget_fd(fd);
        if crate::gate::on() {
            fdtable::forget(fd);
        }
        // SAFETY: forwarded unchanged.
        unsafe { close::real(fd) }
    }

    /// `close_range(2)`: like `close` for each fd of the range (unless it
    /// only sets close-on-exec).
    [fd] fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
        before_close_range(first, last, flags);
        // SAFETY: forwarded, in pieces around the hub's own fds.
        around_own(first, last, flags, |a, b, f| unsafe { close_range::real(a, b, f) })
    }

    /// `closefrom(3)` (glibc 2.34+): like `close` for every fd from `low`
    /// on, the hub's own excepted.
    [fd] fn closefrom(low: c_int) {
        if low < 0 {
            // SAFETY: forwarded unchanged (glibc's answer to a bad number).
            return unsafe { closefrom::real(low) };
        }
        forget_range(low as c_uint, c_uint::MAX);
        // The program's fds up to our last one, around ours; then glibc's
        // own `closefrom` for the rest (with its fallback for old kernels).
        let own = hub::reactor::own_in(low as c_uint, c_uint::MAX);
        let rest = match own.last() {
            Some(&last) => {
                // SAFETY: the program's fds, below and between ours.
                close_pieces(low as c_uint, last as c_uint, 0, &own, |a, b, f| unsafe { close_range::real(a, b, f) });
                last + 1
            }
            None => low,
        };
        // SAFETY: the rest, as the caller asked.
        unsafe { closefrom::real(rest) }
    }

    /// `posix_spawn_file_actions_adddup2(3)`: a managed fd that a spawned
    /// child will get as its stdin/stdout/stderr is handed back now
    /// ([`hand_back`]); the dup itself happens inside glibc, out of sight.
    [fd] fn posix_spawn_file_actions_adddup2(
        fa: *mut libc::posix_spawn_file_actions_t,
        fd: c_int,
        new: c_int,
    ) -> c_int {
        // SAFETY: forwarded unchanged.
        let r = unsafe { posix_spawn_file_actions_adddup2::real(fa, fd, new) };
        if r == 0 && crate::gate::on() && (0..=2).contains(&new) {
            hand_back(fd);
        }
        r
    }
}

/// What a socket-creating call (`socket`, `socketpair`, `accept4`) adds to
/// the caller's flags: `SOCK_NONBLOCK`, unless sockets stay blocking
/// underneath ([`crate::nowait`]).
pub(crate) fn socket_nonblock() -> c_int {
    if crate::nowait::supported() {
        0
    } else {
        libc::SOCK_NONBLOCK
    }
}

/// Records a socket just made with [`socket_nonblock`] added as managed;
/// `user_nb`: the caller asked for `SOCK_NONBLOCK`.
pub(crate) fn managed_socket(fd: c_int, user_nb: bool) {
    if crate::nowait::supported() {
        fdtable::set_managed_nowait(fd, user_nb);
    } else {
        fdtable::set_managed(fd, user_nb, true);
    }
}

/// Records both fds of a new pair as managed (non-blocking underneath).
///
/// # Safety
/// `fds` points at the two fds the kernel has just written.
unsafe fn managed_pair(fds: *const c_int, user_nonblock: bool, socket: bool) {
    // SAFETY: caller's contract.
    let (a, b) = unsafe { (*fds, *fds.add(1)) };
    fdtable::set_managed(a, user_nonblock, socket);
    fdtable::set_managed(b, user_nonblock, socket);
}

/// `pipe2` and `pipe`: a managed pipe, with the caller's flags kept aside.
fn piped(fds: *mut c_int, flags: c_int) -> c_int {
    // SAFETY: fds is the caller's int[2]; the kernel checks it.
    let r = unsafe { pipe2::real(fds, flags | libc::O_NONBLOCK) };
    if r == 0 {
        // SAFETY: on success the kernel wrote both entries.
        unsafe { managed_pair(fds, flags & libc::O_NONBLOCK != 0, false) };
    }
    r
}

/// Creates an fd through `create(flags | nonblock_flag)` and records it as
/// managed; `nonblock_flag` is the call's own spelling of `O_NONBLOCK`.
fn created(flags: c_int, nonblock_flag: c_int, create: impl FnOnce(c_int) -> c_int) -> c_int {
    let fd = create(flags | nonblock_flag);
    if fd >= 0 {
        fdtable::set_managed(fd, flags & nonblock_flag != 0, false);
    }
    fd
}

/// Before `new` is replaced by a dup of `old`: if `old` is valid (so the
/// call will go ahead), wake fibers waiting on `new` and drop its state.
fn replacing(old: c_int, new: c_int) {
    // SAFETY: F_GETFD only reads the descriptor flags.
    if old != new && unsafe { fcntl::real(old, libc::F_GETFD, 0) } >= 0 {
        hub::forget_fd(new);
        fdtable::forget(new);
    }
}

/// After `dup2`/`dup3` made `new` a dup of `old`: `new` shares what we know
/// of `old`, and as a standard stream it is handed back ([`hand_back`]).
fn duplicated(old: c_int, new: c_int) {
    fdtable::copy(old, new);
    if (0..=2).contains(&new) {
        hand_back(new);
    }
}

/// `fcntl` and `fcntl64` while patched.
fn fcntl_on(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let mut view = Fd::of(fd);
    if cmd == libc::F_GETFL && view.flags() & (fdtable::MANAGED | fdtable::KNOWN) == 0 {
        // A foreign fd's flags, asked before any use (Python's
        // `socket.socket(fileno=…)` makes a socket whose fd is non-blocking
        // a non-blocking socket object): a socket another greenhook marked
        // ([`MARK`]) is taken as managed first, and shows as blocking.
        view = crate::fdwait::known(view);
    }
    let managed = view.flags() & fdtable::MANAGED != 0;
    match cmd {
        libc::F_GETFL if managed => {
            // SAFETY: F_GETFL takes no argument.
            let r = unsafe { fcntl::real(fd, cmd, 0) };
            if r >= 0 && view.flags() & fdtable::USER_NONBLOCK == 0 {
                r & !ours(view)
            } else {
                r
            }
        }
        libc::F_SETFL if view.flags() & fdtable::KNOWN != 0 => {
            // SAFETY: forwarded unchanged.
            let r = unsafe { fcntl::real(fd, cmd, arg) };
            if r == 0 {
                view.set_user_nonblock(arg as c_int & libc::O_NONBLOCK != 0);
                view.set_direct(arg as c_int & libc::O_DIRECT != 0);
            }
            r
        }
        libc::F_SETFL if managed && view.nowait() => {
            // The description is the program's: its flags as asked.
            // SAFETY: forwarded unchanged.
            let r = unsafe { fcntl::real(fd, cmd, arg) };
            if r == 0 {
                view.set_user_nonblock(arg as c_int & libc::O_NONBLOCK != 0);
            }
            r
        }
        libc::F_SETFL if managed => {
            let user_nb = arg as c_int & libc::O_NONBLOCK != 0;
            // Our O_NONBLOCK, and on a socket our mark with it; the user's
            // own O_NONBLOCK goes without the mark.
            let add = if user_nb { libc::O_NONBLOCK } else { ours(view) };
            // SAFETY: F_SETFL takes an int; we keep O_NONBLOCK set underneath.
            let r = unsafe { fcntl::real(fd, cmd, arg | add as usize) };
            if r == 0 {
                view.set_user_nonblock(user_nb);
            }
            r
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            // SAFETY: forwarded unchanged.
            let r = unsafe { fcntl::real(fd, cmd, arg) };
            if r >= 0 {
                fdtable::copy(fd, r);
            }
            r
        }
        libc::F_SETLKW | libc::F_OFD_SETLKW if crate::gate::cooperative() => {
            // SAFETY: the caller's lock request, with the command given.
            crate::blocking::fcntl_lock_wait(cmd, |c| unsafe { fcntl::real(fd, c, arg) })
        }
        // SAFETY: forwarded unchanged.
        _ => unsafe { fcntl::real(fd, cmd, arg) },
    }
}

/// Hands a managed fd back to blocking mode underneath, with every dup of
/// its description, and records it as a known foreign fd (still cooperative
/// through readiness waits). Used where glibc takes the fd over through
/// internal calls no hook sees: stdio (`fdopen`) and fds 0–2, which stdio and
/// every exec'd program use. On a non-blocking fd those calls would meet
/// `EAGAIN`, report an I/O error and drop data. Does nothing for fds we do
/// not manage or that the user made non-blocking.
pub(crate) fn hand_back(fd: c_int) {
    let fd = Fd::of(fd);
    if !fd.waits_on_hub() {
        return;
    }
    // SAFETY: status flags of an open fd we manage.
    let st = unsafe { fcntl::real(fd.raw(), libc::F_GETFL, 0) };
    if st >= 0 {
        // SAFETY: as above; clears only O_NONBLOCK (and our mark).
        unsafe { fcntl::real(fd.raw(), libc::F_SETFL, (st & !ours(fd)) as usize) };
        fd.unmanage();
    }
}

/// The managed pipes with `O_NONBLOCK` set underneath that the user did not
/// make non-blocking, and whether each is close-on-exec. A program exec'd
/// on one would meet `EAGAIN` on a full or empty pipe and fail or lose
/// data (fds 0–2 never get here: they were handed back).
fn nonblocking_pipes() -> impl Iterator<Item = (c_int, bool)> {
    (0..fdtable::high() as c_int).filter_map(|fd| {
        let f = Fd::of(fd).flags();
        if f & fdtable::MANAGED == 0 || f & (fdtable::SOCKET | fdtable::USER_NONBLOCK) != 0 {
            return None;
        }
        // SAFETY: F_GETFD only reads the descriptor flags.
        let fdfl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD) };
        // SAFETY: an all-zero stat is a valid out buffer for fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes into `st`.
        let fifo =
            unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO;
        (fdfl >= 0 && fifo).then_some((fd, fdfl as c_int & libc::FD_CLOEXEC != 0))
    })
}

/// The [`nonblocking_pipes`] a child process would inherit: not
/// close-on-exec.
fn inheritable_pipes() -> impl Iterator<Item = c_int> {
    nonblocking_pipes().filter(|&(_, cloexec)| !cloexec).map(|(fd, _)| fd)
}

/// A new, blocking open file description of the pipe end `fd`, through
/// `/proc/self/fd` (the kernel opens the same pipe again, with the same
/// access mode), close-on-exec. None if that fails (no `/proc`, no fds
/// left, the write end of a pipe nobody reads).
fn reopen_blocking(fd: c_int) -> Option<c_int> {
    // SAFETY: F_GETFL only reads the status flags.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) };
    if fl < 0 {
        return None;
    }
    let fl = fl as c_int;
    // "/proc/self/fd/" and the number, NUL-terminated, without allocating
    // (this runs in a fork child).
    let mut path = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (fd as u32, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        path[14 + i] = digits[len - 1 - i];
    }
    // O_NONBLOCK for the open only: opening the write end of a pipe with no
    // reader would otherwise wait for one; it fails with ENXIO instead.
    // SAFETY: a NUL-terminated path; the flags ask for a new fd.
    let nfd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            (fl & libc::O_ACCMODE) | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if nfd < 0 {
        return None;
    }
    let nfd = nfd as c_int;
    // SAFETY: our own new description; clears O_NONBLOCK, keeps the rest.
    unsafe { libc::syscall(libc::SYS_fcntl, nfd, libc::F_SETFL, fl & !libc::O_NONBLOCK) };
    Some(nfd)
}

/// Puts `from` at `to` (raw `dup3`: no hook, no table update), close-on-exec
/// if `cloexec`, and closes `from`.
fn move_fd(from: c_int, to: c_int, cloexec: bool) {
    let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: both are open fds of this process; `to` is replaced.
    unsafe {
        libc::syscall(libc::SYS_dup3, from, to, flags);
        libc::syscall(libc::SYS_close, from);
    }
}

/// In the child of `fork`: every managed pipe gets its own blocking
/// description, so a program it execs sees a blocking pipe; the parent's
/// description (shared until now, non-blocking underneath) is untouched.
/// Close-on-exec pipes too: the child may still make one inheritable
/// before it execs (Python's `subprocess` clears `FD_CLOEXEC` on its
/// `pass_fds` between fork and exec, as `multiprocessing` does for its
/// resource tracker's pipe, which then met `EAGAIN` and took the parent for
/// dead). From here on the child treats the fd as a known foreign one
/// (readiness wait, then the call), like stdin.
pub(crate) fn private_pipes_after_fork() {
    for (fd, cloexec) in nonblocking_pipes() {
        if let Some(b) = reopen_blocking(fd) {
            move_fd(b, fd, cloexec);
            Fd::of(fd).set_known(false, false, false);
        }
    }
}

/// greenhook's mark on a socket's open file description: `O_APPEND`, which
/// means nothing to a socket, set beside the `O_NONBLOCK` greenhook added,
/// where the description may reach another process (a fork child, a
/// `sendmsg` with `SCM_RIGHTS`). The description's flags are all another
/// process can see, and `O_NONBLOCK` alone could be the program's; with the
/// mark, greenhook in the receiving process (an exec'd child inherits the
/// preload) takes the socket as a managed one, blocking for the program
/// (see `fdwait::examine`). A socket cannot be given a blocking description
/// of its own as a pipe can. `F_GETFL` hides the mark as it hides
/// `O_NONBLOCK`; the program's own `O_NONBLOCK` removes it.
pub(crate) const MARK: c_int = libc::O_APPEND;

/// The status flags greenhook adds underneath to a managed fd the user did
/// not make non-blocking: `O_NONBLOCK`, and on a socket the [`MARK`] with
/// it. `F_GETFL` hides them; `hand_back` clears them.
fn ours(fd: Fd) -> c_int {
    libc::O_NONBLOCK | if fd.flags() & fdtable::SOCKET != 0 { MARK } else { 0 }
}

/// Sets (`on`) or clears `flag` among the status flags of `fd`'s open file
/// description, unless it is so already. Returns the flags it changed from
/// (None: nothing changed, or `fd` is not open); keeps errno. Raw system
/// calls: no hook of ours sees them.
pub(crate) fn set_status_flag(fd: c_int, flag: c_int, on: bool) -> Option<c_int> {
    let saved = crate::errno::get();
    // SAFETY: F_GETFL only reads the status flags.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) } as c_int;
    let changed = (fl >= 0 && (fl & flag != 0) != on).then(|| {
        let to = if on { fl | flag } else { fl & !flag };
        // SAFETY: the flags just read, with only `flag` changed.
        unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_SETFL, to) };
        fl
    });
    crate::errno::set(saved);
    changed
}

/// Sets [`MARK`] on the description of `fd`, a managed socket the user did
/// not make non-blocking.
fn mark(fd: c_int) {
    set_status_flag(fd, MARK, true);
}

/// Clears [`MARK`] from the description of `fd` (the user made it
/// non-blocking: a receiver must see it so).
fn unmark(fd: c_int) {
    set_status_flag(fd, MARK, false);
}

/// Whether `fd` is a managed socket non-blocking underneath that the user
/// did not make non-blocking (a [`NOWAIT`](fdtable::NOWAIT) socket's
/// description is blocking, as the program made it: nothing to mark).
fn greenhooks_socket(fd: c_int) -> bool {
    let f = Fd::of(fd).flags();
    f & (fdtable::MANAGED | fdtable::SOCKET) == fdtable::MANAGED | fdtable::SOCKET
        && f & (fdtable::USER_NONBLOCK | fdtable::NOWAIT) == 0
}

/// After a successful `listen` on `fd`: a [`NOWAIT`](fdtable::NOWAIT)
/// socket of ours gets `O_NONBLOCK` underneath for good (hidden from
/// `F_GETFL` as a pipe's is), unless the user made it non-blocking
/// already; an adopted one goes back to a known foreign fd.
fn listening(fd: Fd) {
    if !fd.nowait() {
        return;
    }
    if fd.is_adopted() {
        // Another process's description too: never non-blocking for good;
        // its `accept` waits as on any listener from elsewhere.
        fd.unmanage();
        return;
    }
    // Its description is blocking (ours, the user's O_NONBLOCK not set):
    // no change means the fd is gone.
    if fd.flags() & fdtable::USER_NONBLOCK == 0 && set_status_flag(fd.raw(), libc::O_NONBLOCK, true).is_none() {
        return;
    }
    fd.set_nonblocking_underneath();
}

/// In the child of `fork`: every managed socket is marked ([`MARK`]), for
/// a program the child may exec with it. (The description is shared: the
/// parent's is marked too, which it hides as well.)
pub(crate) fn mark_sockets_after_fork() {
    if !fdtable::made_nonblocking() {
        return;
    }
    for fd in (0..fdtable::high() as c_int).filter(|&fd| greenhooks_socket(fd)) {
        mark(fd);
    }
}

/// A `sendmsg`'s message with the pipes it passes (`SCM_RIGHTS`) swapped for
/// blocking descriptions of the same pipes ([`blocking_rights`]); closes
/// those when dropped, keeping `errno`.
pub(crate) struct BlockingRights {
    msg: libc::msghdr,
    /// The copy of the control data `msg` points at (8-aligned, as
    /// `cmsghdr`s are).
    _control: Vec<u64>,
    opened: Vec<c_int>,
}

impl BlockingRights {
    /// The message to send instead of the caller's.
    pub(crate) fn msg(&self) -> *const libc::msghdr {
        &self.msg
    }
}

impl Drop for BlockingRights {
    fn drop(&mut self) {
        let e = crate::errno::get();
        for &fd in &self.opened {
            // SAFETY: our own descriptions, sent (the receiver holds its own
            // reference) or not.
            unsafe { libc::syscall(libc::SYS_close, fd) };
        }
        crate::errno::set(e);
    }
}

/// For `sendmsg` on a Unix socket: a pipe passed to another process with
/// `SCM_RIGHTS` would take its `O_NONBLOCK` along (a property of the open
/// file description the receiver shares), and a program there reading it
/// as the blocking pipe it is would meet `EAGAIN` (Python's forkserver read
/// `None` from its request pipe). Each managed pipe the caller did not make
/// non-blocking itself is sent as a new, blocking description of the same
/// pipe end instead. None when there is nothing to swap, or when the
/// caller's message cannot be read (the kernel then answers `EFAULT` to the
/// caller's own). A socket cannot be reopened so: it goes marked instead
/// ([`MARK`]).
///
/// # Safety
/// `msg` is the caller's argument to `sendmsg`, not yet checked by anyone.
pub(crate) unsafe fn blocking_rights(msg: *const libc::msghdr) -> Option<BlockingRights> {
    if !fdtable::made_nonblocking() {
        return None;
    }
    let mut m = crate::user::read(msg).ok()?;
    let len = m.msg_controllen;
    if len < std::mem::size_of::<libc::cmsghdr>() || len > 1 << 16 || m.msg_control.is_null() {
        return None;
    }
    let mut control = vec![0u64; len.div_ceil(8)];
    // SAFETY: `control` holds at least `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(control.as_mut_ptr().cast::<u8>(), len) };
    crate::user::read_bytes(m.msg_control.cast(), bytes).ok()?;
    m.msg_control = control.as_mut_ptr().cast();
    let mut opened = Vec::new();
    // SAFETY: `m` describes our own copy of the control data, `len` bytes;
    // the CMSG_* walk stays within it (it checks each header's length
    // against the end).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<c_int>();
                let n =
                    ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize) / std::mem::size_of::<c_int>();
                for i in 0..n {
                    let fd = data.add(i).read_unaligned();
                    if greenhooks_socket(fd) {
                        mark(fd);
                        continue;
                    }
                    let f = Fd::of(fd).flags();
                    if f & fdtable::MANAGED == 0 || f & (fdtable::SOCKET | fdtable::USER_NONBLOCK) != 0 {
                        continue;
                    }
                    if let Some(b) = reopen_blocking(fd) {
                        data.add(i).write_unaligned(b);
                        opened.push(b);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
    }
    (!opened.is_empty()).then_some(BlockingRights {
        msg: m,
        _control: control,
        opened,
    })
}

/// Pipes swapped for blocking ones around a `posix_spawn` (see
/// [`blocking_pipes_for_spawn`]).
pub(crate) struct SpawnPipes(Vec<(c_int, c_int)>);

/// For `posix_spawn`, whose child runs glibc's code and then the program,
/// out of our sight: every pipe the child would inherit is swapped, in the
/// parent, for a blocking description of the same pipe until the spawn
/// returns ([`SpawnPipes::restore`]); the child keeps that one. Nothing runs
/// meanwhile on this hub (the spawn does not yield), so no fiber sees the
/// swap.
pub(crate) fn blocking_pipes_for_spawn() -> SpawnPipes {
    let mut swapped = Vec::new();
    for fd in inheritable_pipes() {
        // SAFETY: duplicates an open fd, close-on-exec, above stdio.
        let saved = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, 3) };
        if saved < 0 {
            continue;
        }
        let saved = saved as c_int;
        match reopen_blocking(fd) {
            Some(b) => {
                move_fd(b, fd, false);
                swapped.push((fd, saved));
            }
            None => {
                // SAFETY: our own duplicate.
                unsafe { libc::syscall(libc::SYS_close, saved) };
            }
        }
    }
    SpawnPipes(swapped)
}

impl SpawnPipes {
    /// Puts the parent's own descriptions back (not close-on-exec, as they
    /// were). Keeps `errno`.
    pub(crate) fn restore(self) {
        let e = crate::errno::get();
        for (fd, saved) in self.0 {
            move_fd(saved, fd, false);
        }
        crate::errno::set(e);
    }
}

/// Forgets every fd in `[first, last]` that greenhook knows of (the hub's
/// registrations and the fd table), before a bulk close.
fn forget_range(first: c_uint, last: c_uint) {
    let high = fdtable::high().max(hub::registered_high());
    let last = (last as usize).min(high.saturating_sub(1));
    for fd in first as usize..=last {
        hub::forget_fd(fd as c_int);
        if crate::gate::on() {
            fdtable::forget(fd as c_int);
        }
    }
}

/// `syscall(SYS_close, fd)` or `syscall(SYS_close_range, first, last,
/// flags)`, made by `real(a1, a2, a3)`: what the `close` and `close_range`
/// hooks do.
pub(crate) fn raw_close(
    n: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    real: impl Fn(libc::c_long, libc::c_long, libc::c_long) -> libc::c_long,
) -> libc::c_long {
    if n == libc::SYS_close {
        if let Ok(fd) = c_int::try_from(a1) {
            if hub::reactor::is_own(fd) {
                return crate::errno::fail(libc::EBADF);
            }
            if fd >= 0 {
                forget_range(fd as c_uint, fd as c_uint);
            }
        }
        return real(a1, a2, a3);
    }
    before_close_range(a1 as c_uint, a2 as c_uint, a3 as c_int);
    let call = |a: c_uint, b: c_uint, f: c_int| {
        real(libc::c_long::from(a), libc::c_long::from(b), libc::c_long::from(f)) as c_int
    };
    libc::c_long::from(around_own(a1 as c_uint, a2 as c_uint, a3 as c_int, call))
}

/// `close_range(first, last, flags)` made by `call`, in pieces that leave
/// out the hub's own fds (see `hub::reactor::own`), unless it only sets
/// close-on-exec (ours have it) or the range holds none of them: the
/// kernel's answer for the first piece that fails (`EINVAL` for a bad
/// range or flags, which the first piece meets), else 0.
fn around_own(first: c_uint, last: c_uint, flags: c_int, call: impl Fn(c_uint, c_uint, c_int) -> c_int) -> c_int {
    let own = if flags as c_uint & libc::CLOSE_RANGE_CLOEXEC != 0 || first > last {
        Vec::new()
    } else {
        hub::reactor::own_in(first, last)
    };
    if own.is_empty() {
        return call(first, last, flags);
    }
    close_pieces(first, last, flags, &own, call)
}

/// `[first, last]` closed by `call` in the pieces between `own` (the hub's
/// fds in that range, in order): the first failing piece's answer, else 0.
fn close_pieces(
    first: c_uint,
    last: c_uint,
    flags: c_int,
    own: &[c_int],
    call: impl Fn(c_uint, c_uint, c_int) -> c_int,
) -> c_int {
    // The next fd to close; ours are below 65,536, so `fd + 1` fits.
    let mut from = first;
    for &fd in own {
        let fd = fd as c_uint;
        if fd > from {
            let r = call(from, fd - 1, flags);
            if r != 0 {
                return r;
            }
        }
        from = fd + 1;
    }
    if from <= last {
        return call(from, last, flags);
    }
    0
}

/// What `close_range` needs first, unless it only sets close-on-exec.
fn before_close_range(first: c_uint, last: c_uint, flags: c_int) {
    if flags as c_uint & libc::CLOSE_RANGE_CLOEXEC == 0 && first <= last {
        forget_range(first, last);
    }
}
