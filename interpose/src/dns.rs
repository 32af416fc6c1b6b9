//! Name resolution: `getaddrinfo`, `getnameinfo` and the `gethostby*`
//! family run on the hub's offload pool while the calling fiber waits.
//!
//! glibc resolves names through NSS (`/etc/nsswitch.conf`: `/etc/hosts`,
//! DNS, mDNS, LDAP, systemd-resolved…), and its modules make blocking calls
//! through glibc's internal aliases, which no hook sees: unpatched, one
//! fiber's lookup would stall every fiber. Rather than reimplement a
//! resolver (and lose NSS), each call goes unchanged to the real function on
//! a worker thread, so every configuration and module behaves exactly as
//! without greenhook. `freeaddrinfo` and `gai_strerror` never block and need
//! no hook.
//!
//! What travels back from the worker: the return value, `errno`, and for
//! `gethostbyname*`/`gethostbyaddr*` the thread-local `h_errno` (read on the
//! worker, set on the hub thread last). The reentrant forms write their
//! results (and `*h_errnop`) straight into the caller's buffers, which stay
//! valid: `hub::offload` does not return before the worker is done.
//!
//! Resolver state set with `res_init`/`_res` is thread-local in glibc, so a
//! program that edits `_res` sees its edits ignored by lookups made from a
//! fiber (the worker has its own `_res`, initialised from
//! `/etc/resolv.conf`).
//!
//! **Non-reentrant calls** (`gethostbyname`, `gethostbyname2`,
//! `gethostbyaddr`) return a pointer into buffers that are process-static in
//! glibc. They are serialised among fibers by a fiber-aware lock held across
//! the offload, so two workers never fill the static buffers at once and the
//! pointer a fiber gets back describes its own lookup when the call returns.
//! As unpatched, the result is valid only until the next such call by any
//! thread (fiber): a fiber that yields before copying the result may find it
//! overwritten by another fiber's lookup, just as a second thread's call
//! overwrites the first's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use libc::{addrinfo, c_char, c_int, c_void, hostent, size_t, sockaddr, socklen_t};

use crate::errno;

mod next {
    use libc::{addrinfo, c_char, c_int, c_void, hostent, size_t, sockaddr, socklen_t};
    crate::real::real! {
        fn getaddrinfo(node: *const c_char, service: *const c_char, hints: *const addrinfo, res: *mut *mut addrinfo) -> c_int;
        fn getnameinfo(sa: *const sockaddr, salen: socklen_t, host: *mut c_char, hostlen: socklen_t, serv: *mut c_char, servlen: socklen_t, flags: c_int) -> c_int;
        fn gethostbyname(name: *const c_char) -> *mut hostent;
        fn gethostbyname2(name: *const c_char, af: c_int) -> *mut hostent;
        fn gethostbyaddr(addr: *const c_void, len: socklen_t, ty: c_int) -> *mut hostent;
        fn gethostbyname_r(name: *const c_char, ret: *mut hostent, buf: *mut c_char, buflen: size_t, result: *mut *mut hostent, h_errnop: *mut c_int) -> c_int;
        fn gethostbyname2_r(name: *const c_char, af: c_int, ret: *mut hostent, buf: *mut c_char, buflen: size_t, result: *mut *mut hostent, h_errnop: *mut c_int) -> c_int;
        fn gethostbyaddr_r(addr: *const c_void, len: socklen_t, ty: c_int, ret: *mut hostent, buf: *mut c_char, buflen: size_t, result: *mut *mut hostent, h_errnop: *mut c_int) -> c_int;
    }
}

extern "C" {
    /// glibc's per-thread `h_errno` (not in the `libc` crate).
    fn __h_errno_location() -> *mut c_int;
}

use crate::gate::cooperative;

use crate::offload;

/// [`offload`] for the `gethostby*` family: `h_errno` comes back too.
fn offload_h<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let (r, h, e) = hub::offload(move || {
        let r = f();
        // SAFETY: the worker's own h_errno, read on the worker.
        let h = unsafe { *__h_errno_location() };
        (r, h, errno::get())
    });
    // SAFETY: this thread's h_errno.
    unsafe { *__h_errno_location() = h };
    errno::set(e);
    r
}

/// Held while a non-reentrant lookup fills glibc's static result buffers.
static STATIC_BUSY: AtomicBool = AtomicBool::new(false);

/// Releases [`STATIC_BUSY`] on drop and wakes one waiting fiber.
struct StaticLock;

impl StaticLock {
    /// Takes the lock, parking the fiber while another fiber holds it. The
    /// park has a short deadline so that a holder on another hub (a Rust
    /// program that patched several threads) is noticed too.
    fn acquire() -> StaticLock {
        let key = &STATIC_BUSY as *const AtomicBool as usize;
        while STATIC_BUSY.swap(true, Ordering::Acquire) {
            let dl = Instant::now() + Duration::from_millis(10);
            hub::park(key, Some(dl), || STATIC_BUSY.load(Ordering::Relaxed));
        }
        StaticLock
    }
}

impl Drop for StaticLock {
    fn drop(&mut self) {
        STATIC_BUSY.store(false, Ordering::Release);
        hub::unpark(&STATIC_BUSY as *const AtomicBool as usize, 1);
    }
}

