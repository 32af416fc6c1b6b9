//! Wait lists: parked tasks linked through nodes on their own stacks.
//!
//! Parking and waking allocate nothing: each parked task holds its node
//! for as long as it is parked, and a wake-up unlinks the node before it
//! makes the task runnable. A list may live in the caller's memory (two
//! words), or be one bucket of the hub's table of keyed queues
//! ([`park`](mod@crate::park)), where each node carries its key. This is what
//! makes a lock or condvar hand-over cost about a fiber switch (see
//! `interpose::sync`), and what lets the hub park a task from inside an
//! allocator's lock without calling the allocator.
//!
//! Order is FIFO; [`WaitList::wake_best`] lets the caller pick by a rank
//! (priorities) instead.
//!
//! All of a list's waiters belong to one hub (one OS thread).

use std::cell::Cell;
use std::rc::Rc;

use crate::list::{Linked, Links, List};
use crate::park::Park;
use crate::stats::bump;
use crate::{Deadline, Hub, State, Task, Waiting, Wake};

/// A FIFO of parked tasks, two words of the caller's memory (all zero is
/// an empty list).
#[repr(transparent)]
pub struct WaitList {
    /// # Invariant
    /// Every linked node is alive (see `Node::task`) and has `linked` set.
    list: List<Node>,
}

/// One parked task, on its own stack (see [`WaitList::park`]).
struct Node {
    /// # Invariant
    /// Alive while the node is linked: the task is blocked in `park`, and
    /// the hub owns it (the root) or its registry of live fibers does until
    /// it finishes, which it does only after `park` has returned.
    task: *const Task,
    /// The task's wait this node belongs to (see [`Hub::wake`]).
    seq: u64,
    /// The key it waits on, in a bucket of keyed queues (0 elsewhere).
    key: usize,
    /// The caller's word: what [`WaitList::wake_best`] ranks by, or what a
    /// waiter wants (a reader or a writer).
    tag: u32,
    links: Links<Node>,
    linked: Cell<bool>,
}

impl Linked for Node {
    #[inline(always)]
    fn links(&self) -> &Links<Node> {
        &self.links
    }
}

impl Default for WaitList {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitList {
    /// An empty list.
    pub const fn new() -> WaitList {
        WaitList { list: List::new() }
    }

    /// The list kept at `p`.
    ///
    /// # Safety
    /// `p` is 8-aligned and points at 16 bytes that are all zero or were
    /// only ever used as a `WaitList`, that stay valid while any task is
    /// parked on the list, and that only this OS thread touches meanwhile.
    #[inline(always)]
    pub unsafe fn at<'a>(p: usize) -> &'a WaitList {
        // SAFETY: per the contract; `WaitList` is two pointer-sized cells
        // (`List` is `repr(C)`, and `WaitList` a transparent wrapper).
        unsafe { &*(p as *const WaitList) }
    }

    /// Whether no task is parked here.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.list.head().is_null()
    }

    /// Parks the running task (a fiber, or the root, which runs the hub's
    /// loop meanwhile) at the back of the list until a `wake_*` call picks
    /// it ([`Park::Unparked`]), the deadline passes, or it is interrupted.
    /// `what` names the wait in reports; `tag` is the caller's word for
    /// this waiter.
    pub fn park(&self, what: Waiting, tag: u32, deadline: Option<Deadline>) -> Park {
        let (hub, cur) = Hub::get_and_current();
        self.park_keyed(hub, &cur, 0, what, tag, deadline)
    }

    /// [`WaitList::park`] for `cur`, the running task of `hub` (the
    /// caller's), with the node marked with `key`.
    #[inline(always)]
    pub(crate) fn park_keyed(
        &self,
        hub: &Hub,
        cur: &Rc<Task>,
        key: usize,
        what: Waiting,
        tag: u32,
        deadline: Option<Deadline>,
    ) -> Park {
        cur.state.set(State::Blocked);
        cur.waiting.set(what);
        let node = Node {
            task: Rc::as_ptr(cur),
            seq: cur.seq.get(),
            key,
            tag,
            links: Links::new(),
            linked: Cell::new(true),
        };
        self.link_back(&node);
        bump(&hub.counters.parks);
        let why = hub.block(cur, deadline);
        if node.linked.get() {
            // Timed out or interrupted: nobody unlinked us.
            self.unlink(&node);
        }
        Park::after(why)
    }

