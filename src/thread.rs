//! [`Thread`] and [`ThreadId`]: the handle of a fiber or of a thread's root
//! context, and [`current`].
//!
//! A handle is `Send + Sync`, as std's is: it can be unparked from any OS
//! thread ([`crate::parker`] explains how). Every context has exactly one
//! handle, so that `h.thread().unpark()` wakes the `park()` of the fiber `h`
//! joins. A spawned fiber's handle is made on first use (most fibers never
//! ask for theirs) in a [`LazyThread`] kept in the fiber's result packet;
//! [`current`] finds it through a per-OS-thread registry keyed by fiber id
//! (a [`hub::PerThread`]: shared by the thread's fibers, which have TLS of
//! their own, and usable during thread-local destruction), because the
//! facade cannot hang its own data on a hub task (the task's one opaque
//! word belongs to the interposer).

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroU64;
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use crate::parker::Parker;

/// A unique identifier of a running fiber or root context, like
/// `std::thread::ThreadId`: obtained from [`Thread::id`], never reused.
///
/// A fiber's id is the fiber id that greenhook's reports print (`fiber 7
/// 'worker' overflowed…`); the root context of each OS thread has an id of
/// its own, distinct from every fiber's (`ThreadId(root 1)` in debug output).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadId(NonZeroU64);

/// Set in the ids of root contexts; fiber ids count up from 1 and never get
/// near it.
const ROOT_BIT: u64 = 1 << 63;

impl ThreadId {
    pub(crate) fn of_fiber(id: u64) -> ThreadId {
        debug_assert!(id & ROOT_BIT == 0);
        ThreadId(NonZeroU64::new(id).expect("greenhook: fiber ids start at 1"))
    }

    fn of_root(os_thread: u64) -> ThreadId {
        ThreadId(NonZeroU64::new(ROOT_BIT | os_thread).expect("nonzero: ROOT_BIT is set"))
    }

    /// The fiber id, for a fiber's handle.
    fn fiber_id(self) -> Option<u64> {
        (self.0.get() & ROOT_BIT == 0).then_some(self.0.get())
    }
}

impl fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fiber_id() {
            Some(id) => write!(f, "ThreadId({id})"),
            None => write!(f, "ThreadId(root {})", self.0.get() & !ROOT_BIT),
        }
    }
}

/// A handle to a fiber or to a thread's root context, like
/// `std::thread::Thread`: its id, its name, and [`Thread::unpark`].
///
/// Obtained from [`current`], [`JoinHandle::thread`](crate::JoinHandle::thread)
/// or [`ScopedJoinHandle::thread`](crate::ScopedJoinHandle::thread). Cloning
/// is cheap; every clone refers to the same context.
#[derive(Clone)]
pub struct Thread {
    inner: Arc<Inner>,
}

struct Inner {
    id: ThreadId,
    name: Option<Arc<str>>,
    parker: Parker,
}

impl Thread {
    fn new(id: ThreadId, name: Option<Arc<str>>) -> Thread {
        Thread {
            inner: Arc::new(Inner {
                id,
                name,
                parker: Parker::new(),
            }),
        }
    }

    /// The context's unique id.
    pub fn id(&self) -> ThreadId {
        self.inner.id
    }

    /// The name given to [`Builder::name`](crate::Builder::name); for a root
    /// context, the OS thread's std name (`"main"` for the main thread). `None`
    /// for unnamed fibers.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// Makes the context's park token available, waking it if it is blocked
    /// in [`park`](crate::park) or [`park_timeout`](crate::park_timeout).
    /// Callable from any OS thread. See [`park`](crate::park) for the token
    /// semantics (std's).
    pub fn unpark(&self) {
        self.inner.parker.unpark()
    }

    pub(crate) fn parker(&self) -> &Parker {
        &self.inner.parker
    }
}

