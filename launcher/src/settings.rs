//! The one list of the launcher's options and the environment variables they
//! set, and the help text generated from it.

/// What values an option accepts (validated before the program is run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// A byte count with an optional `K`/`M`/`G` suffix (powers of 1024), not zero.
    Size,
    /// A whole number, zero allowed.
    Count,
    /// A whole number, at least one.
    Positive,
    /// A path to an existing file.
    Path,
    /// A colon-separated list of library file names, or beginnings of them.
    Names,
    /// No argument: the option sets the variable to this fixed value.
    Fixed(&'static str),
}

/// One setting: an environment variable and the `run` option that sets it.
#[derive(Debug)]
pub struct Setting {
    /// The environment variable.
    pub var: &'static str,
    /// The `run` option (`--stack-size`), if there is one.
    pub option: Option<&'static str>,
    /// The option's argument name in the help (`SIZE`), empty for flags.
    pub arg: &'static str,
    /// What values are accepted.
    pub value: Value,
    /// What it does (one line).
    pub meaning: &'static str,
    /// What applies when it is not set.
    pub default: &'static str,
}

/// `GREENHOOK_LIB`: read by the launcher itself, not by the library.
pub const LIB_VAR: &str = "GREENHOOK_LIB";

/// Every environment variable greenhook reads, with the `run` option that
/// sets it. The help, the option parser and the tests all go through this.
pub const SETTINGS: &[Setting] = &[
    Setting {
        var: LIB_VAR,
        option: Some("--lib"),
        arg: "PATH",
        value: Value::Path,
        meaning: "libgreenhook.so to preload / check (launcher only)",
        default: "see below",
    },
    Setting {
        var: "GREENHOOK_STACK_SIZE",
        option: Some("--stack-size"),
        arg: "SIZE",
        value: Value::Size,
        meaning: "fiber stack size: bytes, or with K/M/G (64K, 1M)",
        default: "256K",
    },
    Setting {
        var: "GREENHOOK_STALL_MS",
        option: Some("--stall-ms"),
        arg: "N",
        value: Value::Count,
        meaning: "report a fiber running N ms without yielding",
        default: "no report",
    },
    Setting {
        var: "GREENHOOK_SLICE_MS",
        option: Some("--slice-ms"),
        arg: "N",
        value: Value::Count,
        meaning:
            "a thread that never waits yields after N ms at a hook's return, or about N ms of CPU by signal, at once in a spin wait (0: never)",
        default: "10",
    },
    Setting {
        var: "GREENHOOK_PREEMPT",
        option: Some("--no-preempt"),
        arg: "",
        value: Value::Fixed("0"),
        meaning: "0: a thread computing without calls is not preempted by a signal (x86-64)",
        default: "on",
    },
    Setting {
        var: "GREENHOOK_STATS",
        option: Some("--stats"),
        arg: "",
        value: Value::Fixed("1"),
        meaning: "1: print the hub's statistics on stderr at exit",
        default: "off",
    },
    Setting {
        var: "GREENHOOK_THREADS",
        option: Some("--no-threads"),
        arg: "",
        value: Value::Fixed("native"),
        meaning: "native: pthreads stay OS threads (calls still yield)",
        default: "fibers",
    },
    Setting {
        var: "GREENHOOK_NATIVE_THREADS_FROM",
        option: Some("--native-threads-from"),
        arg: "LIBS",
        value: Value::Names,
        meaning: "threads these libraries start stay OS threads (libtbb.so:libopenblas); libgomp's always do",
        default: "libgomp.so",
    },
    Setting {
        var: "GREENHOOK_TLS",
        option: Some("--shared-tls"),
        arg: "",
        value: Value::Fixed("shared"),
        meaning: "shared: fibers share their thread's TLS (denser, no per-fiber __thread)",
        default: "fiber",
    },
    Setting {
        var: "GREENHOOK_SOCKETS",
        option: Some("--nonblocking-sockets"),
        arg: "",
        value: Value::Fixed("nonblocking"),
        meaning:
            "nonblocking: data sockets are non-blocking underneath, as pipes (the way of kernels without RWF_NOWAIT)",
        default: "per-call no-wait tries",
    },
    Setting {
        var: "GREENHOOK_POOL_SIZE",
        option: Some("--pool-size"),
        arg: "N",
        value: Value::Positive,
        meaning: "offload pool threads for disk reads and syncs at once (waits for locks, IPC, DNS, input get one each)",
        default: "4",
    },
    Setting {
        var: "LD_PRELOAD",
        option: None,
        arg: "",
        value: Value::Path,
        meaning: "ours first, entries already there kept after it",
        default: "",
    },
];

