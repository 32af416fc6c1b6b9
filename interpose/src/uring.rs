//! io_uring: liburing's waits for completions cooperate.
//!
//! liburing makes its system calls with inline `syscall` instructions (2.3,
//! Debian 12's: 59 of them, no import of libc's `syscall`), so no hook sees
//! a fiber wait for completions inside it: it held the hub, and a program
//! whose I/O threads wait in liburing (a database server using InnoDB's
//! io_uring) hung at start. Its exported entry points are reachable, and
//! the ones that can wait are hooked here:
//!
//! - `__io_uring_get_cqe`, behind the inline `io_uring_wait_cqe`,
//!   `io_uring_wait_cqe_nr` and `io_uring_peek_cqe`;
//! - `io_uring_wait_cqes`, `io_uring_wait_cqe_timeout`;
//! - `io_uring_submit_and_wait`, `io_uring_submit_and_wait_timeout`;
//! - `__io_uring_sqring_wait`, behind the inline `io_uring_sqring_wait`
//!   (an `SQPOLL` ring's wait for room in its submission queue).
//!
//! **How.** Each hook is liburing 2.3's own function, step for step, over
//! the caller's `struct io_uring`, with one change: where liburing makes the
//! `io_uring_enter` call that submits and then waits for `min_complete`
//! completions, [`enter`] makes it with `min_complete` 0 (the same
//! submission, the same checks of the arguments, the same task work and
//! overflow flush, but no wait) and then waits as the kernel's
//! `io_cqring_wait` would, parked on the hub: a ring fd polls readable
//! whenever a completion is posted. Like the kernel, the wait ends when the
//! completion queue's tail reaches the head it started from plus
//! `min_complete`, when the timeout passes (`-ETIME`), when a signal
//! interrupts it (`-EINTR`), and when a timeout request (`IORING_OP_TIMEOUT`)
//! expires; an error is reported only if the queue is empty then, and only
//! if nothing was submitted. `__io_uring_sqring_wait` on a full queue runs
//! on the offload pool instead: the kernel wakes no poller when the `SQPOLL`
//! thread makes room.
//!
//! **What this relies on.** The layout of liburing 2.x's `struct io_uring`
//! (declared below as in liburing 2.3's header): it is ABI, since the inline
//! functions every program compiled against liburing contains read the same
//! fields; the kernel's ABI for the ring words, the CQE and
//! `io_uring_getevents_arg`; and the kernel's wait semantics (Linux 6.x).
//!
//! **Passed through** (the real function, which may block the hub as
//! before): outside a cooperative context; rings set up with
//! `IORING_SETUP_IOPOLL` (completions are found only by the waiter polling
//! the device: the ring fd never becomes readable) or
//! `IORING_SETUP_DEFER_TASKRUN` (completions are run only inside the
//! waiter's own `io_uring_enter`: measured here, the ring fd never woke an
//! epoll waiter); setup flags newer than liburing 2.3 (bit 14 up), whose
//! effect on the ring we have not checked; kernels without
//! `IORING_FEAT_EXT_ARG` (before 5.11: liburing's timeouts are then
//! requests of its own); a ring whose fd was closed (`ring_fd` < 0). A
//! registered ring fd (`io_uring_register_ring_fd`) cooperates: liburing 2.3
//! keeps `ring_fd` open beside it.
//!
//! A program linked with liburing's static library calls it directly, out
//! of any hook's sight; the entry points later liburings added
//! (`io_uring_wait_cqes_min_timeout`, `io_uring_submit_and_wait_min_timeout`,
//! `io_uring_submit_and_wait_reg`) are not hooked either.
//!
//! **Not hooked**: the functions that enter with `min_complete` 0 and never
//! wait (`io_uring_submit`, `io_uring_submit_and_get_events`,
//! `io_uring_get_events`, `io_uring_peek_batch_cqe`); the raw wrappers
//! `io_uring_enter`/`io_uring_enter2`, which get an fd and no ring, so the
//! completions cannot be counted (they still block); and
//! `io_uring_register_sync_cancel`, bounded by its own timeout.
//! `io_uring_queue_exit` is hooked for bookkeeping only: liburing closes the
//! ring fd with a raw system call, so the hub drops its registration first,
//! as the `close` hook does.
//!
//! **Deviations**, as for `poll`/`select`/`epoll_wait` (see [`crate::poll`]):
//! a wait's signal mask is checked (`-EINVAL`, `-EFAULT`) but not applied
//! while parked, and a handler with `SA_RESTART` does not end the wait where
//! the kernel would return `-EINTR`. An expired timeout request is
//! recognised by its `-ETIME` completion, so a linked timeout's `-ETIME`
//! ends a wait early too, and a timeout request completed by its count does
//! not. A `pthread_cancel` of the waiting fiber ends the wait with `-EINTR`
//! (these are not cancellation points; the fiber is cancelled at its next
//! one).

