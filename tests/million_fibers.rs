//! 1,000,000 fibers alive at once, with default sysctls
//! (vm.max_map_count = 65530 allows only ~32k separately mapped stacks).
//! They share their thread's TLS (the density setting: one page each
//! instead of two); `cargo bench --bench core` measures a million with TLS
//! of their own too.
use std::time::Duration;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn one_million_fibers_spawned_and_joined() {
    const N: usize = 1_000_000;
    let before = rss_kib();
    let maps_before = map_count();
    let hs: Vec<_> = (0..N)
        .map(|_| {
            greenhook::Builder::new()
                .shared_tls(true)
                .spawn(|| greenhook::sleep(Duration::from_millis(200)))
                .unwrap()
        })
        .collect();
    // Let every fiber start and park in its sleep.
    greenhook::yield_now();
    let st = greenhook::stats();
    let during = rss_kib();
    let maps = map_count();
    let per = (during.saturating_sub(before)) as f64 * 1024.0 / N as f64;
    eprintln!(
        "1,000,000 live fibers: peak live {}, RSS +{} MiB ({per:.0} B per idle fiber, incl. the JoinHandle vector), \
         mappings {maps_before} -> {maps}, guard mode: {}",
        st.peak_live,
        (during - before) / 1024,
        fiber::stack::guard_mode()
    );
    assert_eq!(st.live as usize, N);
    assert!(maps < 60_000, "the mapping count grew with the fibers: {maps}");
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(greenhook::stats().live, 0);
    // Generous bound; the benchmark reports the precise figure.
    assert!(per < 8192.0, "{per} bytes per idle fiber");
}
