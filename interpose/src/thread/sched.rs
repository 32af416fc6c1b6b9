//! Scheduling policy and priority, per fiber.
//!
//! The kernel keeps them per thread; all fibers of a hub share one OS
//! thread, so each fiber's are kept in its record and the OS thread's are
//! left alone: `pthread_getschedparam`, `pthread_setschedparam` and
//! `pthread_setschedprio` on a fiber read and write its record, with the
//! kernel's answers (`EINVAL` for a policy or priority out of range,
//! `EPERM` where the kernel would refuse an unprivileged caller: a
//! real-time policy beyond `RLIMIT_RTPRIO` without `CAP_SYS_NICE`, or
//! leaving `SCHED_IDLE` beyond `RLIMIT_NICE`). A new thread gets its
//! creator's, or with `PTHREAD_EXPLICIT_SCHED` the attribute's, checked the
//! same way. The root's own stay the OS thread's (real calls).
//!
//! Each fiber's priority is also its task's in the hub
//! ([`hub::set_priority`]), and the root's is the root task's: once any
//! differs from 0 the hub runs the highest runnable first, as the kernel
//! runs real-time threads on one CPU (see the hub's `priority` module).
//! Lock waiters are ordered by [`current_priority`].

use std::cell::Cell;

use libc::{c_int, pthread_attr_t, pthread_t, sched_param};

use super::{current_record, resolve, Record, Target, REGISTRY};
use crate::hook::hook;

/// `SCHED_RESET_ON_FORK`, which may be or'ed into a policy.
const RESET_ON_FORK: c_int = 0x4000_0000;
/// Linux's `CAP_SYS_NICE`.
const CAP_SYS_NICE: u32 = 23;

/// The root's policy and priority, once read (real calls); per OS thread
/// (see `hub::PerThread`).
static ROOT: hub::PerThread<Cell<Option<(c_int, c_int)>>> = hub::PerThread::new(|| Cell::new(None));

/// A fiber's policy and priority: `None` while they are the root's (it
/// was created by the root and nobody set them), so that creating a
/// thread asks the kernel nothing. Before the root's change, every `None`
/// is pinned to the old value.
#[derive(Default)]
pub(crate) struct Sched(Cell<Option<(c_int, c_int)>>);

impl Sched {
    fn get(&self) -> (c_int, c_int) {
        self.0.get().unwrap_or_else(root)
    }

    fn set(&self, v: (c_int, c_int)) {
        note(v);
        self.0.set(Some(v));
    }

    /// The hub's priority for a task of these: the root's while they are
    /// the root's and it was read, else 0 until it is (see [`root`]).
    pub(super) fn task_priority(&self) -> u32 {
        self.0.get().or_else(|| ROOT.with(Cell::get)).map_or(0, priority_of)
    }
}

/// The hub's priority of a policy and priority pair.
fn priority_of(v: (c_int, c_int)) -> u32 {
    v.1.max(0) as u32
}

fn note(v: (c_int, c_int)) {
    if v.1 != 0 {
        hub::internal::note_priorities_differ();
    }
}

/// The root's policy and priority (the OS thread's), read once. Reading
/// it gives the hub the root's priority, and that of every fiber that has
/// the root's.
fn root() -> (c_int, c_int) {
    if let Some(v) = ROOT.with(Cell::get) {
        return v;
    }
    let v = read_real();
    note(v);
    ROOT.with(|r| r.set(Some(v)));
    hub::set_priority(&hub::root(), priority_of(v));
    let same: Vec<_> = REGISTRY.with(|r| {
        // Allocates with the registry borrowed: as machinery (see the
        // registry's insert in `pthread_create`).
        let _g = hub::internal::Guard::new();
        r.borrow()
            .values()
            .filter(|rec| rec.sched.0.get().is_none())
            .map(|rec| rec.task.clone())
            .collect()
    });
    for t in same {
        hub::set_priority(&t, priority_of(v));
    }
    v
}

