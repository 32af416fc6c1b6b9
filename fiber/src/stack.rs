//! Fiber stacks: carved from large reserved regions, pooled per OS thread.
//!
//! ```text
//!  region (one mmap, MAP_NORESERVE, never grows the mapping count per fiber)
//!  ┌────────┬──────────────┬────────┬──────────────┬─────
//!  │ guard  │ usable stack │ guard  │ usable stack │ ...
//!  └────────┴──────────────┴────────┴──────────────┴─────
//!  ^ limit()   (grows down)  ^ base() of slot 0 = limit of slot 1's guard
//! ```
//!
//! Each slot is one guard page followed by the usable stack. The guard is
//! installed with `madvise(MADV_GUARD_INSTALL)` where the kernel has it (Linux
//! 6.13+: no new mapping, so a million guarded stacks fit under
//! `vm.max_map_count`), else with `mprotect(PROT_NONE)` while a budget of
//! mappings lasts, else the slot is left unguarded and a canary word at its
//! lowest usable address is checked at every switch.
//!
//! A finished fiber's stack goes back to the free list of its [`StackPool`]
//! and is reused as it is (its touched pages stay resident, like a malloc
//! arena), so spawning on a pooled stack makes no system call. A pool belongs
//! to one OS thread (it is not `Sync`) and lives as long as the process: the
//! scheduler keeps one per thread, where every context of the thread reaches
//! it, instead of a thread-local (which is per fiber once fibers have their
//! own TLS, and gone while the thread's TLS destructors run).

use std::cell::{Cell, RefCell};
use std::io;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use corosensei::stack::{Stack, StackPointer};

/// The stack size used when neither the fiber nor `GREENHOOK_STACK_SIZE` asks
/// for another: 256 KiB of address space, of which an idle fiber touches one
/// page. Enough for ordinary C thread bodies with `printf`, a few KiB of locals
/// and moderate recursion; it is reserved, not committed, so a million of them
/// cost address space only. Deep recursion or large arrays on the stack need a
/// bigger size (`pthread_attr_setstacksize`, `Builder::stack_size` or the
/// environment variable); an overflow is reported by name, never silent.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// The smallest usable stack we hand out: corosensei's initial frame, the
/// scheduler's suspend path and a signal frame must fit with room to spare.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// Bytes of address space reserved per region (rounded to whole slots).
const REGION_BYTES: usize = 1 << 30;

/// Written at the lowest usable word of an unguarded stack.
pub(crate) const CANARY: u64 = 0x6772_6565_6e68_6f6f; // "greenhoo"

/// `MADV_GUARD_INSTALL` (Linux 6.13+); the libc crate may not name it yet.
#[cfg(target_os = "linux")]
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// How slots get their guard, decided once per process on first use.
const GUARD_UNKNOWN: u8 = 0;
const GUARD_MADVISE: u8 = 1;
const GUARD_MPROTECT: u8 = 2;
static GUARD_MODE: AtomicU8 = AtomicU8::new(GUARD_UNKNOWN);

/// mprotect guards split a mapping in two; stop adding them well before
/// `vm.max_map_count` so the rest of the program keeps room for its own maps.
static MPROTECT_GUARDS: AtomicUsize = AtomicUsize::new(0);

fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, Ordering::Relaxed);
    p
}

fn mprotect_budget() -> usize {
    let max = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65530);
    max / 4
}

/// Parses a size such as `65536`, `256K`, `256k`, `1M` or `1m`.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'g' | b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// The process-wide default stack size: `GREENHOOK_STACK_SIZE` if it is set
/// and valid, else [`DEFAULT_STACK_SIZE`]. Read once.
pub fn default_stack_size() -> usize {
    env_stack_size().unwrap_or_else(|| round_size(DEFAULT_STACK_SIZE))
}

/// `GREENHOOK_STACK_SIZE`, rounded, if set and valid. Read once.
pub fn env_stack_size() -> Option<usize> {
    // 0: not read yet; 1: read, not set; else the value.
    static CACHED: AtomicUsize = AtomicUsize::new(0);
    match CACHED.load(Ordering::Relaxed) {
        0 => {}
        1 => return None,
        v => return Some(v),
    }
    let v = std::env::var("GREENHOOK_STACK_SIZE")
        .ok()
        .and_then(|s| parse_size(&s))
        .map(round_size);
    CACHED.store(v.unwrap_or(1), Ordering::Relaxed);
    v
}

/// Rounds a requested size up to whole pages, at least [`MIN_STACK_SIZE`].
pub fn round_size(size: usize) -> usize {
    let page = page_size();
    let size = size.max(MIN_STACK_SIZE);
    size.div_ceil(page) * page
}

