// A small program written for `std::thread`, compiled twice by
// tests/std_compat.rs: into a module that says `use std::thread;` and into
// one that says `use greenhook as thread;`. It names every stable item of
// std::thread's API with its exact signature (and the auto traits std's
// types have) and uses each one, logging what it sees; both builds must log
// the same lines. (It leaves out only what
// cannot agree: thread-local values in spawned threads, which fibers share.)

use std::cell::Cell;
use std::collections::HashSet;
use std::io;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Each function and method as a function pointer of std's exact type: a
/// different signature does not compile. (The types are spelled out in full
/// on purpose, hence the `type_complexity` allowance.)
#[allow(deprecated, clippy::type_complexity)]
fn signatures() {
    let _: fn() -> thread::Builder = thread::Builder::new;
    let _: fn(thread::Builder, String) -> thread::Builder = thread::Builder::name;
    let _: fn(thread::Builder, usize) -> thread::Builder = thread::Builder::stack_size;
    let _: fn(thread::Builder, fn() -> u8) -> io::Result<thread::JoinHandle<u8>> =
        thread::Builder::spawn::<fn() -> u8, u8>;
    let _: unsafe fn(thread::Builder, fn() -> u8) -> io::Result<thread::JoinHandle<u8>> =
        thread::Builder::spawn_unchecked::<fn() -> u8, u8>;
    let _: fn(fn() -> u8) -> thread::JoinHandle<u8> = thread::spawn::<fn() -> u8, u8>;
    let _: fn(thread::JoinHandle<u8>) -> thread::Result<u8> = thread::JoinHandle::join;
    let _: for<'a> fn(&'a thread::JoinHandle<u8>) -> &'a thread::Thread = thread::JoinHandle::thread;
    let _: fn(&thread::JoinHandle<u8>) -> bool = thread::JoinHandle::is_finished;
    let _: fn() -> thread::Thread = thread::current;
    let _: fn(&thread::Thread) -> thread::ThreadId = thread::Thread::id;
    let _: for<'a> fn(&'a thread::Thread) -> Option<&'a str> = thread::Thread::name;
    let _: fn(&thread::Thread) = thread::Thread::unpark;
    let _: fn(Duration) = thread::sleep;
    let _: fn(u32) = thread::sleep_ms;
    let _: fn() = thread::yield_now;
    let _: fn() = thread::park;
    let _: fn(Duration) = thread::park_timeout;
    let _: fn(u32) = thread::park_timeout_ms;
    let _: fn() -> bool = thread::panicking;
    let _: fn() -> io::Result<NonZeroUsize> = thread::available_parallelism;
    let _: thread::Result<u8> = Ok(1);
    send_sync::<thread::Builder>();
    send_sync::<thread::Thread>();
    send_sync::<thread::ThreadId>();
    send_sync::<thread::JoinHandle<u8>>();
    send_sync::<thread::AccessError>();
    unwind_safe::<thread::Thread>();
    unwind_safe::<thread::ThreadId>();
    unwind_safe::<thread::Builder>();
    clone_debug::<thread::Thread>();
    clone_debug::<thread::ThreadId>();
    key::<thread::ThreadId>();
}