fn read_real() -> (c_int, c_int) {
    let (mut p, mut sp) = (0, sched_param { sched_priority: 0 });
    // SAFETY: our own OS thread's real handle; valid out pointers.
    unsafe { pthread_getschedparam::real(super::os_thread_self(), &mut p, &mut sp) };
    (p, sp.sched_priority)
}

/// The calling context's scheduling priority (`sched_priority`: 1–99 for
/// `SCHED_FIFO`/`SCHED_RR`, 0 otherwise): what lock waiters are ordered by.
/// Registered with the hub (`hub::internal::priority`), so that lock
/// waiters find it without a path from `sync` into this module.
pub(crate) fn current_priority() -> u32 {
    match current_record() {
        Some(rec) => rec.sched.get().1,
        None => root().1,
    }
    .max(0) as u32
}

/// `EINVAL` for a policy the kernel does not know or a priority out of
/// its range.
fn check(policy: c_int, prio: c_int) -> Result<(), c_int> {
    let base = policy & !RESET_ON_FORK;
    if ![
        libc::SCHED_OTHER,
        libc::SCHED_FIFO,
        libc::SCHED_RR,
        libc::SCHED_BATCH,
        libc::SCHED_IDLE,
    ]
    .contains(&base)
    {
        return Err(libc::EINVAL);
    }
    // SAFETY: plain integer arguments.
    let (lo, hi) = unsafe { (libc::sched_get_priority_min(base), libc::sched_get_priority_max(base)) };
    if prio < lo || prio > hi {
        return Err(libc::EINVAL);
    }
    Ok(())
}

fn rlimit(which: libc::__rlimit_resource_t) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::getrlimit(which, &mut r) };
    r.rlim_cur
}

/// Whether the process holds `CAP_SYS_NICE` (effective).
fn cap_sys_nice() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: c_int,
    }
    let hdr = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    // Two of {effective, permitted, inheritable}.
    let mut data = [0u32; 6];
    // SAFETY: the kernel reads the header and writes the two data entries.
    let r = unsafe {
        crate::futex::syscall::real(
            libc::SYS_capget,
            &hdr as *const Header as libc::c_long,
            data.as_mut_ptr() as libc::c_long,
            0,
            0,
            0,
            0,
        )
    };
    r == 0 && data[0] & (1 << CAP_SYS_NICE) != 0
}

/// Whether the kernel would let an unprivileged thread at `cur` move to
/// `new` (the checks of `__sched_setscheduler`; `EPERM` otherwise).
fn permitted(cur: (c_int, c_int), new: (c_int, c_int)) -> bool {
    let rt = |p: c_int| matches!(p & !RESET_ON_FORK, libc::SCHED_FIFO | libc::SCHED_RR);
    let base = |p: c_int| p & !RESET_ON_FORK;
    let mut ok = true;
    if rt(new.0) {
        let rlim = rlimit(libc::RLIMIT_RTPRIO);
        let cur_rt = if rt(cur.0) { cur.1 } else { 0 };
        if base(new.0) != base(cur.0) && rlim == 0 {
            ok = false;
        }
        if new.1 > cur_rt && new.1 as u64 > rlim {
            ok = false;
        }
    }
    if base(cur.0) == libc::SCHED_IDLE && base(new.0) != libc::SCHED_IDLE {
        // Leaving SCHED_IDLE is a raise to the thread's nice level.
        // SAFETY: plain arguments; errno is not looked at.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        if (20 - i64::from(nice)) as u64 > rlimit(libc::RLIMIT_NICE) {
            ok = false;
        }
    }
    ok || cap_sys_nice()
}

/// Moves `rec` to `new`: the kernel's checks, then the record.
fn change(rec: &Record, new: (c_int, c_int)) -> c_int {
    if let Err(e) = check(new.0, new.1) {
        return e;
    }
    if !permitted(rec.sched.get(), new) {
        return libc::EPERM;
    }
    rec.sched.set(new);
    hub::set_priority(&rec.task, priority_of(new));
    0
}