use std::ptr::null_mut;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Instant;

use hub::Interest;
use libc::{c_int, c_long, c_uint, c_void, sigset_t, size_t, timespec};

use crate::errno;
use crate::gate::cooperative;
use crate::hook::hook;

// Setup flags (`io_uring_params.flags`, kept in `io_uring.flags`).
const SETUP_IOPOLL: c_uint = 1 << 0;
const SETUP_SQPOLL: c_uint = 1 << 1;
const SETUP_CQE32: c_uint = 1 << 11;
const SETUP_DEFER_TASKRUN: c_uint = 1 << 13;
/// The flags liburing 2.3 knew (up to `IORING_SETUP_DEFER_TASKRUN`) but
/// those two: a ring with any other flag passes through.
const SETUP_COOPERATIVE: c_uint = ((1 << 14) - 1) & !(SETUP_IOPOLL | SETUP_DEFER_TASKRUN);
/// `IORING_FEAT_EXT_ARG`.
const FEAT_EXT_ARG: c_uint = 1 << 8;
// `io_uring_enter` flags.
const ENTER_GETEVENTS: c_uint = 1 << 0;
const ENTER_SQ_WAKEUP: c_uint = 1 << 1;
const ENTER_EXT_ARG: c_uint = 1 << 3;
const ENTER_REGISTERED_RING: c_uint = 1 << 4;
// Submission queue flags (`*sq.kflags`).
const SQ_NEED_WAKEUP: c_uint = 1 << 0;
const SQ_CQ_OVERFLOW: c_uint = 1 << 1;
const SQ_TASKRUN: c_uint = 1 << 2;
/// liburing's `INT_FLAG_REG_RING`: `enter_ring_fd` is a registered index.
const INT_FLAG_REG_RING: u8 = 1;
/// liburing's `_NSIG / 8` (glibc: 65 / 8), the signal mask size it passes.
const NSIG_BYTES: usize = 8;
/// The kernel's `sizeof(sigset_t)`, which a wait's mask size must equal.
const KERNEL_SIGSET: usize = 8;

/// liburing's `struct io_uring_sq` (2.3).
#[repr(C)]
struct Sq {
    khead: *mut c_uint,
    ktail: *mut c_uint,
    kring_mask: *mut c_uint,
    kring_entries: *mut c_uint,
    kflags: *mut c_uint,
    kdropped: *mut c_uint,
    array: *mut c_uint,
    sqes: *mut c_void,
    sqe_head: c_uint,
    sqe_tail: c_uint,
    ring_sz: size_t,
    ring_ptr: *mut c_void,
    ring_mask: c_uint,
    ring_entries: c_uint,
    pad: [c_uint; 2],
}

/// liburing's `struct io_uring_cq` (2.3).
#[repr(C)]
struct Cq {
    khead: *mut c_uint,
    ktail: *mut c_uint,
    kring_mask: *mut c_uint,
    kring_entries: *mut c_uint,
    kflags: *mut c_uint,
    koverflow: *mut c_uint,
    cqes: *mut Cqe,
    ring_sz: size_t,
    ring_ptr: *mut c_void,
    ring_mask: c_uint,
    ring_entries: c_uint,
    pad: [c_uint; 2],
}

/// liburing's `struct io_uring` (2.3; the same layout through 2.x).
#[repr(C)]
pub struct IoUring {
    sq: Sq,
    cq: Cq,
    flags: c_uint,
    ring_fd: c_int,
    features: c_uint,
    enter_ring_fd: c_int,
    int_flags: u8,
    pad: [u8; 3],
    pad2: c_uint,
}

