//! Run with: cargo run --release --example pingpong
//!
//! Two fibers play ping-pong over a non-blocking socketpair, waiting for
//! readiness with `greenhook::io::wait_readable` instead of blocking.
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

fn recv(s: &mut UnixStream) -> u32 {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match s.read(&mut buf[got..]) {
            Ok(0) => panic!("peer closed"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => greenhook::io::wait_readable(s.as_raw_fd(), None).unwrap(),
            Err(e) => panic!("{e}"),
        }
    }
    u32::from_le_bytes(buf)
}

fn main() {
    const ROUNDS: u32 = 100_000;
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let t0 = Instant::now();
    let pong = greenhook::spawn(move || {
        for i in 0..ROUNDS {
            assert_eq!(recv(&mut b), i);
            b.write_all(&(i + 1).to_le_bytes()).unwrap();
        }
    });
    let ping = greenhook::spawn(move || {
        for i in 0..ROUNDS {
            a.write_all(&i.to_le_bytes()).unwrap();
            assert_eq!(recv(&mut a), i + 1);
        }
    });
    ping.join().unwrap();
    pong.join().unwrap();
    let el = t0.elapsed();
    println!(
        "{ROUNDS} round trips in {:.1} ms: {:.2} µs per round trip",
        el.as_secs_f64() * 1e3,
        el.as_secs_f64() * 1e6 / ROUNDS as f64
    );
}
