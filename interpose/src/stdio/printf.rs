//! Formatted output: `printf`, `fprintf`, `dprintf`, the wide `wprintf`
//! and `fwprintf`, their `v` forms and the fortified `__*_chk` forms that
//! `-D_FORTIFY_SOURCE` compiles calls to.
//!
//! **Streams.** `vfprintf` and its relatives go through the same wait as
//! the other output hooks ([`emit`]): writable, and on a pipe room for
//! what the FILE already holds. The formatted size is not known beforehand
//! (see [`output`](super::output) for what that leaves).
//!
//! **Variadics.** Stable Rust cannot define a C variadic function, and the
//! floating-point arguments of `printf` travel in `%xmm0-7` with their count
//! in `%al`. So each variadic hook is a naked-function trampoline (x86-64
//! System V): it spills the six argument registers and the eight vector
//! registers into a register save area laid out as the ABI's `va_list`
//! expects, builds a `va_list` over that area and the caller's stack
//! arguments, and calls the hook of the `v` form with it. The caller's
//! arguments, however many and of whatever type, reach glibc's formatter
//! exactly as passed. A trampoline has no body to count or guard: the call
//! is counted, and guarded, in the `v` hook. (Other architectures keep the
//! unhooked variadic functions.)
//!
//! **`dprintf`.** glibc's `vdprintf` writes with its internal `write`; on a
//! managed fd (non-blocking underneath) output would be lost to `EAGAIN`,
//! and on a full pipe it would stall the hub. So on pipes, sockets and ttys
//! the text is formatted first (`vasprintf`, which reads `errno` for `%m`
//! before anything else runs) and written with our `write` hook, which waits
//! on the hub; glibc, too, returns -1 when any part of the write fails.

use libc::{c_char, c_int, c_void, wchar_t, FILE};

use super::output::emit;
use super::stdout;
use crate::errno;
use crate::fdwait::Path;
use crate::hook::hook;

extern "C" {
    fn vasprintf(out: *mut *mut c_char, fmt: *const c_char, ap: *mut c_void) -> c_int;
    fn __vasprintf_chk(out: *mut *mut c_char, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

/// Formats with `format` (a `vasprintf`) and writes the text to `fd`
/// through our `write` hook, which itself continues a partial write until
/// every byte is through or an error comes. -1 with errno when either
/// fails, as glibc returns when any part of its write fails.
fn formatted_write(fd: c_int, format: impl FnOnce(&mut *mut c_char) -> c_int) -> c_int {
    let mut text = std::ptr::null_mut();
    let n = format(&mut text);
    if n < 0 {
        return n;
    }
    // SAFETY: `text` holds `n` bytes from vasprintf.
    let w = unsafe { crate::io::write(fd, text.cast(), n as usize) };
    let e = errno::get();
    // SAFETY: allocated by vasprintf, not used after this.
    unsafe { libc::free(text.cast()) };
    errno::set(e);
    if w == n as isize {
        n
    } else {
        -1
    }
}

/// Whether `fd` is one whose writes must go through the hub.
fn cooperative_fd(fd: c_int) -> bool {
    matches!(crate::fdwait::path(fd), Path::Managed(_) | Path::Polled(_))
}

hook! {
    /// `vfprintf(3)` (`ap` is a `va_list`, a pointer on these ABIs).
    [stdio] fn vfprintf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, None, -1, || unsafe { vfprintf::real(f, fmt, ap) })
    }

    /// `vprintf(3)`: `vfprintf` on stdout.
    [stdio] fn vprintf(fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: the caller's format and va_list, on stdout.
        emit(f, None, -1, || unsafe { vfprintf::real(f, fmt, ap) })
    }

    /// `__vfprintf_chk`: fortified `vfprintf` (`flag` > 0 refuses `%n` in
    /// writable formats, glibc's business).
    [stdio] fn __vfprintf_chk(f: *mut FILE, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, None, -1, || unsafe { __vfprintf_chk::real(f, flag, fmt, ap) })
    }

    /// `__vprintf_chk`: fortified `vprintf`.
    [stdio] fn __vprintf_chk(flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: the caller's arguments, on stdout.
        emit(f, None, -1, || unsafe { __vfprintf_chk::real(f, flag, fmt, ap) })
    }

    /// `vfwprintf(3)`: wide formatted output, the same wait.
    [stdio] fn vfwprintf(f: *mut FILE, fmt: *const wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, None, -1, || unsafe { vfwprintf::real(f, fmt, ap) })
    }

    /// `vwprintf(3)`: `vfwprintf` on stdout.
    [stdio] fn vwprintf(fmt: *const wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: the caller's format and va_list, on stdout.
        emit(f, None, -1, || unsafe { vfwprintf::real(f, fmt, ap) })
    }

    /// `__vfwprintf_chk`: fortified `vfwprintf`.
    [stdio] fn __vfwprintf_chk(f: *mut FILE, flag: c_int, fmt: *const wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: forwarded unchanged.
        emit(f, None, -1, || unsafe { __vfwprintf_chk::real(f, flag, fmt, ap) })
    }

    /// `__vwprintf_chk`: fortified `vwprintf`.
    [stdio] fn __vwprintf_chk(flag: c_int, fmt: *const wchar_t, ap: *mut c_void) -> c_int {
        // SAFETY: reading the stdio global.
        let f = unsafe { stdout };
        // SAFETY: the caller's arguments, on stdout.
        emit(f, None, -1, || unsafe { __vfwprintf_chk::real(f, flag, fmt, ap) })
    }

    /// `vdprintf(3)`.
    #[gate(cooperative_fd(fd))]
    [stdio] fn vdprintf(fd: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: the caller's format and va_list, consumed once.
        formatted_write(fd, |out| unsafe { vasprintf(out, fmt, ap) })
    }

    /// `__vdprintf_chk`: fortified `vdprintf`.
    #[gate(cooperative_fd(fd))]
    [stdio] fn __vdprintf_chk(fd: c_int, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
        // SAFETY: as in vdprintf; the fortified formatter keeps its checks.
        formatted_write(fd, |out| unsafe { __vasprintf_chk(out, flag, fmt, ap) })
    }
}