/// The kernel's `struct io_uring_cqe` (the first 16 bytes of a big one).
#[repr(C)]
pub struct Cqe {
    user_data: u64,
    res: i32,
    flags: u32,
}

/// The kernel's `struct io_uring_getevents_arg`.
#[repr(C)]
#[derive(Clone, Copy)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    pad: u32,
    ts: u64,
}

// The header's sizes (x86-64 and AArch64): a mismatch fails the build.
const _: () = assert!(std::mem::size_of::<Sq>() == 104 && std::mem::size_of::<Cq>() == 88);
const _: () = assert!(std::mem::size_of::<IoUring>() == 216 && std::mem::offset_of!(IoUring, ring_fd) == 196);
const _: () = assert!(std::mem::size_of::<Cqe>() == 16 && std::mem::size_of::<GeteventsArg>() == 24);
// `__kernel_timespec` is read through `deadline` as a `timespec`: same layout.
const _: () = assert!(std::mem::size_of::<timespec>() == 16);

/// A ring the emulation takes on (one [`Ring::takes`] accepted).
///
/// # Invariant
/// Points at a `struct io_uring` set up by liburing and not yet exited, used
/// by this thread only for the length of the call (the caller's contract
/// with every liburing function; the hub does not switch fibers inside a
/// liburing call, so only our own waits let other fibers touch it
/// meanwhile, and no reference into it is held across them).
#[derive(Clone, Copy)]
struct Ring(*mut IoUring);

impl Ring {
    /// Whether the emulation can wait for `ring` (see the module docs):
    /// each hook's gate asks, and its body then takes `Ring(ring)`.
    fn takes(ring: *mut IoUring) -> bool {
        if ring.is_null() {
            return false;
        }
        // SAFETY: the caller's ring (liburing's contract): read only.
        let (flags, features, fd) = unsafe { ((*ring).flags, (*ring).features, (*ring).ring_fd) };
        flags & !SETUP_COOPERATIVE == 0 && features & FEAT_EXT_ARG != 0 && fd >= 0
    }

    fn get(&self) -> &IoUring {
        // SAFETY: see the invariant.
        unsafe { &*self.0 }
    }

    /// One of the kernel-shared ring words, read atomically.
    fn word(p: *mut c_uint, order: Ordering) -> u32 {
        // SAFETY: `p` points into the mapped ring (invariant); the kernel
        // and liburing access these words atomically too.
        unsafe { AtomicU32::from_ptr(p) }.load(order)
    }

    fn sqpoll(&self) -> bool {
        self.get().flags & SETUP_SQPOLL != 0
    }

    fn sq_flags(&self) -> c_uint {
        Self::word(self.get().sq.kflags, Ordering::Relaxed)
    }

    /// The CQ head, which the application writes.
    fn cq_head(&self) -> u32 {
        Self::word(self.get().cq.khead, Ordering::Relaxed)
    }

    /// The CQ tail, which the kernel writes; acquire, as liburing reads it.
    fn cq_tail(&self) -> u32 {
        Self::word(self.get().cq.ktail, Ordering::Acquire)
    }

    /// The CQE at position `i`.
    fn cqe(&self, i: u32) -> *mut Cqe {
        let r = self.get();
        let shift = u32::from(r.flags & SETUP_CQE32 != 0);
        // SAFETY: masked, the index is within the CQE array (invariant).
        unsafe { r.cq.cqes.add(((i & r.cq.ring_mask) << shift) as usize) }
    }

    /// liburing's `__io_uring_peek_cqe` on a ring with `EXT_ARG` (so without
    /// liburing's own timeout completions): the first CQE and how many
    /// there are.
    fn peek(&self) -> (*mut Cqe, u32) {
        let tail = self.cq_tail();
        let available = tail.wrapping_sub(self.cq_head());
        let cqe = if available == 0 {
            null_mut()
        } else {
            self.cqe(self.cq_head())
        };
        (cqe, available)
    }

    /// liburing's `cq_ring_needs_flush`.
    fn cq_needs_flush(&self) -> bool {
        self.sq_flags() & (SQ_CQ_OVERFLOW | SQ_TASKRUN) != 0
    }

