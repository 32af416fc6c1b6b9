//! Multiplexing: `poll`, `ppoll`, `select`, `pselect`, `epoll_wait`,
//! `epoll_pwait`, `epoll_pwait2`.
//!
//! Each one first asks the kernel with a zero timeout (so results, `revents`,
//! fd sets and errors are exactly the kernel's, including `EINVAL`/`EBADF`/
//! `EFAULT` for bad input), then, if nothing is ready and the caller may
//! wait, registers the fds with the hub and parks until one of them has an
//! edge or the deadline passes, then asks the kernel again. An epoll fd is
//! itself pollable, so `epoll_wait` waits on the user's epoll fd. The signal
//! masks of `ppoll`/`pselect`/`epoll_pwait` are the calling thread's for the
//! whole call (`signal::with_wait_mask`), and the zero-timeout kernel calls
//! apply them too.

use std::time::{Duration, Instant};

use hub::Interest;
use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};

use crate::errno;
use crate::gate::cooperative;
use crate::hook::hook;

enum Waited {
    /// Something may be ready: ask the kernel again.
    Again,
    /// The deadline passed: ask the kernel one last time and return that.
    Expired,
    /// Interrupted: return -1/EINTR.
    Interrupted,
}

/// Parks until one of `fds` has an edge, or the deadline.
fn wait_any(fds: &[(c_int, Interest)], deadline: Option<Instant>) -> Waited {
    match hub::wait_fds(fds, deadline) {
        Ok(()) => Waited::Again,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Waited::Expired,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            crate::cancel_point();
            Waited::Interrupted
        }
        // An fd closed while we waited (the kernel will say POLLNVAL/EBADF),
        // or one epoll cannot watch: re-ask after a short nap so such an fd
        // cannot turn the wait into a busy loop.
        Err(_) => {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Waited::Expired;
            }
            hub::sleep(Duration::from_millis(1));
            Waited::Again
        }
    }
}

/// The generic loop: `probe()` asks the kernel without blocking.
fn multiplex(fds: &[(c_int, Interest)], deadline: Option<Instant>, mut probe: impl FnMut() -> c_int) -> c_int {
    loop {
        match wait_any(fds, deadline) {
            Waited::Again => {
                let r = probe();
                if r != 0 {
                    return r;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return 0;
                }
            }
            Waited::Expired => return probe(),
            Waited::Interrupted => return errno::fail(libc::EINTR),
        }
    }
}

/// # Safety
/// `fds` points at `n` pollfds (the kernel accepted them already).
unsafe fn poll_interest(fds: *const pollfd, n: nfds_t) -> Vec<(c_int, Interest)> {
    if n == 0 || fds.is_null() {
        // poll(NULL, 0, ms): the classic portable sleep.
        return Vec::new();
    }
    // SAFETY: caller's contract.
    let s = unsafe { std::slice::from_raw_parts(fds, n as usize) };
    let mut v = Vec::with_capacity(s.len());
    for p in s.iter().filter(|p| p.fd >= 0) {
        if p.events & libc::POLLOUT != 0 {
            v.push((p.fd, Interest::Writable));
        }
        if p.events & libc::POLLOUT == 0 || p.events & (libc::POLLIN | libc::POLLPRI | libc::POLLRDHUP) != 0 {
            // Hang-ups and errors are always reported: watch reads at least.
            v.push((p.fd, Interest::Readable));
        }
    }
    v
}

struct Sets {
    r: Option<fd_set>,
    w: Option<fd_set>,
    e: Option<fd_set>,
}

impl Sets {
    /// The `(fd, interest)` pairs the saved sets ask for, below `n`
    /// (exceptional conditions are watched as readability).
    fn interest(&self, n: c_int) -> Vec<(c_int, Interest)> {
        // SAFETY: FD_ISSET reads within an fd_set we own, for fd < FD_SETSIZE.
        let has = |set: &Option<fd_set>, fd| set.as_ref().is_some_and(|s| unsafe { libc::FD_ISSET(fd, s) });
        let mut v = Vec::new();
        for fd in 0..n.min(libc::FD_SETSIZE as c_int) {
            if has(&self.r, fd) || has(&self.e, fd) {
                v.push((fd, Interest::Readable));
            }
            if has(&self.w, fd) {
                v.push((fd, Interest::Writable));
            }
        }
        v
    }