/// Variadic hooks: `[n] fn name => v` defines the trampoline `name`, with
/// `n` named arguments, that calls the hook `v` with the same named
/// arguments and a `va_list` over the rest (in the argument register after
/// them). Exported, and listed in the interpose table, as
/// [`hook!`](crate::hook::hook) does.
///
/// Frame: 176 bytes of register save area at `%rsp` (six GPRs, then eight
/// XMM registers at offset 48, as the ABI lays it out), the 24-byte
/// `va_list` at 176 (`gp_offset`, `fp_offset` = 48, `overflow_arg_area` =
/// the caller's stack arguments at `%rbp + 16`, `reg_save_area`), padded to
/// keep `%rsp` 16-byte aligned for the call. The named arguments are still
/// in their registers when `v` is called.
#[cfg(target_arch = "x86_64")]
macro_rules! va_hooks {
    ($(
        $(#[doc = $doc:expr])*
        [$fixed:tt] fn $name:ident => $v:ident;
    )*) => {$(
        $(#[doc = $doc])*
        #[unsafe(naked)]
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        pub unsafe extern "C-unwind" fn $name() {
            std::arch::naked_asm!(
                // Unwind info, so that debuggers, the stall monitor's
                // backtraces and glibc's forced unwinding see through the
                // trampoline.
                ".cfi_startproc",
                "endbr64",
                "push rbp",
                ".cfi_def_cfa_offset 16",
                ".cfi_offset rbp, -16",
                "mov rbp, rsp",
                ".cfi_def_cfa_register rbp",
                "sub rsp, 208",
                "mov [rsp], rdi",
                "mov [rsp + 8], rsi",
                "mov [rsp + 16], rdx",
                "mov [rsp + 24], rcx",
                "mov [rsp + 32], r8",
                "mov [rsp + 40], r9",
                "movaps [rsp + 48], xmm0",
                "movaps [rsp + 64], xmm1",
                "movaps [rsp + 80], xmm2",
                "movaps [rsp + 96], xmm3",
                "movaps [rsp + 112], xmm4",
                "movaps [rsp + 128], xmm5",
                "movaps [rsp + 144], xmm6",
                "movaps [rsp + 160], xmm7",
                "mov dword ptr [rsp + 176], {gp}",
                "mov dword ptr [rsp + 180], 48",
                "lea rax, [rbp + 16]",
                "mov [rsp + 184], rax",
                "mov [rsp + 192], rsp",
                concat!("lea ", $crate::stdio::va_hooks!(@ap $fixed), ", [rsp + 176]"),
                "call {v}",
                "leave",
                ".cfi_def_cfa rsp, 8",
                "ret",
                ".cfi_endproc",
                gp = const $fixed * 8,
                v = sym $v,
            )
        }
        crate::real::interpose!($name);
    )*};
    // The register of the argument after `n` named ones.
    (@ap 1) => { "rsi" };
    (@ap 2) => { "rdx" };
    (@ap 3) => { "rcx" };
}
// `execl` and its kin use it too (see `crate::process`).
#[cfg(target_arch = "x86_64")]
pub(crate) use va_hooks;

#[cfg(target_arch = "x86_64")]
va_hooks! {
    /// `printf(3)`: a trampoline to [`vprintf()`].
    [1] fn printf => vprintf;
    /// `fprintf(3)`: a trampoline to [`vfprintf()`].
    [2] fn fprintf => vfprintf;
    /// `__printf_chk`: a trampoline to [`__vprintf_chk()`].
    [2] fn __printf_chk => __vprintf_chk;
    /// `__fprintf_chk`: a trampoline to [`__vfprintf_chk()`].
    [3] fn __fprintf_chk => __vfprintf_chk;
    /// `dprintf(3)`: a trampoline to [`vdprintf()`].
    [2] fn dprintf => vdprintf;
    /// `__dprintf_chk`: a trampoline to [`__vdprintf_chk()`].
    [3] fn __dprintf_chk => __vdprintf_chk;
    /// `wprintf(3)`: a trampoline to [`vwprintf()`].
    [1] fn wprintf => vwprintf;
    /// `fwprintf(3)`: a trampoline to [`vfwprintf()`].
    [2] fn fwprintf => vfwprintf;
    /// `__wprintf_chk`: a trampoline to [`__vwprintf_chk()`].
    [2] fn __wprintf_chk => __vwprintf_chk;
    /// `__fwprintf_chk`: a trampoline to [`__vfwprintf_chk()`].
    [3] fn __fwprintf_chk => __vfwprintf_chk;
}