impl fmt::Debug for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Thread")
            .field("id", &self.id())
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// A handle to the calling fiber, or to the thread's root context when
/// called outside any fiber (e.g. from `main`).
pub fn current() -> Thread {
    match hub::with_current_fiber(|f| f.map(|f| f.id())) {
        None => ROOT.with(|r| r.get_or_init(root_thread).clone()),
        Some(id) => REGISTRY.with(|r| r.borrow_mut().get_or_adopt(id)),
    }
}

fn root_thread() -> Thread {
    Thread::new(
        ThreadId::of_root(os_thread()),
        std::thread::current().name().map(Arc::from),
    )
}

/// A spawned fiber's handle, made on first use: by [`current`] in the fiber
/// or by its join handle's `thread()`, whichever comes first (a named
/// fiber's is made at once, by [`register`]). Two words, since every fiber
/// carries one.
pub(crate) struct LazyThread {
    /// The fiber id; 0 until [`register`].
    id: AtomicU64,
    /// # Invariant
    /// Null, or from `Box::into_raw`, owned by this cell; it never changes
    /// once set.
    thread: AtomicPtr<Thread>,
}

impl LazyThread {
    pub(crate) const fn new() -> LazyThread {
        LazyThread {
            id: AtomicU64::new(0),
            thread: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The fiber id; 0 until [`register`].
    pub(crate) fn fiber_id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    /// The handle. Only once the fiber exists ([`register`]).
    pub(crate) fn get(&self) -> &Thread {
        let p = self.thread.load(Ordering::Acquire);
        if p.is_null() {
            return self.make(None);
        }
        // SAFETY: the invariant: set once, owned by `self`.
        unsafe { &*p }
    }

    #[cold]
    fn make(&self, name: Option<Arc<str>>) -> &Thread {
        let t = Thread::new(ThreadId::of_fiber(self.fiber_id()), name);
        let new = Box::into_raw(Box::new(t));
        match self
            .thread
            .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: ours, now owned by `self` (the invariant).
            Ok(_) => unsafe { &*new },
            Err(first) => {
                // SAFETY: not published: still ours.
                drop(unsafe { Box::from_raw(new) });
                // SAFETY: the invariant: set once, owned by `self`.
                unsafe { &*first }
            }
        }
    }
}

impl Drop for LazyThread {
    fn drop(&mut self) {
        let p = *self.thread.get_mut();
        if !p.is_null() {
            // SAFETY: the invariant: ours to free.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// A number for the calling OS thread, unique in the process (a thread-local
/// address could be reused by a later thread): the root context's id, and
/// a fiber's home.
pub(crate) fn os_thread() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static ME: hub::PerThread<u64> = hub::PerThread::new(|| NEXT.fetch_add(1, Ordering::Relaxed));
    ME.with(|&n| n)
}

/// Records fiber `id`, just spawned on this thread's hub, whose handle
/// `lazy` is, so that [`current`] inside the fiber finds it; a named fiber's
/// handle is made now, with its name.
///
/// # Safety
/// `lazy` stays valid until the fiber calls [`unregister`] (or forever, if
/// the fiber never gets that far).
pub(crate) unsafe fn register(id: u64, lazy: &LazyThread, name: Option<Arc<str>>) {
    lazy.id.store(id, Ordering::Relaxed);
    if name.is_some() {
        lazy.make(name);
    }
    REGISTRY.with(|r| r.borrow_mut().spawned.insert(id, lazy));
}

/// Whether fiber `id` is registered on this OS thread: spawned here and
/// still running its closure (ids are unique in the process).
pub(crate) fn is_registered_here(id: u64) -> bool {
    REGISTRY
        .with_existing(|r| r.borrow().spawned.get(id).is_some())
        .unwrap_or(false)
}

/// Forgets fiber `id` (the caller): called as its closure ends, before its
/// [`LazyThread`] goes. Id 0 (never registered) is ignored.
pub(crate) fn unregister(id: u64) {
    if id != 0 {
        REGISTRY.with(|r| r.borrow_mut().spawned.remove(id));
    }
}

/// The handle of this thread's root context, made on first use.
static ROOT: hub::PerThread<OnceCell<Thread>> = hub::PerThread::new(OnceCell::new);
static REGISTRY: hub::PerThread<RefCell<Registry>> = hub::PerThread::new(|| {
    RefCell::new(Registry {
        spawned: Spawned {
            near: [(0, ptr::null()); NEAR],
            far: HashMap::with_hasher(BuildHasherDefault::new()),
        },
        adopted: HashMap::with_hasher(BuildHasherDefault::new()),
        sweep_at: 0,
    })
});

/// The fibers of this OS thread that [`current`] may be asked about, by
/// fiber id.
struct Registry {
    /// Fibers greenhook spawned, until their closure ends.
    ///
    /// # Invariant
    /// Each `LazyThread` pointer is valid while its entry exists (see
    /// [`register`]).
    spawned: Spawned,
    /// Fibers greenhook did not spawn (pthreads under the preload), adopted
    /// by [`current`].
    adopted: HashMap<u64, (Thread, Weak<hub::Task>), BuildHasherDefault<IdHasher>>,
    /// The size at which `adopted` is swept of ended fibers.
    sweep_at: usize,
}

impl Registry {
    /// The running fiber's handle. A fiber greenhook did not spawn gets one
    /// on first use; nothing tells us when such a fiber ends, so ended ones
    /// are swept out whenever `adopted` has doubled since the last sweep.
    fn get_or_adopt(&mut self, id: u64) -> Thread {
        if let Some(lazy) = self.spawned.get(id) {
            // SAFETY: the invariant of `spawned`: the entry exists.
            return unsafe { &*lazy }.get().clone();
        }
        if let Some((t, _)) = self.adopted.get(&id) {
            return t.clone();
        }
        if self.adopted.len() >= self.sweep_at {
            self.adopted
                .retain(|_, (_, task)| task.upgrade().is_some_and(|t| !t.is_finished()));
            self.sweep_at = (2 * self.adopted.len()).max(64);
        }
        let task = hub::current();
        let t = Thread::new(ThreadId::of_fiber(id), task.name().map(Arc::from));
        self.adopted.insert(id, (t.clone(), Rc::downgrade(&task)));
        t
    }
}

/// Slots of [`Spawned::near`].
const NEAR: usize = 64;

/// Fiber id -> handle of the fibers greenhook spawned. Every spawn inserts
/// and every fiber's end removes, so this is on the spawn-and-join path:
/// few fibers are alive at once in the common case, and fiber ids are
/// consecutive, so a direct-mapped array indexed by the id's low bits holds
/// them without hashing; an id whose slot is taken goes to a hash map.
struct Spawned {
    /// `(id, handle)`, id 0 when free (fiber ids start at 1).
    near: [(u64, *const LazyThread); NEAR],
    far: HashMap<u64, *const LazyThread, BuildHasherDefault<IdHasher>>,
}

impl Spawned {
    fn slot(&mut self, id: u64) -> &mut (u64, *const LazyThread) {
        &mut self.near[id as usize % NEAR]
    }

    /// Inserts `id`, which is not in the map.
    fn insert(&mut self, id: u64, lazy: *const LazyThread) {
        let slot = self.slot(id);
        if slot.0 == 0 {
            *slot = (id, lazy);
        } else {
            self.far.insert(id, lazy);
        }
    }

    // An id is in its slot or in `far`, never both: `insert` puts it in
    // `far` only when the slot holds another id.
    fn get(&self, id: u64) -> Option<*const LazyThread> {
        match self.near[id as usize % NEAR] {
            (i, lazy) if i == id => Some(lazy),
            _ => self.far.get(&id).copied(),
        }
    }

    fn remove(&mut self, id: u64) {
        let slot = self.slot(id);
        if slot.0 == id {
            slot.0 = 0;
        } else {
            self.far.remove(&id);
        }
    }
}

/// Fiber ids are consecutive integers: a multiplicative hash spreads them
/// over the table's high bits (which hashbrown's probing uses) at the cost
/// of one multiplication, instead of SipHash's dozens.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