/// A new thread's policy and priority: its creator's, or with
/// `PTHREAD_EXPLICIT_SCHED` the attribute's (which must be valid and
/// allowed: `EINVAL`, `EPERM`, as glibc's `pthread_create` answers).
pub(super) fn at_create(attr: *const pthread_attr_t, creator: Option<&Record>) -> Result<Sched, c_int> {
    let inherited = creator.and_then(|r| r.sched.0.get());
    if attr.is_null() {
        return Ok(Sched(Cell::new(inherited)));
    }
    let (mut inherit, mut policy) = (0, 0);
    let mut sp = sched_param { sched_priority: 0 };
    // SAFETY: the caller's initialised attribute object; valid out pointers.
    unsafe {
        libc::pthread_attr_getinheritsched(attr, &mut inherit);
        libc::pthread_attr_getschedpolicy(attr, &mut policy);
        libc::pthread_attr_getschedparam(attr, &mut sp);
    }
    if inherit != libc::PTHREAD_EXPLICIT_SCHED {
        return Ok(Sched(Cell::new(inherited)));
    }
    let new = (policy, sp.sched_priority);
    check(new.0, new.1)?;
    let creator = inherited.unwrap_or_else(root);
    if !permitted(creator, new) {
        return Err(libc::EPERM);
    }
    note(new);
    Ok(Sched(Cell::new(Some(new))))
}

/// Writes `rec`'s policy and priority into an attribute object
/// (`pthread_getattr_np`).
pub(super) fn fill_attr(rec: &Record, a: *mut pthread_attr_t) {
    let (policy, prio) = rec.sched.get();
    // SAFETY: the caller's initialised attribute object; the values were
    // checked when they were set (the attribute takes OTHER, FIFO and RR
    // only, and refuses the others unchanged).
    unsafe {
        libc::pthread_attr_setschedpolicy(a, policy & !RESET_ON_FORK);
        libc::pthread_attr_setschedparam(a, &sched_param { sched_priority: prio });
    }
}

/// The root changes its own (real) policy or priority: every fiber that
/// had "the root's" keeps the old value, and the cache is dropped.
fn root_changing() {
    let old = root();
    REGISTRY.with(|r| {
        for rec in r.borrow().values() {
            if rec.sched.0.get().is_none() {
                rec.sched.0.set(Some(old));
            }
        }
    });
    ROOT.with(|r| r.set(None));
}

/// The root's change is made: the hub learns its new priority.
fn root_changed() {
    root();
}

/// Whether `t` is the OS thread running the caller (the root of this hub).
fn is_own_thread(t: pthread_t) -> bool {
    t == super::os_thread_self()
}

