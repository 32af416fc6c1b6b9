//! Run with: cargo run --release --example sleepers
//!
//! Spawns 10,000 fibers that each sleep 10 ms, joins them, and prints the
//! wall time (serially this would take 100 s).
use std::time::{Duration, Instant};

fn main() {
    let n = 10_000;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| greenhook::spawn(|| greenhook::sleep(Duration::from_millis(10))))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let st = greenhook::stats();
    println!(
        "{n} fibers × sleep(10 ms): {:.1} ms wall, peak {} live fibers, {} switches",
        t0.elapsed().as_secs_f64() * 1e3,
        st.peak_live,
        st.switches
    );
}
