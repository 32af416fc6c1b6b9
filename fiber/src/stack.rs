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
//! arena), so spawning on a pooled stack makes no system call. Beyond
//! [`WARM_BYTES`] of them, free stacks give their pages back to the kernel,
//! as glibc's thread exit does: once unused for [`TRIM_AFTER`]
//! ([`StackPool::trim`], which the scheduler calls), or at once when the
//! last stack in use comes back. So a burst of threads does not leave the
//! process at its peak memory, and bursts beside a thread that stays reuse
//! warm stacks. A pool belongs
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

/// Bytes of free stacks (by usable size) a pool keeps resident however
/// long they wait, reused as they are: what glibc's stack cache holds
/// (40 MiB). Beyond them, see [`TRIM_AFTER`].
pub const WARM_BYTES: usize = 40 << 20;

/// How long a free stack beyond [`WARM_BYTES`] may wait unused before
/// [`StackPool::trim`] gives its pages back (`MADV_DONTNEED`, which glibc's
/// thread exit applies to every stack but its top 16 KiB): unused from one
/// trim to the next, so one to two periods. When the last stack in use
/// comes back there is no wait (no fiber is left to have the scheduler
/// trim later). Measured: 2,000 threads that touched 100 KiB of stack
/// each left 215 MiB resident after they were joined, against 2 MiB
/// unpatched (5 MiB now). Ten bursts of 10,000 threads, each joined before
/// the next, take 2.5× as long as when nothing went back (~470 → ~1,200
/// ms: a system call and page faults again per thread; unpatched, 5.6 s);
/// beside a thread that stays, no longer (each burst reuses the last's).
pub const TRIM_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

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
        // SAFETY: the block just made; its stack block is the whole slot,
        // as a glibc thread's is its whole mapping (guard, stack, TLS).
        unsafe { crate::tls::set_stack_block(tp, self.slot.guard_lo, self.slot.top - self.slot.guard_lo) };
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
                .map(|mut classes| classes.give(self.slot, dtv))
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

/// A pool's slots by size, and how many bytes of them are warm.
struct Classes {
    list: Vec<SizeClass>,
    /// The usable bytes of the warm free slots of every class.
    warm_bytes: usize,
    /// How many times [`StackPool::trim`] ran: a slot freed in an earlier
    /// period than the current one has waited since the last trim at
    /// least.
    period: u32,
    /// Slots taken and not given back.
    in_use: usize,
}

/// A free slot, with the DTV its last TLS block kept (0: none).
type Free = (Slot, usize);

struct SizeClass {
    size: usize,
    /// Guard bytes below each slot's stack (a page unless a thread asked
    /// for more: `pthread_attr_setguardsize`).
    guard: usize,
    /// Free slots whose pages are as their last fiber left them, oldest
    /// first (the last freed is reused first), each with the trim period it
    /// was freed in.
    warm: std::collections::VecDeque<(Free, u32)>,
    /// Free slots whose pages went back to the kernel.
    cold: Vec<Free>,
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
    classes: RefCell<Classes>,
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
            classes: RefCell::new(Classes {
                list: Vec::new(),
                warm_bytes: 0,
                period: 0,
                in_use: 0,
            }),
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
        self.take_guarded(size, page_size())
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

    /// Whether more than [`WARM_BYTES`] of free stacks are warm: the
    /// scheduler then calls [`StackPool::trim`] every [`TRIM_AFTER`].
    pub fn has_excess(&self) -> bool {
        self.classes.try_borrow().is_ok_and(|c| c.warm_bytes > WARM_BYTES)
    }

    /// Gives back the pages of free stacks beyond [`WARM_BYTES`] that were
    /// freed before the last call (the longest unused first), and starts a
    /// new period. Returns whether warm stacks beyond [`WARM_BYTES`]
    /// remain (freed since the last call), for a call one period later.
    pub fn trim(&self) -> bool {
        // Busy: re-entered from a signal handler; the next call will do.
        self.classes.try_borrow_mut().is_ok_and(|mut c| c.trim(true))
    }

