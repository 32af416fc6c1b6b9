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
use crate::gate::cooperative;
use crate::hook::hook;
use crate::AssertSend;

extern "C" {
    /// glibc's per-thread `h_errno` (not in the `libc` crate).
    fn __h_errno_location() -> *mut c_int;
}

/// Whether a lookup reports through `h_errno` as well as its return value
/// and `errno` (the `gethostby*` family).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reports {
    /// Return value and `errno`.
    Errno,
    /// Return value, `errno` and `h_errno`.
    HErrno,
}

/// Runs `lookup`, the real function, on the offload pool while the fiber
/// waits, and carries back what it reports (set on this thread last).
fn offloaded<R: Send, F: FnOnce() -> R>(reports: Reports, lookup: AssertSend<F>) -> R {
    // A name server may never answer: a lookup waits in a lane where
    // no call queues behind another (curl's threads looked names up side
    // by side, and one in /etc/hosts waited behind an unreachable server).
    let (r, h, e) = hub::offload(hub::Lane::Wait, move || {
        let r = lookup.call();
        // SAFETY: the worker's own h_errno, read on the worker.
        let h = (reports == Reports::HErrno).then(|| unsafe { *__h_errno_location() });
        (r, h, errno::get())
    });
    if let Some(h) = h {
        // SAFETY: this thread's h_errno.
        unsafe { *__h_errno_location() = h };
    }
    errno::set(e);
    r
}

