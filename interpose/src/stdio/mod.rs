//! stdio on pipes, sockets and ttys: what the input hooks
//! ([`input`]: `fgets`, `fread`, `getline`, `getc`, `__uflow`, `scanf`…),
//! the output hooks ([`output`]: `fwrite`, `fputs`, `putc`, `__overflow`,
//! `fflush`, `fdopen`, `fclose`…), formatted output ([`printf`]) and
//! wide-character stdio ([`wide`]) share: glibc's `FILE` layout, and which
//! streams are ours to wait for.
//!
//! glibc's stdio reads and writes through its internal `read`/`write`
//! aliases, which our `read`/`write` hooks never see: a fiber in `fgets()`
//! on an empty pipe would stall the hub, and on a managed fd (non-blocking
//! underneath) glibc would see `EAGAIN` and report an error. So the stdio
//! hooks wait on the hub *before* glibc touches the fd: until there is
//! input to refill the buffer with, or room for what a write will flush.
//!
//! Which fds: managed ones (unless the user asked for `O_NONBLOCK`), and, in
//! a cooperative context, foreign blocking pipes/ttys/sockets — the same
//! rules as `io.rs` ([`kind`]). Regular files, memory streams (`fileno` =
//! -1) and non-blocking fds pass straight through.
//!
//! **FILE layout.** The hooks read the first fields of glibc's `struct
//! _IO_FILE` (flags and the read/write pointers, [`IoFile`]); this layout
//! has been stable since glibc 2.1 and is part of the installed
//! `bits/types/struct_FILE.h`.
//!
//! **Managed fds and stdio.** glibc's own reads and writes on a managed fd
//! (non-blocking underneath) would meet `EAGAIN`, report an error and drop
//! buffered data. So a managed fd that stdio takes over (`fdopen`, or the
//! first stdio call that finds one) goes back to blocking underneath, with
//! every dup of it, and is handled as a foreign fd from then on. `fclose`
//! waits until the final flush fits and drops the fd's registration before
//! glibc closes it internally.
//!
//! **FILE locks.** glibc's FILE lock is recursive for its owner, the
//! thread descriptor (`THREAD_SELF`) that took it. With per-fiber TLS each
//! fiber has a descriptor of its own, so a fiber that waits on the hub while
//! holding a FILE (inside `fgets`, a long `fwrite` to a full pipe, or
//! between its own `flockfile` and `funlockfile`) owns it meanwhile, as a
//! thread would; another fiber's stdio call on that FILE would then wait for
//! the lock in the kernel, blocking the OS thread, the holder included.
//! So every hook here takes the lock itself first, cooperatively
//! ([`acquire`]): `ftrylockfile`, and while another fiber of this thread
//! holds it, a wait on the hub that the holder's release ends (another OS
//! thread's hold, such as the offload worker running a `scanf`, is polled
//! every 10 ms). `flockfile`, `funlockfile` and `ftrylockfile` are hooked
//! the same way, so a user's lock held across a sleep serialises the other
//! fibers' output exactly as it serialises threads. Formatted output waits
//! for room before it takes the lock; calls that refill or write in pieces
//! hold it across their waits, as glibc holds it across a blocking
//! `read`/`write`. With shared TLS the lock is the OS thread's and recursive
//! for every fiber: they may interleave, as before.
//!
//! **What remains.**
//! - Streams flushed by `exit()` are flushed by glibc directly.
//! - glibc functions that lock a FILE internally and have no hook here
//!   (`ferror`, `feof`, `fseek`, `ungetc`, `perror`, `ungetwc`…)
//!   still wait in the kernel if another fiber holds that FILE across a
//!   wait: the OS thread stalls until... never, if the holder is a fiber of
//!   it. The common output and input calls are hooked.
//! - The `scanf` family and formatted output have limits of their own (see
//!   [`input`] and [`output`]).

use libc::{c_char, c_int, FILE};

use crate::hook::hook;

mod input;
mod output;
mod printf;
mod wide;

// The fortified forms (`__fgets_chk`, `__fread_chk`) end in these.
pub(crate) use input::{fgets, fgets_unlocked, fread, fread_unlocked};
// `fopen` of a FIFO ends in this (see `crate::fifo`).
pub(crate) use output::fdopen;
// `pclose` flushes with this first (see `crate::process`).
pub(crate) use output::fflush;
// The variadic trampolines, which `execl` and its kin use too.
#[cfg(target_arch = "x86_64")]
pub(crate) use printf::va_hooks;

extern "C" {
    static mut stdin: *mut FILE;
    static mut stdout: *mut FILE;
}

