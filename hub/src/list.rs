//! The intrusive doubly linked list under the run queue and the wait
//! lists: entries carry their own [`Links`], so linking and unlinking
//! touch a few words and never allocate. Who owns the entries, and how
//! long they live, is the user's business ([`RunQueue`](crate::run) holds
//! a strong count of each queued task; a [`WaitList`](crate::WaitList)
//! node lives on its parked task's stack); this module only keeps the
//! neighbours and the two ends right.

use std::cell::Cell;

/// An entry's neighbours while it is linked (null at either end).
pub(crate) struct Links<T> {
    next: Cell<*const T>,
    prev: Cell<*const T>,
}

impl<T> Links<T> {
    pub(crate) const fn new() -> Links<T> {
        Links {
            next: Cell::new(std::ptr::null()),
            prev: Cell::new(std::ptr::null()),
        }
    }

    /// The entry after this one (null: the last), while linked.
    #[inline(always)]
    pub(crate) fn next(&self) -> *const T {
        self.next.get()
    }
}

/// A type whose values can be linked into a [`List`].
pub(crate) trait Linked: Sized {
    /// The links of `self`.
    fn links(&self) -> &Links<Self>;
}

/// The two ends of a list: two words, all zero when empty (`repr(C)`, so
/// a [`WaitList`](crate::WaitList) can live in 16 bytes of the caller's
/// memory).
#[repr(C)]
pub(crate) struct List<T> {
    head: Cell<*const T>,
    tail: Cell<*const T>,
}

impl<T: Linked> List<T> {
    pub(crate) const fn new() -> List<T> {
        List {
            head: Cell::new(std::ptr::null()),
            tail: Cell::new(std::ptr::null()),
        }
    }

    /// The first entry (null: empty).
    #[inline(always)]
    pub(crate) fn head(&self) -> *const T {
        self.head.get()
    }

    /// The last entry (null: empty).
    #[inline(always)]
    pub(crate) fn tail(&self) -> *const T {
        self.tail.get()
    }

    /// Moves the entries after `last` (all of them when `last` is null:
    /// nothing moves) to the front, in their order.
    ///
    /// # Safety
    /// `last` is null or linked here; every linked entry is alive.
    pub(crate) unsafe fn move_after_to_front(&self, last: *const T) {
        // SAFETY: per the contract.
        unsafe {
            let Some(l) = last.as_ref() else { return };
            let first = l.links().next.get();
            let Some(f) = first.as_ref() else { return };
            let (head, end) = (self.head.get(), self.tail.get());
            // `last` is linked and not the tail, so `head` is not null.
            l.links().next.set(std::ptr::null());
            self.tail.set(last);
            (*end).links().next.set(head);
            (*head).links().prev.set(end);
            f.links().prev.set(std::ptr::null());
            self.head.set(first);
        }
    }

    /// Links `t` after `prev` (null: at the front).
    ///
    /// # Safety
    /// `t` is alive and not linked; `prev` is null or linked here; every
    /// linked entry is alive.
    #[inline(always)]
    pub(crate) unsafe fn link_after(&self, t: *const T, prev: *const T) {
        // SAFETY: per the contract.
        unsafe {
            let next = match prev.as_ref() {
                Some(p) => p.links().next.get(),
                None => self.head.get(),
            };
            let l = (*t).links();
            l.prev.set(prev);
            l.next.set(next);
            match prev.as_ref() {
                Some(p) => p.links().next.set(t),
                None => self.head.set(t),
            }
            match next.as_ref() {
                Some(n) => n.links().prev.set(t),
                None => self.tail.set(t),
            }
        }
    }

    /// Links `t` at the back: [`List::link_after`] the tail, with what is
    /// known of the tail (nothing after it) not loaded again.
    ///
    /// # Safety
    /// As for [`List::link_after`].
    #[inline(always)]
    pub(crate) unsafe fn push_back(&self, t: *const T) {
        let tail = self.tail.get();
        // SAFETY: per the contract.
        unsafe {
            let l = (*t).links();
            l.prev.set(tail);
            l.next.set(std::ptr::null());
            match tail.as_ref() {
                Some(p) => p.links().next.set(t),
                None => self.head.set(t),
            }
        }
        self.tail.set(t);
    }

    /// Unlinks `t`.
    ///
    /// # Safety
    /// `t` is linked here; every linked entry is alive.
    #[inline(always)]
    pub(crate) unsafe fn unlink(&self, t: *const T) {
        // SAFETY: per the contract.
        unsafe {
            let l = (*t).links();
            let (prev, next) = (l.prev.get(), l.next.get());
            match prev.as_ref() {
                Some(p) => p.links().next.set(next),
                None => self.head.set(next),
            }
            match next.as_ref() {
                Some(n) => n.links().prev.set(prev),
                None => self.tail.set(prev),
            }
        }
    }

    /// Forgets every entry (they are not unlinked: see
    /// [`RunQueue::leak_all`](crate::run)).
    pub(crate) fn forget_all(&self) {
        self.head.set(std::ptr::null());
        self.tail.set(std::ptr::null());
    }
}
