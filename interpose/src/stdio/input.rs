//! stdio input: `fgets`, `fread`, `getdelim`/`getline`, `fgetc`/`getc`/
//! `getchar`, their `_unlocked` forms, `__uflow`/`__underflow` (what the
//! inline `getc_unlocked` calls), and the `scanf` family, narrow and wide.
//!
//! Each hook makes sure the FILE's read buffer holds data before glibc
//! looks at it ([`fill`]): when the buffer is empty it waits on the hub
//! until the fd is readable, then lets glibc refill the buffer with one
//! `read` (`__underflow`, exported by glibc), which cannot block now. Line
//! and block reads (`fgets`, `getdelim`, `fread`) take what the buffer holds
//! with the real `_unlocked` function, bounded so that it never refills by
//! itself, and repeat: the whole call is cooperative however the data
//! arrives. An `EAGAIN` from the refill (another reader took the data) is
//! cleared and waited out.
//!
//! **`scanf`.** A conversion may need more input than one refill brings,
//! and glibc reads again internally. So on pipes, sockets and ttys the whole
//! call runs on the offload pool: the worker blocks, not the hub.
//! `fscanf`/`scanf`/`__isoc99_fscanf`/`__isoc99_scanf` are variadic: stable
//! Rust cannot define C variadics, so they are declared with 16 trailing
//! pointer-sized words and forward them all — exact for up to 16
//! conversions on System V x86-64 and AAPCS64 Linux (scanf's variadic
//! arguments are all pointers); the real function ignores the extra words.
//! Programs with more than 16 conversions in one `scanf` must not use the
//! shim.

use hub::Interest;
use libc::{c_char, c_int, c_void, size_t, ssize_t, FILE};

use super::{clear_error, coop_locked, fd_of, flags, io, kind, locked, set_error, stdin, Kind, ERR_SEEN};
use crate::errno;
use crate::hook::hook;

/// `_IO_IN_BACKUP`: reading from the `ungetc` backup area.
const IN_BACKUP: c_int = 0x0100;