hook! {
    /// `pthread_getschedparam`: a fiber's own; `ESRCH` once it ended.
    [thread] fn pthread_getschedparam(t: pthread_t, policy: *mut c_int, param: *mut sched_param) -> c_int {
        match resolve(t) {
            Target::Fiber(rec) if !rec.ended.get() => {
                let (p, prio) = rec.sched.get();
                // SAFETY: the caller's out pointers.
                unsafe {
                    *policy = p;
                    (*param).sched_priority = prio;
                }
                0
            }
            Target::Fiber(_) | Target::Gone(_) => libc::ESRCH,
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => unsafe { pthread_getschedparam::real(t, policy, param) },
        }
    }

    /// `pthread_setschedparam`: a fiber's own, with the kernel's checks.
    [thread] fn pthread_setschedparam(t: pthread_t, policy: c_int, param: *const sched_param) -> c_int {
        match resolve(t) {
            Target::Fiber(rec) if !rec.ended.get() => {
                // SAFETY: the caller's parameter.
                let prio = unsafe { (*param).sched_priority };
                change(&rec, (policy, prio))
            }
            Target::Fiber(_) | Target::Gone(_) => libc::ESRCH,
            Target::Real if crate::gate::emulating() && is_own_thread(t) => {
                root_changing();
                // SAFETY: forwarded unchanged.
                let r = unsafe { pthread_setschedparam::real(t, policy, param) };
                root_changed();
                r
            }
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => unsafe { pthread_setschedparam::real(t, policy, param) },
        }
    }

    /// `pthread_setschedprio`: a fiber's priority within its policy.
    [thread] fn pthread_setschedprio(t: pthread_t, prio: c_int) -> c_int {
        match resolve(t) {
            Target::Fiber(rec) if !rec.ended.get() => {
                let policy = rec.sched.get().0;
                change(&rec, (policy, prio))
            }
            Target::Fiber(_) | Target::Gone(_) => libc::ESRCH,
            Target::Real if crate::gate::emulating() && is_own_thread(t) => {
                root_changing();
                // SAFETY: forwarded unchanged.
                let r = unsafe { pthread_setschedprio::real(t, prio) };
                root_changed();
                r
            }
            // SAFETY: not ours: forwarded unchanged.
            Target::Real => unsafe { pthread_setschedprio::real(t, prio) },
        }
    }
}

/// The pthread fiber a call that takes a thread id (`sched_*`,
/// `sched_setaffinity`, `setpriority`…) names: with 0 the caller, if it is
/// one; with a fiber's id ([`super::tid`]) that fiber, while it lives.
/// `None`: the kernel's call (the root's own, or an id that is no live
/// thread's, which the kernel answers with `ESRCH`).
pub(super) fn named_fiber(pid: libc::pid_t) -> Option<std::rc::Rc<Record>> {
    if !crate::gate::emulating() {
        return None;
    }
    match pid {
        0 => current_record(),
        _ => super::tid::fiber(pid),
    }
}

/// The fiber `getpriority`/`setpriority` on `PRIO_PROCESS` name (see
/// [`named_fiber`]): on Linux they name a thread, whose nice value is its
/// own.
fn own_nice(which: libc::__priority_which_t, who: libc::id_t) -> Option<std::rc::Rc<Record>> {
    if which != libc::PRIO_PROCESS {
        return None;
    }
    named_fiber(who as libc::pid_t)
}

/// The nice value of the fiber `rec`: its own, or the OS thread's, which
/// it inherited.
fn nice_of(rec: &Record) -> c_int {
    // SAFETY: plain arguments; a fiber's own is not asked for.
    rec.nice
        .get()
        .unwrap_or_else(|| unsafe { getpriority::real(libc::PRIO_PROCESS, 0) })
}

/// A `sched_*` call changes the root's policy or priority (the root's 0,
/// or its OS thread's id from anywhere): whether it does.
fn root_changing_itself(pid: libc::pid_t) -> bool {
    let mine = crate::gate::emulating() && (pid == 0 && !hub::in_fiber() || pid == hub::internal::os_tid());
    if mine {
        root_changing();
    }
    mine
}

