//! wait_readable / wait_writable: ping-pong, timeouts, and closing an fd
//! while a fiber waits on it.
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn read_exact_nb(s: &mut UnixStream, buf: &mut [u8]) {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => panic!("eof"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => greenhook::io::wait_readable(s.as_raw_fd(), None).unwrap(),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn socketpair_ping_pong() {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    const N: u32 = 10_000;
    let pong = greenhook::spawn(move || {
        let mut buf = [0u8; 4];
        for i in 0..N {
            read_exact_nb(&mut b, &mut buf);
            assert_eq!(u32::from_le_bytes(buf), i);
            b.write_all(&(i + 1).to_le_bytes()).unwrap();
        }
    });
    let ping = greenhook::spawn(move || {
        let mut buf = [0u8; 4];
        for i in 0..N {
            a.write_all(&i.to_le_bytes()).unwrap();
            read_exact_nb(&mut a, &mut buf);
            assert_eq!(u32::from_le_bytes(buf), i + 1);
        }
    });
    ping.join().unwrap();
    pong.join().unwrap();
}

#[test]
fn wait_times_out_not_early() {
    let (a, _b) = UnixStream::pair().unwrap();
    let t0 = Instant::now();
    let e = greenhook::io::wait_readable(a.as_raw_fd(), Some(Duration::from_millis(30))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(t0.elapsed() >= Duration::from_millis(30));
}

/// Ready at once, so the wait ends at once: not when its timeout passes,
/// nor at some later turn of the hub's loop. (Normally well under 1 ms; the
/// bound leaves room for a loaded machine.)
#[test]
fn writable_is_immediate_on_an_empty_socket() {
    let (a, _b) = UnixStream::pair().unwrap();
    let t0 = Instant::now();
    greenhook::io::wait_writable(a.as_raw_fd(), Some(Duration::from_secs(30))).unwrap();
    let waited = t0.elapsed();
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
}

#[test]
fn forgetting_an_fd_wakes_its_waiters_with_ebadf() {
    let (a, _b) = UnixStream::pair().unwrap();
    let fd = a.as_raw_fd();
    let waiter = greenhook::spawn(move || greenhook::io::wait_readable(fd, None));
    greenhook::yield_now(); // let it block
    hub::forget_fd(fd);
    let r = waiter.join().unwrap();
    assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF));
    drop(a);
}

#[test]
fn regular_files_cannot_be_polled() {
    let f = std::fs::File::open("Cargo.toml").unwrap();
    let e = greenhook::io::wait_readable(f.as_raw_fd(), None).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
}

/// Regression (found by the core benchmark): closing a waited-on fd and
/// getting the same number back for a new socket must not leave a stale
/// registration that swallows the new socket's events.
#[test]
fn reused_fd_numbers_still_get_readiness() {
    for round in 0..3u8 {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let reader = greenhook::spawn(move || {
            let mut buf = [0u8; 1];
            read_exact_nb(&mut b, &mut buf);
            buf[0]
        });
        greenhook::yield_now(); // the reader registers b's fd and waits
        a.write_all(&[round]).unwrap();
        assert_eq!(reader.join().unwrap(), round);
        // Dropping closes both fds through the close hook; the next pair
        // reuses the numbers.
    }
}

/// close_range() closes fds without the close hook: it must drop the hub's
/// registrations too, or a reused fd number never reports readiness.
#[test]
fn close_range_drops_registrations() {
    for round in 0..3u8 {
        let mut sv = [0i32; 2];
        let ty = libc::SOCK_STREAM | libc::SOCK_NONBLOCK;
        // SAFETY: a valid out array of two ints.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, ty, 0, sv.as_mut_ptr()) };
        assert_eq!(r, 0);
        let (a, b) = (sv[0], sv[1]);
        let reader = greenhook::spawn(move || {
            let mut c = 0u8;
            loop {
                // SAFETY: reading one byte into a local.
                let n = unsafe { libc::read(b, (&raw mut c).cast(), 1) };
                if n == 1 {
                    return c;
                }
                greenhook::io::wait_readable(b, Some(std::time::Duration::from_secs(10))).unwrap();
            }
        });
        greenhook::yield_now(); // registers b and waits
                                // SAFETY: writing one byte from a local.
        assert_eq!(unsafe { libc::write(a, (&raw const round).cast(), 1) }, 1);
        assert_eq!(reader.join().unwrap(), round);
        // One fd per call: tests run in parallel threads, and a range
        // between the two numbers could hold another test's fds.
        for fd in [a, b] {
            let fd = fd as libc::c_uint;
            // SAFETY: closes exactly one fd this round created.
            let r = unsafe { libc::close_range(fd, fd, 0) };
            assert_eq!(r, 0);
        }
    }
}
