//! Run with: cargo run --release --example echo_server
//!
//! A `std::net` echo server written the plain blocking way, one fiber per
//! connection, made concurrent by `greenhook::monkey::patch_all()`: the
//! blocking `accept`, `read` and `write` of std become yields to the hub.
//! It serves 200 client fibers in the same process (all on one OS thread),
//! checks every byte, prints the totals and exits.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

const CLIENTS: usize = 200;
const ROUNDS: usize = 100;

fn serve(mut conn: TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

fn client(addr: std::net::SocketAddr, id: usize) -> usize {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut echoed = 0;
    for round in 0..ROUNDS {
        let msg = format!("client {id} round {round}\n");
        s.write_all(msg.as_bytes()).unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, msg.as_bytes());
        echoed += back.len();
    }
    echoed
}

fn main() {
    greenhook::monkey::patch_all();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The acceptor: one fiber per connection, exactly as with threads.
    let acceptor = greenhook::spawn(move || {
        for _ in 0..CLIENTS {
            let (conn, _) = listener.accept().unwrap();
            greenhook::spawn(move || serve(conn));
        }
    });
    let t0 = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| greenhook::spawn(move || client(addr, id)))
        .collect();
    let bytes: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    acceptor.join().unwrap();
    let el = t0.elapsed();
    println!(
        "{CLIENTS} connections × {ROUNDS} round trips, {bytes} bytes echoed and checked, in {:.0} ms on one OS thread \
         ({:.0} round trips/s)",
        el.as_secs_f64() * 1e3,
        (CLIENTS * ROUNDS) as f64 / el.as_secs_f64()
    );
}