    /// # Safety
    /// Each pointer is null or a valid fd_set.
    unsafe fn save(r: *const fd_set, w: *const fd_set, e: *const fd_set) -> Sets {
        // SAFETY: caller's contract.
        unsafe {
            Sets {
                r: r.as_ref().copied(),
                w: w.as_ref().copied(),
                e: e.as_ref().copied(),
            }
        }
    }

    /// # Safety
    /// The same pointers as given to `save`.
    unsafe fn restore(&self, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set) {
        // SAFETY: caller's contract.
        unsafe {
            if let Some(s) = self.r {
                *r = s;
            }
            if let Some(s) = self.w {
                *w = s;
            }
            if let Some(s) = self.e {
                *e = s;
            }
        }
    }
}

fn epoll_common(ep: c_int, deadline: Option<Instant>, mut probe: impl FnMut() -> c_int) -> c_int {
    crate::cancel_point();
    let r = probe();
    if r != 0 {
        return r;
    }
    multiplex(&[(ep, Interest::Readable)], deadline, probe)
}

/// The answer `r` of a call with a zero timeout: one that reports nothing
/// ready counts towards giving way (`preempt::found_nothing`, which counts
/// only in a cooperative context).
fn nothing_ready(r: c_int) -> c_int {
    if r == 0 {
        crate::preempt::found_nothing();
    }
    r
}

/// Whether a timeout pointer asks for no wait at all (a zero timespec).
fn zero_timeout(t: *const timespec) -> bool {
    // SAFETY: null or the caller's timespec, as the call requires.
    unsafe { t.as_ref() }.is_some_and(|ts| ts.tv_sec == 0 && ts.tv_nsec == 0)
}

