//! Marks code that belongs to greenhook's own machinery.
//!
//! The interposer's hooks pass straight through to libc when
//! [`is_internal`] is true: in the offload pool's worker threads (for their
//! whole life), while the hub spawns those threads, and while it prints
//! reports. That keeps the hub's own work from being turned into fiber
//! operations.

use std::cell::Cell;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether the caller is greenhook machinery (hooks must pass through).
#[inline]
pub fn is_internal() -> bool {
    DEPTH.with(|d| d.get()) != 0
}

/// While alive, the thread counts as greenhook machinery.
pub struct Guard(());

impl Guard {
    /// Enters internal mode (nests).
    pub fn new() -> Guard {
        DEPTH.with(|d| d.set(d.get() + 1));
        Guard(())
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Marks this whole thread as machinery (worker threads).
pub(crate) fn mark_thread() {
    DEPTH.with(|d| d.set(d.get() + 1));
}

type Describer = fn(usize) -> Option<String>;
static DESCRIBER: std::sync::atomic::AtomicPtr<()> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Lets the layer above say what a wait-queue key is ("mutex 0x…, held by
/// fiber 2") in deadlock reports.
pub fn set_key_describer(f: Describer) {
    DESCRIBER.store(f as *mut (), std::sync::atomic::Ordering::Release);
}

pub(crate) fn describe_key(key: usize) -> String {
    let p = DESCRIBER.load(std::sync::atomic::Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: only set_key_describer stores here, from a `Describer`.
        let f: Describer = unsafe { std::mem::transmute::<*mut (), Describer>(p) };
        if let Some(s) = f(key) {
            return s;
        }
    }
    format!("address {key:#x}")
}

type Extra = fn() -> Vec<(&'static str, u64)>;
static EXTRA: std::sync::atomic::AtomicPtr<()> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Lets the layer above add rows (hooked calls by family) to the stats table.
pub fn set_stats_extra(f: Extra) {
    EXTRA.store(f as *mut (), std::sync::atomic::Ordering::Release);
}

pub(crate) fn stats_extra() -> Vec<(&'static str, u64)> {
    let p = EXTRA.load(std::sync::atomic::Ordering::Acquire);
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: only set_stats_extra stores here, from an `Extra`.
    let f: Extra = unsafe { std::mem::transmute::<*mut (), Extra>(p) };
    f()
}

type NameProvider = fn(&mut [u8; 64]) -> usize;
static NAMER: std::sync::atomic::AtomicPtr<()> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Lets the layer above supply the running fiber's current name (e.g. set by
/// `pthread_setname_np`) to the stall monitor. The function runs inside a
/// signal handler on the hub thread: it must be async-signal-safe (no
/// allocation, no locks; `RefCell::try_borrow` is fine).
pub fn set_name_provider(f: NameProvider) {
    NAMER.store(f as *mut (), std::sync::atomic::Ordering::Release);
}

pub(crate) fn provided_name(buf: &mut [u8; 64]) -> usize {
    let p = NAMER.load(std::sync::atomic::Ordering::Acquire);
    if p.is_null() {
        return 0;
    }
    // SAFETY: only set_name_provider stores here, from a `NameProvider`.
    let f: NameProvider = unsafe { std::mem::transmute::<*mut (), NameProvider>(p) };
    f(buf)
}

type UserNamer = fn(usize) -> Option<String>;
static USER_NAMER: std::sync::atomic::AtomicPtr<()> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Lets the layer above name a task from its user word (pthread names) in
/// deadlock reports.
pub fn set_user_namer(f: UserNamer) {
    USER_NAMER.store(f as *mut (), std::sync::atomic::Ordering::Release);
}

pub(crate) fn user_name(user: usize) -> Option<String> {
    let p = USER_NAMER.load(std::sync::atomic::Ordering::Acquire);
    if p.is_null() || user == 0 {
        return None;
    }
    // SAFETY: only set_user_namer stores here, from a `UserNamer`.
    let f: UserNamer = unsafe { std::mem::transmute::<*mut (), UserNamer>(p) };
    f(user)
}
