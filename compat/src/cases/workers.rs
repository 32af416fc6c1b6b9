//! Programs that split their work over a pool of threads: `xz -T4`,
//! `zstd -T4`, `pbzip2 -p4` and `plzip -n4` compressing in blocks and
//! `sort --parallel=4` sorting in memory, their pools fed through mutexes,
//! condition variables and queues (fibers under greenhook); `rg -j4`
//! (ripgrep: Rust's `std::sync` and crossbeam's channels, which wait
//! with the `futex` system call through libc's `syscall`); and
//! `sox --multi-threaded`, whose OpenMP team (GCC's libgomp) stays OS
//! threads. What each writes must be byte for byte what it writes on its
//! own (the compressors' output depends on the block size, not on which
//! thread finished first; ripgrep's per-file counts are compared sorted;
//! sox runs with its random numbers repeatable and no dither), and the
//! compressed files must decompress to the input.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::Duration;

use super::{arg, Case, Ctx, Mode, Side};
use crate::apt::{find_command, Need};
use crate::proc;

const TIMEOUT: Duration = Duration::from_secs(120);

/// The input: 8 MB of numbered text lines, the same in every run.
const INPUT_BYTES: usize = 8_000_000;

pub const CASES: [Case; 7] = [
    Case {
        name: "xz",
        program: "xz -T4 (a pool of 4 threads) compressing 8 MB in 1 MiB blocks, then decompressing",
        quick: true,
        needs: &[Need::command("xz-utils", "xz")],
        run: |ctx, mode| compressor(ctx, mode, &XZ),
    },
    Case {
        name: "zstd",
        program: "zstd -T4 compressing 8 MB in 1 MiB jobs, then decompressing",
        quick: true,
        needs: &[Need::command("zstd", "zstd")],
        run: |ctx, mode| compressor(ctx, mode, &ZSTD),
    },
    Case {
        name: "pbzip2",
        program: "pbzip2 -p4 (a producer, 4 workers, a writer; condvar queues) compressing 8 MB in 600 kB blocks, then decompressing",
        quick: true,
        needs: &[Need::command("pbzip2", "pbzip2")],
        run: |ctx, mode| compressor(ctx, mode, &PBZIP2),
    },
    Case {
        name: "plzip",
        program: "plzip -n4 (lzip's threaded compressor) compressing 8 MB in 1 MiB members, then decompressing",
        quick: true,
        needs: &[Need::command("plzip", "plzip")],
        run: |ctx, mode| compressor(ctx, mode, &PLZIP),
    },
    Case {
        name: "ripgrep",
        program: "rg -j4 (ripgrep: Rust std::sync and crossbeam channels, futex waits) counting matches in 64 files",
        quick: true,
        needs: &[Need::command("ripgrep", "rg")],
        run: ripgrep,
    },
    Case {
        name: "sox",
        program: "sox --multi-threaded (OpenMP, a team of 4): reverb, EQ, resampling of 8 channels × 20 s",
        quick: true,
        needs: &[Need::command("sox", "sox")],
        run: sox,
    },
    Case {
        name: "sort",
        program: "sort --parallel=4 -n of 8 MB (coreutils' threaded merge sort)",
        quick: true,
        needs: &[],
        run: sort,
    },
];

const PBZIP2: Compressor = Compressor {
    command: "pbzip2",
    compress: &["-p4", "-6", "-k", "-q"],
    suffix: ".bz2",
    decompress: &["-d", "-c", "-p4", "-q"],
};

const PLZIP: Compressor = Compressor {
    command: "plzip",
    compress: &["-n4", "-B", "1MiB", "-6", "-k", "-q"],
    suffix: ".lz",
    decompress: &["-d", "-c", "-n4", "-q"],
};

/// How to run one compressor.
struct Compressor {
    command: &'static str,
    /// Compresses `input` to `input` + `suffix`.
    compress: &'static [&'static str],
    suffix: &'static str,
    /// Decompresses the file named last to stdout.
    decompress: &'static [&'static str],
}

const XZ: Compressor = Compressor {
    command: "xz",
    compress: &["-T4", "--block-size=1MiB", "-6", "-k", "-q"],
    suffix: ".xz",
    decompress: &["-d", "-T4", "-c", "-q"],
};

