//! Wide-character stdio: `fgetwc`/`getwc`/`getwchar`, `fgetws`,
//! `fputwc`/`putwc`/`putwchar`, `fputws`, and their `_unlocked` forms
//! (formatted wide output is in [`printf`](super::printf), the wide
//! `scanf`s in [`input`](super::input)).
//!
//! glibc reads and writes a wide stream with the same internal `read` and
//! `write` as a byte stream, converting through a second buffer of its own
//! (`_wide_data`). Unhooked, a fiber in `fgetwc` on an empty pipe held the
//! hub in the kernel, and a writer that was a fiber of it never came. The
//! waits are the byte hooks': for input, where both the wide buffer and
//! the byte buffer are empty (glibc then reads the fd, and that read is its
//! cancellation point); for output, unless what is written lands in the
//! wide buffer. Left: a multibyte character split across two writes to a
//! pipe is completed by a second read in the kernel, and a string longer
//! than a pipe's free room may still wait there for the rest (as formatted
//! output may).

use libc::{c_int, wchar_t, FILE};

use super::input::{await_input, buffered};
use super::output::emit;
use super::{
    clear_error, coop_locked, flags, fully_buffered, io, kind, locked, set_error, stdin, stdout, Kind, ERR_SEEN,
};
use crate::errno;
use crate::hook::hook;

/// C's `wint_t` (`unsigned int` on glibc's Linux targets).
#[allow(non_camel_case_types)]
type wint_t = libc::c_uint;

/// glibc's `WEOF`.
const WEOF: wint_t = 0xffff_ffff;
/// The longest piece of an `fputws` handed to glibc at once: at most
/// `PIPE_BUF` bytes in any encoding glibc writes (four bytes a character
/// at most in UTF-8).
const PIECE: usize = libc::PIPE_BUF / 4;

/// The leading fields of glibc's `struct _IO_wide_data`: the wide buffer's
/// pointers, laid out as the byte buffer's.
#[repr(C)]
pub(super) struct WideData {
    read_ptr: *mut wchar_t,
    read_end: *mut wchar_t,
    read_base: *mut wchar_t,
    write_base: *mut wchar_t,
    write_ptr: *mut wchar_t,
    write_end: *mut wchar_t,
}

/// `f`'s wide buffer, if it has one (a stream becomes wide at its first
/// wide call).
fn wide(f: *mut FILE) -> Option<&'static WideData> {
    // SAFETY: a live glibc FILE; `_wide_data` is null or points at the
    // stream's own wide data, alive as long as the stream.
    unsafe { (*io(f)).wide_data.as_ref() }
}

/// Wide characters buffered for reading.
fn wide_buffered(f: *mut FILE) -> usize {
    wide(f).map_or(0, |w| {
        if w.read_ptr.is_null() || w.read_end <= w.read_ptr {
            0
        } else {
            (w.read_end as usize - w.read_ptr as usize) / std::mem::size_of::<wchar_t>()
        }
    })
}

/// Makes sure the next wide read finds input without waiting: data in the
/// wide or the byte buffer, or a readable fd (waited for on the hub).
/// False, with the stream's error flag and errno set, when the wait
/// failed (a socket timeout, a signal without `SA_RESTART`).
fn wait_input(f: *mut FILE) -> bool {
    wide_buffered(f) > 0 || buffered(f) > 0 || await_input(f)
}

/// A wide character read: waits for input, then the real call; `lock`
/// for the entry points that lock the FILE.
fn getwc_with(f: *mut FILE, lock: bool, op: impl FnOnce() -> wint_t) -> wint_t {
    let lock = lock && !f.is_null() && crate::gate::cooperative();
    if kind(f) == Kind::Pass {
        return locked(f, lock, op);
    }
    locked(f, lock, || if wait_input(f) { op() } else { WEOF })
}

