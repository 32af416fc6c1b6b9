//! stdio on pipes, sockets and ttys: `fgets`, `getline`, `fread`, `fgetc`,
//! the `scanf` family and their `_unlocked` forms, and the output side
//! (`fwrite`, `fputs`, `puts`, `fputc`, `putc`, `putchar`, `fflush`, and the
//! `printf` family in [`printf`](self::printf)).
//!
//! glibc's stdio reads and writes through its internal `read`/`write`
//! aliases, which our `read`/`write` hooks never see: a fiber in `fgets()`
//! on an empty pipe would stall the hub, and on a managed fd (non-blocking
//! underneath) glibc would see `EAGAIN` and report an error. So each input
//! hook makes sure the FILE's read buffer holds data before glibc looks at
//! it: when the buffer is empty it waits on the hub until the fd is
//! readable, then lets glibc refill the buffer with one `read`
//! (`__underflow`, exported by glibc), which cannot block now. Line and
//! block reads (`fgets`, `getdelim`, `fread`) take what the buffer holds
//! with the real `_unlocked` function, bounded so that it never refills by
//! itself, and repeat: the whole call is cooperative however the data
//! arrives. An `EAGAIN` from the refill (another reader took the data) is
//! cleared and waited out.
//!
//! Which fds: managed ones (unless the user asked for `O_NONBLOCK`), and, in
//! a cooperative context, foreign blocking pipes/ttys/sockets — the same
//! rules as `io.rs`. Regular files, memory streams (`fileno` = -1) and
//! non-blocking fds pass straight through.
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
//! - `scanf` family: a conversion may need more input than one refill
//!   brings, and glibc reads again internally. So on pipes, sockets and ttys
//!   the whole call runs on the offload pool: the worker blocks, not the hub.
//!   `fscanf`/`scanf`/`__isoc99_fscanf`/`__isoc99_scanf` are variadic: stable
//!   Rust cannot define C variadics, so they are declared with 16 trailing
//!   pointer-sized words and forward them all — exact for up to 16
//!   conversions on System V x86-64 and AAPCS64 Linux (scanf's variadic
//!   arguments are all pointers); the real function ignores the extra words.
//!   Programs with more than 16 conversions in one `scanf` must not use the
//!   shim.
//! - Output: before a call that may write to a pipe/socket, the fiber waits
//!   until the fd polls writable and, on a pipe, until what the FILE holds
//!   plus the call's bytes fit. `fwrite`/`fputs` are fed to glibc in pieces
//!   of at most `PIPE_BUF` bytes. Formatted output (`vprintf`, `vfprintf`,
//!   and `printf`, `fprintf`, `dprintf` through the trampolines of
//!   [`printf`](self::printf)) larger than the pipe's free space may still
//!   block the hub; if the only reader of that pipe is another fiber of this
//!   hub, that is a deadlock, as it is for any program that writes more than
//!   a pipe holds from the thread that must read it.
//! - Streams flushed by `exit()` are flushed by glibc directly.
//! - FILE locks belong to the OS thread: while fiber A waits inside
//!   `fgets(f)` (holding `f`'s lock), fiber B on the same hub can enter
//!   `f` too (the lock is recursive for the owning thread) and the two
//!   interleave at refill boundaries.

use hub::Interest;
use libc::{c_char, c_int, c_void, size_t, ssize_t, FILE};

use crate::errno;
use crate::fdtable;