const ZSTD: Compressor = Compressor {
    command: "zstd",
    compress: &["-T4", "-B1MiB", "-6", "-k", "-q"],
    suffix: ".zst",
    decompress: &["-d", "-c", "-q"],
};

fn compressor(ctx: &Ctx, mode: Mode, c: &Compressor) -> Side {
    let Some(exe) = find_command(c.command) else {
        return Side::broken(format!("{} is not installed", c.command));
    };
    let dir = match ctx.dir(c.command, mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let text = input_bytes();
    let input = match write_input(&dir, &text) {
        Ok(input) => input,
        Err(side) => return side,
    };
    let mut cmd = ctx.command(mode, &[], &exe);
    cmd.args(c.compress).arg(arg(&input));
    let compressed = match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) if ran.succeeded() => ran,
        Ok(ran) => return Side::from_ran(&ran, String::new()),
        Err(e) => return Side::broken(e.to_string()),
    };
    let packed = dir.join(format!("input{}", c.suffix));
    let Ok(bytes) = std::fs::read(&packed) else {
        return Side::broken(format!("{} wrote no {}", c.command, packed.display()));
    };
    // Decompressed to stdout, which is kept as text: the input is ASCII.
    let mut cmd = ctx.command(mode, &[], &exe);
    cmd.args(c.decompress).arg(arg(&packed));
    let back = match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => ran,
        Err(e) => return Side::broken(e.to_string()),
    };
    let round_trip = back.succeeded() && back.stdout.as_bytes() == text.as_slice();
    let seconds = compressed.elapsed.as_secs_f64();
    Side {
        ok: round_trip,
        brief: if round_trip {
            format!(
                "{:.1} MB → {:.2} MB, decompressed to the input; {seconds:.1} s",
                INPUT_BYTES as f64 / 1e6,
                bytes.len() as f64 / 1e6
            )
        } else {
            format!("decompressing: {}, not the input", back.brief())
        },
        output: format!(
            "compressed: {} bytes, hash {:016x}; round trip {}",
            bytes.len(),
            hash(&bytes),
            if round_trip { "ok" } else { "wrong" }
        ),
        log: format!("{}{}", super::log_of(&compressed), super::log_of(&back)),
    }
}

fn sort(ctx: &Ctx, mode: Mode) -> Side {
    let dir = match ctx.dir("sort", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let input = match write_input(&dir, &input_bytes()) {
        Ok(input) => input,
        Err(side) => return side,
    };
    // A buffer of 32 MB holds the whole input, which sort then sorts with
    // --parallel threads (with a small buffer it sorts runs in one thread).
    let mut cmd = ctx.command(mode, &[], "sort");
    cmd.args(["--parallel=4", "-S", "32M", "-n"]).arg(arg(&input));
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            let lines = ran.stdout.lines().count();
            let sorted = ran.stdout.lines().map(number).is_sorted();
            let brief = format!("exit 0; {lines} lines in order; {:.1} s", ran.elapsed.as_secs_f64());
            let mut side = Side::from_ran(&ran, brief);
            side.ok &= sorted;
            // The sorted text itself is compared, by its hash.
            side.output = format!(
                "{}\nlines {lines}, hash {:016x}",
                ran.status,
                hash(ran.stdout.as_bytes())
            );
            side
        }
        Err(e) => Side::broken(e.to_string()),
    }
}

/// Files ripgrep searches: the input cut into this many, at line ends.
const RG_FILES: usize = 64;

fn ripgrep(ctx: &Ctx, mode: Mode) -> Side {
    let Some(rg) = find_command("rg") else {
        return Side::broken("rg is not installed".into());
    };
    let dir = match ctx.dir("ripgrep", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    let tree = dir.join("tree");
    if let Err(e) = write_files(&tree, &input_bytes()) {
        return Side::broken(format!("cannot write the files: {e}"));
    }
    // Keys ending in 7 on lines whose number has a 3 in it: a regex that
    // matches on about one line in twenty-five. No --sort (it would search
    // in one thread); the per-file counts are sorted here instead.
    let mut cmd = ctx.command(mode, &[], &rg);
    cmd.args(["--no-config", "-j4", "--count-matches", "^[0-9]*7 line [0-9]*3", "tree"])
        .current_dir(&dir);
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            let mut counts: Vec<&str> = ran.stdout.lines().collect();
            counts.sort_unstable();
            let total: u64 = counts
                .iter()
                .filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok())
                .sum();
            let brief = format!(
                "exit 0; {total} matches in {} files; {:.2} s",
                counts.len(),
                ran.elapsed.as_secs_f64()
            );
            let mut side = Side::from_ran(&ran, brief);
            side.ok &= counts.len() == RG_FILES && total > 0;
            side.output = format!("{}\n{}", ran.status, counts.join("\n"));
            side
        }
        Err(e) => Side::broken(e.to_string()),
    }
}

