//! Run with: cargo run --release --example cpu_stall
//!
//! The honest demo: N:1 has no preemption. A ticker fiber wants to run every
//! 100 ms; a CPU-bound fiber computes for one second without yielding, and
//! every tick in that second is late. With `GREENHOOK_STALL_MS=50` (set by
//! this example if absent) the stall monitor names the culprit and prints its
//! backtrace on stderr, then reports how long the stall lasted. (Set
//! `GREENHOOK_STALL_MS` yourself to choose another threshold.)
use std::time::{Duration, Instant};

#[inline(never)]
fn crunch(for_how_long: Duration) -> u64 {
    let t0 = Instant::now();
    let mut x = 1u64;
    while t0.elapsed() < for_how_long {
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
    }
    x
}

fn main() {
    if std::env::var_os("GREENHOOK_STALL_MS").is_none() {
        // Set before any thread or hub exists, so nobody reads it concurrently.
        std::env::set_var("GREENHOOK_STALL_MS", "50");
    }
    greenhook::monkey::patch_all();
    let t0 = Instant::now();
    let ticker = greenhook::Builder::new()
        .name("ticker".into())
        .spawn(move || {
            let mut worst = Duration::ZERO;
            for _ in 0..15 {
                let due = Instant::now() + Duration::from_millis(100);
                std::thread::sleep(Duration::from_millis(100));
                worst = worst.max(Instant::now() - due);
                println!("tick at {:4} ms", t0.elapsed().as_millis());
            }
            worst
        })
        .unwrap();
    let cruncher = greenhook::Builder::new()
        .name("cruncher".into())
        .spawn(|| {
            std::thread::sleep(Duration::from_millis(250));
            crunch(Duration::from_secs(1))
        })
        .unwrap();
    cruncher.join().unwrap();
    let worst = ticker.join().unwrap();
    println!(
        "the latest tick was {} ms late: the cruncher held the only OS thread",
        worst.as_millis()
    );
}
