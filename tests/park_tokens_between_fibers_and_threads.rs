//! `greenhook::park` and `Thread::unpark` follow std's token rules between
//! fibers of one OS thread, between a fiber and its root context, and across
//! OS threads; handles are `Send`, so joins work from other OS threads too.
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

mod util;

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_token_given_before_park_is_consumed_at_once() {
    util::within(LIMIT, "root", || {
        greenhook::current().unpark();
        greenhook::current().unpark(); // tokens do not accumulate
        greenhook::park();
        let t0 = Instant::now();
        greenhook::park_timeout(Duration::from_millis(20));
        assert!(t0.elapsed() >= Duration::from_millis(20), "{:?}", t0.elapsed());
        let fiber = greenhook::spawn(|| {
            greenhook::current().unpark();
            greenhook::park();
        });
        fiber.join().unwrap();
    });
}

#[test]
fn fibers_of_one_thread_park_and_unpark_each_other() {
    util::within(LIMIT, "root", || {
        let woken = Arc::new(AtomicU32::new(0));
        let w = woken.clone();
        let sleeper = greenhook::Builder::new()
            .name("sleeper".into())
            .spawn(move || {
                for _ in 0..3 {
                    greenhook::park();
                    w.fetch_add(1, SeqCst);
                }
            })
            .unwrap();
        let handle = sleeper.thread().clone();
        let waker = greenhook::spawn(move || {
            for i in 1..=3 {
                // Let the sleeper park first, then wake it once.
                while woken.load(SeqCst) != i - 1 {
                    greenhook::yield_now();
                }
                handle.unpark();
                while woken.load(SeqCst) != i {
                    greenhook::yield_now();
                }
            }
        });
        waker.join().unwrap();
        sleeper.join().unwrap();
    });
}

#[test]
fn the_root_parks_while_fibers_run_and_a_fiber_wakes_it() {
    util::within(LIMIT, "root", || {
        let root = greenhook::current();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let h = greenhook::spawn(move || {
            greenhook::sleep(Duration::from_millis(10));
            d.store(true, SeqCst);
            root.unpark();
        });
        while !done.load(SeqCst) {
            greenhook::park();
        }
        h.join().unwrap();
    });
}

#[test]
fn an_unpark_that_arrives_while_parked_wakes_a_timed_park_early() {
    util::within(LIMIT, "root", || {
        let me = greenhook::current();
        let h = greenhook::spawn(move || {
            greenhook::sleep(Duration::from_millis(5));
            me.unpark();
        });
        let t0 = Instant::now();
        greenhook::park_timeout(Duration::from_secs(20));
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        h.join().unwrap();
    });
}

#[test]
fn another_os_thread_unparks_a_fiber() {
    util::within(LIMIT, "root", || {
        let (tx, rx) = mpsc::channel();
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let fiber = greenhook::spawn(move || {
            while !f.load(SeqCst) {
                greenhook::park();
            }
            "woken from afar"
        });
        tx.send(fiber.thread().clone()).unwrap();
        let other = std::thread::spawn(move || {
            let t = rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            flag.store(true, SeqCst);
            t.unpark();
        });
        // The root joins through the hub; the wake-up comes from the other
        // thread, through the hub's inbox.
        assert_eq!(fiber.join().unwrap(), "woken from afar");
        other.join().unwrap();
    });
}

#[test]
fn a_fiber_unparks_a_plain_os_thread() {
    util::within(LIMIT, "root", || {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let (tx, rx) = mpsc::channel();
        let other = std::thread::spawn(move || {
            tx.send(greenhook::current()).unwrap();
            while !f.load(SeqCst) {
                greenhook::park();
            }
        });
        let t = rx.recv().unwrap();
        greenhook::spawn(move || {
            greenhook::sleep(Duration::from_millis(20));
            flag.store(true, SeqCst);
            t.unpark();
        })
        .join()
        .unwrap();
        other.join().unwrap();
    });
}