    /// [`StackPool::take`] with `guard` bytes of guard below the stack
    /// (rounded up to whole pages, at least one; at most 1 GiB), as
    /// `pthread_attr_setguardsize` asks of a thread's.
    pub fn take_guarded(&'static self, size: usize, guard: usize) -> io::Result<FiberStack> {
        let (stack, dtv) = self.take_slot_guarded(size, guard)?;
        if dtv != 0 {
            if let Ok(g) = crate::tls::glibc() {
                // SAFETY: the slot's kept DTV, which no block uses now.
                unsafe { g.free_dtv(dtv) };
            }
        }
        Ok(stack)
    }

    fn take_slot(&'static self, size: usize) -> io::Result<(FiberStack, usize)> {
        self.take_slot_guarded(size, page_size())
    }

    fn take_slot_guarded(&'static self, size: usize, guard: usize) -> io::Result<(FiberStack, usize)> {
        if !self.altstack.replace(true) {
            crate::overflow::install_altstack();
        }
        let size = round_size(size);
        let page = page_size();
        let guard = guard.clamp(page, 1 << 30).div_ceil(page) * page;
        let (slot, dtv) = self.classes.borrow_mut().take(size, guard)?;
        let stack = FiberStack {
            slot,
            pool: Some(self),
            base: slot.top,
        };
        Ok((stack, dtv))
    }
}

impl Classes {
    /// The class of `size` usable bytes over `guard` bytes of guard, made
    /// empty if there is none yet.
    fn class(&mut self, size: usize, guard: usize) -> &mut SizeClass {
        let i = match self.list.iter().position(|c| c.size == size && c.guard == guard) {
            Some(i) => i,
            None => {
                self.list.push(SizeClass {
                    size,
                    guard,
                    warm: std::collections::VecDeque::new(),
                    cold: Vec::new(),
                    next: 0,
                    left: 0,
                });
                self.list.len() - 1
            }
        };
        &mut self.list[i]
    }

    /// A free slot of `size` over `guard` (a warm one first), or a new one.
    fn take(&mut self, size: usize, guard: usize) -> io::Result<Free> {
        let class = self.class(size, guard);
        let free = if let Some((free, _)) = class.warm.pop_back() {
            self.warm_bytes -= size;
            free
        } else {
            match class.cold.pop() {
                Some(free) => free,
                None => carve(class)?,
            }
        };
        self.in_use += 1;
        Ok(free)
    }

    /// Puts a freed slot back, warm. The last one in use gives back the
    /// pages of every free one beyond [`WARM_BYTES`] at once: no fiber is
    /// left to make the scheduler trim them later (a program that made a
    /// burst of threads and joined them all goes on without any).
    fn give(&mut self, s: Slot, dtv: usize) {
        let size = s.size();
        let period = self.period;
        self.warm_bytes += size;
        self.class(size, s.guard as usize).warm.push_back(((s, dtv), period));
        self.in_use -= 1;
        if self.in_use == 0 {
            self.trim(false);
        }
    }

    /// See [`StackPool::trim`]; with `aged`, only slots freed before the
    /// last trim, else any.
    fn trim(&mut self, aged: bool) -> bool {
        let period = self.period;
        for class in &mut self.list {
            while self.warm_bytes > WARM_BYTES {
                match class.warm.front() {
                    Some(&(_, freed)) if !aged || freed != period => {}
                    _ => break,
                }
                let Some(((s, dtv), _)) = class.warm.pop_front() else {
                    break;
                };
                s.release_pages();
                self.warm_bytes -= class.size;
                class.cold.push((s, dtv));
            }
        }
        if aged {
            self.period = period.wrapping_add(1);
        }
        self.warm_bytes > WARM_BYTES
    }
}

impl Slot {
    /// Gives the usable pages back to the kernel: they read as zero from
    /// now on, and are committed again where touched. The guard stays as
    /// it is, and an unguarded slot gets its canary again. (The TLS block
    /// at the top is made anew by the next fiber that carves one.)
    fn release_pages(&self) {
        let lo = self.guard_lo + self.guard as usize;
        // SAFETY: `[lo, top)` is this free slot's usable memory (the
        // invariant of `FiberStack`), which no fiber runs on any more and
        // nothing refers to; dropping its pages leaves the mapping valid.
        let r = unsafe { libc::madvise(lo as *mut libc::c_void, self.top - lo, libc::MADV_DONTNEED) };
        if r == 0 && !self.guarded {
            // SAFETY: the canary word is this free slot's lowest usable word.
            unsafe { (lo as *mut u64).write_volatile(CANARY) };
        }
    }
}