hook! {
    /// `poll(2)`.
    #[cancel_point]
    #[gate(cooperative())]
    [poll] fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
        if timeout == 0 {
            // SAFETY: forwarded unchanged.
            return nothing_ready(unsafe { poll::real(fds, n, 0) });
        }
        crate::cancel_point();
        let deadline = crate::deadline::millis(timeout);
        // SAFETY: forwarded with a zero timeout.
        let probe = || unsafe { poll::real(fds, n, 0) };
        let r = probe();
        if r != 0 {
            return r;
        }
        // SAFETY: the kernel accepted the array.
        let interest = unsafe { poll_interest(fds, n) };
        multiplex(&interest, deadline, probe)
    }

    /// `ppoll(2)`.
    #[cancel_point]
    [poll] fn ppoll(fds: *mut pollfd, n: nfds_t, t: *const timespec, mask: *const sigset_t) -> c_int {
        let deadline = crate::deadline::relative(t);
        if !cooperative() || (deadline.is_ok() && zero_timeout(t)) {
            // A handler the call's mask lets through runs in it, as without us.
            // SAFETY: forwarded unchanged.
            let r = crate::hook::program(|| unsafe { ppoll::real(fds, n, t, mask) });
            return nothing_ready(r);
        }
        let deadline = match deadline {
            Ok(d) => d,
            Err(e) => return errno::fail(e),
        };
        crate::cancel_point();
        crate::signal::with_wait_mask(mask, || {
            let zero = timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: forwarded with a zero timeout.
            let probe = || unsafe { ppoll::real(fds, n, &zero, mask) };
            let r = probe();
            if r != 0 {
                return r;
            }
            // SAFETY: the kernel accepted the array.
            let interest = unsafe { poll_interest(fds, n) };
            multiplex(&interest, deadline, probe)
        })
    }

    /// `select(2)`; like Linux, updates `*t` with the time not slept.
    #[cancel_point]
    [poll] fn select(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, t: *mut timeval) -> c_int {
        // SAFETY: null or the caller's timeval.
        let tv = unsafe { t.as_ref() }.copied();
        let is_zero = tv.is_some_and(|tv| tv.tv_sec == 0 && tv.tv_usec == 0);
        if !cooperative() || is_zero || n < 0 || n > libc::FD_SETSIZE as c_int {
            // SAFETY: forwarded unchanged.
            let res = unsafe { select::real(n, r, w, e, t) };
            return if is_zero { nothing_ready(res) } else { res };
        }
        let deadline = match tv {
            None => None,
            Some(tv) if tv.tv_sec < 0 || tv.tv_usec < 0 || tv.tv_usec >= 1_000_000 => {
                return errno::fail(libc::EINVAL);
            }
            Some(tv) => crate::deadline::after(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000)),
        };
        crate::cancel_point();
        // SAFETY: the sets are the caller's (null or valid).
        let saved = unsafe { Sets::save(r, w, e) };
        let mut zero = timeval { tv_sec: 0, tv_usec: 0 };
        // SAFETY: forwarded with a zero timeout.
        let res = unsafe { select::real(n, r, w, e, &mut zero) };
        if res != 0 {
            return res;
        }
        let interest = saved.interest(n);
        let res = multiplex(&interest, deadline, || {
            // SAFETY: same sets as saved; zero timeout.
            unsafe {
                saved.restore(r, w, e);
                let mut zero = timeval { tv_sec: 0, tv_usec: 0 };
                select::real(n, r, w, e, &mut zero)
            }
        });
        if let (Some(d), false) = (deadline, t.is_null()) {
            let left = d.saturating_duration_since(Instant::now());
            // SAFETY: non-null caller pointer.
            unsafe {
                *t = timeval {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_usec: left.subsec_micros() as libc::suseconds_t,
                };
            }
        }
        res
    }

    /// `pselect(2)`.
    #[cancel_point]
    #[gate(cooperative() && (0..=libc::FD_SETSIZE as c_int).contains(&n))]
    [poll] fn pselect(
        n: c_int,
        r: *mut fd_set,
        w: *mut fd_set,
        e: *mut fd_set,
        t: *const timespec,
        m: *const sigset_t,
    ) -> c_int {
        if zero_timeout(t) {
            // A handler the call's mask lets through runs in it, as without
            // us (as `ppoll`'s).
            // SAFETY: forwarded unchanged.
            return nothing_ready(crate::hook::program(|| unsafe { pselect::real(n, r, w, e, t, m) }));
        }
        let deadline = match crate::deadline::relative(t) {
            Ok(d) => d,
            Err(err) => return errno::fail(err),
        };
        crate::cancel_point();
        // SAFETY: the sets are the caller's (null or valid).
        let saved = unsafe { Sets::save(r, w, e) };
        crate::signal::with_wait_mask(m, || {
            let zero = timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: forwarded with a zero timeout.
            let res = unsafe { pselect::real(n, r, w, e, &zero, m) };
            if res != 0 {
                return res;
            }
            let interest = saved.interest(n);
            multiplex(&interest, deadline, || {
                // SAFETY: same sets as saved; zero timeout.
                unsafe {
                    saved.restore(r, w, e);
                    pselect::real(n, r, w, e, &zero, m)
                }
            })
        })
    }

    /// `epoll_wait(2)`.
    #[cancel_point]
    #[gate(cooperative())]
    [poll] fn epoll_wait(ep: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int {
        if timeout == 0 {
            // SAFETY: forwarded unchanged.
            return nothing_ready(unsafe { epoll_wait::real(ep, ev, max, 0) });
        }
        // SAFETY: forwarded with a zero timeout.
        epoll_common(ep, crate::deadline::millis(timeout), || unsafe { epoll_wait::real(ep, ev, max, 0) })
    }

    /// `epoll_pwait(2)`.
    #[cancel_point]
    #[gate(cooperative())]
    [poll] fn epoll_pwait(ep: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, m: *const sigset_t) -> c_int {
        if timeout == 0 {
            // As `pselect`'s, for the mask.
            // SAFETY: forwarded unchanged.
            return nothing_ready(crate::hook::program(|| unsafe { epoll_pwait::real(ep, ev, max, 0, m) }));
        }
        crate::signal::with_wait_mask(m, || {
            // SAFETY: forwarded with a zero timeout.
            epoll_common(ep, crate::deadline::millis(timeout), || unsafe { epoll_pwait::real(ep, ev, max, 0, m) })
        })
    }

    /// `epoll_pwait2(2)` (glibc 2.35+): a timespec timeout, null = forever.
    /// Zero-timeout probes go through `epoll_pwait`, which is equivalent.
    #[cancel_point]
    #[gate(cooperative())]
    [poll] fn epoll_pwait2(
        ep: c_int,
        ev: *mut epoll_event,
        max: c_int,
        t: *const timespec,
        m: *const sigset_t,
    ) -> c_int {
        if zero_timeout(t) {
            // As `pselect`'s, for the mask.
            // SAFETY: forwarded unchanged.
            return nothing_ready(crate::hook::program(|| unsafe { epoll_pwait2::real(ep, ev, max, t, m) }));
        }
        let deadline = match crate::deadline::relative(t) {
            Ok(d) => d,
            Err(e) => return errno::fail(e),
        };
        crate::signal::with_wait_mask(m, || {
            // SAFETY: forwarded with a zero timeout.
            epoll_common(ep, deadline, || unsafe { epoll_pwait::real(ep, ev, max, 0, m) })
        })
    }
}