/// Bytes buffered for reading (reading from the `ungetc` backup area
/// counts as "has data": glibc switches back by itself).
pub(super) fn buffered(f: *mut FILE) -> usize {
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

/// Where `f`'s buffer is empty and glibc would read the fd: a cancellation
/// point, as glibc's read is, then a wait until the fd is readable. False,
/// with the stream's error flag and errno set, when the wait failed (a
/// socket timeout, a handler without `SA_RESTART`).
pub(super) fn await_input(f: *mut FILE) -> bool {
    crate::cancel_point();
    match crate::fdwait::wait_until_ready(crate::fdtable::Fd::of(fd_of(f)), Interest::Readable) {
        Ok(()) => true,
        Err(e) => {
            set_error(f);
            errno::set(e);
            false
        }
    }
}

/// Makes sure `f`'s read buffer holds data: waits for the fd, then lets
/// glibc refill the buffer with one read. Returns false at end of file or
/// on an error (glibc's flags and errno say which). A call that finds its
/// data buffered passes no cancellation point, as in glibc.
fn fill(f: *mut FILE) -> bool {
    loop {
        if buffered(f) > 0 {
            return true;
        }
        if !await_input(f) {
            return false;
        }
        let had_error = flags(f) & ERR_SEEN != 0;
        // SAFETY: a live FILE; the fd is readable, so the one read this
        // makes does not block.
        if unsafe { __underflow::real(f) } != libc::EOF {
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

// ---------------------------------------------------------------- lines and blocks

/// `fgets` and `fgets_unlocked`: `real` is the entry point's own next
/// definition, for the streams and arguments that pass through.
fn fgets_with(
    real: unsafe fn(*mut c_char, c_int, *mut FILE) -> *mut c_char,
    lock: bool,
    s: *mut c_char,
    n: c_int,
    f: *mut FILE,
) -> *mut c_char {
    if n <= 1 || s.is_null() || kind(f) == Kind::Pass {
        // SAFETY: forwarded unchanged (glibc handles the edge cases).
        return locked(f, lock && !f.is_null() && crate::gate::cooperative(), || unsafe {
            real(s, n, f)
        });
    }
    locked(f, lock, || fgets_coop(s, n, f))
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
        let r = unsafe { fgets_unlocked::real(s.add(len), (take + 1) as c_int, f) };
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

/// `fread` and `fread_unlocked`: `real` as for [`fgets_with`].
fn fread_with(
    real: unsafe fn(*mut c_void, size_t, size_t, *mut FILE) -> size_t,
    lock: bool,
    p: *mut c_void,
    size: size_t,
    n: size_t,
    f: *mut FILE,
) -> size_t {
    let total = size.checked_mul(n);
    let (Some(total), false) = (total, kind(f) == Kind::Pass || p.is_null()) else {
        // SAFETY: forwarded unchanged.
        return locked(f, lock && !f.is_null() && crate::gate::cooperative(), || unsafe {
            real(p, size, n, f)
        });
    };
    if total == 0 {
        return 0;
    }
    locked(f, lock, || {
        let mut done = 0usize;
        while done < total && fill(f) {
            let take = buffered(f).min(total - done);
            // SAFETY: within the caller's buffer; at most what is buffered,
            // so glibc does not read the fd.
            done += unsafe { fread_unlocked::real(p.cast::<u8>().add(done).cast(), 1, take, f) };
        }
        done / size
    })
}

/// `getdelim`, `__getdelim` and `getline`: cooperative for pipes, sockets
/// and ttys; what passes through goes to glibc's `getdelim`.
fn getdelim_with(line: *mut *mut c_char, n: *mut size_t, delim: c_int, f: *mut FILE) -> ssize_t {
    if line.is_null() || n.is_null() || kind(f) == Kind::Pass {
        // SAFETY: forwarded unchanged.
        return coop_locked(f, || unsafe { getdelim::real(line, n, delim, f) });
    }
    // SAFETY: non-null caller pointers to the line buffer and its size.
    locked(f, true, || unsafe {
        getdelim_coop(&mut *line, &mut *n, delim as u8, f)
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
            let c = unsafe { getc_unlocked::real(f) };
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
        let got = unsafe { fread_unlocked::real((*line).add(len).cast(), 1, take, f) };
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

hook! {
    /// `fgets(3)`.
    [stdio] fn fgets(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char {
        fgets_with(fgets::real, true, s, n, f)
    }

    /// `fgets_unlocked(3)`.
    [stdio] fn fgets_unlocked(s: *mut c_char, n: c_int, f: *mut FILE) -> *mut c_char {
        fgets_with(fgets_unlocked::real, false, s, n, f)
    }

    /// `fread(3)`.
    [stdio] fn fread(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
        fread_with(fread::real, true, p, size, n, f)
    }

    /// `fread_unlocked(3)`.
    [stdio] fn fread_unlocked(p: *mut c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
        fread_with(fread_unlocked::real, false, p, size, n, f)
    }

    /// `getdelim(3)`.
    [stdio] fn getdelim(line: *mut *mut c_char, n: *mut size_t, delim: c_int, f: *mut FILE) -> ssize_t {
        getdelim_with(line, n, delim, f)
    }

    /// `__getdelim`, glibc's alias that `getline` users may import.
    [stdio] fn __getdelim(line: *mut *mut c_char, n: *mut size_t, delim: c_int, f: *mut FILE) -> ssize_t {
        getdelim_with(line, n, delim, f)
    }

    /// `getline(3)`: `getdelim` with `'\n'`.
    [stdio] fn getline(line: *mut *mut c_char, n: *mut size_t, f: *mut FILE) -> ssize_t {
        getdelim_with(line, n, b'\n' as c_int, f)
    }
}

// ---------------------------------------------------------------- characters

/// A single-character read: fill, then the real call (which finds data);
/// `lock` for the entry points that lock the FILE.
fn getc_with(f: *mut FILE, lock: bool, op: impl FnOnce() -> c_int) -> c_int {
    let lock = lock && !f.is_null() && crate::gate::cooperative();
    if kind(f) == Kind::Pass {
        return locked(f, lock, op);
    }
    locked(f, lock, || if fill(f) { op() } else { libc::EOF })
}

/// The character reads: `name(args) on stream => real`, where `real` is the
/// glibc function called once the buffer holds data.
macro_rules! getc_hooks {
    ($($name:ident($($arg:ident),*) on $file:expr => $real:ident, $lock:expr;)*) => {
        hook! {$(
            #[doc = concat!("`", stringify!($name), "(3)`: waits for input on the hub when the buffer is empty.")]
            [stdio] fn $name($($arg: *mut FILE),*) -> c_int {
                // SAFETY: reading the stdio globals.
                #[allow(unused_unsafe)]
                let f = unsafe { $file };
                // SAFETY: forwarded unchanged.
                getc_with(f, $lock, || unsafe { $real::real(f) })
            }
        )*}
    };
}

getc_hooks! {
    fgetc(f) on f => fgetc, true;
    getc(f) on f => getc, true;
    _IO_getc(f) on f => _IO_getc, true;
    fgetc_unlocked(f) on f => fgetc_unlocked, false;
    getc_unlocked(f) on f => getc_unlocked, false;
    getchar() on stdin => getc, true;
    getchar_unlocked() on stdin => getc_unlocked, false;
}

hook! {
    /// `__uflow`: what glibc's inline `getc_unlocked`, `getchar_unlocked`
    /// and `fgetc_unlocked` (`<bits/stdio.h>`, in code built with
    /// optimisation) call when the buffer is empty, with the caller's lock
    /// (or none). Unhooked, it read the fd in the kernel: on an empty pipe
    /// the hub stalled, and a writer that was a fiber of it never came.
    [stdio] fn __uflow(f: *mut FILE) -> c_int {
        if kind(f) == Kind::Pass {
            // SAFETY: forwarded unchanged.
            return unsafe { __uflow::real(f) };
        }
        // SAFETY: the buffer holds data now: no read.
        if fill(f) { unsafe { __uflow::real(f) } } else { libc::EOF }
    }

    /// `__underflow`: the same without taking the character.
    [stdio] fn __underflow(f: *mut FILE) -> c_int {
        if kind(f) == Kind::Pass {
            // SAFETY: forwarded unchanged.
            return unsafe { __underflow::real(f) };
        }
        // SAFETY: as in `__uflow`.
        if fill(f) { unsafe { __underflow::real(f) } } else { libc::EOF }
    }
}

// ---------------------------------------------------------------- scanf

/// A scanf-family call: on a pipe, socket or tty, the whole call on the
/// offload pool; on a managed fd, `O_NONBLOCK` is cleared underneath first
/// (see the [module](self) docs).
fn scan(f: *mut FILE, op: impl FnOnce() -> c_int) -> c_int {
    let k = kind(f);
    if k == Kind::Pass {
        return op();
    }
    if buffered(f) == 0 {
        // glibc reads the fd (its cancellation point) unless the buffer
        // holds data.
        crate::cancel_point();
    }
    if k == Kind::Managed {
        crate::fd::hand_back(fd_of(f));
    }
    // A conversion may need more input than one refill brings, and glibc
    // then reads again through its internal alias, blocking. So the whole
    // call runs on the offload pool: the worker blocks, not the hub, and the
    // FILE lock is the worker's. The caller's pointers (format, va_list,
    // destinations) stay valid: offload cannot return before the call ends.
    let op = crate::AssertSend(op);
    crate::offload(hub::Lane::Wait, move || op.call())
}

hook! {
    /// `vfscanf(3)` (`ap` is a `va_list`, a pointer on these ABIs).
    [stdio] fn vfscanf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        scan(f, || unsafe { vfscanf::real(f, fmt, ap) })
    }

    /// `__isoc99_vfscanf`: C99 `vfscanf`.
    [stdio] fn __isoc99_vfscanf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        scan(f, || unsafe { __isoc99_vfscanf::real(f, fmt, ap) })
    }

    /// `vscanf(3)`: `vfscanf` on stdin.
    [stdio] fn vscanf(fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdin };
        // SAFETY: the caller's arguments, on stdin.
        scan(f, || unsafe { vfscanf::real(f, fmt, ap) })
    }

    /// `vfwscanf(3)`: the wide `vfscanf`, the same way.
    [stdio] fn vfwscanf(f: *mut FILE, fmt: *const libc::wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        scan(f, || unsafe { vfwscanf::real(f, fmt, ap) })
    }

    /// `__isoc99_vfwscanf`: C99 `vfwscanf`.
    [stdio] fn __isoc99_vfwscanf(f: *mut FILE, fmt: *const libc::wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        scan(f, || unsafe { __isoc99_vfwscanf::real(f, fmt, ap) })
    }

    /// `vwscanf(3)`: `vfwscanf` on stdin.
    [stdio] fn vwscanf(fmt: *const libc::wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdin };
        // SAFETY: the caller's arguments, on stdin.
        scan(f, || unsafe { vfwscanf::real(f, fmt, ap) })
    }

    /// `__isoc99_vwscanf`: C99 `vwscanf`.
    [stdio] fn __isoc99_vwscanf(fmt: *const libc::wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdin };
        // SAFETY: the caller's arguments, on stdin.
        scan(f, || unsafe { __isoc99_vfwscanf::real(f, fmt, ap) })
    }

    /// `__isoc99_vscanf`: C99 `vscanf`.
    [stdio] fn __isoc99_vscanf(fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdin };
        // SAFETY: the caller's arguments, on stdin.
        scan(f, || unsafe { __isoc99_vfscanf::real(f, fmt, ap) })
    }
}

/// The variadic scanfs, `stream-form / stdin-form`, forwarded as 16
/// pointer words (see the [module](self) docs).
macro_rules! scanf_hooks {
    ($($name:ident / $sname:ident;)*) => {
        hook! {$(
            #[doc = concat!("`", stringify!($name), "`: variadic, forwarded as 16 pointer words.")]
            [stdio] fn $name(
                f: *mut FILE, fmt: *const c_char, a0: usize, a1: usize, a2: usize, a3: usize, a4: usize,
                a5: usize, a6: usize, a7: usize, a8: usize, a9: usize, a10: usize, a11: usize, a12: usize,
                a13: usize, a14: usize, a15: usize,
            ) -> c_int {
                scan(f, || {
                    // SAFETY: forwarded unchanged with the caller's words.
                    unsafe { $name::real(f, fmt, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) }
                })
            }

            #[doc = concat!("`", stringify!($sname), "`: `", stringify!($name), "` on stdin.")]
            [stdio] fn $sname(
                fmt: *const c_char, a0: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize,
                a7: usize, a8: usize, a9: usize, a10: usize, a11: usize, a12: usize, a13: usize, a14: usize,
                a15: usize,
            ) -> c_int {
                // SAFETY: reading the stdio global.
                let f = unsafe { stdin };
                scan(f, || {
                    // SAFETY: the caller's words, on stdin.
                    unsafe { $name::real(f, fmt, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) }
                })
            }
        )*}
    };
}

scanf_hooks! {
    fscanf / scanf;
    __isoc99_fscanf / __isoc99_scanf;
    // The wide ones: the format is a wide string, forwarded as a pointer.
    fwscanf / wscanf;
    __isoc99_fwscanf / __isoc99_wscanf;
}
