//! Integration tests of the `greenhook` launcher binary: `run` (arguments,
//! exit status, options mapped to environment variables, LD_PRELOAD
//! handling, errors), `help`, and `doctor` on C programs built here.
#[path = "../../tests/util/mod.rs"]
mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The environment variables the launcher documents (and this test controls).
const ENV_VARS: &[&str] = &[
    "GREENHOOK_LIB",
    "GREENHOOK_STACK_SIZE",
    "GREENHOOK_STALL_MS",
    "GREENHOOK_SLICE_MS",
    "GREENHOOK_PREEMPT",
    "GREENHOOK_STATS",
    "GREENHOOK_THREADS",
    "GREENHOOK_TLS",
    "GREENHOOK_POOL_SIZE",
    "LD_PRELOAD",
];

/// The library the launcher is pointed at: the one cargo built.
fn lib() -> PathBuf {
    util::preload_lib()
        .canonicalize()
        .expect("canonical libgreenhook.so path")
}

/// The launcher with a clean environment: none of [`ENV_VARS`] set except
/// `GREENHOOK_LIB` (the launcher's own directory has no library under `cargo test`).
fn greenhook() -> Command {
    let mut cmd = launcher_at(Path::new(env!("CARGO_BIN_EXE_greenhook")));
    cmd.env("GREENHOOK_LIB", lib());
    cmd
}

/// The launcher at `path`, with none of [`ENV_VARS`] set.
fn launcher_at(path: &Path) -> Command {
    let mut cmd = Command::new(path);
    for var in ENV_VARS {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null());
    cmd
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn describe(&self) -> String {
        format!(
            "status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    /// Lines `env NAME=value` printed by launcher_probe, as `NAME=value`,
    /// except `GREENHOOK_LIB` (set by [`greenhook`], passed on unchanged).
    fn env_lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("env "))
            .filter(|l| !l.starts_with("GREENHOOK_LIB="))
            .collect()
    }
}