/// `getaddrinfo(3)`: on the offload pool.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_getaddrinfo")]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> c_int {
    crate::real::guard("getaddrinfo", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::getaddrinfo(node, service, hints, res) };
        }
        // SAFETY: forwarded unchanged; the caller's pointers stay valid
        // until offload returns, after this closure has finished.
        let op = crate::AssertSend(|| unsafe { next::getaddrinfo(node, service, hints, res) });
        offload(move || op.call())
    })
}

/// `getnameinfo(3)`: on the offload pool.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_getnameinfo")]
pub unsafe extern "C" fn getnameinfo(
    sa: *const sockaddr,
    salen: socklen_t,
    host: *mut c_char,
    hostlen: socklen_t,
    serv: *mut c_char,
    servlen: socklen_t,
    flags: c_int,
) -> c_int {
    crate::real::guard("getnameinfo", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::getnameinfo(sa, salen, host, hostlen, serv, servlen, flags) };
        }
        // SAFETY: forwarded unchanged; the caller's buffers outlive the
        // offload.
        let op = crate::AssertSend(|| unsafe { next::getnameinfo(sa, salen, host, hostlen, serv, servlen, flags) });
        offload(move || op.call())
    })
}

/// `gethostbyname(3)`: on the offload pool, serialised among fibers (see
/// the module docs).
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_gethostbyname")]
pub unsafe extern "C" fn gethostbyname(name: *const c_char) -> *mut hostent {
    crate::real::guard("gethostbyname", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::gethostbyname(name) };
        }
        let _lock = StaticLock::acquire();
        let name = name as usize;
        // SAFETY: forwarded unchanged; the name outlives the offload.
        let r = offload_h(move || unsafe { next::gethostbyname(name as *const c_char) } as usize);
        r as *mut hostent
    })
}

/// `gethostbyname2(3)`: like [`gethostbyname`].
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_gethostbyname2")]
pub unsafe extern "C" fn gethostbyname2(name: *const c_char, af: c_int) -> *mut hostent {
    crate::real::guard("gethostbyname2", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::gethostbyname2(name, af) };
        }
        let _lock = StaticLock::acquire();
        let name = name as usize;
        // SAFETY: forwarded unchanged; the name outlives the offload.
        let r = offload_h(move || unsafe { next::gethostbyname2(name as *const c_char, af) } as usize);
        r as *mut hostent
    })
}

/// `gethostbyaddr(3)`: like [`gethostbyname`].
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_gethostbyaddr")]
pub unsafe extern "C" fn gethostbyaddr(addr: *const c_void, len: socklen_t, ty: c_int) -> *mut hostent {
    crate::real::guard("gethostbyaddr", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::gethostbyaddr(addr, len, ty) };
        }
        let _lock = StaticLock::acquire();
        let addr = addr as usize;
        // SAFETY: forwarded unchanged; the address outlives the offload.
        let r = offload_h(move || unsafe { next::gethostbyaddr(addr as *const c_void, len, ty) } as usize);
        r as *mut hostent
    })
}

/// `gethostbyname_r(3)`: on the offload pool; results go straight into the
/// caller's buffers.
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_gethostbyname_r")]
pub unsafe extern "C" fn gethostbyname_r(
    name: *const c_char,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    crate::real::guard("gethostbyname_r", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::gethostbyname_r(name, ret, buf, buflen, result, h_errnop) };
        }
        // SAFETY: forwarded unchanged; the caller's buffers outlive the
        // offload (it does not return before the call has finished).
        let op = crate::AssertSend(|| unsafe { next::gethostbyname_r(name, ret, buf, buflen, result, h_errnop) });
        offload_h(move || op.call())
    })
}

/// `gethostbyname2_r(3)`: like [`gethostbyname_r`].
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_gethostbyname2_r")]
pub unsafe extern "C" fn gethostbyname2_r(
    name: *const c_char,
    af: c_int,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    crate::real::guard("gethostbyname2_r", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::gethostbyname2_r(name, af, ret, buf, buflen, result, h_errnop) };
        }
        // SAFETY: forwarded unchanged; the caller's buffers outlive the
        // offload (it does not return before the call has finished).
        let op = crate::AssertSend(|| unsafe { next::gethostbyname2_r(name, af, ret, buf, buflen, result, h_errnop) });
        offload_h(move || op.call())
    })
}

/// `gethostbyaddr_r(3)`: like [`gethostbyname_r`].
#[cfg_attr(not(greenhook_table), no_mangle)]
#[cfg_attr(greenhook_table, export_name = "greenhook_gethostbyaddr_r")]
pub unsafe extern "C" fn gethostbyaddr_r(
    addr: *const c_void,
    len: socklen_t,
    ty: c_int,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    crate::real::guard("gethostbyaddr_r", || {
        if !cooperative() {
            // SAFETY: forwarded unchanged.
            return unsafe { next::gethostbyaddr_r(addr, len, ty, ret, buf, buflen, result, h_errnop) };
        }
        // SAFETY: forwarded unchanged; the caller's buffers outlive the
        // offload (it does not return before the call has finished).
        let op =
            crate::AssertSend(|| unsafe { next::gethostbyaddr_r(addr, len, ty, ret, buf, buflen, result, h_errnop) });
        offload_h(move || op.call())
    })
}

// Entries of the interpose table (see `real::interpose!`).
crate::real::interpose! {
    getaddrinfo,
    getnameinfo,
    gethostbyname,
    gethostbyname2,
    gethostbyaddr,
    gethostbyname_r,
    gethostbyname2_r,
    gethostbyaddr_r,
}
