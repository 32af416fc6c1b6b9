//! The signals the fiber thread holds for its contexts: one fixed table,
//! written by the trampoline without allocating or locking, read and moved
//! on at safe points.
//!
//! A slot goes `FREE → CLAIMED → RAW` when the trampoline defers a signal
//! the kernel gave us (its copy of the `siginfo_t`, the context it was
//! directed at or [`PROCESS`]); a safe point places it (`RAW → HELD`, with
//! the context it is now pending for, or [`PROCESS`] when no context
//! accepts it); a signal sent to one context without the kernel
//! (`pthread_kill` to a fiber) is `HELD` at once. The context it is for
//! takes it (`HELD → TAKING → FREE`) when it runs its action.
//!
//! The only concurrency is a signal handler interrupting this thread
//! anywhere, including in the middle of these functions: the trampoline
//! only claims `FREE` slots (a compare-and-swap, so nested handlers take
//! different ones) and reads the others, and every field it reads is an
//! atomic, so it never sees a torn value. Only the fiber thread uses the
//! table (other threads run handlers as the kernel gives them).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};

use libc::{c_int, siginfo_t};

/// Signals held at once (each standard signal at most once per context,
/// real-time signals queued). 256 slots of about 170 bytes: 43 KiB.
const SLOTS: usize = 256;

/// The target of a process-directed signal that no context accepts yet.
pub(super) const PROCESS: u64 = u64::MAX;

const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const RAW: u32 = 2;
const HELD: u32 = 3;
const TAKING: u32 = 4;

/// What the trampoline reads of every slot when it coalesces: small and
/// together, so a scan touches few cache lines.
struct Meta {
    state: AtomicU32,
    sig: AtomicI32,
    /// RAW: the context the kernel's signal was directed at, or PROCESS.
    /// HELD: the context it is pending for, or PROCESS.
    target: AtomicU64,
    /// Sent to one thread (`pthread_kill`, `raise`), not to the process.
    directed: AtomicBool,
}

/// The rest of a slot, read only by the context that takes it.
struct Body {
    /// Arrival order, to take the oldest of equal signals first.
    seq: AtomicU64,
    /// The handler the kernel delivered the signal through when that reset
    /// the disposition (`SA_RESETHAND`), with its flags and mask; 0: none.
    via_handler: AtomicUsize,
    via_flags: AtomicI32,
    via_mask: AtomicU64,
    info: UnsafeCell<MaybeUninit<siginfo_t>>,
}

struct Table {
    meta: [Meta; SLOTS],
    body: [Body; SLOTS],
    seq: AtomicU64,
}

// SAFETY: `info` is written only by whoever claimed the slot (state
// CLAIMED, which no one else touches) and read only by whoever moved it to
// TAKING; both are the fiber thread, and the state transitions order them.
unsafe impl Sync for Table {}

static TABLE: Table = Table {
    meta: [const {
        Meta {
            state: AtomicU32::new(FREE),
            sig: AtomicI32::new(0),
            target: AtomicU64::new(0),
            directed: AtomicBool::new(false),
        }
    }; SLOTS],
    body: [const {
        Body {
            seq: AtomicU64::new(0),
            via_handler: AtomicUsize::new(0),
            via_flags: AtomicI32::new(0),
            via_mask: AtomicU64::new(0),
            info: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }; SLOTS],
    seq: AtomicU64::new(0),
};

/// Something to do at the next safe point: slots still RAW, plus contexts
/// with a signal due (held for them and not masked; see `state`). The
/// hooks' way out reads this one word.
pub(super) static WORK: AtomicU32 = AtomicU32::new(0);

/// Slots not `FREE`: raised after a slot is claimed, lowered after it is
/// freed, so a zero means no slot is `RAW` or `HELD` and the scans below
/// return at once. A context's end and a mask's change look for signals
/// to move on, nearly always in an empty table: ~6,000 instructions each
/// thread's end spent scanning 256 slots twice.
static OCCUPIED: AtomicU32 = AtomicU32::new(0);

/// Whether no slot holds a signal.
#[inline]
fn empty() -> bool {
    OCCUPIED.load(SeqCst) == 0
}

/// Frees the slot `m` (its state already moved on from `FREE`).
fn free(m: &Meta) {
    m.state.store(FREE, SeqCst);
    OCCUPIED.fetch_sub(1, SeqCst);
}

/// Kernel signals the trampoline could not keep (the table was full).
pub(super) static LOST: AtomicU64 = AtomicU64::new(0);

/// A handler and its flags and mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Via {
    pub(super) handler: usize,
    pub(super) flags: c_int,
    pub(super) mask: u64,
}

