//! The compatibility suite: real, unmodified programs run once as they are
//! and once under greenhook (`greenhook run`), results compared.
//!
//! ```text
//! compat/run [--quick] [--list] [--no-install] [--greenhook PATH] [NAME...]
//! ```
//!
//! `compat/run` builds the library, the launcher and this runner in release
//! mode and runs it. It installs the Debian packages the selected programs
//! need (`apt-get`, as root), runs each program unpatched and patched with a
//! hard timeout, prints one Markdown table (program, unpatched, patched,
//! verdict), the logs of what failed, and a closing `N passed, M failed`
//! line; it exits 1 when any verdict is not PASS. `--quick` selects the
//! programs that CI runs (`.ci/run`): those that pass today, in seconds.

mod apt;
mod cases;
mod proc;
mod resp;

use std::ffi::CStr;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use cases::{Case, Ctx, Mode, Side};

const USAGE: &str = "usage: greenhook-compat [--quick] [--list] [--no-install] [--greenhook PATH] [NAME...]";

struct Options {
    quick: bool,
    list: bool,
    install: bool,
    greenhook: Option<PathBuf>,
    names: Vec<String>,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        list: false,
        install: true,
        greenhook: None,
        names: Vec::new(),
    };
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--list" => o.list = true,
            "--no-install" => o.install = false,
            "--greenhook" => o.greenhook = Some(args.next().ok_or("--greenhook needs a path")?.into()),
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => o.names.push(a),
        }
    }
    Ok(o)
}

/// The cases `o` selects, in the table's order.
fn select(o: &Options) -> Result<Vec<Case>, String> {
    let all = cases::all();
    if let Some(unknown) = o.names.iter().find(|n| !all.iter().any(|c| c.name == n.as_str())) {
        let names: Vec<&str> = all.iter().map(|c| c.name).collect();
        return Err(format!("no program named {unknown} (there are: {})", names.join(" ")));
    }
    Ok(all
        .into_iter()
        .filter(|c| {
            if o.names.is_empty() {
                !o.quick || c.quick
            } else {
                o.names.iter().any(|n| n == c.name)
            }
        })
        .collect())
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("greenhook-compat: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let selected = match select(&o) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("greenhook-compat: {message}");
            return ExitCode::from(2);
        }
    };
    if o.list {
        for c in &selected {
            println!(
                "{:<14} {:<6} {}",
                c.name,
                if c.quick { "quick" } else { "full" },
                c.program
            );
        }
        return ExitCode::SUCCESS;
    }
    match run(&o, &selected) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("greenhook-compat: {message}");
            ExitCode::from(2)
        }
    }
}

/// One row of the table.
struct Row<'a> {
    case: &'a Case,
    unpatched: Side,
    patched: Side,
    pass: bool,
    verdict: String,
}

fn verdict(unpatched: &Side, patched: &Side) -> (bool, String) {
    if !unpatched.ok {
        (false, "FAIL: fails unpatched too (the environment?)".into())
    } else if !patched.ok {
        (false, "FAIL".into())
    } else if unpatched.output != patched.output {
        (false, "FAIL: output differs".into())
    } else {
        (true, "PASS".into())
    }
}

fn run(o: &Options, selected: &[Case]) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate myself: {e}"))?;
    let greenhook = match &o.greenhook {
        Some(path) => path.clone(),
        None => exe.with_file_name("greenhook"),
    };
    if !greenhook.is_file() {
        return Err(format!(
            "no launcher at {} (build it: cargo build --release, or use compat/run)",
            greenhook.display()
        ));
    }
    let scratch = proc::Scratch::new().map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let needs: Vec<apt::Need> = selected.iter().flat_map(|c| c.needs.iter().copied()).collect();
    if let Err(message) = apt::install(&needs, &scratch, o.install) {
        eprintln!("greenhook-compat: {message}");
    }
    let ctx = Ctx::new(greenhook, PathBuf::from(env!("CARGO_MANIFEST_DIR")), scratch);

    let mut rows = Vec::new();
    for case in selected {
        let missing: Vec<&str> = case.needs.iter().filter(|n| !n.present()).map(|n| n.package).collect();
        let [unpatched, patched] = if missing.is_empty() {
            [Mode::Unpatched, Mode::Patched].map(|mode| {
                eprintln!("compat: {} {}", case.name, mode.label());
                (case.run)(&ctx, mode)
            })
        } else {
            let side = Side::broken(format!("not installed: {}", missing.join(" ")));
            [side.clone(), side]
        };
        let (pass, verdict) = verdict(&unpatched, &patched);
        eprintln!("compat: {} {verdict}", case.name);
        rows.push(Row {
            case,
            unpatched,
            patched,
            pass,
            verdict,
        });
    }
    print!("{}", report(o.quick && o.names.is_empty(), &rows));
    Ok(rows.iter().all(|r| r.pass))
}

