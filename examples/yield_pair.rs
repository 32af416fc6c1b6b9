//! Run with: cargo run --release --example yield_pair
//!
//! Two fibers hand control back and forth with `yield_now`, a million times:
//! the scheduler's own cost per switch, with no I/O or timers involved.
use std::time::Instant;

fn main() {
    const N: u32 = 1_000_000;
    let t0 = Instant::now();
    let a = greenhook::spawn(|| (0..N).for_each(|_| greenhook::yield_now()));
    let b = greenhook::spawn(|| (0..N).for_each(|_| greenhook::yield_now()));
    a.join().unwrap();
    b.join().unwrap();
    let ns = t0.elapsed().as_nanos() as f64 / f64::from(N);
    println!("{N} yield round trips between two fibers: {ns:.1} ns each");
}