/// The setting whose option is `option`.
pub fn by_option(option: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.option == Some(option))
}

/// Parses a size: bytes with an optional `K`/`M`/`G` suffix (powers of 1024).
///
/// The same grammar as the library's (`fiber::stack::parse_size`), which
/// this calls, plus: zero is refused.
pub fn parse_size(s: &str) -> Option<usize> {
    fiber::stack::parse_size(s).filter(|&n| n > 0)
}

/// Checks `raw` against `value`; returns the text to put in the environment,
/// or why it is not acceptable.
pub fn validate(value: Value, raw: &str) -> Result<String, String> {
    match value {
        Value::Size => parse_size(raw).map(|_| raw.trim().to_string()).ok_or_else(|| {
            "expected a non-zero size in bytes, optionally with a K, M or G suffix (e.g. 64K)".to_string()
        }),
        Value::Count => raw
            .trim()
            .parse::<u64>()
            .map(|n| n.to_string())
            .map_err(|_| "expected a whole number of milliseconds".to_string()),
        Value::Positive => match raw.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n.to_string()),
            _ => Err("expected a whole number, at least 1".to_string()),
        },
        Value::Path => {
            if raw.is_empty() {
                Err("expected a path".to_string())
            } else {
                Ok(raw.to_string())
            }
        }
        Value::Names => {
            if raw.split(':').any(|n| !n.is_empty()) {
                Ok(raw.to_string())
            } else {
                Err("expected library file names separated by ':' (e.g. libtbb.so:libopenblas)".to_string())
            }
        }
        Value::Fixed(v) => Ok(v.to_string()),
    }
}

/// Pads each column of `rows` to its widest cell (the last column is not padded).
fn table(rows: &[[String; 4]]) -> String {
    let mut widths = [0usize; 4];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The full help (`greenhook help`).
pub fn help_text() -> String {
    let mut rows = vec![[
        "OPTION".to_string(),
        "ENVIRONMENT VARIABLE".to_string(),
        "DEFAULT".to_string(),
        "MEANING".to_string(),
    ]];
    for s in SETTINGS {
        let option = match s.option {
            Some(o) if s.arg.is_empty() => o.to_string(),
            Some(o) => format!("{o} {}", s.arg),
            None => "-".to_string(),
        };
        let default = if s.default.is_empty() { "-" } else { s.default };
        rows.push([option, s.var.to_string(), default.to_string(), s.meaning.to_string()]);
    }
    format!(
        "greenhook {version}: run an unmodified, dynamically linked program with its pthreads as fibers on one
OS thread and its blocking libc calls as cooperative yields (libgreenhook.so through LD_PRELOAD).

SUBCOMMANDS
  greenhook run [OPTIONS] [--] PROG [ARGS...]
      Preload libgreenhook.so into PROG and exec it: PROG's exit status and signals are greenhook's.
      `--` may be left out when PROG does not start with '-'. PROG without a '/' is searched in PATH.
      Options may also be written --option=VALUE. A variable already in the environment is passed
      on unless its option is given.
      Exit status: PROG's own; 2 usage error; 125 libgreenhook.so not usable; 126 PROG not
      executable; 127 PROG not found.
  greenhook doctor [--lib PATH] PROG
      Read PROG's ELF without running it: is it statically linked or a Go binary (cannot be
      interposed), which libraries it links (DT_NEEDED), which allocator (jemalloc, tcmalloc,
      mimalloc, glibc's) and whether io_uring (liburing) it links and what that means under
      greenhook, which functions it imports are covered by the hooks libgreenhook.so exports, and
      which blocking ones are not. Only PROG's own imports are checked: calls made inside the
      libraries it links are not seen.
      Exit status: 0 nothing important uncovered; 1 some blocking imports uncovered; 2 cannot be
      interposed (static, Go, or a library of another ELF class/machine); 3 usage or I/O error.
  greenhook help | --help | -h
      This help.
  greenhook version | --version
      The launcher's version.

OPTIONS OF `run` AND ENVIRONMENT VARIABLES (`doctor` takes --lib too)
{table}
The library is looked up as: --lib, then {LIB_VAR}, then next to the greenhook executable, then in ../lib/.
",
        version = env!("CARGO_PKG_VERSION"),
        table = table(&rows),
    )
}