fn output(mut cmd: Command) -> Ran {
    // A binary a test has just copied may still be open for writing in a
    // child another test thread forked meanwhile (until that child execs):
    // exec then fails with ETXTBSY for a moment. Try again.
    let mut tries = 0;
    let Output { status, stdout, stderr } = loop {
        match cmd.output() {
            Err(e) if e.raw_os_error() == Some(26 /* ETXTBSY */) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.expect("spawn the greenhook launcher"),
        }
    };
    Ran {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn launch(args: &[&str]) -> Ran {
    let mut cmd = greenhook();
    cmd.args(args);
    output(cmd)
}

fn probe() -> PathBuf {
    util::compile("launcher_probe")
}

fn probe_str() -> String {
    probe().to_str().expect("UTF-8 path").to_string()
}

#[test]
fn run_passes_arguments_and_exit_status() {
    let p = probe_str();
    let r = launch(&["run", "--", &p, "7", "a b", "", "-x", "--stats"]);
    assert_eq!(r.code, Some(7), "{}", r.describe());
    let expected = "arg[1]=7\narg[2]=a b\narg[3]=\narg[4]=-x\narg[5]=--stats\nargc=6\n";
    assert!(r.stdout.starts_with(expected), "{}", r.describe());
    assert!(
        r.stdout.contains("sigpipe=default\n"),
        "SIGPIPE must not stay ignored:\n{}",
        r.describe()
    );
    assert!(r.stdout.contains("slept=0\nread=0\n"), "{}", r.describe());
    let preload = format!("LD_PRELOAD={}", lib().display());
    assert_eq!(r.env_lines(), [preload.as_str()], "{}", r.describe());

    // Without `--`: options stop at the program, whose own arguments pass untouched.
    let r = launch(&["run", &p, "0", "--stats", "--no-threads"]);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    assert!(
        r.stdout
            .starts_with("arg[1]=0\narg[2]=--stats\narg[3]=--no-threads\nargc=4\n"),
        "{}",
        r.describe()
    );
    assert_eq!(r.env_lines(), [preload.as_str()], "{}", r.describe());
}

#[test]
fn run_looks_the_program_up_in_path() {
    let p = probe();
    let dir = p.parent().unwrap();
    let mut cmd = greenhook();
    cmd.args(["run", "launcher_probe", "5"]).env("PATH", dir);
    let r = output(cmd);
    assert_eq!(r.code, Some(5), "{}", r.describe());
    assert!(r.stdout.starts_with("arg[1]=5\n"), "{}", r.describe());
}

#[test]
fn options_map_to_environment_variables() {
    let p = probe_str();
    let r = launch(&[
        "run",
        "--stack-size",
        "64K",
        "--stall-ms=250",
        "--stats",
        "--no-threads",
        "--pool-size",
        "3",
        "--native-threads-from",
        "libtbb.so:libopenblas",
        "--",
        &p,
    ]);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    let mut env = r.env_lines();
    env.sort_unstable();
    let preload = format!("LD_PRELOAD={}", lib().display());
    let mut expected = vec![
        "GREENHOOK_NATIVE_THREADS_FROM=libtbb.so:libopenblas",
        "GREENHOOK_POOL_SIZE=3",
        "GREENHOOK_STACK_SIZE=64K",
        "GREENHOOK_STALL_MS=250",
        "GREENHOOK_STATS=1",
        "GREENHOOK_THREADS=native",
        preload.as_str(),
    ];
    expected.sort_unstable();
    assert_eq!(env, expected, "{}", r.describe());

    for size in ["4096", "1M", "2g", "256k"] {
        let r = launch(&["run", "--stack-size", size, &p]);
        assert_eq!(r.code, Some(0), "--stack-size {size}: {}", r.describe());
        assert!(
            r.env_lines().contains(&format!("GREENHOOK_STACK_SIZE={size}").as_str()),
            "{}",
            r.describe()
        );
    }
}

#[test]
fn invalid_option_values_are_usage_errors() {
    let p = probe_str();
    for args in [
        &["--stack-size", "12Q"][..],
        &["--stack-size", "0"],
        &["--stack-size", ""],
        &["--stack-size=99999999999999999999G"],
        &["--pool-size", "0"],
        &["--pool-size", "many"],
        &["--stall-ms", "-1"],
        &["--native-threads-from", ":"],
        &["--stats=1"],
        &["--lib="],
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.push(&p);
        let r = launch(&all);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.describe());
        assert!(
            r.stdout.is_empty(),
            "{args:?}: the program must not run: {}",
            r.describe()
        );
        assert!(r.stderr.contains("usage: greenhook run"), "{args:?}: {}", r.describe());
    }
    // An option without its value at the end of the line.
    let r = launch(&["run", "--pool-size"]);
    assert_eq!(r.code, Some(2), "{}", r.describe());
    assert!(r.stderr.contains("'--pool-size' needs a value"), "{}", r.describe());
}

#[test]
fn an_existing_ld_preload_is_kept_after_ours() {
    let p = probe_str();
    let mut cmd = greenhook();
    cmd.args(["run", &p]).env("LD_PRELOAD", "libm.so.6");
    let r = output(cmd);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    let expected = format!("LD_PRELOAD={}:libm.so.6", lib().display());
    assert_eq!(r.env_lines(), [expected.as_str()], "{}", r.describe());
}

#[test]
fn variables_already_set_pass_through_and_options_override_them() {
    let p = probe_str();
    let mut cmd = greenhook();
    cmd.args(["run", "--pool-size", "2", &p])
        .env("GREENHOOK_STACK_SIZE", "128K")
        .env("GREENHOOK_POOL_SIZE", "9");
    let r = output(cmd);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    let env = r.env_lines();
    assert!(env.contains(&"GREENHOOK_STACK_SIZE=128K"), "{}", r.describe());
    assert!(env.contains(&"GREENHOOK_POOL_SIZE=2"), "{}", r.describe());
    assert!(!env.contains(&"GREENHOOK_POOL_SIZE=9"), "{}", r.describe());
}

#[test]
fn the_library_is_chosen_by_lib_option_then_environment() {
    let p = probe_str();
    // --lib wins over GREENHOOK_LIB.
    let mut cmd = greenhook();
    cmd.args(["run", "--lib", lib().to_str().unwrap(), &p])
        .env("GREENHOOK_LIB", "/nonexistent/libgreenhook.so");
    let r = output(cmd);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    assert_eq!(r.env_lines(), [format!("LD_PRELOAD={}", lib().display()).as_str()]);

    // A library that is not there: the launcher's own failure, 125.
    let r = launch(&["run", "--lib", "/nonexistent/libgreenhook.so", &p]);
    assert_eq!(r.code, Some(125), "{}", r.describe());
    assert!(r.stderr.contains("/nonexistent/libgreenhook.so"), "{}", r.describe());
    let mut cmd = greenhook();
    cmd.args(["run", &p])
        .env("GREENHOOK_LIB", "/nonexistent/libgreenhook.so");
    let r = output(cmd);
    assert_eq!(r.code, Some(125), "{}", r.describe());
    assert!(r.stderr.contains("GREENHOOK_LIB"), "{}", r.describe());
}

/// Without `--lib` or `GREENHOOK_LIB`, the launcher finds the library from
/// its own location: beside it (a cargo build: `target/release/`) or in
/// `../lib/` (installed: `PREFIX/bin/greenhook`, `PREFIX/lib/libgreenhook.so`).
/// The program really runs under it: its threads become fibers.
#[test]
fn the_library_is_found_from_the_launchers_own_location() {
    let probe = probe_str();
    let sleepers = util::compile("sleep_threads");
    let sleepers = sleepers.to_str().unwrap();
    let root = util::target_dir()
        .join("tmp")
        .join(format!("launcher-layout.{}", std::process::id()));
    for (bin_dir, lib_dir) in [("release", "release"), ("bin", "lib")] {
        let _ = std::fs::remove_dir_all(&root);
        let (bin_dir, lib_dir) = (root.join(bin_dir), root.join(lib_dir));
        std::fs::create_dir_all(&bin_dir).unwrap();
        std::fs::create_dir_all(&lib_dir).unwrap();
        let launcher = bin_dir.join("greenhook");
        std::fs::copy(env!("CARGO_BIN_EXE_greenhook"), &launcher).unwrap();
        let run = |args: &[&str]| {
            let mut cmd = launcher_at(&launcher);
            cmd.arg("run").args(args);
            output(cmd)
        };

        let r = run(&[&probe]);
        assert_eq!(r.code, Some(125), "no library anywhere: {}", r.describe());
        assert!(r.stderr.contains("libgreenhook.so not found"), "{}", r.describe());

        let installed = lib_dir.join("libgreenhook.so");
        std::fs::copy(lib(), &installed).unwrap();
        let r = run(&[&probe]);
        assert_eq!(r.code, Some(0), "{}", r.describe());
        let preload = format!("LD_PRELOAD={}", installed.canonicalize().unwrap().display());
        assert_eq!(r.env_lines(), [preload.as_str()], "{}", r.describe());
        let r = run(&["--stats", sleepers, "10", "usleep", "10"]);
        assert_eq!(r.code, Some(0), "{}", r.describe());
        assert!(
            r.stderr.contains("spawned 10"),
            "not run under the library: {}",
            r.describe()
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn unknown_options_and_a_missing_program_are_usage_errors() {
    for args in [
        &["run", "--bogus", "true"][..],
        &["run", "-x", "true"],
        &["run"],
        &["run", "--"],
        &["run", "--stats"],
        &[],
        &["--bogus"],
        &["frobnicate"],
    ] {
        let r = launch(args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.describe());
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            2,
            "{args:?}: an error line and a usage line: {}",
            r.describe()
        );
        assert!(lines[0].starts_with("greenhook: "), "{args:?}: {}", r.describe());
        assert!(
            lines[1].starts_with("usage: greenhook run"),
            "{args:?}: {}",
            r.describe()
        );
    }
    let r = launch(&["run", "--bogus", "true"]);
    assert!(r.stderr.contains("unknown option '--bogus'"), "{}", r.describe());
    let r = launch(&["run", "--stats"]);
    assert!(r.stderr.contains("no program to run"), "{}", r.describe());
}

#[test]
fn programs_that_cannot_be_executed_exit_like_a_shell() {
    let r = launch(&["run", "/nonexistent/program", "x"]);
    assert_eq!(r.code, Some(127), "{}", r.describe());
    assert!(
        r.stderr.starts_with("greenhook: cannot run '/nonexistent/program': "),
        "{}",
        r.describe()
    );
    let mut cmd = greenhook();
    cmd.args(["run", "no-such-program-greenhook-test"])
        .env("PATH", "/nonexistent");
    let r = output(cmd);
    assert_eq!(r.code, Some(127), "{}", r.describe());

    // A file without execute permission (this test's own C source).
    let source = util::c_source_dir().join("launcher_probe.c");
    let r = launch(&["run", source.to_str().unwrap()]);
    assert_eq!(r.code, Some(126), "{}", r.describe());
    assert!(r.stderr.contains("cannot run '"), "{}", r.describe());
    assert!(r.stderr.contains("os error"), "{}", r.describe());
}

#[test]
fn help_documents_every_subcommand_option_and_variable() {
    let r = launch(&["--help"]);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    assert!(r.stderr.is_empty(), "{}", r.describe());
    for word in ENV_VARS.iter().chain(&[
        "greenhook run",
        "greenhook doctor",
        "greenhook help",
        "--lib PATH",
        "--stack-size SIZE",
        "--stall-ms N",
        "--slice-ms N",
        "--no-preempt",
        "--stats",
        "--no-threads",
        "--shared-tls",
        "--pool-size N",
    ]) {
        assert!(r.stdout.contains(word), "--help does not mention {word}:\n{}", r.stdout);
    }
    // Every GREENHOOK_* variable that the library crates read is documented.
    let root = util::workspace_dir();
    for dir in ["fiber/src", "hub/src", "interpose/src"] {
        for var in greenhook_vars_in(&root.join(dir)) {
            assert!(r.stdout.contains(&var), "--help does not mention {var} (read in {dir})");
        }
    }
    for alias in ["help", "-h"] {
        let same = launch(&[alias]);
        assert_eq!(same.code, Some(0));
        assert_eq!(same.stdout, r.stdout, "`greenhook {alias}` differs from --help");
    }
}

/// `GREENHOOK_*` names in the Rust sources under `dir`.
fn greenhook_vars_in(dir: &Path) -> Vec<String> {
    let mut vars = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vars;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            vars.extend(greenhook_vars_in(&path));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("GREENHOOK_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            let name = name.trim_end_matches('_').to_string();
            if !name.starts_with("GREENHOOK_TEST") && name != "GREENHOOK" && !vars.contains(&name) {
                vars.push(name);
            }
        }
    }
    vars
}

#[test]
fn doctor_lists_sleep_and_read_as_covered() {
    let p = probe_str();
    let r = launch(&["doctor", &p]);
    assert_eq!(r.code, Some(0), "{}", r.describe());
    let covered = r
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("covered ("))
        .unwrap_or_else(|| panic!("no covered line:\n{}", r.stdout));
    let names: Vec<&str> = covered
        .split_once(": ")
        .map(|(_, n)| n)
        .unwrap_or("")
        .split(' ')
        .collect();
    assert!(names.contains(&"read") && names.contains(&"sleep"), "{}", r.describe());
    assert!(r.stdout.contains("dynamically linked"), "{}", r.describe());
    assert!(r.stdout.contains("libc.so.6"), "DT_NEEDED is listed: {}", r.describe());
    assert!(
        r.stdout.contains("NOT covered, may block the hub (0)"),
        "{}",
        r.describe()
    );
}

#[test]
fn doctor_reads_the_hooks_from_the_library_it_is_given() {
    // libm exports none of read/sleep: with it as "the hooks", both are uncovered.
    let libm = [
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file());
    let Some(libm) = libm else {
        eprintln!("note: no libm.so.6 at a known path; skipping");
        return;
    };
    let p = probe_str();
    let r = launch(&["doctor", "--lib", libm, &p]);
    assert_eq!(r.code, Some(1), "{}", r.describe());
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("NOT covered, may block the hub"))
        .unwrap_or_else(|| panic!("{}", r.describe()));
    assert!(line.contains(" read") && line.contains(" sleep"), "{}", r.describe());
}

