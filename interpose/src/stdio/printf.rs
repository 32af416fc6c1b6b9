//! Formatted output: `printf`, `fprintf`, `dprintf`, their `v` forms and
//! the fortified `__*_chk` forms that `-D_FORTIFY_SOURCE` compiles calls to.
//!
//! **Variadics.** Stable Rust cannot define a C variadic function, and the
//! floating-point arguments of `printf` travel in `%xmm0-7` with their count
//! in `%al`. So each variadic hook is a naked-function trampoline (x86-64
//! System V): it spills the six argument registers and the eight vector
//! registers into a register save area laid out as the ABI's `va_list`
//! expects, builds a `va_list` over that area and the caller's stack
//! arguments, and calls the `v` form below with it. The caller's arguments,
//! however many and of whatever type, reach glibc's formatter exactly as
//! passed. (Other architectures keep the unhooked variadic functions.)
//!
//! **`dprintf`.** glibc's `vdprintf` writes with its internal `write`; on a
//! managed fd (non-blocking underneath) output would be lost to `EAGAIN`,
//! and on a full pipe it would stall the hub. So on pipes, sockets and ttys
//! the text is formatted first (`vasprintf`, which reads `errno` for `%m`
//! before anything else runs) and written with our `write` hook, which waits
//! on the hub; glibc, too, returns -1 when any part of the write fails.

use libc::{c_char, c_int, c_void, FILE};

use super::{output, stdout};
use crate::errno;
use crate::fdwait::Path;