    /// liburing's `sq_ring_needs_enter`.
    fn sq_needs_enter(&self, submit: u32, flags: &mut c_uint) -> bool {
        if submit == 0 {
            return false;
        }
        if !self.sqpoll() {
            return true;
        }
        // The kernel must see the tail store before we read its flags.
        fence(Ordering::SeqCst);
        if self.sq_flags() & SQ_NEED_WAKEUP != 0 {
            *flags |= ENTER_SQ_WAKEUP;
            return true;
        }
        false
    }

    /// liburing's `__io_uring_flush_sq`: publishes the SQEs the caller
    /// prepared and returns how many are pending.
    fn flush_sq(&self) -> u32 {
        // SAFETY: the caller's ring, ours for the call (invariant); liburing
        // itself updates these fields here.
        let sq = unsafe { &mut (*self.0).sq };
        let tail = sq.sqe_tail;
        if sq.sqe_head != tail {
            sq.sqe_head = tail;
            // Release: the kernel must see the SQEs before the new tail.
            // SAFETY: the SQ tail word of the mapped ring.
            unsafe { AtomicU32::from_ptr(sq.ktail) }.store(tail, Ordering::Release);
        }
        tail.wrapping_sub(Self::word(sq.khead, Ordering::Relaxed))
    }

    /// `flags` as liburing enters with them: with
    /// `IORING_ENTER_REGISTERED_RING` when the ring fd is registered.
    fn enter_flags(&self, flags: c_uint) -> c_uint {
        if self.get().int_flags & INT_FLAG_REG_RING != 0 {
            flags | ENTER_REGISTERED_RING
        } else {
            flags
        }
    }

    /// Whether a completion at positions `from..tail` still in the queue
    /// reports `-ETIME`: an `IORING_OP_TIMEOUT` that expired, which ends
    /// every kernel wait on the ring.
    fn timeout_expired(&self, from: u32, tail: u32) -> bool {
        let head = self.cq_head();
        let mut i = if head.wrapping_sub(from) as i32 > 0 { head } else { from };
        while i != tail {
            // SAFETY: a posted CQE (before the tail read with acquire).
            if unsafe { (*self.cqe(i)).res } == -libc::ETIME {
                return true;
            }
            i = i.wrapping_add(1);
        }
        false
    }
}

/// `io_uring_enter(2)` as liburing's `__sys_io_uring_enter2` makes it: the
/// result or `-errno`, the caller's errno untouched.
fn sys_enter(fd: c_int, to_submit: u32, min_complete: u32, flags: c_uint, arg: *const c_void, sz: usize) -> c_int {
    let saved = errno::get();
    // SAFETY: the kernel checks every argument; it touches only the ring and
    // what `arg` points at, as the caller's liburing call would.
    let r = unsafe {
        crate::futex::syscall::real(
            libc::SYS_io_uring_enter,
            fd as c_long,
            to_submit as c_long,
            min_complete as c_long,
            flags as c_long,
            arg as c_long,
            sz as c_long,
        )
    };
    let r = if r < 0 { -errno::get() } else { r as c_int };
    errno::set(saved);
    r
}

/// liburing's `__sys_io_uring_enter2` with the wait on the hub: submits
/// without waiting, then, if the kernel would wait (`IORING_ENTER_GETEVENTS`
/// with `min_complete` > 0, and everything submitted), waits as it would.
fn enter(r: Ring, to_submit: u32, min_complete: u32, flags: c_uint, arg: *const c_void, sz: usize) -> c_int {
    let fd = if flags & ENTER_REGISTERED_RING != 0 {
        r.get().enter_ring_fd
    } else {
        r.get().ring_fd
    };
    let submitted = sys_enter(fd, to_submit, 0, flags, arg, sz);
    // The kernel skips the wait after a short submission, and reports an
    // error of the wait only when nothing was submitted.
    if submitted < 0 || flags & ENTER_GETEVENTS == 0 || min_complete == 0 || submitted as u32 != to_submit {
        return submitted;
    }
    let waited = wait(r, min_complete.min(r.get().cq.ring_entries), flags, arg, sz);
    if submitted == 0 {
        waited
    } else {
        submitted
    }
}