/// Whether `n` wide characters land in `f`'s wide buffer without a write:
/// a fully buffered stream with that much room.
fn fits(f: *mut FILE, n: usize) -> bool {
    if !fully_buffered(f) {
        return false;
    }
    wide(f).is_some_and(|w| {
        !w.write_ptr.is_null()
            && n < (w.write_end as usize).saturating_sub(w.write_ptr as usize) / std::mem::size_of::<wchar_t>()
    })
}

/// Wide output of `n` characters: straight into the wide buffer when it
/// fits, else after the byte hooks' wait for room ([`emit`]).
fn wemit<R>(f: *mut FILE, n: usize, fail: R, op: impl FnOnce() -> R) -> R {
    if fits(f, n) {
        coop_locked(f, op)
    } else {
        emit(f, None, fail, op)
    }
}

/// `fgetws` and `fgetws_unlocked`: glibc's `fgetws` reads until a newline
/// or `n - 1` characters, refilling in the kernel as often as it needs;
/// here each character is read once input is there (glibc's answers:
/// null when nothing was read or a new error came, the error flag as it
/// was before plus any new one).
fn fgetws_with(
    real: unsafe fn(*mut wchar_t, c_int, *mut FILE) -> *mut wchar_t,
    lock: bool,
    s: *mut wchar_t,
    n: c_int,
    f: *mut FILE,
) -> *mut wchar_t {
    if n <= 1 || s.is_null() || kind(f) == Kind::Pass {
        // SAFETY: forwarded unchanged (glibc handles the edge cases).
        return locked(f, lock && !f.is_null() && crate::gate::cooperative(), || unsafe {
            real(s, n, f)
        });
    }
    locked(f, lock, || {
        let old_error = flags(f) & ERR_SEEN;
        clear_error(f);
        let mut count = 0usize;
        while count < (n - 1) as usize && wait_input(f) {
            // SAFETY: a live FILE, held; input is there.
            let c = unsafe { fgetwc_unlocked::real(f) };
            if c == WEOF {
                break;
            }
            // SAFETY: `count` < n - 1, within the caller's n characters.
            unsafe { *s.add(count) = c as wchar_t };
            count += 1;
            if c == '\n' as wint_t {
                break;
            }
        }
        let failed = flags(f) & ERR_SEEN != 0 && errno::get() != libc::EAGAIN;
        let r = if count == 0 || failed {
            std::ptr::null_mut()
        } else {
            // SAFETY: `count` ≤ n - 1.
            unsafe { *s.add(count) = 0 };
            s
        };
        if old_error != 0 {
            set_error(f);
        }
        r
    })
}

/// `fputws` and `fputws_unlocked`: the string in pieces of at most
/// [`PIECE`] characters, each after the wait for room, under the lock.
fn fputws_with(
    real: unsafe fn(*const wchar_t, *mut FILE) -> c_int,
    lock: bool,
    s: *const wchar_t,
    f: *mut FILE,
) -> c_int {
    if s.is_null() || kind(f) == Kind::Pass {
        // SAFETY: forwarded unchanged.
        return locked(f, lock && !f.is_null() && crate::gate::cooperative(), || unsafe {
            real(s, f)
        });
    }
    // SAFETY: the caller's NUL-terminated wide string.
    let len = unsafe { libc::wcslen(s) };
    if len <= PIECE {
        // SAFETY: forwarded unchanged.
        return locked(f, lock, || wemit(f, len, -1, || unsafe { fputws_unlocked::real(s, f) }));
    }
    locked(f, lock, || {
        let mut piece = [0 as wchar_t; PIECE + 1];
        let mut done = 0usize;
        while done < len {
            let k = (len - done).min(PIECE);
            // SAFETY: `done + k` ≤ len, within the caller's string; the
            // piece has room for k characters and the NUL after them.
            unsafe { std::ptr::copy_nonoverlapping(s.add(done), piece.as_mut_ptr(), k) };
            piece[k] = 0;
            // SAFETY: a NUL-terminated piece, on the caller's stream.
            if wemit(f, k, -1, || unsafe { fputws_unlocked::real(piece.as_ptr(), f) }) < 0 {
                return -1;
            }
            done += k;
        }
        1
    })
}