/// The leading fields of glibc's `struct _IO_FILE` (x86-64 and aarch64
/// layout: an `int` padded to 8, then pointers; `bits/types/struct_FILE.h`),
/// which these hooks read.
#[repr(C)]
struct IoFile {
    flags: c_int,
    read_ptr: *mut c_char,
    read_end: *mut c_char,
    read_base: *mut c_char,
    write_base: *mut c_char,
    write_ptr: *mut c_char,
    write_end: *mut c_char,
    buf_base: *mut c_char,
    buf_end: *mut c_char,
    save_base: *mut c_char,
    backup_base: *mut c_char,
    save_end: *mut c_char,
    markers: *mut libc::c_void,
    chain: *mut FILE,
    fileno: c_int,
    flags2: c_int,
    old_offset: libc::c_long,
    cur_column: u16,
    vtable_offset: i8,
    shortbuf: [c_char; 1],
    /// glibc's `_IO_lock_t`: `{ int lock; int cnt; void *owner; }`.
    lock: *mut IoLock,
    offset: i64,
    codecvt: *mut libc::c_void,
    /// The wide buffer of a wide stream (null until its first wide call).
    wide_data: *mut wide::WideData,
}

/// glibc's recursive FILE lock: the owner is the holder's thread descriptor.
#[repr(C)]
struct IoLock {
    lock: c_int,
    cnt: c_int,
    owner: *mut libc::c_void,
}

/// `_IO_ERR_SEEN`.
const ERR_SEEN: c_int = 0x0020;
/// `_IO_NO_WRITES`: a stream that is not open for writing.
const NO_WRITES: c_int = 0x0008;

/// Where glibc's `struct _IO_FILE_plus` keeps its jump table pointer: right
/// after the 216-byte `struct _IO_FILE` (x86-64 and aarch64).
const JUMPS_AT: usize = 216;

/// glibc's `struct _IO_proc_file` (`libio/iopopen.c`), what `popen` makes:
/// the `FILE`, its jump table pointer, then the child's pid.
#[repr(C)]
struct ProcFile {
    file: [u8; JUMPS_AT],
    jumps: *const libc::c_void,
    pid: libc::pid_t,
}