/// A held signal, taken out of the table.
pub(super) struct Entry {
    pub(super) sig: c_int,
    pub(super) info: siginfo_t,
    /// The action the kernel had already chosen (see [`Via`]).
    pub(super) via: Option<Via>,
}

/// How [`add`] went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Added {
    Yes,
    /// A standard signal already pending alike: the kernel keeps one.
    Coalesced,
    Full,
}

fn standard(sig: c_int) -> bool {
    sig < 32
}

/// Whether a signal alike is already pending: the same standard signal,
/// directed at the same context, or both sent to the process.
fn pending_alike(sig: c_int, target: u64, directed: bool) -> bool {
    !empty()
        && TABLE.meta.iter().any(|m| {
            let s = m.state.load(SeqCst);
            (s == RAW || s == HELD)
                && m.sig.load(SeqCst) == sig
                && m.directed.load(SeqCst) == directed
                && (!directed || m.target.load(SeqCst) == target)
        })
}

/// Adds a signal: `raw` (from the trampoline, for the next safe point to
/// place) or held for `target` at once. Allocates nothing, takes no lock:
/// a signal handler may call it.
pub(super) fn add(sig: c_int, info: &siginfo_t, target: u64, directed: bool, via: Option<Via>, raw: bool) -> Added {
    if standard(sig) && pending_alike(sig, target, directed) {
        return Added::Coalesced;
    }
    for (i, m) in TABLE.meta.iter().enumerate() {
        if m.state.compare_exchange(FREE, CLAIMED, SeqCst, SeqCst).is_err() {
            continue;
        }
        OCCUPIED.fetch_add(1, SeqCst);
        let b = &TABLE.body[i];
        m.sig.store(sig, SeqCst);
        m.target.store(target, SeqCst);
        m.directed.store(directed, SeqCst);
        b.seq.store(TABLE.seq.fetch_add(1, SeqCst), SeqCst);
        let v = via.unwrap_or(Via {
            handler: 0,
            flags: 0,
            mask: 0,
        });
        b.via_handler.store(v.handler, SeqCst);
        b.via_flags.store(v.flags, SeqCst);
        b.via_mask.store(v.mask, SeqCst);
        // SAFETY: we claimed the slot: nobody else reads or writes its info.
        unsafe { (*b.info.get()).write(*info) };
        if raw {
            WORK.fetch_add(1, SeqCst);
            m.state.store(RAW, SeqCst);
        } else {
            m.state.store(HELD, SeqCst);
        }
        return Added::Yes;
    }
    Added::Full
}

/// Places every RAW slot: `place(sig, target, directed)` names the
/// context it is now held for (or [`PROCESS`]); None drops it. `placed`
/// is told each target afterwards. At a safe point only.
pub(super) fn place_raw(mut place: impl FnMut(c_int, u64, bool) -> Option<u64>, mut placed: impl FnMut(u64)) {
    if empty() {
        return;
    }
    for m in &TABLE.meta {
        if m.state.load(SeqCst) != RAW {
            continue;
        }
        let sig = m.sig.load(SeqCst);
        match place(sig, m.target.load(SeqCst), m.directed.load(SeqCst)) {
            Some(t) => {
                m.target.store(t, SeqCst);
                m.state.store(HELD, SeqCst);
                WORK.fetch_sub(1, SeqCst);
                placed(t);
            }
            None => {
                free(m);
                WORK.fetch_sub(1, SeqCst);
            }
        }
    }
}

