//! `greenhook`: the launcher for `libgreenhook.so`.
//!
//! - `greenhook run [OPTIONS] [--] PROG [ARGS...]` preloads `libgreenhook.so`
//!   into an unmodified, dynamically linked program (its pthreads become
//!   fibers, its blocking libc calls yields) and `exec`s it, so the program's
//!   exit status and signals are the launcher's.
//! - `greenhook doctor [--lib PATH] PROG` reads the program's ELF and tells,
//!   before it is run, whether it can be interposed and which of the blocking
//!   functions it imports our hooks cover.
//! - `greenhook help` documents every subcommand, option and environment
//!   variable ([`settings::SETTINGS`] is the one list of them).

mod doctor;
mod library;
mod run;
mod settings;

use std::ffi::OsString;
use std::process::ExitCode;

/// Exit status of a usage error (unknown option, missing program).
const EXIT_USAGE: u8 = 2;

/// The one-line usage printed after a usage error.
const USAGE: &str =
    "usage: greenhook run [OPTIONS] [--] PROG [ARGS...] | greenhook doctor [--lib PATH] PROG | greenhook help";

/// Prints `greenhook: <message>` and the one-line usage on stderr; returns
/// the usage-error exit status.
fn usage_error(message: &str) -> ExitCode {
    eprintln!("greenhook: {message}");
    eprintln!("{USAGE}");
    ExitCode::from(EXIT_USAGE)
}

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        return usage_error("no subcommand given");
    }
    let command = args.remove(0);
    match command.to_str() {
        Some("run") => run::main(args),
        Some("doctor") => doctor::main(args),
        Some("help" | "--help" | "-h") => {
            print!("{}", settings::help_text());
            ExitCode::SUCCESS
        }
        Some("version" | "--version" | "-V") => {
            println!("greenhook {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) if other.starts_with('-') => usage_error(&format!("unknown option '{other}'")),
        // `greenhook PROG ...` is not accepted: the subcommand is explicit,
        // so a program named like a subcommand is never ambiguous.
        _ => usage_error(&format!(
            "unknown subcommand '{}' (did you mean `greenhook run {}`?)",
            command.to_string_lossy(),
            command.to_string_lossy()
        )),
    }
}
