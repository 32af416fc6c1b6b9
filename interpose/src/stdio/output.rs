//! stdio output: `fwrite`, `fputs`, `puts`, `fputc`, `putc`, `putchar`,
//! `__overflow` (what the inline `putc_unlocked` calls), `fflush`, and the
//! stream's ends, `fdopen` and `fclose`.
//!
//! Before a call that may write to a pipe/socket, the fiber waits until the
//! fd polls writable and, on a pipe, until what the FILE holds plus the
//! call's bytes fit ([`emit`]). `fwrite`/`fputs` are fed to glibc in pieces
//! of at most `PIPE_BUF` bytes. Formatted output ([`printf`](super::printf))
//! goes through the same wait, but its size is not known beforehand: more
//! than the pipe's free space may still block the hub; if the only reader
//! of that pipe is another fiber of this hub, that is a deadlock, as it is
//! for any program that writes more than a pipe holds from the thread that
//! must read it.

use hub::Interest;
use libc::{c_char, c_int, c_void, size_t, FILE};

use super::{coop_acquired, coop_locked, fd_of, fully_buffered, io, kind, locked, set_error, stdout, Kind};
use crate::errno;
use crate::fdtable;
use crate::hook::hook;

mod next {
    use libc::c_int;
    crate::real::real! {
        fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int;
    }
}

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
    let fully_buffered = fully_buffered(f);
    let room = (p.write_end as usize).saturating_sub(p.write_ptr as usize);
    if fully_buffered && !p.write_ptr.is_null() && len.is_some_and(|l| l < room) {
        return Ok(k); // lands in the buffer: no write
    }
    if len.is_some() {
        // The bytes do not fit: glibc writes, and its write is a
        // cancellation point (a flush's is the caller's: see
        // `flush_point`; a format's size is not known).
        crate::cancel_point();
    }
    let fd = fd_of(f);
    crate::fdwait::wait_until_ready(crate::fdtable::Fd::of(fd), Interest::Writable)?;
    // A pipe may poll writable with less room than one flush needs (Linux
    // reports POLLOUT as soon as one pipe buffer slot is free): wait until
    // what is pending in the FILE plus this call's bytes fit, as long as
    // they can fit at all. `len` None is a flush (fflush, fclose).
    let need = len.unwrap_or(0) + (p.write_ptr as usize).saturating_sub(p.write_base as usize);
    while pipe_room(fd).is_some_and(|r| r < need) && pipe_capacity(fd).is_some_and(|c| need <= c) {
        if !crate::gate::can_yield() {
            break; // nothing else could drain it: let the write block
        }
        // Where the blocking write would wait: a cancellation point, and
        // a handler without SA_RESTART ends it with EINTR (before, a
        // thread cancelled here looked for room every millisecond for
        // ever).
        crate::cancel_point();
        let mark = crate::signal::HandlerMark::now();
        if crate::time::sleep_for(std::time::Duration::from_millis(1)).is_err() {
            crate::cancel_point();
            if mark.since().interrupts {
                return Err(libc::EINTR);
            }
        }
    }
    Ok(k)
}