    /// Wakes the oldest waiter; returns whether there was one.
    #[inline]
    pub fn wake_one(&self) -> bool {
        self.wake_where(|_| true)
    }

    /// Wakes the oldest waiter whose tag satisfies `pick`.
    #[inline]
    pub fn wake_where(&self, pick: impl FnMut(u32) -> bool) -> bool {
        Hub::existing().is_some_and(|hub| self.wake_where_keyed(hub, None, pick))
    }

    /// Wakes the waiter of the highest rank (`rank(tag)`; `None` skips a
    /// waiter), the oldest among equals. Returns whether it woke one.
    pub fn wake_best(&self, rank: impl FnMut(u32) -> Option<u32>) -> bool {
        Hub::existing().is_some_and(|hub| self.wake_best_keyed(hub, None, rank))
    }

    /// Wakes every waiter; returns how many.
    pub fn wake_all(&self) -> usize {
        let mut woken = 0;
        while self.wake_one() {
            woken += 1;
        }
        woken
    }

    /// Whether any waiter's tag satisfies `f`.
    pub fn any(&self, f: impl FnMut(u32) -> bool) -> bool {
        self.count_keyed(None, f, 1) > 0
    }

    /// The first linked node (of `key`, if given) whose tag satisfies
    /// `pick`, starting at `p`.
    fn find(&self, mut p: *const Node, key: Option<usize>, pick: &mut impl FnMut(u32) -> bool) -> Option<&Node> {
        while !p.is_null() {
            // SAFETY: a linked node is alive (see `Node::task`).
            let n = unsafe { &*p };
            if key.is_none_or(|k| n.key == k) && pick(n.tag) {
                return Some(n);
            }
            p = n.links.next();
        }
        None
    }

    /// [`WaitList::wake_where`] among the nodes of `key` (all, for `None`).
    pub(crate) fn wake_where_keyed(&self, hub: &Hub, key: Option<usize>, mut pick: impl FnMut(u32) -> bool) -> bool {
        let mut p = self.list.head();
        while let Some(n) = self.find(p, key, &mut pick) {
            p = n.links.next();
            if self.take(hub, n) {
                return true;
            }
        }
        false
    }

    /// [`WaitList::wake_best`] among the nodes of `key` (all, for `None`).
    pub(crate) fn wake_best_keyed(
        &self,
        hub: &Hub,
        key: Option<usize>,
        mut rank: impl FnMut(u32) -> Option<u32>,
    ) -> bool {
        loop {
            let mut best: Option<(&Node, u32)> = None;
            let mut p = self.list.head();
            while let Some(n) = self.find(p, key, &mut |_| true) {
                if let Some(r) = rank(n.tag) {
                    if best.is_none_or(|(_, b)| r > b) {
                        best = Some((n, r));
                    }
                }
                p = n.links.next();
            }
            match best {
                None => return false,
                Some((n, _)) => {
                    if self.take(hub, n) {
                        return true;
                    }
                }
            }
        }
    }

    /// How many nodes (of `key`, if given) have a tag satisfying `f`,
    /// counting no further than `most`.
    pub(crate) fn count_keyed(&self, key: Option<usize>, mut f: impl FnMut(u32) -> bool, most: usize) -> usize {
        let mut n = 0;
        let mut p = self.list.head();
        while n < most {
            match self.find(p, key, &mut f) {
                Some(node) => {
                    n += 1;
                    p = node.links.next();
                }
                None => break,
            }
        }
        n
    }

    /// Unlinks `n` and wakes its task if its wait is still current (a
    /// stale node, whose task timed out or was interrupted and has not run
    /// yet, is just dropped from the list).
    #[inline]
    fn take(&self, hub: &Hub, n: &Node) -> bool {
        self.unlink(n);
        hub.wake_raw(n.task, n.seq, Wake::Ready)
    }

    #[inline]
    fn link_back(&self, n: &Node) {
        // SAFETY: `n` is alive (the caller's, on its stack) and not linked;
        // linked nodes are alive (the invariant).
        unsafe { self.list.push_back(n) };
    }

    #[inline]
    fn unlink(&self, n: &Node) {
        // SAFETY: `n` is linked here (its `linked` says so); linked nodes
        // are alive (the invariant).
        unsafe { self.list.unlink(n) };
        n.linked.set(false);
    }
}