/// The kernel's `io_cqring_wait(min)` after a submission that flushed task
/// work and overflow: 0, or `-ETIME`, `-EINTR`, or an error of the
/// arguments. `arg`/`sz` are the enter call's: an `io_uring_getevents_arg`
/// with `IORING_ENTER_EXT_ARG`, else the signal mask.
fn wait(r: Ring, min: u32, flags: c_uint, arg: *const c_void, sz: usize) -> c_int {
    let head = r.cq_head();
    let start = r.cq_tail();
    if start.wrapping_sub(head) >= min {
        return 0;
    }
    // The timeout and the mask, checked where the kernel checks them.
    let (ts, mask, mask_sz) = if flags & ENTER_EXT_ARG != 0 {
        // SAFETY: the calls with `IORING_ENTER_EXT_ARG` are ours
        // (`get_cqe_ext`), with `arg` at our own `GeteventsArg`.
        let a = unsafe { *(arg as *const GeteventsArg) };
        (a.ts as *const timespec, a.sigmask as *const u64, a.sigmask_sz as usize)
    } else {
        (std::ptr::null(), arg as *const u64, sz)
    };
    let deadline = if ts.is_null() {
        None
    } else {
        match crate::deadline::ktime_relative(ts) {
            Ok(d) => d,
            Err(e) => return -e,
        }
    };
    if !mask.is_null() {
        if mask_sz != KERNEL_SIGSET {
            return -libc::EINVAL;
        }
        if let Err(e) = crate::user::read(mask) {
            return -e;
        }
    }
    let target = head.wrapping_add(min);
    let fd = r.get().ring_fd;
    let mut seen = start;
    let ret = loop {
        if r.sq_flags() & SQ_CQ_OVERFLOW != 0 {
            // Completions wait in the kernel's overflow list: move them in.
            sys_enter(fd, 0, 0, ENTER_GETEVENTS, std::ptr::null(), NSIG_BYTES);
        }
        let tail = r.cq_tail();
        if tail.wrapping_sub(target) as i32 >= 0 || r.timeout_expired(seen, tail) {
            break 0;
        }
        seen = tail;
        match park(fd, deadline) {
            Parked::Again => {}
            Parked::Ended(e) => break e,
            // The ring was exited meanwhile: its memory is gone.
            Parked::Closed => return -libc::EBADF,
        }
    };
    if r.cq_tail() == r.cq_head() {
        ret
    } else {
        0
    }
}

enum Parked {
    /// Something was posted: look again.
    Again,
    /// The wait ends with this (negative) result.
    Ended(c_int),
    /// The ring fd was closed while we waited.
    Closed,
}

/// Parks until the ring fd polls readable (the hub's registration is
/// edge-triggered: every completion posted wakes it), or the deadline.
fn park(fd: c_int, deadline: Option<Instant>) -> Parked {
    match hub::wait_fd(fd, Interest::Readable, deadline) {
        Ok(()) => Parked::Again,
        Err(e) => match e.kind() {
            std::io::ErrorKind::TimedOut => Parked::Ended(-libc::ETIME),
            std::io::ErrorKind::Interrupted => Parked::Ended(-libc::EINTR),
            _ if e.raw_os_error() == Some(libc::EBADF) => Parked::Closed,
            _ => Parked::Ended(-e.raw_os_error().unwrap_or(libc::EIO)),
        },
    }
}

/// liburing's `struct get_data`.
struct GetData {
    submit: u32,
    wait_nr: u32,
    get_flags: c_uint,
    sz: usize,
    has_ts: bool,
    arg: *const c_void,
}

/// liburing's `_io_uring_get_cqe`, entering through [`enter`].
///
/// # Safety
/// `cqe_ptr` is the caller's out pointer.
unsafe fn get_cqe(r: Ring, cqe_ptr: *mut *mut Cqe, d: &mut GetData) -> c_int {
    let mut cqe;
    let mut looped = false;
    let mut err = 0;
    loop {
        let mut need_enter = false;
        let mut flags = 0;
        let (c, nr_available) = r.peek();
        cqe = c;
        if cqe.is_null() && d.wait_nr == 0 && d.submit == 0 {
            // Nothing to submit or wait for: enter at most once, to flush.
            if looped || !r.cq_needs_flush() {
                if err == 0 {
                    err = -libc::EAGAIN;
                }
                break;
            }
            need_enter = true;
        }
        if d.wait_nr > nr_available || need_enter {
            flags = ENTER_GETEVENTS | d.get_flags;
            need_enter = true;
        }
        if r.sq_needs_enter(d.submit, &mut flags) {
            need_enter = true;
        }
        if !need_enter {
            break;
        }
        if looped && d.has_ts {
            // The timed wait has been made: no second one.
            if cqe.is_null() && err == 0 {
                err = -libc::ETIME;
            }
            break;
        }
        let flags = r.enter_flags(flags);
        let ret = enter(r, d.submit, d.wait_nr, flags, d.arg, d.sz);
        if ret < 0 {
            if err == 0 {
                err = ret;
            }
            break;
        }
        d.submit = d.submit.wrapping_sub(ret as u32);
        if !cqe.is_null() {
            break;
        }
        if !looped {
            looped = true;
            err = ret;
        }
    }
    // SAFETY: the caller's out pointer (liburing writes it unchecked too).
    unsafe { *cqe_ptr = cqe };
    err
}

