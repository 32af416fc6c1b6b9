//! The run queue is FIFO, and yield_now interleaves fibers round-robin.
use std::cell::RefCell;
use std::rc::Rc;

#[test]
fn spawned_fibers_start_in_spawn_order() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs: Vec<_> = (0..5)
        .map(|i| {
            let l = log.clone();
            greenhook::spawn(move || l.borrow_mut().push(i))
        })
        .collect();
    assert!(log.borrow().is_empty(), "spawn must not run the fiber eagerly");
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*log.borrow(), [0, 1, 2, 3, 4]);
}

#[test]
fn yield_now_is_round_robin() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs: Vec<_> = (0..3)
        .map(|i| {
            let l = log.clone();
            greenhook::spawn(move || {
                for r in 0..3 {
                    l.borrow_mut().push((r, i));
                    greenhook::yield_now();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let expect: Vec<_> = (0..3).flat_map(|r| (0..3).map(move |i| (r, i))).collect();
    assert_eq!(*log.borrow(), expect);
}

#[test]
fn root_yield_runs_ready_fibers_once() {
    let n = Rc::new(RefCell::new(0));
    let n2 = n.clone();
    let h = greenhook::spawn(move || {
        *n2.borrow_mut() += 1;
        greenhook::yield_now();
        *n2.borrow_mut() += 1;
    });
    greenhook::yield_now();
    assert_eq!(*n.borrow(), 1);
    h.join().unwrap();
    assert_eq!(*n.borrow(), 2);
}

/// Two fibers yielding to each other hand over directly (no trip through
/// the root); the order must still be strict alternation.
#[test]
fn two_yielders_alternate_exactly() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs: Vec<_> = (0..2)
        .map(|i| {
            let l = log.clone();
            greenhook::spawn(move || {
                for r in 0..200 {
                    l.borrow_mut().push((r, i));
                    greenhook::yield_now();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let expect: Vec<_> = (0..200).flat_map(|r| (0..2).map(move |i| (r, i))).collect();
    assert_eq!(*log.borrow(), expect);
}

/// Direct hand-overs must not starve timers: a sleeper wakes while two
/// fibers yield to each other as fast as they can.
#[test]
fn yielding_pairs_do_not_starve_timers() {
    let woke = Rc::new(std::cell::Cell::new(false));
    let w = woke.clone();
    let sleeper = greenhook::spawn(move || {
        greenhook::sleep(std::time::Duration::from_millis(10));
        w.set(true);
    });
    greenhook::yield_now(); // the sleeper starts and sleeps
    let t0 = std::time::Instant::now();
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let w = woke.clone();
            greenhook::spawn(move || {
                while !w.get() {
                    assert!(
                        t0.elapsed() < std::time::Duration::from_secs(5),
                        "the sleeper never woke"
                    );
                    greenhook::yield_now();
                }
            })
        })
        .collect();
    for s in spinners {
        s.join().unwrap();
    }
    sleeper.join().unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(1), "{:?}", t0.elapsed());
}

/// A fiber that was handed control directly and then makes a third fiber
/// runnable must still end up behind it, exactly as FIFO says.
#[test]
fn handed_over_fiber_that_spawns_keeps_fifo_order() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let (la, lb) = (log.clone(), log.clone());
    let a = greenhook::spawn(move || {
        for r in 0..4 {
            la.borrow_mut().push(format!("a{r}"));
            greenhook::yield_now();
        }
    });
    let b = greenhook::spawn(move || {
        let mut c = None;
        for r in 0..4 {
            lb.borrow_mut().push(format!("b{r}"));
            if r == 1 {
                let lc = lb.clone();
                c = Some(greenhook::spawn(move || lc.borrow_mut().push("c".to_string())));
            }
            greenhook::yield_now();
        }
        c.unwrap().join().unwrap();
    });
    a.join().unwrap();
    b.join().unwrap();
    // After b1 the queue is [a, c, b]: a runs, then c, then b.
    assert_eq!(*log.borrow(), ["a0", "b0", "a1", "b1", "a2", "c", "b2", "a3", "b3"]);
}

/// A fiber that was handed control and then blocks leaves the run queue
/// (it is not resumed while asleep) and comes back when its wait ends.
#[test]
fn handed_over_fiber_that_blocks_leaves_the_queue() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let (la, lb) = (log.clone(), log.clone());
    let a = greenhook::spawn(move || {
        for _ in 0..2000 {
            la.borrow_mut().push('a');
            greenhook::yield_now();
        }
    });
    let b = greenhook::spawn(move || {
        for r in 0..20 {
            lb.borrow_mut().push('b');
            if r % 5 == 4 {
                let t0 = std::time::Instant::now();
                greenhook::sleep(std::time::Duration::from_millis(2));
                assert!(t0.elapsed() >= std::time::Duration::from_millis(2), "woken early");
            }
            greenhook::yield_now();
        }
    });
    a.join().unwrap();
    b.join().unwrap();
    let log = log.borrow();
    assert_eq!(log.iter().filter(|&&c| c == 'a').count(), 2000);
    assert_eq!(log.iter().filter(|&&c| c == 'b').count(), 20);
}

/// A fiber that was handed control and then returns is finished and
/// joined like any other, and leaves nothing behind in the run queue.
#[test]
fn handed_over_fiber_that_returns_is_joined() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let (la, lb) = (log.clone(), log.clone());
    let a = greenhook::spawn(move || {
        for r in 0..6 {
            la.borrow_mut().push(format!("a{r}"));
            greenhook::yield_now();
        }
    });
    let b = greenhook::spawn(move || {
        for r in 0..3 {
            lb.borrow_mut().push(format!("b{r}"));
            greenhook::yield_now();
        }
        lb.borrow_mut().push("b end".to_string());
        7
    });
    assert_eq!(b.join().unwrap(), 7);
    a.join().unwrap();
    assert_eq!(
        *log.borrow(),
        ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b end", "a4", "a5"]
    );
    assert_eq!(hub::live_fibers(), 0);
}

/// A fiber that was handed control and then ends itself with
/// `exit_current` (as `pthread_exit` does) wakes its joiner, and the fiber
/// that handed over goes on alone.
#[test]
fn handed_over_fiber_that_exits_is_joined() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let (la, lb) = (log.clone(), log.clone());
    let a = hub::spawn(hub::Spawn::default(), move || {
        for r in 0..4 {
            la.borrow_mut().push(format!("a{r}"));
            hub::yield_now();
        }
    })
    .unwrap();
    let b = hub::spawn(hub::Spawn::default(), move || {
        lb.borrow_mut().push("b0".to_string());
        hub::yield_now();
        lb.borrow_mut().push("b exits".to_string());
        hub::exit_current();
    })
    .unwrap();
    hub::join(&b);
    hub::join(&a);
    assert!(a.is_finished() && b.is_finished());
    assert_eq!(*log.borrow(), ["a0", "b0", "a1", "b exits", "a2", "a3"]);
    assert_eq!(hub::live_fibers(), 0);
}

/// A fiber that blocks and hands over to the only runnable one, which then
/// wakes a third fiber and only after it the first, and blocks: the first
/// finds itself queued behind the third, and lets it run first, as FIFO
/// says (it suspends as runnable from its own park).
#[test]
fn blocked_fiber_woken_by_the_one_it_handed_over_to_keeps_fifo_order() {
    const KX: usize = 0x1000;
    const KY: usize = 0x2000;
    const KZ: usize = 0x3000;
    const KY2: usize = 0x4000;
    let log = Rc::new(RefCell::new(Vec::new()));
    let (lz, ly, lx) = (log.clone(), log.clone(), log.clone());
    let z = hub::spawn(hub::Spawn::default(), move || {
        lz.borrow_mut().push("z parks");
        hub::park(KZ, None, || true);
        lz.borrow_mut().push("z");
    })
    .unwrap();
    let y = hub::spawn(hub::Spawn::default(), move || {
        ly.borrow_mut().push("y parks");
        hub::park(KY, None, || true);
        ly.borrow_mut().push("y wakes z, then x");
        assert_eq!(hub::unpark(KZ, 1), 1);
        assert_eq!(hub::unpark(KX, 1), 1);
        hub::park(KY2, None, || true);
        ly.borrow_mut().push("y ends");
    })
    .unwrap();
    // Both park, so that x finds y the only runnable fiber when it blocks.
    hub::yield_now();
    let x = hub::spawn(hub::Spawn::default(), move || {
        lx.borrow_mut().push("x wakes y");
        assert_eq!(hub::unpark(KY, 1), 1);
        hub::park(KX, None, || true);
        lx.borrow_mut().push("x");
        // Let y end first.
        assert_eq!(hub::unpark(KY2, 1), 1);
        hub::park(
            KX,
            Some((std::time::Instant::now() + std::time::Duration::from_millis(1)).into()),
            || true,
        );
        lx.borrow_mut().push("x ends");
    })
    .unwrap();
    hub::join(&x);
    hub::join(&y);
    hub::join(&z);
    assert_eq!(
        *log.borrow(),
        [
            "z parks",
            "y parks",
            "x wakes y",
            "y wakes z, then x",
            "z",
            "x",
            "y ends",
            "x ends"
        ]
    );
    assert_eq!(hub::live_fibers(), 0);
}

/// A fiber that gives way through the hub (`hub::yield_to_hub`: a time
/// slice's end, the preload's `sched_yield`) has the hub look at I/O first,
/// and a fiber that look wakes runs before those already queued: eight
/// fibers yielding in a loop let a reader whose data another thread wrote
/// run at the next yield, not after a round of the others (9 yields here
/// when what the poll woke went to the back of the queue).
#[test]
fn yields_to_the_hub_let_the_woken_run_first() {
    use std::io::{ErrorKind, Read, Write};
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let (mut r, mut w) = std::os::unix::net::UnixStream::pair().unwrap();
    r.set_nonblocking(true).unwrap();
    let written = Arc::new(AtomicBool::new(false));
    let done = Rc::new(std::cell::Cell::new(false));
    let late = Rc::new(std::cell::Cell::new(0u32));
    let d = done.clone();
    let reader = greenhook::spawn(move || {
        let mut b = [0u8; 1];
        loop {
            match r.read(&mut b) {
                Ok(1) => break,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    greenhook::io::wait_readable(r.as_raw_fd(), None).unwrap()
                }
                other => panic!("{other:?}"),
            }
        }
        d.set(true);
    });
    greenhook::yield_now(); // the reader starts and waits
    let spinners: Vec<_> = (0..8)
        .map(|_| {
            let (d, late, written) = (done.clone(), late.clone(), written.clone());
            greenhook::spawn(move || {
                let t0 = std::time::Instant::now();
                while !d.get() {
                    assert!(
                        t0.elapsed() < std::time::Duration::from_secs(10),
                        "the reader never ran"
                    );
                    // Counted once the byte is surely there (the flag is set
                    // after the write returned).
                    if written.load(Ordering::Acquire) {
                        late.set(late.get() + 1);
                    }
                    hub::yield_to_hub();
                }
            })
        })
        .collect();
    let wr = written.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        w.write_all(b"x").unwrap();
        wr.store(true, Ordering::Release);
        w
    });
    for s in spinners {
        s.join().unwrap();
    }
    reader.join().unwrap();
    drop(writer.join().unwrap());
    // One yield sees the byte; one more if the flag was set mid-turn.
    assert!(
        late.get() <= 3,
        "{} yields after the write before the reader ran",
        late.get()
    );
}
