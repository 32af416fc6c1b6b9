//! Run with: cargo run --release --example gevent_sleep
//!
//! gevent's seed demo in Rust: three fibers each call the *standard*
//! `std::thread::sleep(1 s)`. Before `greenhook::monkey::patch_all()` that
//! call blocks the only OS thread, so the fibers sleep one after another
//! (~3 s); after it, `nanosleep` is a yield to the hub and they overlap
//! (~1 s).
use std::time::{Duration, Instant};

fn three_sleepers() -> Duration {
    let t0 = Instant::now();
    let hs: Vec<_> = (0..3)
        .map(|_| greenhook::spawn(|| std::thread::sleep(Duration::from_secs(1))))
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    t0.elapsed()
}

fn main() {
    println!(
        "before patch_all: 3 fibers × std::thread::sleep(1 s) took {:.2} s",
        three_sleepers().as_secs_f64()
    );
    greenhook::monkey::patch_all();
    println!(
        "after  patch_all: 3 fibers × std::thread::sleep(1 s) took {:.2} s",
        three_sleepers().as_secs_f64()
    );
}
