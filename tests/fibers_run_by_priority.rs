//! Once tasks have priorities (`hub::set_priority`; the preload maps
//! `SCHED_FIFO`/`SCHED_RR` ones onto it), a hub runs the highest runnable
//! first, FIFO within one priority; `yield_now` gives way only to equal or
//! higher priorities; and a fiber made runnable above the running one's
//! runs at the running one's next `preempt_point`. In a test binary of its
//! own: whether priorities differ is a process-wide fact.
use std::cell::RefCell;
use std::rc::Rc;

type Log = Rc<RefCell<Vec<&'static str>>>;

fn spawn_at(prio: u32, f: impl FnOnce() + 'static) -> Rc<hub::Task> {
    let t = hub::spawn(hub::Spawn::default(), f).unwrap();
    hub::set_priority(&t, prio);
    t
}

fn turns(log: &Log, first: &'static str, second: &'static str) -> impl FnOnce() + 'static {
    let log = log.clone();
    move || {
        log.borrow_mut().push(first);
        hub::yield_now();
        log.borrow_mut().push(second);
    }
}

#[test]
fn highest_priority_first_and_yields_give_way_only_upwards() {
    let log: Log = Rc::default();
    let a = spawn_at(1, turns(&log, "a1", "a2"));
    let b = spawn_at(5, turns(&log, "b1", "b2"));
    let c = spawn_at(5, turns(&log, "c1", "c2"));
    for t in [&a, &b, &c] {
        hub::join(t);
    }
    assert_eq!(*log.borrow(), ["b1", "c1", "b2", "c2", "a1", "a2"]);
}

#[test]
fn a_fiber_made_runnable_above_the_running_one_preempts_it() {
    let log: Log = Rc::default();
    let l = log.clone();
    let low = spawn_at(1, move || {
        l.borrow_mut().push("low");
        let l2 = l.clone();
        let high = spawn_at(2, move || l2.borrow_mut().push("high"));
        hub::preempt_point();
        l.borrow_mut().push("low-after");
        hub::join(&high);
    });
    hub::join(&low);
    assert_eq!(*log.borrow(), ["low", "high", "low-after"]);
}
