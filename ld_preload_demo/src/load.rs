//! The echo load client: many connections doing closed-loop request/response
//! round trips on one thread with epoll, in the demo's own (unpatched) process.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// What one load run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// Round trips completed inside the measurement window.
    pub requests: u64,
    /// Length of the measurement window.
    pub window: Duration,
    /// 99th percentile round-trip latency.
    pub p99: Duration,
    /// Connections that failed (reset, closed, wrong bytes) during the run.
    pub errors: u64,
}

impl LoadResult {
    /// Requests per second over the window.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.window.as_secs_f64()
    }
}

struct Conn {
    stream: TcpStream,
    sent_at: Instant,
    out_off: usize,
    got: usize,
    buf: Vec<u8>,
    alive: bool,
    busy: bool,
}

fn epoll_ctl(ep: libc::c_int, op: libc::c_int, fd: libc::c_int, events: u32, key: u64) {
    let mut ev = libc::epoll_event { events, u64: key };
    // SAFETY: `ev` is a valid epoll_event; ep and fd are open descriptors we own.
    unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) };
}

/// Opens `conns` connections to 127.0.0.1:`port` and runs round trips of
/// `msg` bytes on each for `duration` once every connection has had its first
/// echo (the warm-up, bounded by `warmup_limit`).
pub fn run(
    port: u16,
    conns: usize,
    msg: usize,
    duration: Duration,
    warmup_limit: Duration,
) -> Result<LoadResult, String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let payload: Vec<u8> = (0..msg).map(|i| b'a' + (i % 26) as u8).collect();
    let mut cs = Vec::with_capacity(conns);
    for i in 0..conns {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect #{i} failed: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream.set_nonblocking(true).map_err(|e| e.to_string())?;
        cs.push(Conn {
            stream,
            sent_at: Instant::now(),
            out_off: 0,
            got: 0,
            buf: vec![0; msg],
            alive: true,
            busy: false,
        });
    }
    // SAFETY: plain system call; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(format!("epoll_create1: {}", std::io::Error::last_os_error()));
    }
    let result = drive(ep, &mut cs, &payload, duration, warmup_limit);
    // SAFETY: closing the epoll fd we created; no one else uses it.
    unsafe { libc::close(ep) };
    result
}

/// Sends the rest of the current request; returns false if the connection failed.
fn send(ep: libc::c_int, c: &mut Conn, payload: &[u8], key: u64) -> bool {
    while c.out_off < payload.len() {
        let rest = &payload[c.out_off..];
        // SAFETY: `rest` is a valid readable slice; the fd is open.
        let w = unsafe { libc::write(c.stream.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
        if w < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                epoll_ctl(
                    ep,
                    libc::EPOLL_CTL_MOD,
                    c.stream.as_raw_fd(),
                    (libc::EPOLLIN | libc::EPOLLOUT) as u32,
                    key,
                );
                return true;
            }
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        c.out_off += w as usize;
    }
    true
}

fn drive(
    ep: libc::c_int,
    cs: &mut [Conn],
    payload: &[u8],
    duration: Duration,
    warmup_limit: Duration,
) -> Result<LoadResult, String> {
    let msg = payload.len();
    let total = cs.len();
    for (i, c) in cs.iter_mut().enumerate() {
        epoll_ctl(
            ep,
            libc::EPOLL_CTL_ADD,
            c.stream.as_raw_fd(),
            libc::EPOLLIN as u32,
            i as u64,
        );
    }
    let begin = Instant::now();
    let start_req = |c: &mut Conn, i: usize| -> bool {
        c.sent_at = Instant::now();
        c.out_off = 0;
        c.got = 0;
        c.busy = true;
        send(ep, c, payload, i as u64)
    };
    let mut errors = 0u64;
    for (i, c) in cs.iter_mut().enumerate() {
        if !start_req(c, i) {
            c.alive = false;
            errors += 1;
        }
    }
    let mut warmed = vec![false; cs.len()];
    let mut warm_count = 0usize;
    let mut window: Option<(Instant, Instant)> = None; // (start, end)
    let mut samples: Vec<u32> = Vec::with_capacity(1 << 20);
    let mut requests = 0u64;
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    loop {
        let now = Instant::now();
        match window {
            None if now - begin > warmup_limit => {
                return Err(format!(
                    "only {warm_count} of {} connections got their first echo within {} s",
                    cs.len(),
                    warmup_limit.as_secs()
                ));
            }
            // The window is over: stop issuing; wait (bounded) for the requests still in flight.
            Some((_, end))
                if now >= end && (!cs.iter().any(|c| c.alive && c.busy) || now - end > Duration::from_secs(2)) =>
            {
                break;
            }
            _ => {}
        }
        // SAFETY: `events` is a valid writable array of `events.len()` entries.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 5) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("epoll_wait: {e}"));
        }
        for ev in &events[..n as usize] {
            let i = ev.u64 as usize;
            let c = &mut cs[i];
            if !c.alive {
                continue;
            }
            let fd = c.stream.as_raw_fd();
            if ev.events & libc::EPOLLOUT as u32 != 0 && c.out_off < msg {
                if !send(ep, c, payload, i as u64) {
                    c.alive = false;
                    errors += 1;
                    continue;
                }
                if c.out_off == msg {
                    epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, libc::EPOLLIN as u32, i as u64);
                }
            }
            if ev.events & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 == 0 {
                continue;
            }
            let got = c.got;
            // SAFETY: the destination is the unfilled tail of `c.buf`.
            let r = unsafe { libc::read(fd, c.buf[got..].as_mut_ptr().cast(), msg - got) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) {
                    continue;
                }
            }
            if r <= 0 || !c.busy {
                c.alive = false; // error, EOF, or bytes nobody asked for
                errors += 1;
                epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, 0, 0);
                continue;
            }
            c.got += r as usize;
            if c.got < msg {
                continue;
            }
            c.busy = false;
            if c.buf != payload {
                c.alive = false;
                errors += 1;
                epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, 0, 0);
                continue;
            }
            let done = Instant::now();
            if !warmed[i] {
                warmed[i] = true;
                warm_count += 1;
                if warm_count == total && window.is_none() {
                    window = Some((done, done + duration));
                }
            }
            if let Some((start, end)) = window {
                if c.sent_at >= start && done <= end {
                    requests += 1;
                    samples.push((done - c.sent_at).as_micros().min(u32::MAX as u128) as u32);
                }
                if done >= end {
                    continue; // the window is over: no new request
                }
            }
            if !start_req(c, i) {
                c.alive = false;
                errors += 1;
            }
        }
        if window.is_none() && warm_count + errors as usize >= cs.len() && errors > 0 {
            return Err(format!("{errors} of {} connections failed during warm-up", cs.len()));
        }
    }
    samples.sort_unstable();
    let pct = |p: f64| -> Duration {
        if samples.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
        Duration::from_micros(samples[idx] as u64)
    };
    Ok(LoadResult {
        requests,
        window: duration,
        p99: pct(0.99),
        errors,
    })
}