mod next {
    use libc::{c_char, c_int, c_void, FILE};
    crate::real::real! {
        fn __vfprintf_chk(f: *mut FILE, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int;
        fn vdprintf(fd: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int;
        fn __vdprintf_chk(fd: c_int, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int;
    }
}

extern "C" {
    fn vasprintf(out: *mut *mut c_char, fmt: *const c_char, ap: *mut c_void) -> c_int;
    fn __vasprintf_chk(out: *mut *mut c_char, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

/// `__vfprintf_chk`: fortified `vfprintf` (`flag` > 0 refuses `%n` in
/// writable formats, glibc's business).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___vfprintf_chk")]
pub unsafe extern "C" fn __vfprintf_chk(f: *mut FILE, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    crate::real::guard("__vfprintf_chk", || {
        // SAFETY: forwarded unchanged.
        output(f, None, -1, || unsafe { next::__vfprintf_chk(f, flag, fmt, ap) })
    })
}

/// `__vprintf_chk`: fortified `vprintf`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___vprintf_chk")]
pub unsafe extern "C" fn __vprintf_chk(flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    // SAFETY: reading the stdio global; same contract.
    unsafe { __vfprintf_chk(stdout, flag, fmt, ap) }
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

/// `vdprintf(3)`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_vdprintf")]
pub unsafe extern "C" fn vdprintf(fd: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    crate::real::guard("vdprintf", || {
        if !cooperative_fd(fd) {
            // SAFETY: forwarded unchanged.
            return unsafe { next::vdprintf(fd, fmt, ap) };
        }
        // SAFETY: the caller's format and va_list, consumed once.
        formatted_write(fd, |out| unsafe { vasprintf(out, fmt, ap) })
    })
}

/// `__vdprintf_chk`: fortified `vdprintf`.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook___vdprintf_chk")]
pub unsafe extern "C" fn __vdprintf_chk(fd: c_int, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    crate::real::guard("__vdprintf_chk", || {
        if !cooperative_fd(fd) {
            // SAFETY: forwarded unchanged.
            return unsafe { next::__vdprintf_chk(fd, flag, fmt, ap) };
        }
        // SAFETY: as in vdprintf; the fortified formatter keeps its checks.
        formatted_write(fd, |out| unsafe { __vasprintf_chk(out, flag, fmt, ap) })
    })
}

/// A variadic hook: a trampoline named `$name` that builds a `va_list`
/// after `$fixed` named arguments and calls `$v(a0, a1, a2, ap)` (the named
/// arguments are still in `%rdi`, `%rsi`, `%rdx`; `ap` goes in `%rcx`).
///
/// Frame: 176 bytes of register save area at `%rsp` (six GPRs, then eight
/// XMM registers at offset 48, as the ABI lays it out), the 24-byte
/// `va_list` at 176 (`gp_offset`, `fp_offset` = 48, `overflow_arg_area` =
/// the caller's stack arguments at `%rbp + 16`, `reg_save_area`), padded to
/// keep `%rsp` 16-byte aligned for the call.
#[cfg(target_arch = "x86_64")]
macro_rules! va_hook {
    ($name:ident, $fixed:literal, $v:ident, $doc:literal) => {
        #[doc = $doc]
        #[unsafe(naked)]
        #[cfg_attr(not(greenhook_table), no_mangle)]
        #[cfg_attr(greenhook_table, export_name = concat!("greenhook_", stringify!($name)))]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!(
                // Unwind info, so that debuggers and the stall monitor's
                // backtraces see through the trampoline.
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
                "lea rcx, [rsp + 176]",
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
    };
}

/// The `v` forms the trampolines call: `(a0, a1, a2, ap)`.
#[cfg(target_arch = "x86_64")]
mod va {
    use libc::{c_char, c_int, c_void, FILE};

    pub(super) unsafe extern "C" fn printf(fmt: usize, _: usize, _: usize, ap: *mut c_void) -> c_int {
        // SAFETY: the caller's format and a va_list over its arguments.
        unsafe { super::super::vprintf(fmt as *const c_char, ap) }
    }

    pub(super) unsafe extern "C" fn fprintf(f: usize, fmt: usize, _: usize, ap: *mut c_void) -> c_int {
        // SAFETY: as in printf.
        unsafe { super::super::vfprintf(f as *mut FILE, fmt as *const c_char, ap) }
    }

    pub(super) unsafe extern "C" fn printf_chk(flag: usize, fmt: usize, _: usize, ap: *mut c_void) -> c_int {
        // SAFETY: as in printf.
        unsafe { super::__vprintf_chk(flag as c_int, fmt as *const c_char, ap) }
    }

    pub(super) unsafe extern "C" fn fprintf_chk(f: usize, flag: usize, fmt: usize, ap: *mut c_void) -> c_int {
        // SAFETY: as in printf.
        unsafe { super::__vfprintf_chk(f as *mut FILE, flag as c_int, fmt as *const c_char, ap) }
    }

    pub(super) unsafe extern "C" fn dprintf(fd: usize, fmt: usize, _: usize, ap: *mut c_void) -> c_int {
        // SAFETY: as in printf.
        unsafe { super::vdprintf(fd as c_int, fmt as *const c_char, ap) }
    }

    pub(super) unsafe extern "C" fn dprintf_chk(fd: usize, flag: usize, fmt: usize, ap: *mut c_void) -> c_int {
        // SAFETY: as in printf.
        unsafe { super::__vdprintf_chk(fd as c_int, flag as c_int, fmt as *const c_char, ap) }
    }
}

#[cfg(target_arch = "x86_64")]
va_hook!(printf, 1, va_printf, "`printf(3)`: a trampoline to `vprintf`.");
#[cfg(target_arch = "x86_64")]
va_hook!(fprintf, 2, va_fprintf, "`fprintf(3)`: a trampoline to `vfprintf`.");
#[cfg(target_arch = "x86_64")]
va_hook!(
    __printf_chk,
    2,
    va_printf_chk,
    "`__printf_chk`: a trampoline to [`__vprintf_chk`]."
);
#[cfg(target_arch = "x86_64")]
va_hook!(
    __fprintf_chk,
    3,
    va_fprintf_chk,
    "`__fprintf_chk`: a trampoline to [`__vfprintf_chk`]."
);
#[cfg(target_arch = "x86_64")]
va_hook!(dprintf, 2, va_dprintf, "`dprintf(3)`: a trampoline to [`vdprintf`].");
#[cfg(target_arch = "x86_64")]
va_hook!(
    __dprintf_chk,
    3,
    va_dprintf_chk,
    "`__dprintf_chk`: a trampoline to [`__vdprintf_chk`]."
);

#[cfg(target_arch = "x86_64")]
use va::{
    dprintf as va_dprintf, dprintf_chk as va_dprintf_chk, fprintf as va_fprintf, fprintf_chk as va_fprintf_chk,
    printf as va_printf, printf_chk as va_printf_chk,
};

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    __vfprintf_chk,
    __vprintf_chk,
    vdprintf,
    __vdprintf_chk,
}