/// liburing's `io_uring_wait_cqes_new` and the timed form of
/// `io_uring_submit_and_wait_timeout`: a wait with an
/// `io_uring_getevents_arg`.
///
/// # Safety
/// As [`get_cqe`].
unsafe fn get_cqe_ext(
    r: Ring,
    cqe_ptr: *mut *mut Cqe,
    submit: u32,
    wait_nr: u32,
    ts: *const timespec,
    sigmask: *const sigset_t,
) -> c_int {
    let arg = GeteventsArg {
        sigmask: sigmask as u64,
        sigmask_sz: NSIG_BYTES as u32,
        pad: 0,
        ts: ts as u64,
    };
    let mut d = GetData {
        submit,
        wait_nr,
        get_flags: ENTER_EXT_ARG,
        sz: std::mem::size_of::<GeteventsArg>(),
        has_ts: !ts.is_null(),
        arg: (&raw const arg).cast(),
    };
    // SAFETY: caller's contract.
    unsafe { get_cqe(r, cqe_ptr, &mut d) }
}

/// liburing's `__io_uring_get_cqe` (the signal mask form).
///
/// # Safety
/// As [`get_cqe`].
unsafe fn get_cqe_sig(r: Ring, cqe_ptr: *mut *mut Cqe, submit: u32, wait_nr: u32, sigmask: *const sigset_t) -> c_int {
    let mut d = GetData {
        submit,
        wait_nr,
        get_flags: 0,
        sz: NSIG_BYTES,
        has_ts: false,
        arg: sigmask.cast(),
    };
    // SAFETY: caller's contract.
    unsafe { get_cqe(r, cqe_ptr, &mut d) }
}

/// liburing's `io_uring_wait_cqes` on a ring with `EXT_ARG`.
///
/// # Safety
/// As [`get_cqe`].
unsafe fn wait_cqes(
    r: Ring,
    cqe_ptr: *mut *mut Cqe,
    wait_nr: u32,
    ts: *const timespec,
    sigmask: *const sigset_t,
) -> c_int {
    // SAFETY: caller's contract.
    unsafe {
        if ts.is_null() {
            get_cqe_sig(r, cqe_ptr, 0, wait_nr, sigmask)
        } else {
            get_cqe_ext(r, cqe_ptr, 0, wait_nr, ts, sigmask)
        }
    }
}

/// Whether an `SQPOLL` ring's submission queue is full as the kernel sees
/// it (its tail, not the caller's unpublished one).
fn sq_full(r: Ring) -> bool {
    let sq = &r.get().sq;
    let used = Ring::word(sq.ktail, Ordering::Relaxed).wrapping_sub(Ring::word(sq.khead, Ordering::Acquire));
    used >= sq.ring_entries
}

