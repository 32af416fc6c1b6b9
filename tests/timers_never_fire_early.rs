//! Sleeps and timed waits never end early, and are late by a bounded amount.
use std::time::{Duration, Instant};

#[test]
fn sleeps_are_never_early_in_fibers() {
    let durs = [1u64, 3, 7, 10, 25, 50];
    let hs: Vec<_> = durs
        .iter()
        .map(|&ms| {
            greenhook::spawn(move || {
                let d = Duration::from_millis(ms);
                let t0 = Instant::now();
                greenhook::sleep(d);
                let el = t0.elapsed();
                assert!(el >= d, "{el:?} < {d:?}");
                el - d
            })
        })
        .collect();
    for h in hs {
        let late = h.join().unwrap();
        // Generous: the machine is shared and noisy.
        assert!(late < Duration::from_millis(200), "late by {late:?}");
    }
}

#[test]
fn root_sleep_is_never_early() {
    for ms in [0u64, 1, 5, 20] {
        let d = Duration::from_millis(ms);
        let t0 = Instant::now();
        greenhook::sleep(d);
        assert!(t0.elapsed() >= d);
    }
}

#[test]
fn timers_fire_in_deadline_order() {
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let hs: Vec<_> = [30u64, 10, 20]
        .into_iter()
        .map(|ms| {
            let l = log.clone();
            greenhook::spawn(move || {
                greenhook::sleep(Duration::from_millis(ms));
                l.borrow_mut().push(ms);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*log.borrow(), [10, 20, 30]);
}

#[test]
fn many_sleepers_overlap() {
    let t0 = Instant::now();
    let hs: Vec<_> = (0..10_000)
        .map(|_| greenhook::spawn(|| greenhook::sleep(Duration::from_millis(10))))
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    // 10,000 × 10 ms serially would be 100 s.
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

/// A sleep shorter than a millisecond takes about what it asks, as the
/// kernel's would (its timer slack is ~50 µs), not a whole millisecond:
/// the hub waits in `epoll_pwait2`, which takes a `timespec`. It waited in
/// `epoll_pwait`, in whole milliseconds rounded up, so each of these took
/// over 1 ms while no other fiber could run.
#[test]
fn sleeps_shorter_than_a_millisecond_keep_their_length() {
    let h = greenhook::spawn(|| {
        let mut took: Vec<Duration> = (0..200)
            .map(|_| {
                let t0 = Instant::now();
                greenhook::sleep(Duration::from_micros(20));
                t0.elapsed()
            })
            .collect();
        took.sort();
        took
    });
    let took = h.join().unwrap();
    assert!(took[0] >= Duration::from_micros(20), "early: {:?}", took[0]);
    // The median, against noise; generous (natively ~70-100 µs here).
    assert!(took[100] < Duration::from_micros(500), "median {:?}", took[100]);
}
