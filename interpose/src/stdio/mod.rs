//! stdio on pipes, sockets and ttys: what the input hooks
//! ([`input`]: `fgets`, `fread`, `getline`, `getc`, `scanf`…),
//! the output hooks ([`output`]: `fwrite`, `fputs`, `putc`,
//! `fflush`, `fdopen`, `fclose`…) and formatted output
//! ([`printf`]) share: glibc's `FILE` layout, and which
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
//! **What remains.**
//! - Streams flushed by `exit()` are flushed by glibc directly.
//! - FILE locks belong to the OS thread: while fiber A waits inside
//!   `fgets(f)` (holding `f`'s lock), fiber B on the same hub can enter
//!   `f` too (the lock is recursive for the owning thread) and the two
//!   interleave at refill boundaries.
//! - The `scanf` family and formatted output have limits of their own (see
//!   [`input`] and [`output`]).

use libc::{c_char, c_int, FILE};

mod input;
mod output;
mod printf;

// The fortified forms (`__fgets_chk`, `__fread_chk`) end in these.
pub(crate) use input::{fgets, fgets_unlocked, fread, fread_unlocked};

extern "C" {
    static mut stdin: *mut FILE;
    static mut stdout: *mut FILE;
    fn flockfile(f: *mut FILE);
    fn funlockfile(f: *mut FILE);
}

/// The leading fields of glibc's `struct _IO_FILE` (x86-64 and aarch64
/// layout: an `int` padded to 8, then pointers), which these hooks read.
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
}

/// `_IO_ERR_SEEN`.
const ERR_SEEN: c_int = 0x0020;

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

fn set_error(f: *mut FILE) {
    // SAFETY: a live glibc FILE; setting the error flag is what glibc does
    // on a failed read or write.
    unsafe { (*io(f)).flags |= ERR_SEEN };
}

fn clear_error(f: *mut FILE) {
    // SAFETY: as set_error.
    unsafe { (*io(f)).flags &= !ERR_SEEN };
}

/// Runs `op` with `f` locked (for the locked entry points).
fn locked<R>(f: *mut FILE, lock: bool, op: impl FnOnce() -> R) -> R {
    if lock {
        // SAFETY: a live FILE.
        unsafe { flockfile(f) };
    }
    let r = op();
    if lock {
        // SAFETY: locked above by this thread.
        unsafe { funlockfile(f) };
    }
    r
}
