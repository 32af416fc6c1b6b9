//! Notifications glibc delivers on threads of its own (`SIGEV_THREAD`):
//! `timer_create`, `mq_notify`, the POSIX AIO calls and `getaddrinfo_a`;
//! and the fds of AIO requests, which glibc's AIO threads use.
//!
//! glibc runs a `SIGEV_THREAD` notification function on an OS thread it
//! makes with its internal `pthread_create`, so it runs beside the fibers
//! as a thread that is not one of them. What it does to pthread objects it
//! shares with fibers reaches them the way any such thread's does (see
//! `gate::foreign_threads`): but only from its first use of one on, and
//! until then a fiber waiting for it looked like a deadlock. A fiber
//! waiting on a condition variable that a timer's notification signals
//! had the process exit with the deadlock report before the timer fired.
//! So a request for such a notification notes, before glibc makes its
//! thread, that one will exist.

use libc::{aiocb, c_int, c_void, clockid_t, mqd_t, sigevent, timer_t};

use crate::hook::hook;

/// Notes a notification thread to come if `ev` asks for one.
fn note(ev: *const sigevent) {
    // SAFETY: null or the caller's sigevent (the kernel and glibc read it
    // next anyway).
    if unsafe { ev.as_ref() }.is_some_and(|e| e.sigev_notify == libc::SIGEV_THREAD) {
        crate::gate::foreign_thread();
    }
}

/// Before an AIO request: [`note`] for its own sigevent; and its fd, if
/// greenhook made it non-blocking underneath (a pipe's), goes back to
/// blocking as when stdio takes one over (`fd::hand_back`), since glibc's
/// AIO threads read and write it with internal calls: they met `EAGAIN`
/// on an empty pipe where the request waits for data.
fn note_aio(cb: *const aiocb) {
    // SAFETY: null or the caller's control block.
    if let Some(cb) = unsafe { cb.as_ref() } {
        note(&cb.aio_sigevent);
        if crate::gate::on() && !crate::fdtable::Fd::of(cb.aio_fildes).nowait() {
            crate::fd::hand_back(cb.aio_fildes);
        }
    }
}

/// [`note_aio`] for each request of a list, and [`note`] for the list's
/// own sigevent (`lio_listio`, `lio_listio64`: see `blocking`, which waits
/// for a `LIO_WAIT` list on the pool).
pub(crate) fn note_lio(list: *const *mut aiocb, n: c_int, ev: *const sigevent) {
    note(ev);
    if list.is_null() || n <= 0 {
        return;
    }
    // SAFETY: the caller's array of `n` pointers (null entries skipped).
    for &cb in unsafe { std::slice::from_raw_parts(list, n as usize) } {
        note_aio(cb);
    }
}

hook! {
    /// `timer_create(2)`; a `SIGEV_THREAD_ID` notification to a fiber's
    /// id goes to its OS thread (see `thread::tid`).
    [time] fn timer_create(clock: clockid_t, ev: *mut sigevent, t: *mut timer_t) -> c_int {
        note(ev);
        // SAFETY: the caller's sigevent, if any, read as the kernel reads it.
        if let Some(mut own) = unsafe { ev.as_ref() }
            .filter(|e| e.sigev_notify == libc::SIGEV_THREAD_ID)
            .filter(|e| crate::thread::tid::is_fiber_id(e.sigev_notify_thread_id))
            .copied()
        {
            own.sigev_notify_thread_id = crate::thread::tid::for_kernel(own.sigev_notify_thread_id);
            // SAFETY: the caller's arguments, the sigevent copied.
            return unsafe { timer_create::real(clock, &mut own, t) };
        }
        // SAFETY: forwarded unchanged.
        unsafe { timer_create::real(clock, ev, t) }
    }

    /// `mq_notify(3)`.
    [file] fn mq_notify(q: mqd_t, ev: *const sigevent) -> c_int {
        note(ev);
        // SAFETY: forwarded unchanged.
        unsafe { mq_notify::real(q, ev) }
    }

    /// `aio_read(3)`.
    [file] fn aio_read(cb: *mut aiocb) -> c_int {
        note_aio(cb);
        // SAFETY: forwarded unchanged.
        unsafe { aio_read::real(cb) }
    }

    /// `aio_write(3)`.
    [file] fn aio_write(cb: *mut aiocb) -> c_int {
        note_aio(cb);
        // SAFETY: forwarded unchanged.
        unsafe { aio_write::real(cb) }
    }

    /// `aio_fsync(3)`.
    [file] fn aio_fsync(op: c_int, cb: *mut aiocb) -> c_int {
        note_aio(cb);
        // SAFETY: forwarded unchanged.
        unsafe { aio_fsync::real(op, cb) }
    }

    /// `aio_read64`: the same function on 64-bit glibc.
    [file] fn aio_read64(cb: *mut aiocb) -> c_int {
        note_aio(cb);
        // SAFETY: forwarded unchanged.
        unsafe { aio_read64::real(cb) }
    }

    /// `aio_write64`: the same function on 64-bit glibc.
    [file] fn aio_write64(cb: *mut aiocb) -> c_int {
        note_aio(cb);
        // SAFETY: forwarded unchanged.
        unsafe { aio_write64::real(cb) }
    }

    /// `getaddrinfo_a(3)`: its `GAI_NOWAIT` notification.
    [dns] fn getaddrinfo_a(mode: c_int, list: *mut *mut c_void, n: c_int, ev: *mut sigevent) -> c_int {
        note(ev);
        // SAFETY: forwarded unchanged.
        unsafe { getaddrinfo_a::real(mode, list, n, ev) }
    }
}