/// Two fibers of one OS thread take turns many times (the unpark wakes the
/// other fiber through its own hub): a lost wake-up would hang (and fail
/// the time limit).
#[test]
fn ping_pong_between_fibers_loses_no_wake_up() {
    const ROUNDS: u32 = 20_000;
    util::within(Duration::from_secs(60), "root", || {
        let turn = Arc::new(AtomicU32::new(0));
        let players: Arc<[std::sync::OnceLock<greenhook::Thread>; 2]> = Arc::default();
        let hs: Vec<_> = (0..2u32)
            .map(|me| {
                let (turn, players) = (turn.clone(), players.clone());
                greenhook::spawn(move || {
                    players[me as usize].set(greenhook::current()).unwrap();
                    for i in 0..ROUNDS {
                        while turn.load(SeqCst) != 2 * i + me {
                            greenhook::park();
                        }
                        turn.fetch_add(1, SeqCst);
                        // Not started yet, the other finds its turn when it
                        // starts.
                        if let Some(other) = players[1 - me as usize].get() {
                            other.unpark();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(turn.load(SeqCst), 2 * ROUNDS);
    });
}

/// A fiber on one OS thread and the root of another take turns many times:
/// a lost wake-up would hang (and fail the time limit).
#[test]
fn ping_pong_across_os_threads_loses_no_wake_up() {
    const ROUNDS: u32 = 20_000;
    util::within(Duration::from_secs(60), "root", || {
        let turn = Arc::new(AtomicU32::new(0));
        let (tx, rx) = mpsc::channel::<greenhook::Thread>();
        let (back_tx, back_rx) = mpsc::channel::<greenhook::Thread>();
        let t2 = turn.clone();
        let other = std::thread::spawn(move || {
            back_tx.send(greenhook::current()).unwrap();
            let fiber = rx.recv().unwrap();
            for i in 0..ROUNDS {
                while t2.load(SeqCst) != 2 * i + 1 {
                    greenhook::park();
                }
                t2.store(2 * i + 2, SeqCst);
                fiber.unpark();
            }
        });
        let t1 = turn.clone();
        let fiber = greenhook::spawn(move || {
            let root = back_rx.recv().unwrap();
            for i in 0..ROUNDS {
                while t1.load(SeqCst) != 2 * i {
                    greenhook::park();
                }
                t1.store(2 * i + 1, SeqCst);
                root.unpark();
            }
        });
        tx.send(fiber.thread().clone()).unwrap();
        fiber.join().unwrap();
        other.join().unwrap();
        assert_eq!(turn.load(SeqCst), 2 * ROUNDS);
    });
}

#[test]
fn a_join_handle_joins_from_another_os_thread() {
    util::within(LIMIT, "root", || {
        let go = Arc::new(AtomicBool::new(false));
        let g = go.clone();
        let fiber = greenhook::spawn(move || {
            while !g.load(SeqCst) {
                greenhook::park();
            }
            42u32
        });
        let handle = fiber.thread().clone();
        let joined = Arc::new(AtomicBool::new(false));
        let j = joined.clone();
        let joiner = std::thread::spawn(move || {
            let r = fiber.join().unwrap();
            j.store(true, SeqCst);
            r
        });
        // Give the other thread time to wait on the packet, then let the
        // fiber finish: the root must run the hub for it to run.
        greenhook::sleep(Duration::from_millis(20));
        go.store(true, SeqCst);
        handle.unpark();
        while !joined.load(SeqCst) {
            greenhook::sleep(Duration::from_millis(1));
        }
        assert_eq!(joiner.join().unwrap(), 42);

        // A finished fiber joins at once from anywhere.
        let done = greenhook::spawn(|| String::from("done"));
        greenhook::yield_now();
        assert!(done.is_finished());
        assert_eq!(std::thread::spawn(move || done.join().unwrap()).join().unwrap(), "done");
    });
}