mod next {
    use libc::{c_char, c_int, c_void, size_t, ssize_t, FILE};
    crate::real::real! {
        fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int;
        fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
        fn __underflow(f: *mut FILE) -> c_int;
        fn fgetc(f: *mut FILE) -> c_int;
        fn getc(f: *mut FILE) -> c_int;
        fn fgetc_unlocked(f: *mut FILE) -> c_int;
        fn getc_unlocked(f: *mut FILE) -> c_int;
        fn fgets(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char;
        fn fgets_unlocked(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char;
        fn fread(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t;
        fn fread_unlocked(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t;
        fn getdelim(line: *mut *mut c_char, n: *mut size_t, delim: c_int, f: *mut FILE) -> ssize_t;
        fn vfscanf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int;
        fn __isoc99_vfscanf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int;
        fn fwrite(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t;
        fn fwrite_unlocked(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t;
        fn fputc(c: c_int, f: *mut FILE) -> c_int;
        fn putc(c: c_int, f: *mut FILE) -> c_int;
        fn fflush(f: *mut FILE) -> c_int;
        fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE;
        fn fclose(f: *mut FILE) -> c_int;
        fn vfprintf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int;
    }
    // The variadic scanfs, with 16 trailing words (see the module docs).
    crate::real::real! {
        fn fscanf(f: *mut FILE, fmt: *const c_char, a0: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize, a7: usize, a8: usize, a9: usize, a10: usize, a11: usize, a12: usize, a13: usize, a14: usize, a15: usize) -> c_int;
        fn __isoc99_fscanf(f: *mut FILE, fmt: *const c_char, a0: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize, a7: usize, a8: usize, a9: usize, a10: usize, a11: usize, a12: usize, a13: usize, a14: usize, a15: usize) -> c_int;
    }
}

mod printf;

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

/// `_IO_UNBUFFERED`.
const UNBUFFERED: c_int = 0x0002;
/// `_IO_ERR_SEEN`.
const ERR_SEEN: c_int = 0x0020;
/// `_IO_IN_BACKUP`: reading from the `ungetc` backup area.
const IN_BACKUP: c_int = 0x0100;
/// `_IO_LINE_BUF`.
const LINE_BUF: c_int = 0x0200;

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

/// Bytes buffered for reading (0 if the stream reads from its `ungetc`
/// backup area counts as "has data": glibc switches back by itself).
fn buffered(f: *mut FILE) -> usize {
    // SAFETY: a live glibc FILE; the fields are read, not written.
    let p = unsafe { &*io(f) };
    if p.flags & IN_BACKUP != 0 {
        return 1;
    }
    if p.read_ptr.is_null() || p.read_end <= p.read_ptr {
        0
    } else {
        p.read_end as usize - p.read_ptr as usize
    }
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

/// Waits until `fd` is readable (zero-timeout poll first, then the hub).
pub(crate) fn wait_readable_for_stdio(fd: c_int) -> Result<(), c_int> {
    crate::fdwait::wait_until_ready(fdtable::Fd::of(fd), Interest::Readable)
}

/// Makes sure `f`'s read buffer holds data: waits for the fd, then lets
/// glibc refill the buffer with one read. Returns false at end of file or
/// on an error (glibc's flags and errno say which).
fn fill(f: *mut FILE) -> bool {
    loop {
        if buffered(f) > 0 {
            return true;
        }
        if let Err(e) = wait_readable_for_stdio(fd_of(f)) {
            set_error(f);
            errno::set(e);
            return false;
        }
        let had_error = flags(f) & ERR_SEEN != 0;
        // SAFETY: a live FILE; the fd is readable, so the one read this
        // makes does not block.
        if unsafe { next::__underflow(f) } != libc::EOF {
            return true;
        }
        let e = errno::get();
        if !had_error && flags(f) & ERR_SEEN != 0 && (e == libc::EAGAIN || e == libc::EWOULDBLOCK) {
            // Another reader took the data between the poll and the read.
            clear_error(f);
            continue;
        }
        return false;
    }
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

/// A single-character read: fill, then the real call (which finds data).
fn getc_with(f: *mut FILE, op: impl FnOnce() -> c_int) -> c_int {
    if kind(f) == Kind::Pass {
        return op();
    }
    crate::cancel_point();
    if !fill(f) {
        return libc::EOF;
    }
    op()
}

/// The cooperative `fgets`.
fn fgets_coop(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char {
    let mut len = 0usize;
    let cap = (n - 1) as usize;
    while len < cap {
        if !fill(f) {
            break;
        }
        // At most what is buffered: the real call then never refills.
        let take = buffered(f).min(cap - len);
        // SAFETY: `s + len` has room for `take` bytes and a NUL within the
        // caller's n bytes.
        let r = unsafe { next::fgets_unlocked(s.add(len), (take + 1) as c_int, f) };
        if r.is_null() {
            break;
        }
        // SAFETY: fgets NUL-terminated what it wrote.
        let got = unsafe { libc::strlen(s.add(len)) };
        len += got;
        // SAFETY: `len - 1` is within what was written.
        if got == 0 || unsafe { *s.add(len - 1) } == b'\n' as c_char {
            break;
        }
    }
    if len == 0 && cap > 0 {
        return std::ptr::null_mut();
    }
    if flags(f) & ERR_SEEN != 0 && errno::get() != libc::EAGAIN && len < cap {
        // glibc: an error (other than EAGAIN) yields NULL even after data.
        let last = if len > 0 {
            // SAFETY: within the written part.
            unsafe { *s.add(len - 1) }
        } else {
            0
        };
        if last != b'\n' as c_char {
            return std::ptr::null_mut();
        }
    }
    // SAFETY: len ≤ n - 1.
    unsafe { *s.add(len) = 0 };
    s
}

fn fgets_impl(s: *mut c_char, n: c_int, f: *mut FILE, lock: bool) -> *mut c_char {
    if n <= 1 || s.is_null() || kind(f) == Kind::Pass {
        // SAFETY: forwarded unchanged (glibc handles the edge cases).
        return unsafe {
            if lock {
                next::fgets(s, n, f)
            } else {
                next::fgets_unlocked(s, n, f)
            }
        };
    }
    crate::cancel_point();
    locked(f, lock, || fgets_coop(s, n, f))
}

/// `fgets(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fgets")]
pub unsafe extern "C" fn fgets(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char {
    crate::real::guard("fgets", || fgets_impl(s, n, f, true))
}

/// `fgets_unlocked(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fgets_unlocked")]
pub unsafe extern "C" fn fgets_unlocked(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char {
    crate::real::guard("fgets_unlocked", || fgets_impl(s, n, f, false))
}

fn fread_impl(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE, lock: bool) -> size_t {
    let total = size.checked_mul(n);
    let (Some(total), false) = (total, kind(f) == Kind::Pass || p.is_null()) else {
        // SAFETY: forwarded unchanged.
        return unsafe {
            if lock {
                next::fread(p, size, n, f)
            } else {
                next::fread_unlocked(p, size, n, f)
            }
        };
    };
    if total == 0 {
        return 0;
    }
    crate::cancel_point();
    locked(f, lock, || {
        let mut done = 0usize;
        while done < total && fill(f) {
            let take = buffered(f).min(total - done);
            // SAFETY: within the caller's buffer; at most what is buffered,
            // so glibc does not read the fd.
            done += unsafe { next::fread_unlocked(p.cast::<u8>().add(done).cast(), 1, take, f) };
        }
        done / size
    })
}

/// `fread(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fread")]
pub unsafe extern "C" fn fread(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
    crate::real::guard("fread", || fread_impl(p, size, n, f, true))
}

/// `fread_unlocked(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fread_unlocked")]
pub unsafe extern "C" fn fread_unlocked(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
    crate::real::guard("fread_unlocked", || fread_impl(p, size, n, f, false))
}

/// `getdelim(3)`: cooperative for pipes, sockets and ttys.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_getdelim")]
pub unsafe extern "C" fn getdelim(line: *mut *mut c_char, n: *mut size_t, delim: c_int, f: *mut FILE) -> ssize_t {
    crate::real::guard("getdelim", || {
        if line.is_null() || n.is_null() || kind(f) == Kind::Pass {
            // SAFETY: forwarded unchanged.
            return unsafe { next::getdelim(line, n, delim, f) };
        }
        crate::cancel_point();
        // SAFETY: non-null caller pointers to the line buffer and its size.
        locked(f, true, || unsafe {
            getdelim_coop(&mut *line, &mut *n, delim as u8, f)
        })
    })
}

/// The cooperative `getdelim`: takes what the buffer holds up to the
/// delimiter, refilling cooperatively, into the caller's growing buffer.
///
/// # Safety
/// `*line`/`*n` describe a `malloc`ed buffer (or null/0), as for getdelim.
unsafe fn getdelim_coop(line: &mut *mut c_char, n: &mut size_t, delim: u8, f: *mut FILE) -> ssize_t {
    if line.is_null() || *n == 0 {
        // SAFETY: plain allocation; the caller frees with free().
        let p = unsafe { libc::realloc((*line).cast(), 120) };
        if p.is_null() {
            return errno::fail(libc::ENOMEM);
        }
        *line = p.cast();
        *n = 120;
    }
    let had_error = flags(f) & ERR_SEEN != 0;
    let mut len = 0usize;
    loop {
        if !fill(f) {
            break;
        }
        let one: [u8; 1];
        let chunk: &[u8] = if flags(f) & IN_BACKUP != 0 {
            // The ungetc area: peek one byte the slow, exact way.
            // SAFETY: a live FILE with input buffered.
            let c = unsafe { next::getc_unlocked(f) };
            // SAFETY: pushes back the byte just read (ungetc always takes one).
            unsafe { libc::ungetc(c, f) };
            one = [c as u8];
            &one
        } else {
            // SAFETY: a live FILE with `buffered(f)` bytes at read_ptr.
            unsafe { std::slice::from_raw_parts((*io(f)).read_ptr as *const u8, buffered(f)) }
        };
        let avail = chunk.len();
        let (take, found) = match chunk.iter().position(|&c| c == delim) {
            Some(i) => (i + 1, true),
            None => (avail, false),
        };
        let need = len + take + 1;
        if need > *n {
            let cap = need.max(*n * 2);
            // SAFETY: growing the caller's malloc'ed buffer.
            let p = unsafe { libc::realloc((*line).cast(), cap) };
            if p.is_null() {
                return errno::fail(libc::ENOMEM);
            }
            *line = p.cast();
            *n = cap;
        }
        // SAFETY: room for `take` bytes at `*line + len`; at most what is
        // buffered, so glibc does not read the fd.
        let got = unsafe { next::fread_unlocked((*line).add(len).cast(), 1, take, f) };
        len += got;
        if found || got < take {
            break;
        }
    }
    if len == 0 || (!had_error && flags(f) & ERR_SEEN != 0) {
        return -1;
    }
    // SAFETY: need ≤ *n, so index len is within the buffer.
    unsafe { *(*line).add(len) = 0 };
    len as ssize_t
}

/// `getline(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_getline")]
pub unsafe extern "C" fn getline(line: *mut *mut c_char, n: *mut size_t, f: *mut FILE) -> ssize_t {
    // SAFETY: same contract as getdelim with '\n'.
    unsafe { getdelim(line, n, b'\n' as c_int, f) }
}

/// `__getdelim`, glibc's alias that `getline` users may import.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___getdelim")]
pub unsafe extern "C" fn __getdelim(line: *mut *mut c_char, n: *mut size_t, delim: c_int, f: *mut FILE) -> ssize_t {
    // SAFETY: same contract.
    unsafe { getdelim(line, n, delim, f) }
}

macro_rules! getc_hooks {
    ($($name:ident($($arg:ident),*) on $file:expr => $real:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(3)`: waits for input on the hub when the buffer is empty.")]
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        pub unsafe extern "C" fn $name($($arg: *mut FILE),*) -> c_int {
            crate::real::guard(stringify!($name), || {
                // SAFETY: reading the stdio globals.
                #[allow(unused_unsafe)]
                let f = unsafe { $file };
                // SAFETY: forwarded unchanged.
                getc_with(f, || unsafe { next::$real(f) })
            })
        }
        crate::real::interpose!($name);
    )*};
}

getc_hooks! {
    fgetc(f) on f => fgetc;
    getc(f) on f => getc;
    fgetc_unlocked(f) on f => fgetc_unlocked;
    getc_unlocked(f) on f => getc_unlocked;
    getchar() on stdin => getc;
    getchar_unlocked() on stdin => getc_unlocked;
}

/// A scanf-family call: fill the buffer cooperatively first; on a managed
/// fd, clear `O_NONBLOCK` underneath for the call (see the module docs).
fn scan(f: *mut FILE, op: impl FnOnce() -> c_int) -> c_int {
    let k = kind(f);
    if k == Kind::Pass {
        return op();
    }
    crate::cancel_point();
    if k == Kind::Managed {
        crate::fd::hand_back(fd_of(f));
    }
    // A conversion may need more input than one refill brings, and glibc
    // then reads again through its internal alias, blocking. So the whole
    // call runs on the offload pool: the worker blocks, not the hub, and the
    // FILE lock is the worker's. The caller's pointers (format, va_list,
    // destinations) stay valid: offload cannot return before the call ends.
    let op = crate::AssertSend(op);
    crate::offload(move || op.call())
}

/// `vfscanf(3)` (`ap` is a `va_list`, a pointer on these ABIs).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_vfscanf")]
pub unsafe extern "C" fn vfscanf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
    // SAFETY: forwarded unchanged.
    crate::real::guard("vfscanf", || scan(f, || unsafe { next::vfscanf(f, fmt, ap) }))
}

/// `__isoc99_vfscanf`: C99 `vfscanf`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___isoc99_vfscanf")]
pub unsafe extern "C" fn __isoc99_vfscanf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
    crate::real::guard("__isoc99_vfscanf", || {
        // SAFETY: forwarded unchanged.
        scan(f, || unsafe { next::__isoc99_vfscanf(f, fmt, ap) })
    })
}

/// `vscanf(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_vscanf")]
pub unsafe extern "C" fn vscanf(fmt: *const c_char, ap: *mut c_void) -> c_int {
    // SAFETY: reading the stdio global; same contract as vfscanf.
    unsafe { vfscanf(stdin, fmt, ap) }
}

/// `__isoc99_vscanf`: C99 `vscanf`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___isoc99_vscanf")]
pub unsafe extern "C" fn __isoc99_vscanf(fmt: *const c_char, ap: *mut c_void) -> c_int {
    // SAFETY: reading the stdio global; same contract.
    unsafe { __isoc99_vfscanf(stdin, fmt, ap) }
}

macro_rules! scanf_hooks {
    ($($name:ident / $sname:ident => $real:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: variadic, forwarded as 16 pointer words (see the module docs).")]
        #[allow(clippy::too_many_arguments)]
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        pub unsafe extern "C" fn $name(
            f: *mut FILE, fmt: *const c_char, a0: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize,
            a6: usize, a7: usize, a8: usize, a9: usize, a10: usize, a11: usize, a12: usize, a13: usize,
            a14: usize, a15: usize,
        ) -> c_int {
            crate::real::guard(stringify!($name), || {
                scan(f, || {
                    // SAFETY: forwarded unchanged with the caller's words.
                    unsafe { next::$real(f, fmt, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) }
                })
            })
        }

        #[doc = concat!("`", stringify!($sname), "`: [`", stringify!($name), "`] on stdin.")]
        #[allow(clippy::too_many_arguments)]
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($sname)))]
        pub unsafe extern "C" fn $sname(
            fmt: *const c_char, a0: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize,
            a7: usize, a8: usize, a9: usize, a10: usize, a11: usize, a12: usize, a13: usize, a14: usize,
            a15: usize,
        ) -> c_int {
            // SAFETY: reading the stdio global; same contract.
            unsafe { $name(stdin, fmt, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) }
        }
        crate::real::interpose!($name, $sname);
    )*};
}

scanf_hooks! {
    fscanf / scanf => fscanf;
    __isoc99_fscanf / __isoc99_scanf => __isoc99_fscanf;
}

// ---------------------------------------------------------------- output

/// Before output of `len` bytes (None: unknown) to `f`: if it may reach a
/// pipe/socket that is not writable now, waits on the hub. Returns the
/// stream's kind, or the errno of a failed wait.
fn before_output(f: *mut FILE, len: Option<usize>) -> Result<Kind, c_int> {
    let k = kind(f);
    if k == Kind::Pass {
        return Ok(k);
    }
    // SAFETY: a live glibc FILE.
    let p = unsafe { &*io(f) };
    let fully_buffered = p.flags & (UNBUFFERED | LINE_BUF) == 0;
    let room = (p.write_end as usize).saturating_sub(p.write_ptr as usize);
    if fully_buffered && !p.write_ptr.is_null() && len.is_some_and(|l| l < room) {
        return Ok(k); // lands in the buffer: no write
    }
    let fd = fd_of(f);
    crate::fdwait::wait_until_ready(fdtable::Fd::of(fd), Interest::Writable)?;
    // A pipe may poll writable with less room than one flush needs (Linux
    // reports POLLOUT as soon as one pipe buffer slot is free): wait until
    // what is pending in the FILE plus this call's bytes fit, as long as
    // they can fit at all. `len` None is a flush (fflush, fclose).
    let need = len.unwrap_or(0) + (p.write_ptr as usize).saturating_sub(p.write_base as usize);
    while pipe_room(fd).is_some_and(|r| r < need) && pipe_capacity(fd).is_some_and(|c| need <= c) {
        if !crate::gate::can_yield() {
            break; // nothing else could drain it: let the write block
        }
        hub::sleep(std::time::Duration::from_millis(1));
    }
    Ok(k)
}

/// A pipe's capacity (None for other fds).
fn pipe_capacity(fd: c_int) -> Option<usize> {
    // SAFETY: F_GETPIPE_SZ only reads.
    let cap = unsafe { next::fcntl(fd, libc::F_GETPIPE_SZ, 0) };
    (cap > 0).then_some(cap as usize)
}

/// Free bytes in a pipe (None for other fds).
fn pipe_room(fd: c_int) -> Option<usize> {
    let cap = pipe_capacity(fd)?;
    let mut queued: c_int = 0;
    // SAFETY: FIONREAD writes one int.
    if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) } < 0 {
        return None;
    }
    Some(cap.saturating_sub(queued.max(0) as usize))
}

/// Runs an output call after [`before_output`]; on a managed fd with
/// `O_NONBLOCK` cleared underneath, so glibc never sees `EAGAIN`.
///
/// The caller's `errno` reaches `op` unchanged: a format's `%m` prints it.
fn output<R>(f: *mut FILE, len: Option<usize>, fail: R, op: impl FnOnce() -> R) -> R {
    let saved = errno::get();
    let k = match before_output(f, len) {
        Ok(k) => k,
        Err(e) => {
            set_error(f);
            errno::set(e);
            return fail;
        }
    };
    if k != Kind::Managed {
        errno::set(saved);
        return op();
    }
    let fd = fd_of(f);
    // SAFETY: the status flags of our own managed fd, restored below.
    let fl = unsafe { next::fcntl(fd, libc::F_GETFL, 0) };
    // SAFETY: as above.
    unsafe { next::fcntl(fd, libc::F_SETFL, (fl & !libc::O_NONBLOCK) as usize) };
    errno::set(saved);
    let r = op();
    let e = errno::get();
    // SAFETY: restores the flags read above.
    unsafe { next::fcntl(fd, libc::F_SETFL, fl as usize) };
    errno::set(e);
    r
}

fn fwrite_impl(p: *const c_void, size: size_t, n: size_t, f: *mut FILE, lock: bool) -> size_t {
    let real = |p: *const c_void, size: size_t, n: size_t| {
        // SAFETY: forwarded under the caller's contract.
        unsafe {
            if lock {
                next::fwrite(p, size, n, f)
            } else {
                next::fwrite_unlocked(p, size, n, f)
            }
        }
    };
    let total = size.checked_mul(n);
    let (Some(total), false) = (total, total == Some(0) || kind(f) == Kind::Pass) else {
        return real(p, size, n);
    };
    crate::cancel_point();
    locked(f, lock, || {
        let mut done = 0usize;
        while done < total {
            let piece = (total - done).min(libc::PIPE_BUF);
            // SAFETY: within the caller's buffer.
            let at = unsafe { p.cast::<u8>().add(done) }.cast::<c_void>();
            let r = output(f, Some(piece), 0, || real(at, 1, piece));
            done += r;
            if r < piece {
                break;
            }
        }
        done / size
    })
}

/// `fwrite(3)`: fed to glibc in `PIPE_BUF` pieces, each after waiting for
/// writability.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fwrite")]
pub unsafe extern "C" fn fwrite(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
    crate::real::guard("fwrite", || fwrite_impl(p, size, n, f, true))
}

/// `fwrite_unlocked(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fwrite_unlocked")]
pub unsafe extern "C" fn fwrite_unlocked(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
    crate::real::guard("fwrite_unlocked", || fwrite_impl(p, size, n, f, false))
}

/// `fputs(3)`: as `fwrite` of the string.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fputs")]
pub unsafe extern "C" fn fputs(s: *const c_char, f: *mut FILE) -> c_int {
    crate::real::guard("fputs", || {
        // SAFETY: a NUL-terminated string (fputs' contract).
        let len = unsafe { libc::strlen(s) };
        if fwrite_impl(s.cast(), 1, len, f, true) < len {
            libc::EOF
        } else {
            1
        }
    })
}

/// `puts(3)`: the string and a newline, as one locked sequence.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_puts")]
pub unsafe extern "C" fn puts(s: *const c_char) -> c_int {
    crate::real::guard("puts", || {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: a NUL-terminated string (puts' contract).
        let len = unsafe { libc::strlen(s) };
        locked(f, true, || {
            if fwrite_impl(s.cast(), 1, len, f, false) < len || fwrite_impl(c"\n".as_ptr().cast(), 1, 1, f, false) < 1 {
                libc::EOF
            } else {
                1
            }
        })
    })
}

/// `fputc(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fputc")]
pub unsafe extern "C" fn fputc(c: c_int, f: *mut FILE) -> c_int {
    crate::real::guard("fputc", || {
        // SAFETY: forwarded unchanged.
        output(f, Some(1), libc::EOF, || unsafe { next::fputc(c, f) })
    })
}

/// `putc(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_putc")]
pub unsafe extern "C" fn putc(c: c_int, f: *mut FILE) -> c_int {
    // SAFETY: forwarded unchanged.
    crate::real::guard("putc", || output(f, Some(1), libc::EOF, || unsafe { next::putc(c, f) }))
}

/// `putchar(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_putchar")]
pub unsafe extern "C" fn putchar(c: c_int) -> c_int {
    // SAFETY: reading the stdio global; same contract as putc.
    unsafe { putc(c, stdout) }
}

/// `fflush(3)` (a null stream flushes all streams: passed through).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fflush")]
pub unsafe extern "C" fn fflush(f: *mut FILE) -> c_int {
    crate::real::guard("fflush", || {
        if f.is_null() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::fflush(f) };
        }
        // SAFETY: forwarded unchanged.
        output(f, None, libc::EOF, || unsafe { next::fflush(f) })
    })
}

/// `fdopen(3)`: a managed fd handed to stdio goes back to blocking
/// underneath (with every dup of it) and is treated as a foreign fd from
/// now on. glibc's stdio reads and writes through internal aliases that no
/// hook sees; on a non-blocking fd it would meet `EAGAIN` it never asked
/// for, report an error and drop buffered data. Blocking underneath, the
/// worst case is a stall, never a loss: the hooks above wait for readiness
/// before each call that may read or write.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fdopen")]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    crate::real::guard("fdopen", || {
        // SAFETY: forwarded unchanged.
        let f = unsafe { next::fdopen(fd, mode) };
        if !f.is_null() && crate::is_patched() {
            crate::fd::hand_back(fd);
        }
        f
    })
}

/// `fclose(3)`: waits (cooperatively) until the final flush fits, and drops
/// the hub's registration of the fd before glibc closes it internally,
/// where no `close` hook sees it.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_fclose")]
pub unsafe extern "C" fn fclose(f: *mut FILE) -> c_int {
    crate::real::guard("fclose", || {
        let fd = fd_of(f);
        if fd >= 0 {
            let _ = before_output(f, None);
            hub::forget_fd(fd);
            if crate::is_patched() {
                fdtable::forget(fd);
            }
        }
        // SAFETY: forwarded unchanged.
        unsafe { next::fclose(f) }
    })
}

/// `vfprintf(3)` (`ap` is a `va_list`, a pointer on these ABIs).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_vfprintf")]
pub unsafe extern "C" fn vfprintf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
    crate::real::guard("vfprintf", || {
        // SAFETY: forwarded unchanged.
        output(f, None, -1, || unsafe { next::vfprintf(f, fmt, ap) })
    })
}

/// `vprintf(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_vprintf")]
pub unsafe extern "C" fn vprintf(fmt: *const c_char, ap: *mut c_void) -> c_int {
    // SAFETY: reading the stdio global; same contract as vfprintf.
    unsafe { vfprintf(stdout, fmt, ap) }
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    fgets,
    fgets_unlocked,
    fread,
    fread_unlocked,
    getdelim,
    getline,
    __getdelim,
    vfscanf,
    __isoc99_vfscanf,
    vscanf,
    __isoc99_vscanf,
    fwrite,
    fwrite_unlocked,
    fputs,
    puts,
    fputc,
    putc,
    putchar,
    fflush,
    fdopen,
    fclose,
    vfprintf,
    vprintf,
}