hook! {
    /// `getpriority(2)`: a fiber's nice value (0 in one, or its id: see
    /// `setpriority`).
    [thread] fn getpriority(which: libc::__priority_which_t, who: libc::id_t) -> c_int {
        match own_nice(which, who) {
            Some(rec) => nice_of(&rec),
            // SAFETY: forwarded unchanged.
            None => unsafe { getpriority::real(which, who) },
        }
    }

    /// `setpriority(2)` of a fiber (0 in one, or its id): kept in its
    /// record, as the kernel keeps a thread's (clamped to -20..19; a
    /// lower value than its own needs `RLIMIT_NICE` or `CAP_SYS_NICE`,
    /// else `EACCES`). Before, it reniced the OS thread: a thread that
    /// lowered its own priority lowered every thread's, main's too.
    [thread] fn setpriority(which: libc::__priority_which_t, who: libc::id_t, prio: c_int) -> c_int {
        let Some(rec) = own_nice(which, who) else {
            // SAFETY: forwarded unchanged.
            return unsafe { setpriority::real(which, who, prio) };
        };
        let new = prio.clamp(-20, 19);
        if new < nice_of(&rec) && (20 - i64::from(new)) as u64 > rlimit(libc::RLIMIT_NICE) && !cap_sys_nice() {
            return crate::errno::fail(libc::EACCES);
        }
        rec.nice.set(Some(new));
        0
    }

    /// `nice(2)`: glibc's, on the hooks above (glibc's calls them
    /// internally, where no hook sees them): the new value, or -1 with
    /// `EPERM` for a raise the thread may not make.
    [thread] fn nice(inc: c_int) -> c_int {
        if named_fiber(0).is_none() {
            // SAFETY: forwarded unchanged.
            return unsafe { nice::real(inc) };
        }
        // SAFETY: our own hooks' C entries, with plain arguments.
        unsafe {
            let cur = getpriority(libc::PRIO_PROCESS, 0);
            if setpriority(libc::PRIO_PROCESS, 0, cur.saturating_add(inc)) == -1 {
                if crate::errno::get() == libc::EACCES {
                    crate::errno::set(libc::EPERM);
                }
                return -1;
            }
            getpriority(libc::PRIO_PROCESS, 0)
        }
    }

    /// `sched_getscheduler(2)`: pid 0 in a fiber is the fiber's policy.
    [thread] fn sched_getscheduler(pid: libc::pid_t) -> c_int {
        match named_fiber(pid) {
            Some(rec) => rec.sched.get().0,
            // SAFETY: forwarded unchanged.
            None => unsafe { sched_getscheduler::real(pid) },
        }
    }

    /// `sched_getparam(2)`: pid 0 in a fiber is the fiber's priority.
    [thread] fn sched_getparam(pid: libc::pid_t, param: *mut sched_param) -> c_int {
        match named_fiber(pid) {
            Some(_) if param.is_null() => crate::errno::fail(libc::EINVAL),
            Some(rec) => {
                // SAFETY: the caller's out pointer (not null).
                unsafe { (*param).sched_priority = rec.sched.get().1 };
                0
            }
            // SAFETY: forwarded unchanged.
            None => unsafe { sched_getparam::real(pid, param) },
        }
    }

    /// `sched_setscheduler(2)`: pid 0 in a fiber sets the fiber's own.
    [thread] fn sched_setscheduler(pid: libc::pid_t, policy: c_int, param: *const sched_param) -> c_int {
        match named_fiber(pid) {
            Some(_) if param.is_null() => crate::errno::fail(libc::EINVAL),
            // SAFETY: the caller's parameter (not null).
            Some(rec) => match change(&rec, (policy, unsafe { (*param).sched_priority })) {
                0 => 0,
                e => crate::errno::fail(e),
            },
            None => {
                let mine = root_changing_itself(pid);
                // SAFETY: forwarded unchanged.
                let r = unsafe { sched_setscheduler::real(pid, policy, param) };
                if mine {
                    root_changed();
                }
                r
            }
        }
    }

    /// `sched_setparam(2)`: pid 0 in a fiber sets the fiber's priority.
    [thread] fn sched_setparam(pid: libc::pid_t, param: *const sched_param) -> c_int {
        match named_fiber(pid) {
            Some(_) if param.is_null() => crate::errno::fail(libc::EINVAL),
            Some(rec) => {
                let policy = rec.sched.get().0;
                // SAFETY: the caller's parameter (not null).
                match change(&rec, (policy, unsafe { (*param).sched_priority })) {
                    0 => 0,
                    e => crate::errno::fail(e),
                }
            }
            None => {
                let mine = root_changing_itself(pid);
                // SAFETY: forwarded unchanged.
                let r = unsafe { sched_setparam::real(pid, param) };
                if mine {
                    root_changed();
                }
                r
            }
        }
    }
}