/// Whether any slot is still RAW.
#[inline]
pub(super) fn any_raw() -> bool {
    !empty() && TABLE.meta.iter().any(|m| m.state.load(SeqCst) == RAW)
}

/// The signals held for `target`.
pub(super) fn held(target: u64) -> u64 {
    if empty() {
        return 0;
    }
    TABLE.meta.iter().fold(0, |acc, m| {
        if m.state.load(SeqCst) == HELD && m.target.load(SeqCst) == target {
            acc | super::bit(m.sig.load(SeqCst))
        } else {
            acc
        }
    })
}

/// Takes the held signal for `target` that `allowed` lets through: the
/// lowest-numbered (as the kernel delivers), the oldest of equals.
pub(super) fn take(target: u64, allowed: u64) -> Option<Entry> {
    if empty() {
        return None;
    }
    let mut best: Option<(c_int, u64, usize)> = None;
    for (i, m) in TABLE.meta.iter().enumerate() {
        if m.state.load(SeqCst) != HELD || m.target.load(SeqCst) != target {
            continue;
        }
        let sig = m.sig.load(SeqCst);
        if allowed & super::bit(sig) == 0 {
            continue;
        }
        let seq = TABLE.body[i].seq.load(SeqCst);
        if best.is_none_or(|(s, q, _)| (sig, seq) < (s, q)) {
            best = Some((sig, seq, i));
        }
    }
    let (sig, _, i) = best?;
    let m = &TABLE.meta[i];
    // No longer "pending alike": a new instance arriving from here on is
    // pending again, as in the kernel once delivery has begun.
    m.state.store(TAKING, SeqCst);
    let b = &TABLE.body[i];
    // SAFETY: a HELD slot's info was written when it was claimed; TAKING
    // keeps everyone else away from it until it is FREE again.
    let info = unsafe { (*b.info.get()).assume_init_read() };
    let handler = b.via_handler.load(SeqCst);
    let via = (handler != 0).then(|| Via {
        handler,
        flags: b.via_flags.load(SeqCst),
        mask: b.via_mask.load(SeqCst),
    });
    free(m);
    Some(Entry { sig, info, via })
}

/// Moves the held signals of `from` in `sigs` to `to`: only those sent to
/// the process when `process_only`; all others are dropped when `to` is
/// None. Returns the signals moved.
pub(super) fn retarget(from: u64, sigs: u64, process_only: bool, to: Option<u64>) -> u64 {
    if sigs == 0 || empty() {
        return 0;
    }
    let mut moved = 0;
    for m in &TABLE.meta {
        if m.state.load(SeqCst) != HELD || m.target.load(SeqCst) != from {
            continue;
        }
        let sig = m.sig.load(SeqCst);
        if sigs & super::bit(sig) == 0 {
            continue;
        }
        if process_only && m.directed.load(SeqCst) {
            continue;
        }
        match to {
            Some(t) => {
                m.target.store(t, SeqCst);
                moved |= super::bit(sig);
            }
            None => free(m),
        }
    }
    moved
}

/// Drops every held or raw instance of `sig` (its action became "ignore");
/// `dropped` is told each target that had one.
pub(super) fn discard(sig: c_int, mut dropped: impl FnMut(u64)) {
    if empty() {
        return;
    }
    for m in &TABLE.meta {
        let s = m.state.load(SeqCst);
        if (s == HELD || s == RAW) && m.sig.load(SeqCst) == sig {
            free(m);
            if s == RAW {
                WORK.fetch_sub(1, SeqCst);
            } else {
                dropped(m.target.load(SeqCst));
            }
        }
    }
}

/// In the child of `fork()`: nothing is pending (POSIX).
pub(super) fn clear() {
    for m in &TABLE.meta {
        m.state.store(FREE, SeqCst);
    }
    OCCUPIED.store(0, SeqCst);
    WORK.store(0, SeqCst);
}