#[test]
fn doctor_refuses_a_static_program() {
    let src = util::c_source_dir().join("launcher_probe.c");
    let out_dir = util::target_dir().join("ctests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let bin = out_dir.join(format!("launcher_probe_static.{}", std::process::id()));
    let (cc, built) = run_cc(|cmd| {
        cmd.args(["-static", "-O1"]).arg(&src).arg("-o").arg(&bin);
    });
    match built {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "note: `{cc} -static` failed (no static libc here?); skipping:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
            return;
        }
        Err(e) => {
            eprintln!("note: cannot run `{cc}`: {e}; skipping");
            return;
        }
    }
    let r = launch(&["doctor", bin.to_str().unwrap()]);
    let _ = std::fs::remove_file(&bin);
    assert_eq!(r.code, Some(2), "{}", r.describe());
    assert!(r.stdout.contains("statically linked"), "{}", r.describe());
    assert!(r.stdout.contains("cannot be interposed"), "{}", r.describe());
}

#[test]
fn doctor_errors_exit_3() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let r = launch(&["doctor", manifest.to_str().unwrap()]);
    assert_eq!(r.code, Some(3), "{}", r.describe());
    assert!(r.stderr.contains("not an ELF file"), "{}", r.describe());

    for args in [
        &["doctor"][..],
        &["doctor", "/nonexistent/program"],
        &["doctor", "--bogus", "x"],
        &["doctor", "a", "b"],
    ] {
        let r = launch(args);
        assert_eq!(r.code, Some(3), "{args:?}: {}", r.describe());
        assert!(r.stderr.starts_with("greenhook doctor: "), "{args:?}: {}", r.describe());
    }

    // A truncated ELF file: an error, not a panic.
    let elf = std::fs::read(probe()).unwrap();
    let cut = util::target_dir()
        .join("ctests")
        .join(format!("truncated_elf.{}", std::process::id()));
    std::fs::write(&cut, &elf[..200.min(elf.len())]).unwrap();
    let r = launch(&["doctor", cut.to_str().unwrap()]);
    let _ = std::fs::remove_file(&cut);
    assert_eq!(r.code, Some(3), "{}", r.describe());
    assert!(!r.stderr.contains("panicked"), "{}", r.describe());
}