/// One fiber stack: a slot of a region.
///
/// # Invariant
/// `[guard_lo, top)` lies inside a live region that is never unmapped;
/// `[guard_lo + guard, top)` is readable and writable and owned by this value.
pub struct FiberStack {
    slot: Slot,
    /// Where the slot goes back when the stack is dropped (None: foreign).
    pool: Option<&'static StackPool>,
    /// Where the stack starts: the slot's top, or the low end of the TLS
    /// block carved from it ([`FiberStack::carve_tls`]; the fiber owns and
    /// releases the block).
    base: usize,
}

/// The plain description of a slot; the pool keeps these.
#[derive(Clone, Copy)]
struct Slot {
    top: usize,
    guard_lo: usize,
    guard: u32,
    /// Whether a real guard page protects the low end (else a canary does).
    guarded: bool,
}

impl FiberStack {
    /// A stack on memory the caller owns, like `pthread_attr_setstack`:
    /// `[lo, lo + size)`. It has no guard page and no canary (the memory is
    /// the caller's to check, as in glibc) and is never pooled.
    ///
    /// # Safety
    /// The range must be readable, writable, unused by anything else, and
    /// stay so until the fiber running on it has finished or been dropped.
    pub unsafe fn foreign(lo: usize, size: usize) -> io::Result<FiberStack> {
        // corosensei wants both ends aligned to 16 bytes.
        let top = (lo + size) & !15;
        let bottom = (lo + 15) & !15;
        if top <= bottom || top - bottom < 4096 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(FiberStack {
            slot: Slot {
                top,
                guard_lo: bottom,
                guard: 0,
                guarded: true,
            },
            pool: None,
            base: top,
        })
    }

    /// The usable range `[lo, hi)` (below the TLS block, if it has one).
    pub fn bounds(&self) -> (usize, usize) {
        (self.slot.guard_lo + self.slot.guard as usize, self.base)
    }

    /// Makes a TLS block at the top of the stack, as glibc does for a
    /// thread's (see [`crate::tls`]), copying the header from the block
    /// at `from`; the stack then starts below it. Returns its thread
    /// pointer.
    pub(crate) fn carve_tls(&mut self, g: &crate::tls::Glibc, from: usize) -> io::Result<usize> {
        self.carve_tls_with(g, from, 0)
    }

    /// [`FiberStack::carve_tls`] reusing `dtv` (see [`crate::tls::Glibc::init_block`]).
    fn carve_tls_with(&mut self, g: &crate::tls::Glibc, from: usize, dtv: usize) -> io::Result<usize> {
        debug_assert_eq!(self.base, self.slot.top);
        let tp = crate::tls::block_pointer(g, self.slot.top);
        let lo = crate::tls::block_low(g, tp) & !15;
        let (stack_lo, _) = self.bounds();
        if lo < stack_lo + MIN_STACK_SIZE / 2 {
            // Less than 8 KiB of stack would be left (glibc would refuse too).
            // SAFETY: the DTV is ours to free (the caller's contract).
            unsafe { g.free_dtv(dtv) };
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `[lo, top)` is the top of this stack's own memory, which
        // no fiber runs on yet; `from` is the caller's complete block; the
        // DTV, if any, was this slot's and nothing else uses it.
        unsafe { g.init_block(tp, from, dtv)? };
        self.base = lo;
        Ok(tp)
    }

    /// The top of the stack's memory (above its TLS block, if it has one).
    pub(crate) fn slot_top(&self) -> usize {
        self.slot.top
    }

    /// Usable bytes (excluding the guard page).
    pub fn size(&self) -> usize {
        self.slot.size()
    }

    /// The guard range `[lo, hi)`: a fault here is a stack overflow.
    pub fn guard_range(&self) -> (usize, usize) {
        (self.slot.guard_lo, self.slot.guard_lo + self.slot.guard as usize)
    }

    /// Whether a guard page protects this stack (else only the canary).
    pub fn is_guarded(&self) -> bool {
        self.slot.guarded
    }
}

impl Slot {
    fn size(&self) -> usize {
        self.top - self.guard_lo - self.guard as usize
    }
}

// SAFETY: base and limit bound memory owned by this value, both page aligned
// (so aligned to STACK_ALIGNMENT); the low end is a guard page, or, where no
// guard could be installed, a canary checked at every switch reports overflow.
unsafe impl Stack for FiberStack {
    #[inline]
    fn base(&self) -> StackPointer {
        // Read at every resume: no check on the hot path.
        // SAFETY: `base` is the end of a mapped range or the low end of the
        // TLS block at its top (see the invariant), so it is not zero.
        unsafe { StackPointer::new_unchecked(self.base) }
    }
    #[inline]
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.slot.guard_lo).expect("stack limit is non-null")
    }
}

