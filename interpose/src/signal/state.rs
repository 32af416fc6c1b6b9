//! Each context's signal state on the fiber thread: its virtual mask, a
//! summary of the signals held for it (the signals themselves are in
//! [`table`](super::table)), whether it waits for a signal; and what they
//! add up to: per signal, how many contexts accept it, and the real mask.
//!
//! The root's entry is made on first use, from the thread's real mask; a
//! fiber's when `pthread_create` makes it ([`State::add`]) and removed when
//! it ends. A fiber without one (made through the Rust API, not
//! `pthread_create`) has the root's mask and is never chosen as a
//! recipient.
//!
//! Everything here is touched at safe points only (inside hooks, at their
//! way out, in the hub's loop), never while the trampoline may be reading:
//! the trampoline reads a mask only when it interrupted the program's own
//! code, and then through `try_borrow`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use std::sync::atomic::Ordering::SeqCst;

use libc::sigset_t;

use super::table::{self, WORK};
use super::{bit, bits_to_set, set_to_bits, NSIG};

/// What a context waits for, if it waits in a signal call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wait {
    No,
    /// `pause`/`sigsuspend`: ends when a handler ran in it.
    Handler,
    /// The `sigwait` family, for these signals: takes one without a handler.
    Set(u64),
}

pub(super) struct Ctx {
    /// The fiber (None for the root, whose task the hub gives when it has
    /// one: an entry must not create a hub, which opens fds).
    task: Option<Rc<hub::Task>>,
    /// The virtual mask (never the unblockable signals).
    pub(super) mask: u64,
    /// The signals the table holds for this context.
    pub(super) held: u64,
    pub(super) wait: Wait,
    /// Handlers run in this context so far, and of those the ones without
    /// `SA_RESTART` (see `HandlerMark`).
    ran: u64,
    interrupting: u64,
}

impl Ctx {
    /// Whether a held signal may run its action here now.
    fn due(&self) -> bool {
        self.held & !self.mask != 0
    }
}

pub(super) struct State {
    root: RefCell<Option<Ctx>>,
    fibers: RefCell<HashMap<u64, Ctx, BuildHasherDefault<crate::thread::HandleHasher>>>,
    /// The contexts with an entry.
    contexts: Cell<u32>,
    /// Per signal, how many of them block it: the others accept it.
    blocking: [Cell<u32>; NSIG],
    /// The signals some context blocks (a `blocking` count not 0), so
    /// that the common case, masks all empty, costs no loop over signals
    /// when a context comes or goes.
    blocked_by_some: Cell<u64>,
    /// The real mask as last set by us (None: not set yet).
    real: Cell<Option<u64>>,
    /// Contexts in `pause`, `sigsuspend` or the `sigwait` family, oldest first.
    waiters: RefCell<Vec<u64>>,
    /// Contexts with a signal due (mirrored in [`WORK`]).
    due: Cell<u32>,
}

/// Per OS thread, shared by its fibers (see `hub::PerThread`: with TLS per
/// fiber a `thread_local!` would be per fiber, and it would be gone during
/// the thread's TLS destructors).
static STATE: hub::PerThread<State> = hub::PerThread::new(State::new);

/// Runs `f` with this thread's state, made on first use (at any moment of
/// the thread's life, its TLS destructors included).
pub(super) fn with<R>(f: impl FnOnce(&State) -> R) -> R {
    STATE.with(f)
}

/// Runs `f` with this thread's state if it was made; a signal handler's
/// way, which must not allocate (a thread without state has masks that
/// are not virtual).
pub(super) fn existing<R>(f: impl FnOnce(&State) -> R) -> Option<R> {
    STATE.with_existing(f)
}

/// The id of the root context (fibers' ids start at 1).
pub(super) const ROOT: u64 = 0;

impl State {
    /// A thread's state before anything happened: no context yet.
    fn new() -> State {
        State {
            root: RefCell::new(None),
            fibers: RefCell::new(HashMap::with_hasher(BuildHasherDefault::new())),
            contexts: Cell::new(0),
            blocking: [const { Cell::new(0) }; NSIG],
            blocked_by_some: Cell::new(0),
            real: Cell::new(None),
            waiters: RefCell::new(Vec::new()),
            due: Cell::new(0),
        }
    }

