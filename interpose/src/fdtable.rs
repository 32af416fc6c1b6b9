//! What greenhook knows about each file descriptor, process-wide: one
//! entry per fd, seen through an [`Fd`].
//!
//! An fd is **managed** when it was created through our hooks while patched
//! (`socket`, `accept`, `pipe`, `socketpair`, `dup`…). A managed pipe or
//! listening socket is non-blocking underneath, always; a managed data
//! socket ([`NOWAIT`]) keeps the blocking description it was created with,
//! and our tries ask for no wait per call. Either way, what the *user*
//! asked for is kept here (`USER_NONBLOCK`) so that `fcntl(F_GETFL)` shows
//! exactly what they set and their `EAGAIN`s still reach them. Socket
//! timeouts (`SO_RCVTIMEO`/`SO_SNDTIMEO`) are kept here too, because the
//! kernel never applies them to a non-blocking try.
//!
//! The table is an array of atomics: the first 1024 fds (where nearly
//! every program's fds are) in a static block, where a look-up is a bounds
//! check and an index; higher fds in lazily allocated chunks, one more load.
//! No lock either way. A hook looks its fd up once ([`Fd::of`]) and asks
//! that one view everything it needs.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Created through our hooks: non-blocking underneath.
pub const MANAGED: u32 = 1;
/// The user asked for `O_NONBLOCK`: hooks pass `EAGAIN` through.
pub const USER_NONBLOCK: u32 = 2;
/// A socket (not a pipe, FIFO or tty).
pub const SOCKET: u32 = 4;
/// A regular file (reads may block on the disk; see `file`).
pub const FILE: u32 = 16;
/// A regular file opened `O_DIRECT`: its reads and writes always wait for
/// the device (see `file`).
pub const DIRECT: u32 = 32;
/// Not managed, but examined once: `USER_NONBLOCK` tells whether the
/// (inherited or foreign) fd is non-blocking.
pub const KNOWN: u32 = 8;
/// A managed socket whose open file description stays as the program made
/// it (blocking): each try asks the kernel not to wait, per call
/// (`MSG_DONTWAIT`, `RWF_NOWAIT`; see `crate::nowait`). Nothing of ours
/// shows to another process that shares the description.
pub const NOWAIT: u32 = 64;

const CHUNK: usize = 1024;
const CHUNKS: usize = 4096; // up to 4M fds

/// What is known of one fd.
struct Entry {
    flags: AtomicU32,
    /// Which open file description this fd refers to: dups share the id.
    /// `O_NONBLOCK` and socket options belong to the description, so a
    /// change through one fd is copied to every fd of its group.
    group: AtomicU64,
    /// Receive timeout in µs, 0 = none.
    rcvtimeo: AtomicU64,
    /// Send timeout in µs, 0 = none.
    sndtimeo: AtomicU64,
}

static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);
/// One past the highest fd ever recorded: bounds the group scans.
static HIGH: AtomicU32 = AtomicU32::new(0);

/// Entries of fds `0..CHUNK`.
static FIRST: [Entry; CHUNK] = [const { Entry::empty() }; CHUNK];
/// Chunks of `CHUNK` entries for the higher fds (slot 0 stays null: those
/// fds are in [`FIRST`]).
static TABLE: [AtomicPtr<Entry>; CHUNKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];

#[inline]
fn entry(fd: i32) -> Option<&'static Entry> {
    // A negative fd wraps to a huge index: not in FIRST, and rejected below.
    match FIRST.get(fd as u32 as usize) {
        Some(e) => Some(e),
        None => higher_entry(fd),
    }
}

fn higher_entry(fd: i32) -> Option<&'static Entry> {
    if fd < 0 {
        return None;
    }
    let (c, i) = (fd as usize / CHUNK, fd as usize % CHUNK);
    let p = TABLE.get(c)?.load(Ordering::Acquire);
    // SAFETY: chunks are leaked arrays of CHUNK entries, never freed.
    (!p.is_null()).then(|| unsafe { &*p.add(i) })
}

/// The entry of `fd`, allocated if need be; `fd` counts towards [`high`].
fn entry_or_create(fd: i32) -> Option<&'static Entry> {
    if let Some(e) = entry(fd) {
        HIGH.fetch_max(fd as u32 + 1, Ordering::Relaxed);
        return Some(e);
    }
    if fd < 0 {
        return None;
    }
    let c = fd as usize / CHUNK;
    let slot = TABLE.get(c)?;
    let fresh: Box<[Entry]> = (0..CHUNK).map(|_| Entry::empty()).collect();
    let fresh = Box::into_raw(fresh) as *mut Entry;
    if let Err(_existing) = slot.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: we just allocated `fresh` and lost the race; nobody saw it.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(fresh, CHUNK)) });
    }
    HIGH.fetch_max(fd as u32 + 1, Ordering::Relaxed);
    entry(fd)
}