/// The scoped half of [`signatures`].
#[allow(clippy::type_complexity)]
fn scoped_signatures<'scope, 'env>(_: &'scope thread::Scope<'scope, 'env>) {
    let _: fn(&'scope thread::Scope<'scope, 'env>, fn() -> u8) -> thread::ScopedJoinHandle<'scope, u8> =
        thread::Scope::spawn::<fn() -> u8, u8>;
    let _: fn(
        thread::Builder,
        &'scope thread::Scope<'scope, 'env>,
        fn() -> u8,
    ) -> io::Result<thread::ScopedJoinHandle<'scope, u8>> = thread::Builder::spawn_scoped::<fn() -> u8, u8>;
    let _: fn(thread::ScopedJoinHandle<'scope, u8>) -> thread::Result<u8> = thread::ScopedJoinHandle::join;
    let _: for<'a> fn(&'a thread::ScopedJoinHandle<'scope, u8>) -> &'a thread::Thread =
        thread::ScopedJoinHandle::thread;
    let _: fn(&thread::ScopedJoinHandle<'scope, u8>) -> bool = thread::ScopedJoinHandle::is_finished;
    send_sync::<thread::Scope<'scope, 'env>>();
    ref_unwind_safe::<thread::Scope<'scope, 'env>>();
    send_sync::<thread::ScopedJoinHandle<'scope, u8>>();
}

fn send_sync<T: Send + Sync>() {}
fn unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
fn ref_unwind_safe<T: std::panic::RefUnwindSafe>() {}
fn clone_debug<T: Clone + std::fmt::Debug>() {}
fn key<T: Copy + Eq + std::hash::Hash>() {}

thread_local! {
    static CALLS: Cell<u32> = const { Cell::new(0) };
}

/// Takes a thread-local key by its `thread::LocalKey` type.
fn count(key: &'static thread::LocalKey<Cell<u32>>) -> Result<u32, thread::AccessError> {
    key.try_with(|c| {
        c.set(c.get() + 1);
        c.get()
    })
}

/// Handles kept in statics: these need `Thread` and `JoinHandle` to be `Send`.
static PARKED: Mutex<Option<thread::Thread>> = Mutex::new(None);
static KEPT: Mutex<Vec<thread::JoinHandle<u32>>> = Mutex::new(Vec::new());

/// Sets its flag to `thread::panicking()` when dropped.
struct Probe(Arc<AtomicBool>);

impl Drop for Probe {
    fn drop(&mut self) {
        self.0.store(thread::panicking(), SeqCst);
    }
}

/// Runs the program; returns its log.
pub fn program() -> Vec<String> {
    signatures();
    let mut log = Vec::new();

    // Builder, exactly as std users write it.
    let h = thread::Builder::new()
        .name("worker".into())
        .stack_size(64 * 1024)
        .spawn(|| format!("{:?} says hi", thread::current().name()))
        .unwrap();
    log.push(format!("handle: {:?} {:?}", h.thread().name(), h));
    let worker = h.thread().id();
    let r: thread::Result<String> = h.join();
    log.push(format!("joined: {}", r.unwrap()));

    // The current thread's handle and ids.
    let me = thread::current();
    log.push(format!("main is named {:?}", me.name()));
    log.push(format!("debug starts {:?}", format!("{me:?}").starts_with("Thread { id: ThreadId(")));
    let ids: HashSet<thread::ThreadId> = [me.id(), worker, thread::current().id()].into_iter().collect();
    log.push(format!("distinct ids: {}", ids.len()));

    // spawn, move, results and panics.
    let data = Arc::new(vec![1u32, 2, 3]);
    let handles: Vec<_> = (0..3)
        .map(|i| {
            let data = Arc::clone(&data);
            thread::spawn(move || data[i] * 10)
        })
        .collect();
    let results: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    log.push(format!("results {results:?}"));
    let err = thread::spawn(|| -> u32 { panic!("a worker panics on purpose") })
        .join()
        .unwrap_err();
    log.push(format!("panic payload {:?}", err.downcast_ref::<&str>()));
    let seen = Arc::new(AtomicBool::new(false));
    let probe = Probe(Arc::clone(&seen));
    let _ = thread::spawn(move || {
        let _probe = probe;
        panic!("unwinding on purpose");
    })
    .join();
    log.push(format!("panicking while unwinding: {}, here: {}", seen.load(SeqCst), thread::panicking()));

    // park and unpark: a token given before park is consumed at once; a
    // parked thread is woken by its handle, kept in a static.
    thread::current().unpark();
    thread::park();
    thread::park_timeout(Duration::from_millis(1));
    let go = Arc::new(AtomicBool::new(false));
    let go2 = Arc::clone(&go);
    let parked = thread::spawn(move || {
        *PARKED.lock().unwrap() = Some(thread::current());
        while !go2.load(SeqCst) {
            thread::park();
        }
        "woken"
    });
    while PARKED.lock().unwrap().is_none() {
        thread::yield_now();
    }
    log.push(format!("parked one finished: {}", parked.is_finished()));
    go.store(true, SeqCst);
    PARKED.lock().unwrap().take().unwrap().unpark();
    log.push(format!("parked one says {}", parked.join().unwrap()));

    // is_finished, and a handle joined from a static.
    let quick = thread::spawn(|| 7u32);
    while !quick.is_finished() {
        thread::sleep(Duration::from_millis(1));
    }
    KEPT.lock().unwrap().push(quick);
    let kept = KEPT.lock().unwrap().pop().unwrap();
    log.push(format!("kept handle joins to {}", kept.join().unwrap()));

    // Sleeping never ends early.
    let t0 = Instant::now();
    thread::sleep(Duration::from_millis(20));
    log.push(format!("slept 20 ms at least: {}", t0.elapsed() >= Duration::from_millis(20)));
    #[allow(deprecated)]
    {
        thread::sleep_ms(1);
        thread::park_timeout_ms(1);
    }

    // Scoped threads borrow from this stack, shared and mutably.
    let numbers = [1, 2, 3, 4];
    let mut doubled = [1, 2, 3];
    let counter = AtomicUsize::new(0);
    let mut total = 0;
    thread::scope(|s| {
        scoped_signatures(s);
        let sum = s.spawn(|| numbers.iter().sum::<i32>());
        s.spawn(|| doubled.iter_mut().for_each(|n| *n *= 2));
        s.spawn(|| {
            counter.fetch_add(1, SeqCst);
            s.spawn(|| counter.fetch_add(10, SeqCst));
        });
        let named = thread::Builder::new()
            .name("scoped".into())
            .spawn_scoped(s, || thread::current().name().map(str::to_owned))
            .unwrap();
        log.push(format!("scoped name {:?} {:?}", named.thread().name(), named));
        log.push(format!("scoped fiber saw its name {:?}", named.join().unwrap()));
        let quick = s.spawn(|| 1);
        while !quick.is_finished() {
            thread::yield_now();
        }
        total = sum.join().unwrap() + quick.join().unwrap();
        let _ = format!("{s:?}");
    });
    log.push(format!("scope: total {total}, doubled {doubled:?}, counter {}", counter.load(SeqCst)));
    let r = std::panic::catch_unwind(|| {
        thread::scope(|s| {
            s.spawn(|| panic!("a scoped worker panics on purpose"));
        })
    });
    log.push(format!("unjoined scoped panic: {:?}", r.unwrap_err().downcast_ref::<&str>()));
    let handled = thread::scope(|s| s.spawn(|| -> u8 { panic!("a joined one panics on purpose") }).join().is_err());
    log.push(format!("joined scoped panic is an Err: {handled}"));

    // spawn_unchecked may borrow: joined before the borrow ends.
    let local = String::from("borrowed");
    let borrowed = &local;
    // SAFETY: joined below, while `local` lives.
    let h = unsafe { thread::Builder::new().spawn_unchecked(move || borrowed.len()) }.unwrap();
    log.push(format!("spawn_unchecked saw {} bytes", h.join().unwrap()));

    // The rest of the module: thread-locals and the machine's parallelism.
    log.push(format!("thread-local: {:?} {:?}", count(&CALLS), count(&CALLS)));
    let n = thread::available_parallelism().map(NonZeroUsize::get);
    log.push(format!("available parallelism is known: {}", n.is_ok_and(|n| n >= 1)));
    log
}
