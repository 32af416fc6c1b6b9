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
    assert_eq!(hub::park(2, Some(d.into()), || true), hub::Park::TimedOut);
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

/// In a deadlock test's child: joins a fiber, "stuck", that parks on
/// 0xdead forever, which nothing can end.
fn join_a_stuck_fiber() -> ! {
    let h = greenhook::Builder::new()
        .name("stuck".into())
        .spawn(|| {
            hub::park(0xdead, None, || true);
        })
        .unwrap();
    h.join().unwrap();
    unreachable!();
}

/// Runs the test `name` again in a child (with
/// `GREENHOOK_TEST_DEADLOCK_CHILD` set) and returns its exit code and
/// stderr, failing if it has not ended within a minute.
fn run_deadlock_child(name: &str) -> (Option<i32>, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture"])
        .env("GREENHOOK_TEST_DEADLOCK_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("{name}: no deadlock report within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

#[test]
fn deadlock_is_reported_with_a_distinct_status() {
    if std::env::var_os("GREENHOOK_TEST_DEADLOCK_CHILD").is_some() {
        join_a_stuck_fiber();
    }
    let (code, err) = run_deadlock_child("deadlock_is_reported_with_a_distinct_status");
    assert_eq!(code, Some(hub::DEADLOCK_EXIT_CODE), "stderr: {err}");
    assert!(err.contains("deadlock"), "{err}");
    assert!(err.contains("'stuck' waits on address 0xdead"), "{err}");
    assert!(err.contains("main (root) joins fiber"), "{err}");
}

/// A timed wait that ended before its deadline leaves its timer behind in
/// the hub (it is dropped lazily): that timer must not hide a deadlock
/// that comes later, as if something might still wake at its deadline.
#[test]
fn a_deadlock_is_reported_after_timed_waits_that_ended_early() {
    if std::env::var_os("GREENHOOK_TEST_DEADLOCK_CHILD").is_some() {
        let far = Instant::now() + Duration::from_secs(3600);
        let waiter = greenhook::spawn(move || {
            for _ in 0..3 {
                assert_eq!(hub::park(0xbeef, Some(far.into()), || true), hub::Park::Unparked);
            }
        });
        for _ in 0..3 {
            greenhook::yield_now();
            assert_eq!(hub::unpark(0xbeef, 1), 1);
        }
        waiter.join().unwrap();
        join_a_stuck_fiber();
    }
    let (code, err) = run_deadlock_child("a_deadlock_is_reported_after_timed_waits_that_ended_early");
    assert_eq!(code, Some(hub::DEADLOCK_EXIT_CODE), "stderr: {err}");
    assert!(err.contains("'stuck' waits on address 0xdead"), "{err}");
}

/// Two fibers that hand a turn back and forth by parking (a condvar or a
/// semaphore ping-pong: nothing ever yields) switch once per round trip:
/// one resumes the other from its own stack and the other suspends back to
/// it, with a trip through the root only now and then to poll. The budget of direct hand-overs used to be
/// renewed by yields alone, so such a ping-pong went through the root at
/// every switch after its first 64: twice the switches.
#[test]
fn a_park_ping_pong_switches_once_per_hand_off() {
    const ROUNDS: u64 = 10_000;
    let turn = Rc::new(Cell::new(0u8));
    let side = |me: u8| {
        let turn = turn.clone();
        let (mine, theirs) = (0x2000 + me as usize, 0x2000 + (1 - me) as usize);
        move || {
            for _ in 0..ROUNDS {
                while turn.get() != me {
                    hub::park(mine, None, || turn.get() != me);
                }
                turn.set(1 - me);
                hub::unpark(theirs, 1);
            }
        }
    };
    let before = greenhook::stats().switches;
    let a = greenhook::spawn(side(0));
    let b = greenhook::spawn(side(1));
    a.join().unwrap();
    b.join().unwrap();
    // Switches into a fiber: 2 * ROUNDS hand-offs are ROUNDS resumes when
    // each fiber resumes the other and the other suspends back to it
    // (plus a pass through the root now and then), 2 * ROUNDS when every
    // hand-off goes through the root.
    let switches = greenhook::stats().switches - before;
    assert!(
        switches < ROUNDS + ROUNDS / 4,
        "{switches} switches for {} hand-offs",
        2 * ROUNDS
    );
}