hook! {
    /// `__io_uring_get_cqe`: behind `io_uring_wait_cqe`,
    /// `io_uring_wait_cqe_nr` and `io_uring_peek_cqe` (which cannot wait:
    /// `wait_nr` 0). Counted under `poll`: completion events, as
    /// `epoll_wait` waits for readiness events.
    #[gate(cooperative() && wait_nr > 0 && Ring::takes(ring))]
    [poll] fn __io_uring_get_cqe(
        ring: *mut IoUring,
        cqe_ptr: *mut *mut Cqe,
        submit: c_uint,
        wait_nr: c_uint,
        sigmask: *mut sigset_t,
    ) -> c_int {
        // SAFETY: a ring the gate took; the caller's out pointer.
        unsafe { get_cqe_sig(Ring(ring), cqe_ptr, submit, wait_nr, sigmask) }
    }

    /// `io_uring_wait_cqes`.
    #[gate(cooperative() && Ring::takes(ring))]
    [poll] fn io_uring_wait_cqes(
        ring: *mut IoUring,
        cqe_ptr: *mut *mut Cqe,
        wait_nr: c_uint,
        ts: *mut timespec,
        sigmask: *mut sigset_t,
    ) -> c_int {
        // SAFETY: a ring the gate took; the caller's out pointer.
        unsafe { wait_cqes(Ring(ring), cqe_ptr, wait_nr, ts, sigmask) }
    }

    /// `io_uring_wait_cqe_timeout`: `io_uring_wait_cqes` for one.
    #[gate(cooperative() && Ring::takes(ring))]
    [poll] fn io_uring_wait_cqe_timeout(ring: *mut IoUring, cqe_ptr: *mut *mut Cqe, ts: *mut timespec) -> c_int {
        // SAFETY: a ring the gate took; the caller's out pointer.
        unsafe { wait_cqes(Ring(ring), cqe_ptr, 1, ts, std::ptr::null()) }
    }

    /// `io_uring_submit_and_wait`: the number submitted, or `-errno`.
    /// (`wait_nr` 0 is `io_uring_submit`, which does not wait.)
    #[gate(cooperative() && wait_nr > 0 && Ring::takes(ring))]
    [poll] fn io_uring_submit_and_wait(ring: *mut IoUring, wait_nr: c_uint) -> c_int {
        let r = Ring(ring);
        // liburing's `__io_uring_submit`, which with `wait_nr` > 0 always
        // enters to wait (waking an idle `SQPOLL` thread on the way).
        let submitted = r.flush_sq();
        let mut flags = ENTER_GETEVENTS;
        r.sq_needs_enter(submitted, &mut flags);
        enter(r, submitted, wait_nr, r.enter_flags(flags), std::ptr::null(), NSIG_BYTES)
    }

    /// `io_uring_submit_and_wait_timeout`: the number submitted by its
    /// first entry, or `-errno`.
    #[gate(cooperative() && Ring::takes(ring))]
    [poll] fn io_uring_submit_and_wait_timeout(
        ring: *mut IoUring,
        cqe_ptr: *mut *mut Cqe,
        wait_nr: c_uint,
        ts: *mut timespec,
        sigmask: *mut sigset_t,
    ) -> c_int {
        let r = Ring(ring);
        let submit = r.flush_sq();
        // SAFETY: the caller's out pointer.
        unsafe {
            if ts.is_null() {
                get_cqe_sig(r, cqe_ptr, submit, wait_nr, sigmask)
            } else {
                get_cqe_ext(r, cqe_ptr, submit, wait_nr, ts, sigmask)
            }
        }
    }

    /// `__io_uring_sqring_wait`: an `SQPOLL` ring's wait for room in a full
    /// submission queue runs on the offload pool (the kernel allows it from
    /// any thread, and wakes no poller of the ring fd when room is made).
    /// On any other ring it returns at once.
    #[gate(cooperative() && Ring::takes(ring) && Ring(ring).sqpoll() && sq_full(Ring(ring)))]
    [poll] fn __io_uring_sqring_wait(ring: *mut IoUring) -> c_int {
        let call = crate::AssertSend(move || {
            // SAFETY: forwarded unchanged, on a worker; the caller waits, so
            // the ring stays alive.
            unsafe { __io_uring_sqring_wait::real(ring) }
        });
        // Not `crate::offload`: liburing leaves errno alone.
        hub::offload(hub::Lane::Work, move || call.call())
    }

    /// `io_uring_queue_exit`: liburing closes the ring fd with a raw system
    /// call, so its registration with the hub goes first (a stale one would
    /// swallow the events of the next fd given the same number).
    [poll] fn io_uring_queue_exit(ring: *mut IoUring) {
        if !ring.is_null() {
            // SAFETY: the caller's ring, read before the real call frees it.
            hub::forget_fd(unsafe { (*ring).ring_fd });
        }
        // SAFETY: forwarded unchanged.
        unsafe { io_uring_queue_exit::real(ring) }
    }
}