impl Entry {
    /// Nothing known.
    const fn empty() -> Entry {
        Entry {
            flags: AtomicU32::new(0),
            group: AtomicU64::new(0),
            rcvtimeo: AtomicU64::new(0),
            sndtimeo: AtomicU64::new(0),
        }
    }

    /// Starts a new description: a group of its own and these flags.
    fn start(&self, flags: u32) {
        self.group
            .store(NEXT_GROUP.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// Runs `f` on this entry and on every other fd of its description.
    /// Rare (fcntl, setsockopt): a scan up to the highest fd is fine.
    fn for_description(&'static self, f: impl Fn(&Entry)) {
        let g = self.group.load(Ordering::Relaxed);
        f(self);
        if g == 0 {
            return;
        }
        for other in 0..HIGH.load(Ordering::Relaxed) as i32 {
            if let Some(o) = entry(other) {
                if !std::ptr::eq(o, self)
                    && o.group.load(Ordering::Relaxed) == g
                    && o.flags.load(Ordering::Relaxed) & (MANAGED | KNOWN) != 0
                {
                    f(o);
                }
            }
        }
    }
}

/// One fd as the table sees it: its number and its entry, looked up once
/// ([`Fd::of`]). An fd the table has never recorded has no entry: no
/// flags, no timeouts, and the changes below do nothing to it.
#[derive(Clone, Copy)]
pub struct Fd {
    raw: i32,
    entry: Option<&'static Entry>,
}

impl Fd {
    /// Looks `fd` up.
    #[inline]
    pub fn of(fd: i32) -> Fd {
        Fd {
            raw: fd,
            entry: entry(fd),
        }
    }

    /// The fd number.
    #[inline]
    pub fn raw(self) -> i32 {
        self.raw
    }

    /// The flags (0 for an fd never recorded).
    #[inline]
    pub fn flags(self) -> u32 {
        self.entry.map_or(0, |e| e.flags.load(Ordering::Relaxed))
    }

    /// Whether a blocking call on this fd waits on the hub: managed, and
    /// the user did not ask for non-blocking behaviour.
    #[inline]
    pub fn waits_on_hub(self) -> bool {
        self.flags() & (MANAGED | USER_NONBLOCK) == MANAGED
    }

    /// Whether the fd is a managed socket that stays blocking underneath
    /// ([`NOWAIT`]).
    #[inline]
    pub fn nowait(self) -> bool {
        self.flags() & NOWAIT != 0
    }

    /// Whether a managed fd was adopted ([`adopt_nowait`]) rather than
    /// created here.
    #[inline]
    pub fn is_adopted(self) -> bool {
        self.flags() & (MANAGED | KNOWN) == MANAGED | KNOWN
    }

    /// A [`NOWAIT`] socket (and its dups) whose description the caller
    /// has just made non-blocking underneath (it listens: `accept` has no
    /// per-call way not to wait): managed as a pipe is from now on.
    pub fn set_nonblocking_underneath(self) {
        let Some(e) = self.entry else { return };
        MADE_NONBLOCKING.store(true, Ordering::Relaxed);
        e.for_description(|e| {
            e.flags.fetch_and(!NOWAIT, Ordering::Relaxed);
        });
    }

    /// Whether the fd was seen to be a regular file.
    #[inline]
    pub fn is_regular_file(self) -> bool {
        self.flags() & FILE != 0
    }

    /// Whether the fd is a regular file opened `O_DIRECT`.
    #[inline]
    pub fn is_direct(self) -> bool {
        self.flags() & DIRECT != 0
    }

    /// The socket timeout, if any.
    #[inline]
    pub fn timeout(self, which: Timeout) -> Option<Duration> {
        let e = self.entry?;
        let us = match which {
            Timeout::Recv => e.rcvtimeo.load(Ordering::Relaxed),
            Timeout::Send => e.sndtimeo.load(Ordering::Relaxed),
        };
        (us != 0).then(|| Duration::from_micros(us))
    }

    /// Records what `F_GETFL` and `fstat` said of an fd we did not create
    /// (`direct`: a regular file with `O_DIRECT`), and returns the fd's
    /// view with it.
    pub fn set_known(self, nonblock: bool, regular_file: bool, direct: bool) -> Fd {
        let entry = entry_or_create(self.raw);
        if let Some(e) = entry {
            let file = match (regular_file, direct) {
                (false, _) => 0,
                (true, false) => FILE,
                (true, true) => FILE | DIRECT,
            };
            e.start(KNOWN | if nonblock { USER_NONBLOCK } else { 0 } | file);
        }
        Fd { raw: self.raw, entry }
    }

    /// Sets or clears the user's `O_NONBLOCK` on a managed or known fd (and
    /// its dups).
    pub fn set_user_nonblock(self, on: bool) {
        let Some(e) = self.entry else { return };
        e.for_description(|e| {
            if on {
                e.flags.fetch_or(USER_NONBLOCK, Ordering::Relaxed);
            } else {
                e.flags.fetch_and(!USER_NONBLOCK, Ordering::Relaxed);
            }
        });
    }

    /// Sets or clears `O_DIRECT` on a known regular file (and its dups):
    /// `fcntl(F_SETFL)` may change it.
    pub fn set_direct(self, on: bool) {
        let Some(e) = self.entry else { return };
        if e.flags.load(Ordering::Relaxed) & FILE == 0 {
            return;
        }
        e.for_description(|e| {
            if on {
                e.flags.fetch_or(DIRECT, Ordering::Relaxed);
            } else {
                e.flags.fetch_and(!DIRECT, Ordering::Relaxed);
            }
        });
    }

    /// Stores a socket timeout (None = no timeout) for the socket behind
    /// this fd.
    pub fn set_timeout(self, which: Timeout, t: Option<Duration>) {
        let Some(e) = self.entry else { return };
        let us = t.map_or(0, |d| (d.as_micros().min(u64::MAX as u128) as u64).max(1));
        e.for_description(|e| match which {
            Timeout::Recv => e.rcvtimeo.store(us, Ordering::Relaxed),
            Timeout::Send => e.sndtimeo.store(us, Ordering::Relaxed),
        });
    }

    /// Turns a managed fd (and every dup of its description) into a known
    /// foreign blocking fd: the caller has just cleared `O_NONBLOCK`
    /// underneath (stdio took it over). Socket timeouts are kept.
    pub fn unmanage(self) {
        let Some(e) = self.entry else { return };
        e.for_description(|e| {
            let f = e.flags.load(Ordering::Relaxed);
            e.flags.store(KNOWN | (f & (USER_NONBLOCK | SOCKET)), Ordering::Relaxed);
        });
    }
}

/// Whether any fd was ever made managed here without the user's
/// `O_NONBLOCK` (non-blocking underneath for the hub alone): until then
/// nothing of ours can leak to another process, and the scans that guard
/// against that (after `fork`, in `sendmsg`) have nothing to do.
static MADE_NONBLOCKING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// See [`MADE_NONBLOCKING`].
pub fn made_nonblocking() -> bool {
    MADE_NONBLOCKING.load(Ordering::Relaxed)
}

/// Records a freshly created managed fd, non-blocking underneath.
pub fn set_managed(fd: i32, user_nonblock: bool, socket: bool) {
    if !user_nonblock {
        MADE_NONBLOCKING.store(true, Ordering::Relaxed);
    }
    start_managed(
        fd,
        MANAGED | if user_nonblock { USER_NONBLOCK } else { 0 } | if socket { SOCKET } else { 0 },
    );
}

/// Takes a blocking socket greenhook did not create (inherited, or made by
/// raw system calls) as a managed [`NOWAIT`] one: its calls try without
/// waiting and wait on the hub, its description is never changed for
/// good. `KNOWN` stays set beside `MANAGED`: the description is another
/// process's too (see `fd::listening`).
pub fn adopt_nowait(fd: i32) {
    start_managed(fd, MANAGED | SOCKET | NOWAIT | KNOWN);
}

/// Records a freshly created managed socket whose description stays as
/// the user made it ([`NOWAIT`]).
pub fn set_managed_nowait(fd: i32, user_nonblock: bool) {
    start_managed(
        fd,
        MANAGED | SOCKET | NOWAIT | if user_nonblock { USER_NONBLOCK } else { 0 },
    );
}

fn start_managed(fd: i32, flags: u32) {
    if let Some(e) = entry_or_create(fd) {
        e.start(flags);
        e.rcvtimeo.store(0, Ordering::Relaxed);
        e.sndtimeo.store(0, Ordering::Relaxed);
    }
}

/// Copies what we know of `from` to `to` (after dup: they share one open
/// file description, so the non-blocking state is shared too; timeouts are
/// socket options, shared as well).
pub fn copy(from: i32, to: i32) {
    let Some(src) = entry(from) else {
        forget(to);
        return;
    };
    if let Some(dst) = entry_or_create(to) {
        dst.group.store(src.group.load(Ordering::Relaxed), Ordering::Relaxed);
        dst.flags.store(src.flags.load(Ordering::Relaxed), Ordering::Relaxed);
        dst.rcvtimeo
            .store(src.rcvtimeo.load(Ordering::Relaxed), Ordering::Relaxed);
        dst.sndtimeo
            .store(src.sndtimeo.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// Forgets `fd` (it is being closed).
pub fn forget(fd: i32) {
    if let Some(e) = entry(fd) {
        e.flags.store(0, Ordering::Relaxed);
        e.group.store(0, Ordering::Relaxed);
        e.rcvtimeo.store(0, Ordering::Relaxed);
        e.sndtimeo.store(0, Ordering::Relaxed);
    }
}

/// One past the highest fd ever recorded.
pub fn high() -> usize {
    HIGH.load(Ordering::Relaxed) as usize
}

/// Which socket timeout.
#[derive(Clone, Copy)]
pub enum Timeout {
    /// `SO_RCVTIMEO`
    Recv,
    /// `SO_SNDTIMEO`
    Send,
}
