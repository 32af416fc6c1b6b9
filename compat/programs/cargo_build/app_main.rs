//! The program compat's `cargo` case builds and tests: a derive from the
//! workspace's proc macro, generic code for rustc's codegen units, and
//! std threads, channels and a mutex at run time.
use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};

use derive::Fields;

#[derive(Fields, Default)]
pub struct Config {
    pub name: String,
    threads: usize,
    pub table: BTreeMap<String, Vec<u32>>,
}

/// Primes below `n`, by a sieve.
fn primes(n: usize) -> usize {
    let mut composite = vec![false; n];
    let mut count = 0;
    for i in 2..n {
        if !composite[i] {
            count += 1;
            let mut j = i * i;
            while j < n {
                composite[j] = true;
                j += i;
            }
        }
    }
    count
}

/// A fold instantiated for several types (work for the code generator).
fn checksum<T: Copy + Into<u64>>(items: &[T]) -> u64 {
    items
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x.into()).wrapping_mul(0x0100_0000_01b3))
}

/// Four threads count primes and send their counts; a mutex sums them.
fn count_in_threads() -> (Vec<usize>, usize) {
    let (tx, rx) = mpsc::channel();
    let total = Arc::new(Mutex::new(0));
    let handles: Vec<_> = (1..=4)
        .map(|i| {
            let (tx, total) = (tx.clone(), Arc::clone(&total));
            std::thread::spawn(move || {
                let n = primes(100_000 * i);
                *total.lock().unwrap() += n;
                tx.send((i, n)).unwrap();
            })
        })
        .collect();
    drop(tx);
    let mut counts: Vec<(usize, usize)> = rx.iter().collect();
    for h in handles {
        h.join().unwrap();
    }
    counts.sort();
    let total = *total.lock().unwrap();
    (counts.into_iter().map(|(_, n)| n).collect(), total)
}

fn main() {
    // SAFETY: getpid has no preconditions.
    assert!(unsafe { libc::getpid() } > 0);
    let c = Config::default();
    println!("fields: {:?} ({} threads, {} entries)", Config::fields(), c.threads, c.table.len());
    let (counts, total) = count_in_threads();
    println!("primes: {counts:?}, total {total}");
    let bytes: Vec<u8> = (0..=255).collect();
    let words: Vec<u16> = (0..1000).collect();
    let longs: Vec<u32> = (0..1000).map(|x| x * 7).collect();
    println!("checksums: {:x} {:x} {:x}", checksum(&bytes), checksum(&words), checksum(&longs));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derive_names_the_fields() {
        assert_eq!(Config::fields(), ["name", "threads", "table"]);
    }

    #[test]
    fn primes_below_100() {
        assert_eq!(primes(100), 25);
    }

    #[test]
    fn threads_agree() {
        let (counts, total) = count_in_threads();
        assert_eq!(counts.iter().sum::<usize>(), total);
        assert_eq!(counts[0], 9592);
    }

    #[test]
    fn sleeps_and_wakes() {
        let start = std::time::Instant::now();
        let h = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(50)));
        h.join().unwrap();
        assert!(start.elapsed() >= std::time::Duration::from_millis(50));
    }

    #[test]
    #[should_panic(expected = "on purpose")]
    fn a_panic_is_caught() {
        panic!("on purpose");
    }
}