/// Runs the C compiler (`CC`, which may hold arguments, else `cc`) with the
/// arguments `add` gives it; returns its name and what it did.
fn run_cc(add: impl FnOnce(&mut Command)) -> (String, std::io::Result<Output>) {
    let cc = std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    let mut words = cc.split_whitespace();
    let mut cmd = Command::new(words.next().unwrap_or("cc"));
    cmd.args(words).stdin(Stdio::null());
    add(&mut cmd);
    let built = cmd.output();
    (cc, built)
}

/// Compiles the C `source` with `args` (after the source file) into
/// `<target>/ctests/<name>.<pid>`, or returns None (and says why) when the C
/// compiler cannot.
fn build_c(name: &str, source: &str, args: &[&str]) -> Option<PathBuf> {
    let dir = util::target_dir().join("ctests");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{name}.{}.c", std::process::id()));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(format!("{name}.{}", std::process::id()));
    let (cc, built) = run_cc(|cmd| {
        cmd.arg(&src).args(args).arg("-o").arg(&out);
    });
    let _ = std::fs::remove_file(&src);
    match built {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!("`{cc}` failed on {name}:\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("note: cannot run `{cc}`: {e}; skipping");
            None
        }
    }
}

#[test]
fn doctor_names_an_allocator_and_io_uring_linked_by_dt_needed() {
    // Stand-ins with the real sonames: doctor reads DT_NEEDED, it never loads them.
    let mut libs = Vec::new();
    for soname in ["libjemalloc.so.2", "liburing.so.2"] {
        let stem = soname.split('.').next().unwrap();
        let flag = format!("-Wl,-soname,{soname}");
        let Some(lib) = build_c(stem, "int stand_in(void) { return 0; }\n", &["-shared", "-fPIC", &flag]) else {
            return;
        };
        libs.push(lib);
    }
    let mut args = vec!["-Wl,--no-as-needed".to_string()];
    args.extend(libs.iter().map(|l| l.to_str().unwrap().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(prog) = build_c("uses_jemalloc_and_uring", "int main(void) { return 0; }\n", &args) else {
        return;
    };
    let r = launch(&["doctor", prog.to_str().unwrap()]);
    for f in libs.iter().chain([&prog]) {
        let _ = std::fs::remove_file(f);
    }
    assert_eq!(r.code, Some(0), "{}", r.describe());
    assert!(
        r.stdout
            .contains("\n  allocator: jemalloc (DT_NEEDED libjemalloc.so.2): its locks are pthread mutexes"),
        "{}",
        r.describe()
    );
    assert!(
        r.stdout
            .contains("\n  io_uring: liburing (DT_NEEDED liburing.so.2): liburing enters the kernel"),
        "{}",
        r.describe()
    );
    assert!(!r.stdout.contains("glibc's malloc"), "{}", r.describe());
}

#[test]
fn doctor_finds_a_statically_linked_allocator_by_its_symbols() {
    let source = "#include <stdlib.h>\n\
                  void *mi_malloc(size_t n) { return malloc(n); }\n\
                  int __io_uring_get_cqe(void) { return 0; }\n\
                  int main(void) { free(mi_malloc(8)); return __io_uring_get_cqe(); }\n";
    let Some(prog) = build_c("static_mimalloc", source, &["-O1"]) else {
        return;
    };
    let r = launch(&["doctor", prog.to_str().unwrap()]);
    let _ = std::fs::remove_file(&prog);
    assert!(
        r.stdout
            .contains("\n  allocator: mimalloc (linked in statically: defines mi_malloc): its heaps"),
        "{}",
        r.describe()
    );
    assert!(
        r.stdout
            .contains("\n  io_uring: liburing (linked in statically: defines __io_uring_get_cqe)"),
        "{}",
        r.describe()
    );

    // Neither: glibc's malloc, and no io_uring line.
    let r = launch(&["doctor", &probe_str()]);
    assert!(r.stdout.contains("\n  allocator: glibc's malloc"), "{}", r.describe());
    assert!(!r.stdout.contains("io_uring:"), "{}", r.describe());
}
