//! `greenhook::scope`: fibers that borrow the caller's stack are all
//! finished (results dropped too) before `scope` returns or unwinds, whether
//! the caller is the root context or a fiber; panics propagate as std's do.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

mod util;

const LIMIT: Duration = Duration::from_secs(30);

fn payload(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[test]
fn scoped_fibers_borrow_and_mutate_the_callers_stack() {
    util::within(LIMIT, "root", || {
        let words = ["a", "bb", "ccc"];
        let mut lengths = vec![0; 3];
        let mut total = 0;
        let t0 = Instant::now();
        greenhook::scope(|s| {
            for (w, l) in words.iter().zip(lengths.iter_mut()) {
                s.spawn(move || {
                    greenhook::sleep(Duration::from_millis(20));
                    *l = w.len();
                });
            }
            total = s.spawn(|| words.iter().map(|w| w.len()).sum::<usize>()).join().unwrap();
        });
        // No handle was joined but one: scope waited for the sleepers.
        assert!(t0.elapsed() >= Duration::from_millis(20));
        assert_eq!(lengths, [1, 2, 3]);
        assert_eq!(total, 6);
    });
}

#[test]
fn a_fiber_can_own_a_scope_and_scopes_nest() {
    util::within(LIMIT, "root", || {
        let outer = greenhook::spawn(|| {
            let mut v = vec![1, 2, 3];
            greenhook::scope(|s| {
                s.spawn(|| {
                    let mut inner = 0;
                    greenhook::scope(|s2| {
                        s2.spawn(|| inner = v.iter().sum());
                    });
                    inner
                });
            });
            v.push(4);
            v
        });
        assert_eq!(outer.join().unwrap(), [1, 2, 3, 4]);
    });
}

/// Runs a scope with a fiber that sleeps, then sets `finished`, and `then`,
/// which makes the scope panic; returns the panic's message and whether the
/// sleeper had finished by the time the panic left `scope`.
fn panicking_scope<'e>(
    finished: &'e AtomicBool,
    then: impl for<'s> FnOnce(&'s greenhook::Scope<'s, 'e>),
) -> (String, bool) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        greenhook::scope(|s| {
            s.spawn(|| {
                greenhook::sleep(Duration::from_millis(20));
                finished.store(true, SeqCst);
            });
            then(s);
        })
    }));
    (payload(&*r.unwrap_err()), finished.load(SeqCst))
}

#[test]
fn an_unjoined_panic_makes_scope_panic_after_every_fiber_finished() {
    let (msg, finished) = util::within(LIMIT, "root", || {
        panicking_scope(&AtomicBool::new(false), |s| {
            s.spawn(|| panic!("scoped boom"));
        })
    });
    assert_eq!(msg, "a scoped thread panicked");
    assert!(finished, "scope unwound before its fibers finished");
}

#[test]
fn a_joined_panic_is_the_joiners_to_handle() {
    util::within(LIMIT, "root", || {
        let r = greenhook::scope(|s| s.spawn(|| -> u32 { panic!("handled boom") }).join());
        assert_eq!(payload(&*r.unwrap_err()), "handled boom");
    });
}

#[test]
fn a_panic_in_the_scope_closure_waits_for_the_fibers_then_resumes() {
    let (msg, finished) = util::within(LIMIT, "root", || {
        panicking_scope(&AtomicBool::new(false), |_| panic!("closure boom"))
    });
    assert_eq!(msg, "closure boom");
    assert!(finished, "scope unwound before its fibers finished");
}

/// A result that borrows from the scope and touches it when dropped.
struct Tally<'a>(&'a AtomicUsize);

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn unjoined_results_are_dropped_before_scope_returns() {
    util::within(LIMIT, "root", || {
        let drops = AtomicUsize::new(0);
        greenhook::scope(|s| {
            // Handle dropped at once: the fiber drops its own result.
            drop(s.spawn(|| Tally(&drops)));
            // Handle kept past the fiber's end: dropped with the handle.
            let kept = s.spawn(|| {
                greenhook::yield_now();
                Tally(&drops)
            });
            while !kept.is_finished() {
                greenhook::yield_now();
            }
            assert_eq!(drops.load(SeqCst), 1);
        });
        assert_eq!(drops.load(SeqCst), 2);
    });
}

#[test]
fn the_scope_is_usable_from_another_os_thread() {
    util::within(LIMIT, "root", || {
        let data = [1u32, 2, 3];
        let sum = greenhook::scope(|gs| {
            std::thread::scope(|ss| {
                // This fiber lives on the other OS thread's hub, which runs
                // it while that thread joins it.
                ss.spawn(|| gs.spawn(|| data.iter().sum::<u32>()).join().unwrap())
                    .join()
                    .unwrap()
            })
        });
        assert_eq!(sum, 6);
    });
}

#[test]
fn a_fiber_that_could_not_be_made_is_counted_out() {
    util::within(LIMIT, "root", || {
        // No address space for such a stack: spawning fails (1 << 59 bytes
        // is more than any x86-64 or arm64 user space).
        let r = greenhook::scope(|s| {
            greenhook::Builder::new()
                .stack_size(1 << 59)
                .spawn_scoped(s, || 1)
                .map(|_| ())
        });
        assert!(r.is_err());
        let r = greenhook::Builder::new().stack_size(1 << 59).spawn(|| 1);
        assert!(r.is_err());
    });
}
