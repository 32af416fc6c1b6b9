//! redis-server (Debian's: linked with jemalloc) loaded by an unpatched
//! `redis-benchmark` (SET/GET, 50 clients, 100,000 requests each), then its
//! dataset checked: the benchmark's keys, 1,000 values written and read
//! back, a forked background save, and a clean `SHUTDOWN`.

use std::fmt::Write as _;
use std::io;
use std::thread;
use std::time::{Duration, Instant};

use super::{arg, log_of, Case, Ctx, Mode, Side};
use crate::apt::{find_command, Need};
use crate::proc::{self, Server};
use crate::resp::{Redis, Value};

/// Distinct benchmark keys (`-r`): few enough that 100,000 SETs surely hit
/// every one of them, so the count is deterministic.
const KEYSPACE: usize = 1000;
/// Values written and read back by the check itself.
const WRITTEN: usize = 1000;

const NEEDS: &[Need] = &[
    Need::command("redis-server", "redis-server"),
    Need::command("redis-tools", "redis-benchmark"),
];

pub const CASES: [Case; 2] = [
    Case {
        name: "redis",
        program: "redis-server 7.0 (jemalloc) + redis-benchmark SET/GET, 50 clients, 100k requests, dataset checked",
        quick: true,
        needs: NEEDS,
        run: |ctx, mode| run(ctx, mode, &[]),
    },
    // Redis's default starts jemalloc's background thread, a real OS thread
    // (jemalloc creates it with the pthread_create it finds after itself):
    // this row tells the rest of redis from that thread.
    Case {
        name: "redis-no-bg-thread",
        program: "redis-server with `--jemalloc-bg-thread no`, the same load and checks",
        quick: true,
        needs: NEEDS,
        run: |ctx, mode| run(ctx, mode, &["--jemalloc-bg-thread", "no"]),
    },
];