/// The jump table of `popen`'s streams (`_IO_proc_jumps`, static in
/// glibc), read off the first stream [`popened`] was told of: a `FILE`
/// with it is a `ProcFile`. 0 until then.
static PROC_JUMPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Learns the jump table of `popen`'s streams from `f`, one `popen` just
/// made.
pub(crate) fn popened(f: *mut FILE) {
    if !f.is_null() {
        // SAFETY: `popen` returned `f`: a live `_IO_proc_file`.
        let jumps = unsafe { (*f.cast::<ProcFile>()).jumps };
        PROC_JUMPS.store(jumps as usize, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The pid of the child of `f` if `f` is a stream `popen` made (its jump
/// table is `popen`'s: see [`popened`]), else None.
pub(crate) fn popen_child(f: *mut FILE) -> Option<libc::pid_t> {
    let proc_jumps = PROC_JUMPS.load(std::sync::atomic::Ordering::Relaxed);
    if f.is_null() || proc_jumps == 0 {
        return None;
    }
    // SAFETY: a live glibc FILE (the caller's stdio contract): every one
    // is at least a `struct _IO_FILE_plus`, so its jump table pointer is
    // there to read; the pid only behind `popen`'s jump table.
    unsafe {
        let p = f.cast::<ProcFile>();
        ((*p).jumps as usize == proc_jumps).then(|| (*p).pid)
    }
}

/// Whether `f` is open for writing.
pub(crate) fn writes(f: *mut FILE) -> bool {
    flags(f) & NO_WRITES == 0
}

/// How a stream's fd is handled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Straight to the real call.
    Pass,
    /// Managed: non-blocking underneath.
    Managed,
    /// A foreign blocking pipe, tty or socket in a cooperative context.
    Polled,
}

/// The fd of `f` (-1 for memory streams and the like).
fn fd_of(f: *mut FILE) -> c_int {
    if f.is_null() {
        return -1;
    }
    // SAFETY: a FILE the caller passed to stdio; fileno takes no lock.
    unsafe { libc::fileno(f) }
}

/// Classifies the fd of `f` with the same rules as the fd hooks
/// ([`crate::fdwait::path`]); regular files pass straight through (their reads
/// never wait for readiness).
fn kind(f: *mut FILE) -> Kind {
    match crate::fdwait::path(fd_of(f)) {
        crate::fdwait::Path::Managed(_) => Kind::Managed,
        crate::fdwait::Path::Polled(_) => Kind::Polled,
        crate::fdwait::Path::Pass | crate::fdwait::Path::File(_) => Kind::Pass,
    }
}

/// The FILE's leading fields.
fn io(f: *mut FILE) -> *mut IoFile {
    f.cast()
}

fn flags(f: *mut FILE) -> c_int {
    // SAFETY: a live glibc FILE.
    unsafe { (*io(f)).flags }
}

/// `_IO_UNBUFFERED`.
const UNBUFFERED: c_int = 0x0002;
/// `_IO_LINE_BUF`.
const LINE_BUF: c_int = 0x0200;

/// Whether `f` is fully buffered: output that fits in its buffer is not
/// written yet.
fn fully_buffered(f: *mut FILE) -> bool {
    flags(f) & (UNBUFFERED | LINE_BUF) == 0
}

fn set_error(f: *mut FILE) {
    // SAFETY: a live glibc FILE; setting the error flag is what glibc does
    // on a failed read or write.
    unsafe { (*io(f)).flags |= ERR_SEEN };
}

fn clear_error(f: *mut FILE) {
    // SAFETY: as set_error.
    unsafe { (*io(f)).flags &= !ERR_SEEN };
}

/// Runs `op` with `f` locked (for the locked entry points), the lock taken
/// cooperatively ([`acquire`]).
fn locked<R>(f: *mut FILE, lock: bool, op: impl FnOnce() -> R) -> R {
    if !lock {
        return op();
    }
    acquire(f);
    // A cancellation that acts inside `op` (a wait for input or for room)
    // ends the fiber without unwinding this frame: its exit lets the lock
    // go, as glibc's own stdio unlocks in a cleanup handler. Before, the
    // stream stayed locked, and the next thread to use it waited for ever.
    let held = crate::thread::hold_stream(f as usize);
    let r = op();
    if let Some(h) = held {
        h.let_go();
    }
    release(f);
    r
}

/// Runs `op`, which takes `f`'s lock inside glibc, with the lock taken
/// here first, cooperatively, where other fibers could be holding it.
fn coop_locked<R>(f: *mut FILE, op: impl FnOnce() -> R) -> R {
    locked(f, !f.is_null() && crate::gate::cooperative(), op)
}

/// Runs `op`, which locks `f` and frees it (`fclose`), once the lock is
/// free for us: taken cooperatively and let go again at once (nothing else
/// runs on this thread in between), since nothing of `f` is left after.
pub(crate) fn coop_acquired<R>(f: *mut FILE, op: impl FnOnce() -> R) -> R {
    if !f.is_null() && crate::gate::cooperative() {
        acquire(f);
        // SAFETY: taken just above.
        unsafe { funlockfile::real(f) };
    }
    op()
}

/// Takes `f`'s lock as `flockfile` does (recursively for its holder), but
/// while another context holds it, waits on the hub rather than in the
/// kernel (see the [module](self) docs). Where no fiber could run
/// meanwhile, it is `flockfile` itself.
pub(crate) fn acquire(f: *mut FILE) {
    loop {
        // SAFETY: a live FILE (the caller's stdio contract).
        if unsafe { ftrylockfile::real(f) } == 0 {
            return;
        }
        if !crate::gate::cooperative() {
            // SAFETY: as above.
            return unsafe { flockfile::real(f) };
        }
        // A holder on this OS thread (a fiber, or the root) releases
        // through `release`, which wakes us; another OS thread's hold is
        // polled.
        let poll = (!held_on_this_thread(f)).then(|| std::time::Instant::now() + std::time::Duration::from_millis(10));
        hub::park_object("FILE lock", f as usize, 0, poll.map(Into::into), || true);
    }
}

/// Lets go of `f`'s lock (taken by [`acquire`] or `flockfile`) and wakes
/// the fibers waiting for it, which try again.
pub(crate) fn release(f: *mut FILE) {
    // SAFETY: a FILE the caller holds.
    unsafe { funlockfile::real(f) };
    if hub::parked(f as usize) > 0 {
        hub::unpark(f as usize, usize::MAX);
    }
}

/// Whether `f`'s lock is held by a context of the calling OS thread (the
/// holder's descriptor records this thread's kernel id). Without per-fiber
/// TLS every such context shares one descriptor and `ftrylockfile` would
/// have succeeded: the holder is another OS thread.
fn held_on_this_thread(f: *mut FILE) -> bool {
    // SAFETY: a live glibc FILE; its lock pointer and the owner field are
    // read, and the owner, a holder's descriptor, is alive while it holds.
    unsafe {
        let lock = (*io(f)).lock;
        if lock.is_null() {
            return false;
        }
        let owner = std::ptr::read_volatile(&raw const (*lock).owner) as usize;
        owner != 0 && fiber::tls::same_os_thread(owner)
    }
}

hook! {
    /// `flockfile(3)`: while another fiber holds the FILE, waits on the hub
    /// (see the [module](self) docs).
    [stdio] fn flockfile(f: *mut FILE) {
        if crate::gate::patched() {
            acquire(f)
        } else {
            // SAFETY: forwarded unchanged.
            unsafe { flockfile::real(f) }
        }
    }

    /// `ftrylockfile(3)`: never waits, so glibc's own.
    [stdio] fn ftrylockfile(f: *mut FILE) -> c_int {
        // SAFETY: forwarded unchanged.
        unsafe { ftrylockfile::real(f) }
    }

    /// `funlockfile(3)`: wakes the fibers waiting for the FILE.
    [stdio] fn funlockfile(f: *mut FILE) {
        if crate::gate::on() {
            release(f)
        } else {
            // SAFETY: forwarded unchanged.
            unsafe { funlockfile::real(f) }
        }
    }
}