/// Before a flush (`fflush`, `fclose`): glibc writes what the stream
/// holds, and its write is a cancellation point, whatever the fd; with
/// nothing pending it writes nothing.
fn flush_point(f: *mut FILE) {
    // SAFETY: a live glibc FILE; the fields are read, not written.
    let p = unsafe { &*io(f) };
    if p.write_ptr > p.write_base {
        crate::cancel_point();
    }
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

/// Runs an output call (`op`, `len` bytes or None: unknown) after
/// [`before_output`]; on a managed fd with `O_NONBLOCK` cleared
/// underneath, so glibc never sees `EAGAIN`. `fail` is the call's error
/// return, for a wait that failed.
///
/// The caller's `errno` reaches `op` unchanged: a format's `%m` prints it.
pub(super) fn emit<R>(f: *mut FILE, len: Option<usize>, fail: R, op: impl FnOnce() -> R) -> R {
    let saved = errno::get();
    let k = match before_output(f, len) {
        Ok(k) => k,
        Err(e) => {
            set_error(f);
            errno::set(e);
            return fail;
        }
    };
    // The wait for room is over; glibc takes the FILE's lock inside `op`:
    // take it first without blocking the hub (see the module docs).
    coop_locked(f, || {
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
    })
}

/// `fwrite` and `fwrite_unlocked` (and the strings of `fputs` and `puts`):
/// fed to glibc in `PIPE_BUF` pieces, each after waiting for writability.
fn fwrite_with(lock: bool, p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
    let real = |p: *const c_void, size: size_t, n: size_t| {
        // SAFETY: forwarded under the caller's contract.
        unsafe {
            if lock {
                fwrite::real(p, size, n, f)
            } else {
                fwrite_unlocked::real(p, size, n, f)
            }
        }
    };
    let total = size.checked_mul(n);
    let (Some(total), false) = (total, total == Some(0) || kind(f) == Kind::Pass) else {
        return locked(f, lock && crate::gate::cooperative(), || real(p, size, n));
    };
    locked(f, lock, || {
        let mut done = 0usize;
        while done < total {
            let piece = (total - done).min(libc::PIPE_BUF);
            // SAFETY: within the caller's buffer.
            let at = unsafe { p.cast::<u8>().add(done) }.cast::<c_void>();
            let r = emit(f, Some(piece), 0, || real(at, 1, piece));
            done += r;
            if r < piece {
                break;
            }
        }
        done / size
    })
}

hook! {
    /// `fwrite(3)`.
    [stdio] fn fwrite(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
        fwrite_with(true, p, size, n, f)
    }

    /// `fwrite_unlocked(3)`.
    [stdio] fn fwrite_unlocked(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t {
        fwrite_with(false, p, size, n, f)
    }

    /// `fputs(3)`: as `fwrite` of the string.
    [stdio] fn fputs(s: *const c_char, f: *mut FILE) -> c_int {
        // SAFETY: a NUL-terminated string (fputs' contract).
        let len = unsafe { libc::strlen(s) };
        if fwrite_with(true, s.cast(), 1, len, f) < len {
            libc::EOF
        } else {
            1
        }
    }

    /// `puts(3)`: the string and a newline, as one locked sequence.
    [stdio] fn puts(s: *const c_char) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: a NUL-terminated string (puts' contract).
        let len = unsafe { libc::strlen(s) };
        locked(f, true, || {
            if fwrite_with(false, s.cast(), 1, len, f) < len || fwrite_with(false, c"\n".as_ptr().cast(), 1, 1, f) < 1 {
                libc::EOF
            } else {
                1
            }
        })
    }

    /// `fputc(3)`.
    [stdio] fn fputc(c: c_int, f: *mut FILE) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, Some(1), libc::EOF, || unsafe { fputc::real(c, f) })
    }

    /// `putc(3)`.
    [stdio] fn putc(c: c_int, f: *mut FILE) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, Some(1), libc::EOF, || unsafe { putc::real(c, f) })
    }

    /// `putchar(3)`: `putc` on stdout.
    [stdio] fn putchar(c: c_int) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: the caller's character, on stdout.
        emit(f, Some(1), libc::EOF, || unsafe { putc::real(c, f) })
    }

    /// `__overflow`: what glibc's inline `putc_unlocked`, `putchar_unlocked`
    /// and `fputc_unlocked` (`<bits/stdio.h>`, in code built with
    /// optimisation) call when the buffer is full, or for an unbuffered
    /// stream: it writes, so it waits for room first, as `putc` does.
    [stdio] fn __overflow(f: *mut FILE, c: c_int) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, Some(1), libc::EOF, || unsafe { __overflow::real(f, c) })
    }

    /// `_IO_putc`: glibc's old name of `putc`, which programs built
    /// against old headers call.
    [stdio] fn _IO_putc(c: c_int, f: *mut FILE) -> c_int {
        // SAFETY: the caller's character and stream.
        emit(f, Some(1), libc::EOF, || unsafe { _IO_putc::real(c, f) })
    }

    /// `fflush(3)` (a null stream flushes all streams: passed through).
    [stdio] fn fflush(f: *mut FILE) -> c_int {
        if f.is_null() {
            // SAFETY: forwarded unchanged.
            return unsafe { fflush::real(f) };
        }
        flush_point(f);
        // SAFETY: forwarded unchanged.
        emit(f, None, libc::EOF, || unsafe { fflush::real(f) })
    }

    /// `fdopen(3)`: a managed fd handed to stdio goes back to blocking
    /// underneath (with every dup of it) and is treated as a foreign fd from
    /// now on. glibc's stdio reads and writes through internal aliases that no
    /// hook sees; on a non-blocking fd it would meet `EAGAIN` it never asked
    /// for, report an error and drop buffered data. Blocking underneath, the
    /// worst case is a stall, never a loss: the stdio hooks wait for
    /// readiness before each call that may read or write.
    [stdio] fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
        // SAFETY: forwarded unchanged.
        let f = unsafe { fdopen::real(fd, mode) };
        if !f.is_null() && crate::gate::on() {
            crate::fd::hand_back(fd);
        }
        f
    }

    /// `fclose(3)`: waits (cooperatively) until the final flush fits, and drops
    /// the hub's registration of the fd before glibc closes it internally,
    /// where no `close` hook sees it.
    [stdio] fn fclose(f: *mut FILE) -> c_int {
        let fd = fd_of(f);
        if fd >= 0 {
            flush_point(f);
            let _ = before_output(f, None);
            hub::forget_fd(fd);
            if crate::gate::on() {
                fdtable::forget(fd);
            }
        }
        // SAFETY: forwarded unchanged. The lock is taken first, cooperatively,
        // and glibc's fclose lets go of it with the FILE.
        coop_acquired(f, || unsafe { fclose::real(f) })
    }
}
