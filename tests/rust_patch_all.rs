//! `greenhook::monkey::patch_all()` in a Rust program: std's sleeps and
//! std::sync primitives (which reach the futex through libc's `syscall`)
//! cooperate between fibers, and a real `std::thread` can wake a fiber.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

fn patch() {
    greenhook::monkey::patch_all();
}

#[test]
fn std_sleeps_overlap_in_fibers() {
    patch();
    let t0 = Instant::now();
    let hs: Vec<_> = (0..3)
        .map(|_| greenhook::spawn(|| std::thread::sleep(Duration::from_secs(1))))
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let e = t0.elapsed();
    assert!(e >= Duration::from_secs(1), "slept {e:?}");
    assert!(e < Duration::from_secs(2), "sleeps did not overlap: {e:?}");
}

/// A fiber holds a std `Mutex` across a sleep: the sleep lets the other
/// fiber run, which then waits for the mutex (a futex wait that parks it,
/// not the hub) until the holder lets go; no update is lost. Unpatched, the
/// sleep would block the hub and the other fiber would never be waiting.
#[test]
fn std_mutex_held_across_a_sleep() {
    patch();
    let m = Arc::new(Mutex::new(0u32));
    let waiting = Arc::new(AtomicUsize::new(0));
    let saw_a_waiter = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (m, waiting, saw_a_waiter) = (m.clone(), waiting.clone(), saw_a_waiter.clone());
            greenhook::spawn(move || {
                for _ in 0..5 {
                    waiting.fetch_add(1, Ordering::SeqCst);
                    let mut g = m.lock().unwrap();
                    waiting.fetch_sub(1, Ordering::SeqCst);
                    let v = *g;
                    std::thread::sleep(Duration::from_millis(5));
                    if waiting.load(Ordering::SeqCst) > 0 {
                        saw_a_waiter.fetch_add(1, Ordering::SeqCst);
                    }
                    *g = v + 1;
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 10);
    assert!(
        saw_a_waiter.load(Ordering::SeqCst) > 0,
        "no fiber ever waited for the mutex while its holder slept"
    );
}

/// std's mpmc channel never wakes a waiter registered by the sending
/// thread (`Waker::try_select` skips selectors whose `thread_id` is the
/// caller's). With shared TLS every fiber of one OS thread had that
/// thread's std identity, so a receiver fiber blocked in `recv` was never
/// selected by a sender fiber on the same hub; with TLS of its own each
/// fiber has its own (issue 10).
#[test]
fn std_mpsc_between_fibers() {
    patch();
    let (tx, rx) = mpsc::channel::<u32>();
    let consumer = greenhook::spawn(move || rx.iter().sum::<u32>());
    let producer = greenhook::spawn(move || {
        for i in 1..=100 {
            tx.send(i).unwrap();
            if i % 10 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    producer.join().unwrap();
    assert_eq!(consumer.join().unwrap(), 5050);
    // A bounded channel forces both sides to wait on each other.
    let (tx, rx) = mpsc::sync_channel::<u32>(1);
    let consumer = greenhook::spawn(move || rx.iter().count());
    let producer = greenhook::spawn(move || (0..50).for_each(|i| tx.send(i).unwrap()));
    producer.join().unwrap();
    assert_eq!(consumer.join().unwrap(), 50);
}

/// `std::thread::park`/`unpark` between fibers of one OS thread: each
/// fiber's `std::thread::current()` is its own, with its own park token.
/// Fiber B parks first, then A; an unpark of A wakes A (with one token for
/// the whole thread it woke B, the first parked, and A slept on).
#[test]
fn std_park_and_unpark_between_fibers() {
    use std::sync::atomic::AtomicBool;
    patch();
    let go = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let (tx, rx) = mpsc::channel::<(usize, std::thread::Thread)>();
    let sleepers: Vec<_> = [1usize, 0]
        .into_iter()
        .map(|i| {
            let (go, tx) = (go.clone(), tx.clone());
            greenhook::spawn(move || {
                tx.send((i, std::thread::current())).unwrap();
                let t0 = Instant::now();
                // Spurious wake-ups are allowed: park until told to go on.
                while !go[i].load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(2) {
                    std::thread::park_timeout(Duration::from_secs(2));
                }
                Instant::now()
            })
        })
        .collect();
    let waker = greenhook::spawn(move || {
        let mut threads = [None, None];
        for _ in 0..2 {
            let (i, t) = rx.recv().unwrap();
            threads[i] = Some(t);
        }
        std::thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        go[0].store(true, Ordering::SeqCst);
        threads[0].as_ref().unwrap().unpark();
        std::thread::sleep(Duration::from_millis(20));
        go[1].store(true, Ordering::SeqCst);
        threads[1].as_ref().unwrap().unpark();
        t0
    });
    let unparked_a = waker.join().unwrap();
    let woke: Vec<_> = sleepers.into_iter().map(|h| h.join().unwrap()).collect();
    let (a, b) = (woke[1] - unparked_a, woke[0] - unparked_a);
    assert!(a < b, "A woke {a:?} after its unpark, B {b:?}: A waited for B's");
    assert!(
        b >= Duration::from_millis(20),
        "B woke {b:?} after A's unpark, before its own"
    );
    assert!(
        b < Duration::from_secs(1),
        "B woke {b:?} after A's unpark: at its timeout, not at its unpark"
    );
}

/// Each fiber has its own `std::thread::current().id()`, distinct from the
/// other fibers' and from its OS thread's, and its own `thread_local!`s
/// (kept across a sleep that lets the others run), whose destructors run
/// when it ends, in its own context.
#[test]
fn std_thread_identity_and_thread_locals_per_fiber() {
    use std::cell::Cell;
    patch();
    thread_local! {
        static MINE: Cell<u32> = const { Cell::new(0) };
    }
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct Count(u32);
    impl Drop for Count {
        fn drop(&mut self) {
            // Runs in the fiber: its own value is still there.
            assert_eq!(MINE.with(|m| m.get()), self.0);
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static COUNT: std::cell::RefCell<Option<Count>> = const { std::cell::RefCell::new(None) };
    }
    let main_id = std::thread::current().id();
    let hs: Vec<_> = (1..=8)
        .map(|i| {
            greenhook::spawn(move || {
                MINE.with(|m| m.set(i));
                COUNT.with(|c| *c.borrow_mut() = Some(Count(i)));
                let id = std::thread::current().id();
                std::thread::sleep(Duration::from_millis(20));
                (MINE.with(|m| m.get()), id)
            })
        })
        .collect();
    let results: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    for (i, (v, _)) in results.iter().enumerate() {
        assert_eq!(*v, i as u32 + 1, "fiber {i} lost its thread_local");
    }
    let mut ids: Vec<_> = results.iter().map(|(_, id)| *id).collect();
    ids.push(main_id);
    ids.sort_by_key(|id| format!("{id:?}"));
    ids.dedup();
    assert_eq!(ids.len(), 9, "std thread ids are not distinct per fiber");
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        8,
        "thread_local destructors did not run at fiber end"
    );
    assert_eq!(MINE.with(|m| m.get()), 0, "a fiber wrote the OS thread's thread_local");
}

#[test]
fn std_mpsc_between_a_fiber_and_a_real_thread() {
    patch();
    let (tx, rx) = mpsc::channel::<u32>();
    let (back_tx, back_rx) = mpsc::channel::<u32>();
    // The fiber blocks in recv (a futex wait) while a neighbour fiber runs.
    let fiber = greenhook::spawn(move || {
        let mut sum = 0;
        for v in rx.iter() {
            sum += v;
        }
        back_tx.send(sum).unwrap();
    });
    let ticker = greenhook::spawn(|| {
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let real = std::thread::spawn(move || {
        for i in 1..=100 {
            tx.send(i).unwrap();
            if i % 25 == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        drop(tx);
        back_rx.recv().unwrap()
    });
    ticker.join().unwrap();
    fiber.join().unwrap();
    assert_eq!(real.join().unwrap(), 5050);
}

#[test]
fn std_condvar_between_fibers() {
    patch();
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let woken = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let pair = pair.clone();
            let woken = woken.clone();
            greenhook::spawn(move || {
                let (m, c) = &*pair;
                let mut g = m.lock().unwrap();
                while !*g {
                    g = c.wait(g).unwrap();
                }
                woken.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let p = pair.clone();
    let notifier = greenhook::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let (m, c) = &*p;
        *m.lock().unwrap() = true;
        c.notify_all();
    });
    notifier.join().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(woken.load(Ordering::SeqCst), 3);
    // A timed wait that nobody signals times out, on time, while a
    // neighbour fiber keeps running.
    let pair2 = Arc::new((Mutex::new(()), Condvar::new()));
    let p = pair2.clone();
    let t0 = Instant::now();
    let timed = greenhook::spawn(move || {
        let (m, c) = &*p;
        let g = m.lock().unwrap();
        c.wait_timeout(g, Duration::from_millis(50)).unwrap().1.timed_out()
    });
    let ticks = greenhook::spawn(|| {
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    ticks.join().unwrap();
    assert!(timed.join().unwrap());
    assert!(t0.elapsed() >= Duration::from_millis(50));
}

#[test]
fn fiber_woken_by_a_real_thread() {
    patch();
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p = pair.clone();
    let waiter = greenhook::spawn(move || {
        let (m, c) = &*p;
        let mut g = m.lock().unwrap();
        while !*g {
            g = c.wait(g).unwrap();
        }
        true
    });
    // While the fiber waits, another fiber keeps running: the wait does not
    // block the hub.
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let ticker = greenhook::spawn(move || {
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(10));
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let p = pair.clone();
    let real = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let (m, c) = &*p;
        *m.lock().unwrap() = true;
        c.notify_one();
    });
    assert!(waiter.join().unwrap());
    ticker.join().unwrap();
    assert_eq!(ticks.load(Ordering::SeqCst), 5);
    real.join().unwrap();
}