/// [`offloaded`] for a non-reentrant `gethostby*` call, whose result points
/// into glibc's static buffers: serialised among fibers (see the module
/// docs).
fn offloaded_static(lookup: AssertSend<impl FnOnce() -> *mut hostent>) -> *mut hostent {
    let _lock = StaticLock::acquire();
    // The pointer crosses back as an address: it is glibc's, process-wide.
    offloaded(Reports::HErrno, AssertSend(move || lookup.call() as usize)) as *mut hostent
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
            hub::park(key, Some(dl.into()), || STATIC_BUSY.load(Ordering::Relaxed));
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

/// Whether glibc's `getaddrinfo` reads a file or asks the kernel for this
/// lookup, where its internal calls are cancellation points (measured with
/// a cancellation pending): with null hints (they default to
/// `AI_ADDRCONFIG`), with `AI_ADDRCONFIG`, for a host that is not numeric
/// (unless `AI_NUMERICHOST` refuses it at once), for a service that is not
/// a number (unless `AI_NUMERICSERV` does). A numeric host and service
/// with hints read nothing, and are no cancellation point.
///
/// # Safety
/// As `getaddrinfo`: null or valid strings, null or valid hints.
unsafe fn gai_reads(node: *const c_char, service: *const c_char, hints: *const addrinfo) -> bool {
    // SAFETY: per the contract.
    let Some(h) = (unsafe { hints.as_ref() }) else {
        return true;
    };
    if h.ai_flags & libc::AI_ADDRCONFIG != 0 {
        return true;
    }
    // SAFETY: per the contract: a NUL-terminated name.
    let host_named = !node.is_null() && h.ai_flags & libc::AI_NUMERICHOST == 0 && !unsafe { numeric_host(node) };
    // SAFETY: as above.
    let service_named =
        !service.is_null() && h.ai_flags & libc::AI_NUMERICSERV == 0 && !unsafe { numeric_service(service) };
    host_named || service_named
}

extern "C" {
    fn inet_aton(cp: *const c_char, inp: *mut libc::in_addr) -> c_int;
    fn inet_pton(af: c_int, src: *const c_char, dst: *mut c_void) -> c_int;
}

/// [`gai_reads`] on the hook's arguments (the entry's cancellation check).
fn gai_point(node: *const c_char, service: *const c_char, hints: *const addrinfo) -> bool {
    // SAFETY: the caller's arguments to `getaddrinfo`, as the call takes
    // them.
    unsafe { gai_reads(node, service, hints) }
}

/// An IPv4 address as glibc's `getaddrinfo` reads one (`inet_aton`'s
/// forms, nothing after), or an IPv6 one (before any `%` scope).
///
/// # Safety
/// `node` is a NUL-terminated string.
unsafe fn numeric_host(node: *const c_char) -> bool {
    // SAFETY: per the contract.
    let name = unsafe { std::ffi::CStr::from_ptr(node) }.to_bytes();
    let mut v4: libc::in_addr = libc::in_addr { s_addr: 0 };
    // SAFETY: a NUL-terminated string and an out address.
    if !name.iter().any(u8::is_ascii_whitespace) && unsafe { inet_aton(node, &mut v4) } != 0 {
        return true;
    }
    let addr = name.split(|&b| b == b'%').next().unwrap_or(&[]);
    let Ok(addr) = std::ffi::CString::new(addr) else {
        return false;
    };
    let mut v6 = [0u8; 16];
    // SAFETY: a NUL-terminated string and a 16-byte out buffer.
    unsafe { inet_pton(libc::AF_INET6, addr.as_ptr(), v6.as_mut_ptr().cast()) == 1 }
}

/// A service glibc's `getaddrinfo` takes as a port number (`strtoul`
/// reads it all).
///
/// # Safety
/// `service` is a NUL-terminated string.
unsafe fn numeric_service(service: *const c_char) -> bool {
    let mut end: *mut c_char = std::ptr::null_mut();
    // SAFETY: a NUL-terminated string; `end` is written.
    unsafe {
        libc::strtoul(service, &mut end, 10);
        *end == 0
    }
}

// Every lookup goes unchanged to the real function on the pool: the
// caller's pointers (names, hints, result and h_errno pointers, buffers)
// stay valid because `hub::offload` does not return before the call has
// finished.
hook! {
    /// `getaddrinfo(3)`: a cancellation point where glibc's is
    /// ([`gai_reads`]), on entry only: glibc's acts in the reads and
    /// waits inside it, not on its way out (the `#[cancel_point]` of the
    /// system call wrappers does both), so a cancellation that comes while
    /// the lookup runs on the pool acts at the thread's next point.
    #[gate(cooperative())]
    [dns] fn getaddrinfo(node: *const c_char, service: *const c_char, hints: *const addrinfo, res: *mut *mut addrinfo) -> c_int {
        if gai_point(node, service, hints) {
            crate::hook::cancel_point_at_entry();
        }
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        offloaded(Reports::Errno, AssertSend(|| unsafe { getaddrinfo::real(node, service, hints, res) }))
    }

    /// `getnameinfo(3)`.
    #[gate(cooperative())]
    [dns] fn getnameinfo(
        sa: *const sockaddr,
        salen: socklen_t,
        host: *mut c_char,
        hostlen: socklen_t,
        serv: *mut c_char,
        servlen: socklen_t,
        flags: c_int,
    ) -> c_int {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        let lookup = AssertSend(|| unsafe { getnameinfo::real(sa, salen, host, hostlen, serv, servlen, flags) });
        offloaded(Reports::Errno, lookup)
    }

    /// `gethostbyname(3)`.
    #[gate(cooperative())]
    [dns] fn gethostbyname(name: *const c_char) -> *mut hostent {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        offloaded_static(AssertSend(|| unsafe { gethostbyname::real(name) }))
    }

    /// `gethostbyname2(3)`.
    #[gate(cooperative())]
    [dns] fn gethostbyname2(name: *const c_char, af: c_int) -> *mut hostent {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        offloaded_static(AssertSend(|| unsafe { gethostbyname2::real(name, af) }))
    }

    /// `gethostbyaddr(3)`.
    #[gate(cooperative())]
    [dns] fn gethostbyaddr(addr: *const c_void, len: socklen_t, ty: c_int) -> *mut hostent {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        offloaded_static(AssertSend(|| unsafe { gethostbyaddr::real(addr, len, ty) }))
    }

    /// `gethostbyname_r(3)`: the results go straight into the caller's
    /// buffers.
    #[gate(cooperative())]
    [dns] fn gethostbyname_r(
        name: *const c_char,
        ret: *mut hostent,
        buf: *mut c_char,
        buflen: size_t,
        result: *mut *mut hostent,
        h_errnop: *mut c_int,
    ) -> c_int {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        let lookup = AssertSend(|| unsafe { gethostbyname_r::real(name, ret, buf, buflen, result, h_errnop) });
        offloaded(Reports::HErrno, lookup)
    }

    /// `gethostbyname2_r(3)`: like `gethostbyname_r`.
    #[gate(cooperative())]
    [dns] fn gethostbyname2_r(
        name: *const c_char,
        af: c_int,
        ret: *mut hostent,
        buf: *mut c_char,
        buflen: size_t,
        result: *mut *mut hostent,
        h_errnop: *mut c_int,
    ) -> c_int {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        let lookup = AssertSend(|| unsafe { gethostbyname2_r::real(name, af, ret, buf, buflen, result, h_errnop) });
        offloaded(Reports::HErrno, lookup)
    }

    /// `gethostbyaddr_r(3)`: like `gethostbyname_r`.
    #[gate(cooperative())]
    [dns] fn gethostbyaddr_r(
        addr: *const c_void,
        len: socklen_t,
        ty: c_int,
        ret: *mut hostent,
        buf: *mut c_char,
        buflen: size_t,
        result: *mut *mut hostent,
        h_errnop: *mut c_int,
    ) -> c_int {
        // SAFETY: forwarded unchanged, on a worker; the caller waits.
        let lookup =
            AssertSend(|| unsafe { gethostbyaddr_r::real(addr, len, ty, ret, buf, buflen, result, h_errnop) });
        offloaded(Reports::HErrno, lookup)
    }
}