/// Carves a new slot for `class`, reserving a region when its own is used up.
fn carve(class: &mut SizeClass) -> io::Result<Free> {
    let (size, guard) = (class.size, class.guard);
    let slot = size + guard;
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
    let guarded = install_guard(lo, guard);
    if !guarded {
        // SAFETY: the canary word is the lowest usable word of the slot we
        // just carved; nothing else refers to it.
        unsafe { ((lo + guard) as *mut u64).write_volatile(CANARY) };
    }
    Ok((
        Slot {
            top: lo + slot,
            guard_lo: lo,
            guard: guard as u32,
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

/// Installs a guard of `page` bytes (whole pages) at `lo`; returns whether
/// one is now in place.
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

    #[test]
    fn a_larger_guard_is_its_own_class() {
        let pool = StackPool::leak();
        let page = page_size();
        let a = pool.take_guarded(64 * 1024, 5000).unwrap();
        let (lo, hi) = a.guard_range();
        assert_eq!(hi - lo, 2 * page, "rounded up to whole pages");
        assert_eq!(a.bounds().0, hi);
        let top = a.slot.top;
        drop(a);
        let b = pool.take(64 * 1024).unwrap();
        assert_ne!(b.slot.top, top, "a one-page guard is another class");
        assert_eq!(b.guard_range().1 - b.guard_range().0, page);
        let c = pool.take_guarded(64 * 1024, 2 * page).unwrap();
        assert_eq!(c.slot.top, top, "the same class again: its free slot");
    }

    /// Writes a word at the top of each stack's usable memory.
    fn touch(stacks: &[FiberStack]) {
        for s in stacks {
            // SAFETY: the top word of the stack's own usable memory.
            unsafe { ((s.bounds().1 - 8) as *mut u64).write_volatile(7) };
        }
    }

    /// Whether the top word of `top`'s slot still holds what `touch` wrote.
    fn touched(top: usize) -> bool {
        // SAFETY: a slot of a region that is never unmapped; a released
        // page reads as zero.
        unsafe { ((top - 8) as *const u64).read_volatile() == 7 }
    }

    #[test]
    fn free_stacks_beyond_the_warm_bytes_give_their_pages_back() {
        let size = 8 << 20;
        let n = WARM_BYTES / size + 4;
        let pool = StackPool::leak();
        let stacks: Vec<_> = (0..n).map(|_| pool.take(size).unwrap()).collect();
        let tops: Vec<_> = stacks.iter().map(|s| s.slot.top).collect();
        touch(&stacks);
        // One stays in use: the others wait for the scheduler's trims, the
        // oldest freed going first, and only after a whole period.
        let mut stacks = stacks.into_iter();
        let kept = stacks.next().unwrap();
        drop(stacks);
        assert!(tops.iter().all(|&t| touched(t)));
        assert!(pool.has_excess());
        assert!(pool.trim(), "freed in this period: none goes yet");
        assert!(tops.iter().all(|&t| touched(t)));
        assert!(!pool.trim());
        assert!(!pool.has_excess());
        let gone = tops[1..].iter().filter(|&&t| !touched(t)).count();
        assert_eq!(gone, n - 1 - WARM_BYTES / size);
        assert!(!touched(tops[1]) && touched(tops[n - 1]), "the oldest freed go first");
        // Warm stacks are reused first, then released ones, which work.
        let again: Vec<_> = (1..n).map(|_| pool.take(size).unwrap()).collect();
        assert!(again[..WARM_BYTES / size].iter().all(|s| touched(s.slot.top)));
        touch(&again);
        drop(kept);
        // The last one in use given back: no fiber is left to trim later.
        drop(again);
        assert!(!pool.has_excess());
        let warm = tops.iter().filter(|&&t| touched(t)).count();
        assert_eq!(warm, WARM_BYTES / size);
    }
}