impl Drop for FiberStack {
    fn drop(&mut self) {
        // A TLS block carved from the top: its fiber has finished or been
        // abandoned, so it is installed nowhere. Its DTV stays with the slot.
        let mut dtv = 0;
        if self.base != self.slot.top {
            if let Ok(g) = crate::tls::glibc() {
                // SAFETY: the block carve_tls made at this very place.
                dtv = unsafe { g.release_block(crate::tls::block_pointer(g, self.slot.top)) };
            }
        }
        let given = self.pool.is_some_and(|pool| {
            // A stack dropped while the pool is busy (re-entered from a
            // signal handler) is leaked, which is harmless: regions are
            // never unmapped.
            pool.classes
                .try_borrow_mut()
                .map(|mut classes| give(&mut classes, self.slot, dtv))
                .is_ok()
        });
        if !given {
            if let Ok(g) = crate::tls::glibc() {
                // SAFETY: released above, used by nothing else.
                unsafe { g.free_dtv(dtv) };
            }
        }
    }
}

struct SizeClass {
    size: usize,
    /// Free slots, each with the DTV its last TLS block kept (0: none).
    free: Vec<(Slot, usize)>,
    /// The region being carved: next slot address and slots left.
    next: usize,
    left: usize,
}

/// The stacks of one OS thread: free slots by size, and the regions being
/// carved (see the [module](self) docs).
///
/// Not `Sync`: a pool serves the OS thread that made it, and as a
/// `&'static` it cannot be handed to another. Making one also gives that
/// thread the alternate signal stack the overflow report runs on.
pub struct StackPool {
    classes: RefCell<Vec<SizeClass>>,
    /// Whether this thread's alternate signal stack is installed.
    altstack: Cell<bool>,
    /// The thread's own TLS, where fibers that share it run.
    pub(crate) home: crate::Home,
}

impl Default for StackPool {
    fn default() -> Self {
        Self::new()
    }
}

impl StackPool {
    /// An empty pool for the calling OS thread. Made in the thread's own
    /// context (not in a fiber with TLS of its own): it records the
    /// thread's TLS, where fibers that share it run.
    pub fn new() -> StackPool {
        StackPool {
            classes: RefCell::new(Vec::new()),
            altstack: Cell::new(false),
            home: crate::Home::current(),
        }
    }

    /// The thread pointer of the OS thread's own TLS (recorded when the
    /// pool was made).
    pub fn thread_pointer(&self) -> usize {
        self.home.tp
    }

    /// A pool for the calling thread that lives as long as the process.
    pub fn leak() -> &'static StackPool {
        Box::leak(Box::new(StackPool::new()))
    }

    /// Takes a stack of `size` usable bytes (rounded up) from the pool,
    /// reserving a new region when it has none free.
    pub fn take(&'static self, size: usize) -> io::Result<FiberStack> {
        let (stack, dtv) = self.take_slot(size)?;
        if dtv != 0 {
            if let Ok(g) = crate::tls::glibc() {
                // SAFETY: the slot's kept DTV, which no block uses now.
                unsafe { g.free_dtv(dtv) };
            }
        }
        Ok(stack)
    }

    /// [`StackPool::take`] with a TLS block carved from the top of the
    /// stack (see [`crate::tls`]), its header copied from the block at
    /// `from`; returns the stack and the block's thread pointer. A slot
    /// whose last fiber had a block of its own gives its DTV to the new one.
    pub(crate) fn take_tls(
        &'static self,
        g: &crate::tls::Glibc,
        size: usize,
        from: usize,
    ) -> io::Result<(FiberStack, usize)> {
        let (mut stack, dtv) = self.take_slot(size)?;
        let tp = stack.carve_tls_with(g, from, dtv)?;
        Ok((stack, tp))
    }

    fn take_slot(&'static self, size: usize) -> io::Result<(FiberStack, usize)> {
        if !self.altstack.replace(true) {
            crate::overflow::install_altstack();
        }
        let size = round_size(size);
        let (slot, dtv) = take(&mut self.classes.borrow_mut(), size)?;
        let stack = FiberStack {
            slot,
            pool: Some(self),
            base: slot.top,
        };
        Ok((stack, dtv))
    }
}

fn class(classes: &mut Vec<SizeClass>, size: usize) -> &mut SizeClass {
    let i = match classes.iter().position(|c| c.size == size) {
        Some(i) => i,
        None => {
            classes.push(SizeClass {
                size,
                free: Vec::new(),
                next: 0,
                left: 0,
            });
            classes.len() - 1
        }
    };
    &mut classes[i]
}