    /// Makes the root's entry if there is none: its mask is the thread's
    /// real mask, which it has been until now.
    pub(super) fn ensure(&self) {
        if self.root.borrow().is_some() {
            return;
        }
        // SAFETY: a zeroed sigset is a valid out buffer.
        let mut cur: sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: query only.
        unsafe { super::pthread_sigmask::real(libc::SIG_SETMASK, std::ptr::null(), &mut cur) };
        let mask = set_to_bits(&cur) & !super::UNBLOCKABLE;
        self.count(mask, 1);
        self.real.set(Some(mask));
        *self.root.borrow_mut() = Some(Ctx {
            task: None,
            mask,
            held: 0,
            wait: Wait::No,
            ran: 0,
            interrupting: 0,
        });
        if super::adopt_thread_pending() {
            self.refresh(ROOT);
        }
    }

    /// Whether the root's entry exists (masks are virtual from then on).
    pub(super) fn ready(&self) -> bool {
        self.root.try_borrow().is_ok_and(|r| r.is_some())
    }

    fn count(&self, mask: u64, add: i32) {
        self.contexts.set(self.contexts.get().wrapping_add_signed(add));
        for sig in signals_in(mask) {
            let c = &self.blocking[sig as usize];
            let n = c.get().wrapping_add_signed(add);
            c.set(n);
            let some = self.blocked_by_some.get();
            self.blocked_by_some
                .set(if n == 0 { some & !bit(sig) } else { some | bit(sig) });
        }
    }

    fn with_ctx<R>(&self, id: u64, f: impl FnOnce(&mut Ctx) -> R) -> Option<R> {
        if id == ROOT {
            self.root.borrow_mut().as_mut().map(f)
        } else {
            self.fibers.borrow_mut().get_mut(&id).map(f)
        }
    }

    /// The mask of context `id` (a fiber without an entry: the root's).
    pub(super) fn mask(&self, id: u64) -> u64 {
        if id != ROOT {
            if let Some(c) = self.fibers.borrow().get(&id) {
                return c.mask;
            }
        }
        self.root.borrow().as_ref().map_or(0, |r| r.mask)
    }

    /// [`State::ready`] from a signal handler: None if the state is in use.
    pub(super) fn try_ready(&self) -> Option<bool> {
        self.root.try_borrow().ok().map(|r| r.is_some())
    }

    /// [`State::mask`] from a signal handler: None if the state is in use.
    pub(super) fn try_mask(&self, id: u64) -> Option<u64> {
        let root = self.root.try_borrow().ok()?.as_ref()?.mask;
        if id == ROOT {
            return Some(root);
        }
        let f = self.fibers.try_borrow().ok()?;
        Some(f.get(&id).map_or(root, |c| c.mask))
    }

    /// Whether `id` has an entry (the root, or a pthread fiber alive).
    pub(super) fn has(&self, id: u64) -> bool {
        if id == ROOT {
            self.root.borrow().is_some()
        } else {
            self.fibers.borrow().contains_key(&id)
        }
    }

    pub(super) fn task(&self, id: u64) -> Option<Rc<hub::Task>> {
        if id == ROOT {
            hub::has_hub().then(hub::root)
        } else {
            self.fibers.borrow().get(&id).and_then(|c| c.task.clone())
        }
    }

    /// Notes that a handler ran in `id` (`restart`: with `SA_RESTART`).
    pub(super) fn note_handler(&self, id: u64, restart: bool) {
        self.with_ctx(id, |c| {
            c.ran += 1;
            if !restart {
                c.interrupting += 1;
            }
        });
    }

    /// The handlers run in `id` so far: all, and those without `SA_RESTART`.
    pub(super) fn handlers(&self, id: u64) -> (u64, u64) {
        self.with_ctx(id, |c| (c.ran, c.interrupting)).unwrap_or((0, 0))
    }

    pub(super) fn wait_of(&self, id: u64) -> Wait {
        self.with_ctx(id, |c| c.wait).unwrap_or(Wait::No)
    }

    /// Sets the mask of context `task` (making its entry if it is a fiber
    /// without one).
    pub(super) fn set_mask(&self, task: &Rc<hub::Task>, m: u64) {
        let id = task.id();
        if id != ROOT && !self.has(id) {
            let root = self.mask(ROOT);
            self.add(task, root);
        }
        self.set_mask_of(id, m);
    }

    /// Sets the mask of `id` if it has an entry (the trampoline's handler
    /// mask): the same as [`State::set_mask`] without making entries.
    pub(super) fn set_mask_of(&self, id: u64, m: u64) {
        if let Some(old) = self.update(id, |c| std::mem::replace(&mut c.mask, m)) {
            self.count(old, -1);
            self.count(m, 1);
        }
    }