hook! {
    /// `fgetwc(3)`: waits for input on the hub when nothing is buffered.
    [stdio] fn fgetwc(f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        getwc_with(f, true, || unsafe { fgetwc::real(f) })
    }

    /// `getwc(3)`.
    [stdio] fn getwc(f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        getwc_with(f, true, || unsafe { getwc::real(f) })
    }

    /// `getwchar(3)`: `getwc` on stdin.
    [stdio] fn getwchar() -> wint_t {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdin };
        // SAFETY: on stdin.
        getwc_with(f, true, || unsafe { fgetwc::real(f) })
    }

    /// `fgetwc_unlocked(3)`.
    [stdio] fn fgetwc_unlocked(f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        getwc_with(f, false, || unsafe { fgetwc_unlocked::real(f) })
    }

    /// `getwc_unlocked(3)`.
    [stdio] fn getwc_unlocked(f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        getwc_with(f, false, || unsafe { getwc_unlocked::real(f) })
    }

    /// `getwchar_unlocked(3)`: `getwc_unlocked` on stdin.
    [stdio] fn getwchar_unlocked() -> wint_t {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdin };
        // SAFETY: on stdin.
        getwc_with(f, false, || unsafe { fgetwc_unlocked::real(f) })
    }

    /// `fgetws(3)`: see [`fgetws_with`].
    [stdio] fn fgetws(s: *mut wchar_t, n: c_int, f: *mut FILE) -> *mut wchar_t {
        fgetws_with(fgetws::real, true, s, n, f)
    }

    /// `fgetws_unlocked(3)`.
    [stdio] fn fgetws_unlocked(s: *mut wchar_t, n: c_int, f: *mut FILE) -> *mut wchar_t {
        fgetws_with(fgetws_unlocked::real, false, s, n, f)
    }

    /// `fputwc(3)`: waits for room when the character does not fit.
    [stdio] fn fputwc(c: wchar_t, f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        wemit(f, 1, WEOF, || unsafe { fputwc::real(c, f) })
    }

    /// `putwc(3)`.
    [stdio] fn putwc(c: wchar_t, f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        wemit(f, 1, WEOF, || unsafe { putwc::real(c, f) })
    }

    /// `putwchar(3)`: `putwc` on stdout.
    [stdio] fn putwchar(c: wchar_t) -> wint_t {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: on stdout.
        wemit(f, 1, WEOF, || unsafe { fputwc::real(c, f) })
    }

    /// `fputwc_unlocked(3)`.
    [stdio] fn fputwc_unlocked(c: wchar_t, f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        wemit(f, 1, WEOF, || unsafe { fputwc_unlocked::real(c, f) })
    }

    /// `putwc_unlocked(3)`.
    [stdio] fn putwc_unlocked(c: wchar_t, f: *mut FILE) -> wint_t {
        // SAFETY: forwarded unchanged.
        wemit(f, 1, WEOF, || unsafe { putwc_unlocked::real(c, f) })
    }

    /// `putwchar_unlocked(3)`: `putwc_unlocked` on stdout.
    [stdio] fn putwchar_unlocked(c: wchar_t) -> wint_t {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: on stdout.
        wemit(f, 1, WEOF, || unsafe { fputwc_unlocked::real(c, f) })
    }

    /// `fputws(3)`: see [`fputws_with`].
    [stdio] fn fputws(s: *const wchar_t, f: *mut FILE) -> c_int {
        fputws_with(fputws::real, true, s, f)
    }

    /// `fputws_unlocked(3)`.
    [stdio] fn fputws_unlocked(s: *const wchar_t, f: *mut FILE) -> c_int {
        fputws_with(fputws_unlocked::real, false, s, f)
    }
}