fn take(classes: &mut Vec<SizeClass>, size: usize) -> io::Result<(Slot, usize)> {
    let class = class(classes, size);
    if let Some(free) = class.free.pop() {
        return Ok(free);
    }
    let page = page_size();
    let slot = size + page;
    if class.left == 0 {
        // A region of many slots, or fewer where the address space is
        // limited (`ulimit -v`, RLIMIT_AS: see `region_slots`; halved
        // while the mapping fails: varnish's child, which makes stacks of
        // two sizes, could not reserve its second 1 GiB under a limit it
        // runs in unpatched, and waited for threads for ever).
        let mut slots = region_slots(slot);
        let p = loop {
            // SAFETY: a fresh anonymous private mapping; no existing
            // memory is affected. MAP_NORESERVE: only touched pages are
            // committed.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    slots * slot,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                break p;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOMEM) || slots == 1 {
                return Err(e);
            }
            slots /= 2;
        };
        class.next = p as usize;
        class.left = slots;
    }
    let lo = class.next;
    class.next += slot;
    class.left -= 1;
    let guarded = install_guard(lo, page);
    if !guarded {
        // SAFETY: the canary word is the lowest usable word of the slot we
        // just carved; nothing else refers to it.
        unsafe { ((lo + page) as *mut u64).write_volatile(CANARY) };
    }
    Ok((
        Slot {
            top: lo + slot,
            guard_lo: lo,
            guard: page as u32,
            guarded,
        },
        0,
    ))
}

/// How many slots of `slot` bytes a new region reserves: a 1 GiB region's
/// worth (at least 16), or, while the address space is limited (`ulimit
/// -v`, RLIMIT_AS), no more than a 32nd of the limit (at least one): a
/// reservation counts against that limit whether or not it is used, and a
/// region the size of the whole limit left the program's own `malloc`
/// failing where it succeeds unpatched.
fn region_slots(slot: usize) -> usize {
    // SAFETY: a query into a local.
    let limit = unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_AS, &mut r) == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
    };
    match limit {
        None => (REGION_BYTES / slot).max(16),
        Some(l) => ((l as usize / 32).min(REGION_BYTES) / slot).max(1),
    }
}

fn give(classes: &mut Vec<SizeClass>, s: Slot, dtv: usize) {
    class(classes, s.size()).free.push((s, dtv));
}

/// Installs a guard page at `lo`; returns whether one is now in place.
fn install_guard(lo: usize, page: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        let mode = GUARD_MODE.load(Ordering::Relaxed);
        if mode == GUARD_UNKNOWN || mode == GUARD_MADVISE {
            // SAFETY: `lo` is the first page of a slot of our own region;
            // turning it into a guard affects nothing else.
            let r = unsafe { libc::madvise(lo as *mut libc::c_void, page, MADV_GUARD_INSTALL) };
            if r == 0 {
                GUARD_MODE.store(GUARD_MADVISE, Ordering::Relaxed);
                return true;
            }
            GUARD_MODE.store(GUARD_MPROTECT, Ordering::Relaxed);
        }
    }
    #[cfg(not(target_os = "linux"))]
    GUARD_MODE.store(GUARD_MPROTECT, Ordering::Relaxed);

    static BUDGET: AtomicUsize = AtomicUsize::new(0);
    let mut budget = BUDGET.load(Ordering::Relaxed);
    if budget == 0 {
        budget = mprotect_budget();
        BUDGET.store(budget, Ordering::Relaxed);
    }
    if MPROTECT_GUARDS.fetch_add(1, Ordering::Relaxed) >= budget {
        MPROTECT_GUARDS.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    // SAFETY: as above, the page belongs to a slot of our own region.
    let r = unsafe { libc::mprotect(lo as *mut libc::c_void, page, libc::PROT_NONE) };
    r == 0
}

/// Which guard mechanism this process uses, for diagnostics.
pub fn guard_mode() -> &'static str {
    match GUARD_MODE.load(Ordering::Relaxed) {
        GUARD_MADVISE => "madvise(MADV_GUARD_INSTALL)",
        GUARD_MPROTECT => "mprotect while the mapping budget lasts, then canaries",
        _ => "not decided yet",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("256K"), Some(256 * 1024));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn stacks_are_reused_from_the_pool() {
        let pool = StackPool::leak();
        let a = pool.take(64 * 1024).unwrap();
        let top = a.slot.top;
        drop(a);
        let b = pool.take(64 * 1024).unwrap();
        assert_eq!(b.slot.top, top);
        assert!(b.size() >= 64 * 1024);
    }
}