    /// Runs `f` on `id`'s entry and keeps the count of contexts with a
    /// signal due true.
    fn update<R>(&self, id: u64, f: impl FnOnce(&mut Ctx) -> R) -> Option<R> {
        self.with_ctx(id, |c| {
            let before = c.due();
            let r = f(c);
            self.due_changed(before, c.due());
            r
        })
    }

    fn due_changed(&self, before: bool, after: bool) {
        if before != after {
            if after {
                self.due.set(self.due.get() + 1);
                WORK.fetch_add(1, SeqCst);
            } else {
                self.due.set(self.due.get() - 1);
                WORK.fetch_sub(1, SeqCst);
            }
        }
    }

    /// A new context (a fiber `pthread_create` just made) with `mask`.
    pub(super) fn add(&self, task: &Rc<hub::Task>, mask: u64) {
        self.ensure();
        let ctx = Ctx {
            task: Some(task.clone()),
            mask,
            held: 0,
            wait: Wait::No,
            ran: 0,
            interrupting: 0,
        };
        // The map may grow: an allocator's lock taken meanwhile must not
        // come back into these hooks.
        let old = {
            let _g = hub::internal::Guard::new();
            self.fibers.borrow_mut().insert(task.id(), ctx)
        };
        if let Some(old) = old {
            self.count(old.mask, -1);
        }
        self.count(mask, 1);
    }

    /// Forgets a context that ended; returns its entry.
    pub(super) fn remove(&self, id: u64) -> Option<Ctx> {
        let c = self.fibers.borrow_mut().remove(&id)?;
        self.count(c.mask, -1);
        self.due_changed(c.due(), false);
        self.unwait(id);
        Some(c)
    }

    /// Recomputes what the table holds for `id` (after the table changed).
    pub(super) fn refresh(&self, id: u64) {
        if id != table::PROCESS {
            self.update(id, |c| c.held = table::held(id));
        }
    }

    /// Whether `id` has a signal due (held and not masked).
    pub(super) fn due(&self, id: u64) -> bool {
        self.with_ctx(id, |c| c.due()).unwrap_or(false)
    }

    /// How many contexts accept `sig`.
    pub(super) fn acceptors(&self, sig: i32) -> u32 {
        self.contexts.get() - self.blocking[sig as usize].get()
    }

    /// The first fiber whose entry satisfies `f`.
    pub(super) fn find_fiber(&self, mut f: impl FnMut(&Ctx) -> bool) -> Option<u64> {
        self.fibers.borrow().iter().find(|(_, c)| f(c)).map(|(&id, _)| id)
    }

    /// The runnable fiber of the highest priority above `floor` whose mask
    /// lets `b` in (see `deliver::recipient`).
    pub(super) fn best_runnable(&self, b: u64, floor: u32) -> Option<u64> {
        self.fibers
            .borrow()
            .iter()
            .filter(|(_, c)| c.mask & b == 0)
            .filter_map(|(&id, c)| {
                let t = c.task.as_ref()?;
                (t.state() == hub::State::Runnable && t.priority() > floor).then(|| (t.priority(), id))
            })
            .max_by_key(|&(p, id)| (p, std::cmp::Reverse(id)))
            .map(|(_, id)| id)
    }

    /// Marks `id` as waiting in a signal call (or not, with [`Wait::No`]).
    pub(super) fn set_wait(&self, id: u64, w: Wait) {
        self.with_ctx(id, |c| c.wait = w);
        if w == Wait::No {
            self.unwait(id);
        } else {
            let _g = hub::internal::Guard::new();
            self.waiters.borrow_mut().push(id);
        }
    }

    fn unwait(&self, id: u64) {
        self.waiters.borrow_mut().retain(|&w| w != id);
    }

    /// The first waiter (oldest first) whose wait and mask satisfy `f`.
    pub(super) fn find_waiter(&self, mut f: impl FnMut(Wait, u64) -> bool) -> Option<u64> {
        let waiters = self.waiters.borrow();
        waiters.iter().copied().find(|&id| f(self.wait_of(id), self.mask(id)))
    }

    /// The signals every context blocks, but preemption's (which the real
    /// mask never blocks: see `preempt`): what the real mask should be.
    pub(super) fn intersection(&self) -> u64 {
        let n = self.contexts.get();
        let blocked_by_all = if n == 0 {
            !0 // no context accepts anything
        } else {
            signals_in(self.blocked_by_some.get())
                .filter(|&s| self.blocking[s as usize].get() == n)
                .fold(0, |acc, s| acc | bit(s))
        };
        blocked_by_all & !super::never_blocked()
    }

