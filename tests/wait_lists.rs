//! Wait lists kept in the caller's memory (`hub::WaitList`): FIFO wake-ups,
//! picking by tag or rank, and waiters that leave on their own (timeout,
//! interrupt) without leaving a dangling node behind.
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hub::{Park, WaitList, Waiting};

fn what(list: &WaitList) -> Waiting {
    Waiting::Object("test list", list as *const WaitList as usize)
}

/// Spawns one fiber per tag that parks on `list` with that tag and logs
/// its tag once woken; returns after all of them are parked.
fn parked(list: &'static WaitList, tags: &[u32], log: &Rc<RefCell<Vec<u32>>>) -> Vec<greenhook::JoinHandle<Park>> {
    let hs = tags
        .iter()
        .map(|&tag| {
            let log = log.clone();
            greenhook::spawn(move || {
                let r = list.park(what(list), tag, None);
                log.borrow_mut().push(tag);
                r
            })
        })
        .collect();
    greenhook::yield_now();
    hs
}

fn leaked() -> &'static WaitList {
    Box::leak(Box::new(WaitList::new()))
}

#[test]
fn wake_one_is_fifo_and_wake_all_takes_the_rest() {
    let list = leaked();
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs = parked(list, &[1, 2, 3, 4], &log);
    assert!(!list.is_empty());
    assert!(list.wake_one());
    assert!(list.wake_one());
    greenhook::yield_now();
    assert_eq!(*log.borrow(), [1, 2]);
    assert_eq!(list.wake_all(), 2);
    for h in hs {
        assert_eq!(h.join().unwrap(), Park::Unparked);
    }
    assert_eq!(*log.borrow(), [1, 2, 3, 4]);
    assert!(list.is_empty());
    assert!(!list.wake_one());
}

#[test]
fn wake_where_and_wake_best_pick_by_tag() {
    let list = leaked();
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs = parked(list, &[10, 31, 20, 30, 11], &log);
    assert!(list.any(|t| t > 30));
    assert!(!list.any(|t| t > 31));
    // The oldest even tag.
    assert!(list.wake_where(|t| t % 2 == 0));
    // The highest rank, the oldest among equals (31 and 30 both rank 3).
    assert!(list.wake_best(|t| Some(t / 10)));
    // Nothing ranks: nobody is woken.
    assert!(!list.wake_best(|_| None));
    greenhook::yield_now();
    assert_eq!(*log.borrow(), [10, 31]);
    list.wake_all();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*log.borrow(), [10, 31, 20, 30, 11]);
}

#[test]
fn a_waiter_that_times_out_leaves_the_list() {
    let list = leaked();
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs = parked(list, &[1], &log);
    let t0 = Instant::now();
    let r = list.park(what(list), 2, Some((Instant::now() + Duration::from_millis(20)).into()));
    assert_eq!(r, Park::TimedOut);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    // The root's node is gone: one waiter is left, and it is the fiber.
    assert!(list.wake_one());
    assert!(!list.wake_one());
    assert_eq!(hs.into_iter().next().unwrap().join().unwrap(), Park::Unparked);
    assert_eq!(*log.borrow(), [1]);
    assert!(list.is_empty());
}

#[test]
fn a_woken_waiter_that_is_interrupted_first_is_skipped() {
    let list = leaked();
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs = parked(list, &[1, 2], &log);
    // Interrupt the first waiter; before it runs, a wake-up must go to the
    // second one, not be lost on the first's stale node.
    let mut interrupted = false;
    hub::for_each_task(|t| {
        if !interrupted && t.waiting() == what(list) {
            interrupted = t.interrupt();
        }
    });
    assert!(interrupted);
    assert!(list.wake_one());
    let rs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(rs, [Park::Interrupted, Park::Unparked]);
    assert!(list.is_empty());
}

#[test]
fn an_interrupt_that_finds_the_waiter_already_woken_ends_its_next_wait() {
    let list = leaked();
    let second = leaked();
    let log = Rc::new(RefCell::new(Vec::new()));
    // The fiber parks, is woken, and (before it runs) asked to be
    // interrupted: it cannot be woken twice, so its next wait ends at
    // once, and only that one.
    let h = greenhook::spawn(move || {
        let first = list.park(what(list), 0, None);
        let t0 = Instant::now();
        let next = second.park(what(second), 0, Some((Instant::now() + Duration::from_secs(5)).into()));
        let at_once = t0.elapsed() < Duration::from_secs(1);
        let after = second.park(
            what(second),
            0,
            Some((Instant::now() + Duration::from_millis(20)).into()),
        );
        (first, next, at_once, after)
    });
    greenhook::yield_now();
    assert!(list.wake_one());
    let mut soon = None;
    hub::for_each_task(|t| {
        if t.state() == hub::State::Runnable && !t.is_root() {
            soon = Some(t.interrupt_soon());
        }
    });
    assert_eq!(soon, Some(false), "a runnable fiber is not woken again");
    assert_eq!(
        h.join().unwrap(),
        (Park::Unparked, Park::Interrupted, true, Park::TimedOut)
    );
    assert!(second.is_empty());

    // Taken back before the wait: the wait is a plain one.
    let h = greenhook::spawn(move || {
        let first = list.park(what(list), 0, None);
        hub::current().clear_interrupt();
        let next = second.park(
            what(second),
            0,
            Some((Instant::now() + Duration::from_millis(20)).into()),
        );
        log.borrow_mut().push(1);
        (first, next)
    });
    greenhook::yield_now();
    assert!(list.wake_one());
    hub::for_each_task(|t| {
        if t.state() == hub::State::Runnable && !t.is_root() {
            t.interrupt_soon();
        }
    });
    assert_eq!(h.join().unwrap(), (Park::Unparked, Park::TimedOut));
}
