//! The offload pool runs closures on other OS threads while the calling
//! fiber waits, and wakes exactly that fiber; other fibers keep running.
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[test]
fn offload_runs_off_the_hub_and_wakes_the_caller() {
    let hub_thread = std::thread::current().id();
    let ticks = Rc::new(Cell::new(0u32));
    let t2 = ticks.clone();
    let ticker = greenhook::spawn(move || {
        for _ in 0..20 {
            greenhook::sleep(Duration::from_millis(5));
            t2.set(t2.get() + 1);
        }
    });
    let workers: Vec<_> = (0..8u64)
        .map(|i| {
            greenhook::spawn(move || {
                let (tid, v) = hub::offload(hub::Lane::Work, move || {
                    // A real blocking call: it would stall the hub if run there.
                    std::thread::sleep(Duration::from_millis(50));
                    (std::thread::current().id(), i * 2)
                });
                (tid, v, i)
            })
        })
        .collect();
    let t0 = Instant::now();
    for w in workers {
        let (tid, v, i) = w.join().unwrap();
        assert_ne!(tid, hub_thread);
        assert_eq!(v, i * 2, "a result went to the wrong fiber");
    }
    // 8 × 50 ms on a pool of 4 ≈ 100 ms, not 400 ms.
    assert!(t0.elapsed() < Duration::from_millis(350), "{:?}", t0.elapsed());
    assert!(ticks.get() >= 5, "the ticker was stalled: {} ticks", ticks.get());
    ticker.join().unwrap();
}

/// A burst of jobs must not queue behind the one idle worker: the pool grows
/// while the backlog is larger than its idle workers.
#[test]
fn a_burst_grows_the_pool_past_an_idle_worker() {
    // Leave (at least) one idle worker behind.
    hub::offload(hub::Lane::Work, || ());
    std::thread::sleep(Duration::from_millis(20));
    let running = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let fibers: Vec<_> = (0..hub::pool_size())
        .map(|_| {
            let (running, peak) = (running.clone(), peak.clone());
            greenhook::spawn(move || {
                hub::offload(hub::Lane::Work, move || {
                    use std::sync::atomic::Ordering::SeqCst;
                    let now = running.fetch_add(1, SeqCst) + 1;
                    peak.fetch_max(now, SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    running.fetch_sub(1, SeqCst);
                })
            })
        })
        .collect();
    for f in fibers {
        f.join().unwrap();
    }
    // Other tests share the pool, so demand only that it grew.
    let peak = peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!(peak >= 2, "the burst ran on {peak} worker(s) at a time");
}

#[test]
fn offload_borrows_and_propagates_panics() {
    let data = [1u32, 2, 3];
    let sum = hub::offload(hub::Lane::Work, || data.iter().sum::<u32>());
    assert_eq!(sum, 6);
    let r = std::panic::catch_unwind(|| hub::offload(hub::Lane::Work, || panic!("in the pool")));
    assert!(r.is_err());
}

#[test]
fn remote_wakers_work_from_any_thread() {
    let t0 = Instant::now();
    hub::wait_remote(|w| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w.wake();
        });
    });
    assert!(t0.elapsed() >= Duration::from_millis(20));
}

/// An interruptible offload tells its caller of each interruption at once
/// (and polls for the job's end from then on), yet returns only when the
/// job has finished, with its result: the job may borrow the caller's
/// stack.
#[test]
fn an_interruptible_offload_reports_interrupts_and_still_waits_for_the_job() {
    let calls = Rc::new(Cell::new((0u32, 0u32)));
    let c2 = calls.clone();
    let h = greenhook::spawn(move || {
        let borrowed = [7u64; 4];
        let t0 = Instant::now();
        let sum = hub::offload_interruptible(
            hub::Lane::Work,
            || {
                std::thread::sleep(Duration::from_millis(150));
                borrowed.iter().sum::<u64>()
            },
            |interrupted| {
                let (i, p) = c2.get();
                c2.set(if interrupted { (i + 1, p) } else { (i, p + 1) });
                if interrupted {
                    // Reported while the job still runs.
                    assert!(t0.elapsed() < Duration::from_millis(140), "{:?}", t0.elapsed());
                }
            },
        );
        (sum, t0.elapsed())
    });
    greenhook::sleep(Duration::from_millis(20));
    let mut interrupted = false;
    hub::for_each_task(|t| {
        if !t.is_root() {
            interrupted |= t.interrupt();
        }
    });
    assert!(interrupted, "the offloading fiber was not interruptible");
    let (sum, took) = h.join().unwrap();
    assert_eq!(sum, 28);
    assert!(
        took >= Duration::from_millis(150),
        "returned before the job ended: {took:?}"
    );
    let (interrupts, polls) = calls.get();
    assert_eq!(interrupts, 1);
    assert!(polls >= 1, "no look at the job's end after the interruption");
}

/// The wait lane never queues a call behind another: calls that each wait
/// until all of them are running at once (three times the work lane's
/// bound) all end. The work lane keeps its bound. Idle wait workers beyond
/// the bound leave after `hub::LINGER`.
#[test]
fn waits_get_a_worker_each_and_work_keeps_its_bound() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    let n = 3 * hub::pool_size();
    let started = Arc::new(AtomicUsize::new(0));
    let fibers: Vec<_> = (0..n)
        .map(|_| {
            let started = started.clone();
            greenhook::spawn(move || {
                hub::offload(hub::Lane::Wait, move || {
                    started.fetch_add(1, SeqCst);
                    let t0 = Instant::now();
                    while started.load(SeqCst) < n {
                        if t0.elapsed() > Duration::from_secs(10) {
                            return false;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    true
                })
            })
        })
        .collect();
    let all = fibers.into_iter().map(|f| f.join().unwrap()).filter(|&ok| ok).count();
    assert_eq!(all, n, "only {} of {n} waits ran at once", started.load(SeqCst));
    let (_, waiting) = hub::pool_workers();
    assert!(waiting >= n, "{waiting} wait workers for {n} waits at once");

    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let fibers: Vec<_> = (0..hub::pool_size() + 3)
        .map(|_| {
            let (running, peak) = (running.clone(), peak.clone());
            greenhook::spawn(move || {
                hub::offload(hub::Lane::Work, move || {
                    peak.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                    std::thread::sleep(Duration::from_millis(30));
                    running.fetch_sub(1, SeqCst);
                })
            })
        })
        .collect();
    for f in fibers {
        f.join().unwrap();
    }
    let peak = peak.load(SeqCst);
    assert!(
        peak <= hub::pool_size(),
        "{peak} work calls at once, bound {}",
        hub::pool_size()
    );

    let t0 = Instant::now();
    while hub::pool_workers().1 > hub::pool_size() && t0.elapsed() < hub::LINGER * 3 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, left) = hub::pool_workers();
    assert!(
        left <= hub::pool_size(),
        "{left} idle wait workers after {:?}",
        t0.elapsed()
    );
}