    /// Sets the real mask to [`State::intersection`] if it is not that
    /// already: a signal reaches the trampoline as soon as some context
    /// accepts it, and one that every context blocks stays pending in the
    /// kernel.
    pub(super) fn apply_real(&self) {
        let want = self.intersection();
        if self.real.get() == Some(want) {
            return;
        }
        // SAFETY: a zeroed sigset is valid; bits_to_set initialises it.
        let mut set: sigset_t = unsafe { std::mem::zeroed() };
        bits_to_set(want, &mut set);
        // SAFETY: a valid set.
        unsafe { super::pthread_sigmask::real(libc::SIG_SETMASK, &set, std::ptr::null_mut()) };
        self.real.set(Some(want));
    }

    /// Sets the real mask to the intersection, whatever it is thought to
    /// be: after a handler the kernel ran (with its own signal and mask
    /// added to the real one) was left by `siglongjmp`, which skips the
    /// `sigreturn` that would have given the kernel its mask back.
    pub(super) fn reapply_real(&self) {
        self.real.set(None);
        self.apply_real();
    }

    /// The real mask as last set by us.
    pub(super) fn real_mask(&self) -> Option<u64> {
        self.real.get()
    }

    /// Notes that the real mask is `m` (set by the kernel at a handler's
    /// return).
    pub(super) fn real_is(&self, m: u64) {
        self.real.set(Some(m));
    }

    /// In the child of `fork()`: only the calling context `me` is left,
    /// and nothing is pending. The other entries' tasks are leaked, never
    /// dropped (see `hub::reset_after_fork`).
    pub(super) fn after_fork(&self, me: u64) {
        let mut fibers = self.fibers.borrow_mut();
        let keep = fibers.remove(&me);
        for (_, c) in fibers.drain() {
            std::mem::forget(c.task);
        }
        self.waiters.borrow_mut().clear();
        self.due.set(0);
        self.contexts.set(0);
        for c in &self.blocking {
            c.set(0);
        }
        self.blocked_by_some.set(0);
        let mut root = self.root.borrow_mut();
        if let Some(mut k) = keep {
            // The root is gone in spirit (it waits in the parent's loop
            // forever): only this fiber's mask counts.
            if let Some(r) = root.as_mut() {
                r.mask = k.mask;
            }
            k.held = 0;
            k.wait = Wait::No;
            self.count(k.mask, 1);
            fibers.insert(me, k);
        }
        if let Some(r) = root.as_mut() {
            r.held = 0;
            r.wait = Wait::No;
            self.count(r.mask, 1);
        }
    }
}

/// The signals whose bits `set` has, lowest first.
fn signals_in(set: u64) -> impl Iterator<Item = i32> {
    let mut rest = set;
    std::iter::from_fn(move || {
        (rest != 0).then(|| {
            let sig = rest.trailing_zeros() as i32 + 1;
            rest &= rest - 1;
            sig
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts agree with the masks they were made from, as contexts
    /// come and go: how many accept each signal, and which all block.
    #[test]
    fn the_counts_follow_the_masks() {
        let st = State::new();
        let none_accept = st.intersection();
        assert_eq!(none_accept, !super::super::never_blocked());
        let masks = [
            0u64,
            bit(10) | bit(12),
            bit(10) | bit(64) | bit(1),
            bit(10) | bit(12) | bit(64),
        ];
        for m in masks {
            st.count(m, 1);
        }
        st.count(masks[0], -1); // the one with an empty mask ends
        let live = &masks[1..];
        for sig in 1..NSIG as i32 {
            let accepting = live.iter().filter(|&&m| m & bit(sig) == 0).count() as u32;
            assert_eq!(st.acceptors(sig), accepting, "signal {sig}");
        }
        let all = live.iter().fold(!0, |acc, m| acc & m);
        assert_eq!(all, bit(10));
        assert_eq!(st.intersection(), all & !super::super::never_blocked());
        for &m in live {
            st.count(m, -1);
        }
        assert_eq!(st.blocked_by_some.get(), 0);
        assert_eq!(st.intersection(), none_accept);
    }

    #[test]
    fn signals_in_a_set_lowest_first() {
        assert_eq!(signals_in(0).count(), 0);
        assert_eq!(signals_in(bit(1) | bit(33) | bit(64)).collect::<Vec<_>>(), [1, 33, 64]);
    }
}