/// Writes `text` to `RG_FILES` files in `dir`, cut at line ends.
fn write_files(dir: &Path, text: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut rest = text;
    for i in 0..RG_FILES {
        let want = text.len().div_ceil(RG_FILES).min(rest.len());
        let cut = if i + 1 == RG_FILES {
            rest.len()
        } else {
            rest[want..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |p| want + p + 1)
        };
        std::fs::write(dir.join(format!("part{i:02}.txt")), &rest[..cut])?;
        rest = &rest[cut..];
    }
    Ok(())
}

fn sox(ctx: &Ctx, mode: Mode) -> Side {
    let Some(sox) = find_command("sox") else {
        return Side::broken("sox is not installed".into());
    };
    let dir = match ctx.dir("sox", mode) {
        Ok(dir) => dir,
        Err(side) => return side,
    };
    // The input, made unpatched: 8 channels of tones and noise (-R: the
    // noise is the same in every run).
    let mut make = ctx.plain(&sox);
    make.args([
        "-R", "-n", "-r", "48000", "-c", "8", "-b", "16", "in.wav", "synth", "20",
    ])
    .args(["sine", "300-3300", "sine", "440", "pinknoise", "square", "220"])
    .args(["sine", "880", "brownnoise", "sine", "100", "sine", "1000", "gain", "-6"])
    .current_dir(&dir);
    match proc::run(&mut make, &dir, TIMEOUT) {
        Ok(ran) if ran.succeeded() => {}
        Ok(ran) => return Side::broken(format!("making the input: {}", ran.brief())),
        Err(e) => return Side::broken(e.to_string()),
    }
    // -R: repeatable random numbers; -D: no dither, which is random.
    let mut cmd = ctx.command(mode, &[], &sox);
    cmd.args(["-R", "-D", "-V1", "--multi-threaded", "in.wav", "out.wav"])
        .args([
            "reverb", "50", "50", "100", "bass", "+3", "treble", "-2", "rate", "44100", "gain", "-n", "-1",
        ])
        .env("OMP_NUM_THREADS", "4")
        .current_dir(&dir);
    match proc::run(&mut cmd, &dir, TIMEOUT) {
        Ok(ran) => {
            let out = std::fs::read(dir.join("out.wav")).unwrap_or_default();
            let brief = format!(
                "exit 0; {:.1} MB written; {:.1} s",
                out.len() as f64 / 1e6,
                ran.elapsed.as_secs_f64()
            );
            let mut side = Side::from_ran(&ran, brief);
            side.ok &= !out.is_empty();
            side.output = format!("{}\nout.wav: {} bytes, hash {:016x}", ran.status, out.len(), hash(&out));
            side
        }
        Err(e) => Side::broken(e.to_string()),
    }
}

/// The leading number of a line of the input.
fn number(line: &str) -> u64 {
    line.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(u64::MAX)
}

/// The input's bytes: lines "<key> line <i>", keys spread by a
/// multiplicative step so that sorting moves them.
fn input_bytes() -> Vec<u8> {
    let mut text = Vec::with_capacity(INPUT_BYTES + 32);
    let mut i: u64 = 1;
    while text.len() < INPUT_BYTES {
        text.extend_from_slice(format!("{} line {i}\n", i * 7919 % 1_000_003).as_bytes());
        i += 1;
    }
    text
}

/// Writes `text` to `dir/input`.
fn write_input(dir: &Path, text: &[u8]) -> Result<std::path::PathBuf, Side> {
    let path = dir.join("input");
    std::fs::write(&path, text)
        .map(|()| path)
        .map_err(|e| Side::broken(format!("cannot write the input: {e}")))
}

/// A hash of `bytes` to compare the two runs' outputs by (std's hasher has
/// fixed keys: the same bytes give the same value within one suite run).
fn hash(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}
