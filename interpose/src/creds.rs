//! Credentials: `setuid`, `setgid`, `seteuid`, `setegid`, `setreuid`,
//! `setregid`, `setresuid`, `setresgid`, `setgroups` and `initgroups`,
//! made on the OS thread's own thread pointer ([`hub::on_thread_tls`]).
//!
//! The kernel keeps credentials per thread, so once a process has a second
//! thread glibc makes each of these calls on every thread
//! (`__nptl_setxid`): it walks its list of thread descriptors, signals each
//! one but the caller's own (`THREAD_SELF`) with its internal `SIGSETXID`,
//! whose handler makes the call there, and makes it last on the calling
//! thread. A fiber with TLS of its own has a descriptor of its own, which
//! is in no list: called there, glibc took the OS thread's descriptor (in
//! the list) for another thread and signalled its own thread, whose
//! handler is not even installed while glibc's `pthread_create` has never
//! run, so the process died of signal 33 (`tests/c/creds_in_thread.c`;
//! since `__libc_single_threaded` is cleared at the first thread, which
//! makes glibc take this path). On the OS thread's own descriptor glibc
//! skips the caller, signals only real threads (a worker of the offload
//! pool, a library's own thread), and makes the call once on this thread,
//! which is every fiber's. `initgroups` reaches `setgroups` by an internal
//! call, which no hook sees, so it is wrapped too.

use libc::{c_char, c_int, gid_t, size_t, uid_t};

use crate::hook::hook;

hook! {
    /// `setuid(2)`, on the OS thread's descriptor.
    [process] fn setuid(uid: uid_t) -> c_int {
        // SAFETY: forwarded unchanged; glibc's call switches no fiber.
        hub::on_thread_tls(|| unsafe { setuid::real(uid) })
    }

    /// `setgid(2)`, as `setuid`.
    [process] fn setgid(gid: gid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setgid::real(gid) })
    }

    /// `seteuid(2)`, as `setuid`.
    [process] fn seteuid(uid: uid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { seteuid::real(uid) })
    }

    /// `setegid(2)`, as `setuid`.
    [process] fn setegid(gid: gid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setegid::real(gid) })
    }

    /// `setreuid(2)`, as `setuid`.
    [process] fn setreuid(r: uid_t, e: uid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setreuid::real(r, e) })
    }

    /// `setregid(2)`, as `setuid`.
    [process] fn setregid(r: gid_t, e: gid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setregid::real(r, e) })
    }

    /// `setresuid(2)`, as `setuid`.
    [process] fn setresuid(r: uid_t, e: uid_t, s: uid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setresuid::real(r, e, s) })
    }

    /// `setresgid(2)`, as `setuid`.
    [process] fn setresgid(r: gid_t, e: gid_t, s: gid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setresgid::real(r, e, s) })
    }

    /// `setgroups(2)`, as `setuid`.
    [process] fn setgroups(n: size_t, list: *const gid_t) -> c_int {
        // SAFETY: as in `setuid`.
        hub::on_thread_tls(|| unsafe { setgroups::real(n, list) })
    }

    /// `initgroups(3)`: glibc reads the group database (files, or NSS
    /// modules, which may wait on sockets: that stays on the fiber's own
    /// descriptor, where a wait lets others run), then calls its internal
    /// `setgroups`, which no hook sees. Here the list is read by
    /// `getgrouplist` and set by the `setgroups` hook, in glibc's sequence:
    /// at most `NGROUPS_MAX` groups, one fewer while the kernel says
    /// `EINVAL`.
    [process] fn initgroups(user: *const c_char, group: gid_t) -> c_int {
        // SAFETY: no arguments.
        let limit = unsafe { libc::sysconf(libc::_SC_NGROUPS_MAX) };
        let mut n: c_int = if limit > 0 { limit.min(64) as c_int } else { 16 };
        let mut groups: Vec<gid_t> = Vec::new();
        loop {
            groups.resize(n as usize, 0);
            let room = n;
            // SAFETY: `groups` holds `n` entries; `user` is the caller's.
            if unsafe { libc::getgrouplist(user, group, groups.as_mut_ptr(), &mut n) } >= 0 {
                break;
            }
            if n <= room {
                // Never short of room for want of an entry: nothing else
                // makes it fail.
                return crate::errno::fail(libc::ENOMEM);
            }
        }
        let mut k = if limit > 0 { (n as usize).min(limit as usize) } else { n as usize };
        loop {
            // SAFETY: `groups` holds at least `k` entries.
            let r = unsafe { setgroups(k, groups.as_ptr()) };
            if r == -1 && crate::errno::get() == libc::EINVAL && k > 1 {
                k -= 1;
                continue;
            }
            return r;
        }
    }
}
