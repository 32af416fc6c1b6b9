//! Wait queues keyed by address; the deadlock report when nothing can wake
//! anyone (run in a child process, since it exits).
use std::cell::Cell;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[test]
fn unpark_wakes_in_fifo_order_and_counts() {
    let key = 0x1000usize;
    let log = Rc::new(std::cell::RefCell::new(Vec::new()));
    let hs: Vec<_> = (0..4)
        .map(|i| {
            let l = log.clone();
            greenhook::spawn(move || {
                assert_eq!(hub::park(key, None, || true), hub::Park::Unparked);
                l.borrow_mut().push(i);
            })
        })
        .collect();
    greenhook::yield_now();
    assert_eq!(hub::parked(key), 4);
    assert_eq!(hub::unpark(key, 2), 2);
    greenhook::yield_now();
    assert_eq!(*log.borrow(), [0, 1]);
    assert_eq!(hub::unpark(key, usize::MAX), 2);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*log.borrow(), [0, 1, 2, 3]);
    assert_eq!(hub::unpark(key, 1), 0);
}

#[test]
fn park_validates_and_times_out() {
    assert_eq!(hub::park(1, None, || false), hub::Park::Invalid);
    let t0 = Instant::now();
    let d = Instant::now() + Duration::from_millis(20);
    assert_eq!(hub::park(2, Some(d), || true), hub::Park::TimedOut);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert_eq!(hub::parked(2), 0);
}

#[test]
fn interrupt_wakes_a_sleeper() {
    let woke = Rc::new(Cell::new(false));
    let w2 = woke.clone();
    let h = greenhook::spawn(move || {
        let ok = hub::sleep_interruptible(Instant::now() + Duration::from_secs(60));
        w2.set(!ok);
    });
    greenhook::yield_now();
    let mut target = None;
    hub::for_each_task(|t| target = Some(t.clone()));
    assert!(target.unwrap().interrupt());
    h.join().unwrap();
    assert!(woke.get());
}

#[test]
fn deadlock_is_reported_with_a_distinct_status() {
    if std::env::var_os("GREENHOOK_TEST_DEADLOCK_CHILD").is_some() {
        let h = greenhook::Builder::new()
            .name("stuck".into())
            .spawn(|| {
                hub::park(0xdead, None, || true);
            })
            .unwrap();
        h.join().unwrap();
        unreachable!();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "deadlock_is_reported_with_a_distinct_status", "--nocapture"])
        .env("GREENHOOK_TEST_DEADLOCK_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(hub::DEADLOCK_EXIT_CODE), "stderr: {err}");
    assert!(err.contains("deadlock"), "{err}");
    assert!(err.contains("'stuck' waits on address 0xdead"), "{err}");
    assert!(err.contains("main (root) joins fiber"), "{err}");
}