fn run(ctx: &Ctx, mode: Mode, extra: &[&str]) -> Side {
    let (Some(server_exe), Some(benchmark)) = (find_command("redis-server"), find_command("redis-benchmark")) else {
        return Side::broken("redis-server or redis-benchmark is not installed".into());
    };
    let (dir, port) = match (ctx.dir("redis", mode), proc::free_port()) {
        (Ok(dir), Ok(port)) => (dir, port),
        (Err(side), _) => return side,
        (_, Err(e)) => return Side::broken(format!("no free port: {e}")),
    };
    let port_arg = port.to_string();
    let mut cmd = ctx.command(mode, &[], &server_exe);
    cmd.args([
        "--port",
        &port_arg,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .args(["--daemonize", "no", "--dir"])
    .arg(arg(&dir))
    .args(extra);
    let server = match Server::start("redis-server", &mut cmd, &dir, port, Duration::from_secs(20)) {
        Ok(server) => server,
        Err(ran) => return Side::from_ran(&ran, String::new()),
    };

    let bench_dir = dir.join("benchmark");
    let bench = std::fs::create_dir_all(&bench_dir).and_then(|()| {
        let mut cmd = ctx.plain(&benchmark);
        cmd.args([
            "-h",
            "127.0.0.1",
            "-p",
            &port_arg,
            "-t",
            "set,get",
            "-c",
            "50",
            "-n",
            "100000",
        ])
        .args(["-r", &KEYSPACE.to_string(), "-d", "16", "--csv"]);
        proc::run(&mut cmd, &bench_dir, Duration::from_secs(180))
    });
    let bench = match bench {
        Ok(ran) => ran,
        Err(e) => return Side::broken(format!("redis-benchmark did not run: {e}")),
    };
    let tests: Vec<&str> = bench
        .stdout
        .lines()
        .filter_map(|l| l.split(',').next())
        .filter(|t| *t != "\"test\"")
        .collect();
    let bench_ok =
        bench.succeeded() && tests == ["\"SET\"", "\"GET\""] && !bench.stderr.to_lowercase().contains("error");
    let mut output = format!("redis-benchmark: {}, tests {}\n", bench.status, tests.join(" "));

    let checked = check_dataset(port, &mut output);
    // After a failed check the server may still be up: ask it to stop.
    let stop = if checked.is_ok() { None } else { Some(libc::SIGTERM) };
    let served = server.stop(stop, Duration::from_secs(20));
    let _ = writeln!(output, "redis-server: {}", served.status);
    let ok = bench_ok && checked.is_ok() && served.succeeded();
    let brief = if ok {
        "0 errors; 2,000 keys checked, BGSAVE ok, exit 0".to_string()
    } else if !served.succeeded() {
        format!("redis-server {}", served.brief())
    } else if let Err(e) = &checked {
        format!("dataset check: {e}")
    } else {
        format!("redis-benchmark {}", bench.brief())
    };
    Side {
        ok,
        brief,
        output,
        log: format!("redis-server: {}redis-benchmark: {}", log_of(&served), log_of(&bench)),
    }
}

/// A deterministic value for written key `i`: sizes from 1 byte to ~64 KiB.
fn value(i: usize) -> Vec<u8> {
    let size = 1 + (i * 7919) % 65_536;
    (0..size).map(|k| b'a' + ((i + k) % 26) as u8).collect()
}

fn bulk(s: impl Into<Vec<u8>>) -> Vec<u8> {
    s.into()
}

/// Checks the server's data after the benchmark; notes each fact in
/// `output`. Ends with `SHUTDOWN NOSAVE`.
fn check_dataset(port: u16, output: &mut String) -> io::Result<()> {
    let fail = |what: String| io::Error::other(what);
    let mut r = Redis::connect(port)?;

    // Every benchmark key holds the benchmark's one 16-byte value.
    const SCRIPT: &str = "local keys = redis.call('KEYS', 'key:*') \
        local first = redis.call('GET', keys[1]) local same = 0 \
        for _, k in ipairs(keys) do if redis.call('GET', k) == first then same = same + 1 end end \
        return {#keys, same, string.len(first)}";
    let facts = r.command(&[b"EVAL", SCRIPT.as_bytes(), b"0"])?;
    let expected = Value::Array(Some(vec![
        Value::Int(KEYSPACE as i64),
        Value::Int(KEYSPACE as i64),
        Value::Int(16),
    ]));
    let _ = writeln!(output, "benchmark keys [count, same value, length]: {facts:?}");
    if facts != expected {
        return Err(fail(format!("benchmark keys: {facts:?}, expected {expected:?}")));
    }

    // Written values read back equal, in pipelines of 100.
    for chunk in (0..WRITTEN).collect::<Vec<_>>().chunks(100) {
        let sets: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|&i| vec![bulk("SET"), bulk(format!("compat:{i}")), value(i)])
            .collect();
        if let Some(bad) = r
            .pipeline(&sets)?
            .into_iter()
            .find(|v| *v != Value::Simple("OK".into()))
        {
            return Err(fail(format!("SET answered {bad:?}")));
        }
        let mut mget = vec![bulk("MGET")];
        mget.extend(chunk.iter().map(|i| bulk(format!("compat:{i}"))));
        let want = Value::Array(Some(chunk.iter().map(|&i| Value::Bulk(Some(value(i)))).collect()));
        if r.pipeline(&[mget])?.remove(0) != want {
            return Err(fail(format!(
                "MGET of keys {}..: values differ from those written",
                chunk[0]
            )));
        }
    }
    let _ = writeln!(output, "{WRITTEN} written values read back equal");

    // A background save: redis forks, the child writes the RDB file.
    let started = Instant::now();
    let reply = r.command(&[b"BGSAVE"])?;
    loop {
        let Value::Bulk(Some(info)) = r.command(&[b"INFO", b"persistence"])? else {
            return Err(fail("INFO persistence: unexpected reply".into()));
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        if info.contains("rdb_bgsave_in_progress:0") {
            let status = info
                .lines()
                .find(|l| l.starts_with("rdb_last_bgsave_status:"))
                .unwrap_or("?");
            let _ = writeln!(output, "BGSAVE: {reply:?}, {}", status.trim());
            if !status.contains(":ok") {
                return Err(fail(format!("BGSAVE: {}", status.trim())));
            }
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err(fail("BGSAVE still in progress after 60 s".into()));
        }
        thread::sleep(Duration::from_millis(20));
    }

    let size = r.command(&[b"DBSIZE"])?;
    let _ = writeln!(output, "DBSIZE: {size:?}");
    if size != Value::Int((KEYSPACE + WRITTEN) as i64) {
        return Err(fail(format!("DBSIZE {size:?}, expected {}", KEYSPACE + WRITTEN)));
    }
    // SHUTDOWN answers by closing the connection.
    match r.command(&[b"SHUTDOWN", b"NOSAVE"]) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
        Err(e) => Err(e),
        Ok(reply) => Err(fail(format!("SHUTDOWN answered {reply:?}"))),
    }
}