/// The table, the logs of the failures, and the closing count.
fn report(quick: bool, rows: &[Row<'_>]) -> String {
    let mut out = String::new();
    let part = if quick { "quick part" } else { "selected programs" };
    let _ = writeln!(out, "\ngreenhook compatibility suite ({part}) on {}\n", machine());
    let _ = writeln!(out, "| program | unpatched | patched (greenhook run) | verdict |");
    let _ = writeln!(out, "|---|---|---|---|");
    for r in rows {
        // Both ran fine but printed differently: the cell shows the difference.
        let patched = match diff(&r.unpatched.output, &r.patched.output)
            .lines()
            .find(|l| l.starts_with('+'))
        {
            Some(line) if r.unpatched.ok && r.patched.ok => format!("differs: {}", &line[2..]),
            _ => r.patched.brief.clone(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            cell(r.case.program),
            cell(&r.unpatched.brief),
            cell(&patched),
            if r.pass {
                "PASS".to_string()
            } else {
                format!("**{}**", r.verdict)
            }
        );
    }
    for r in rows.iter().filter(|r| !r.pass) {
        let _ = writeln!(out, "\n=== {} ({}): {}", r.case.name, r.case.program, r.verdict);
        if r.unpatched.ok && r.patched.ok {
            let _ = writeln!(out, "--- the lines that differ (- unpatched, + patched)");
            out.push_str(&diff(&r.unpatched.output, &r.patched.output));
        }
        for (label, side) in [("unpatched", &r.unpatched), ("patched", &r.patched)] {
            if !side.ok {
                let _ = writeln!(out, "--- {label}: {}", side.log.trim_end());
            }
        }
    }
    let passed = rows.iter().filter(|r| r.pass).count();
    let _ = writeln!(out, "\ncompat: {passed} passed, {} failed", rows.len() - passed);
    out
}

/// The lines of `a` and `b` that differ, position by position (the
/// programs print the same number of lines when they agree).
fn diff(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x != y {
            if let Some(x) = x {
                let _ = writeln!(out, "- {x}");
            }
            if let Some(y) = y {
                let _ = writeln!(out, "+ {y}");
            }
        }
    }
    out
}

/// A table cell: one line, no `|`, not too long.
fn cell(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().replace('|', "\\|");
    if line.chars().count() > 140 {
        line.chars().take(137).collect::<String>() + "…"
    } else {
        line
    }
}

/// "AMD EPYC …, 2 CPUs, Linux 6.18 x86_64, glibc 2.36".
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    // SAFETY: uname fills the zeroed struct; its fields are NUL-terminated.
    let kernel = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        libc::uname(&mut u);
        let release = CStr::from_ptr(u.release.as_ptr()).to_string_lossy();
        let release: String = release.split(['-', '+']).next().unwrap_or_default().into();
        format!(
            "{} {release} {}",
            CStr::from_ptr(u.sysname.as_ptr()).to_string_lossy(),
            CStr::from_ptr(u.machine.as_ptr()).to_string_lossy()
        )
    };
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let glibc = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy();
    format!("{cpu}, {cpus} CPUs, {kernel}, glibc {glibc}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(ok: bool, output: &str) -> Side {
        Side {
            ok,
            brief: String::new(),
            output: output.into(),
            log: String::new(),
        }
    }

    #[test]
    fn a_verdict_needs_both_runs_ok_and_the_same_output() {
        assert_eq!(verdict(&side(true, "a"), &side(true, "a")), (true, "PASS".into()));
        assert!(!verdict(&side(true, "a"), &side(true, "b")).0);
        assert!(!verdict(&side(true, "a"), &side(false, "a")).0);
        assert!(!verdict(&side(false, "a"), &side(true, "a")).0);
    }

    #[test]
    fn quick_selects_only_quick_programs_and_names_select_any() {
        let o = parse(["--quick".to_string()].into_iter()).unwrap();
        let quick = select(&o).unwrap();
        assert!(!quick.is_empty() && quick.iter().all(|c| c.quick));
        let o = parse(["redis".to_string(), "node".to_string()].into_iter()).unwrap();
        let named: Vec<&str> = select(&o).unwrap().iter().map(|c| c.name).collect();
        assert_eq!(named, ["redis", "node"]);
        let o = parse(["nosuch".to_string()].into_iter()).unwrap();
        assert!(select(&o).is_err());
    }

    #[test]
    fn a_diff_shows_only_the_lines_that_differ() {
        assert_eq!(diff("a\nb\nc\n", "a\nB\nc\nd\n"), "- b\n+ B\n+ d\n");
    }

    #[test]
    fn cells_stay_on_one_line_of_the_table() {
        assert_eq!(cell("a | b\nsecond line"), "a \\| b");
        assert_eq!(cell(&"x".repeat(200)).chars().count(), 138);
    }
}
