//! `greenhook run`: preload the library and exec the program.

use std::ffi::{OsStr, OsString};
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use crate::settings::{self, Setting, Value, LIB_VAR};
use crate::{library, usage_error};

/// Exit status when the launcher cannot prepare the run (no usable library),
/// as `env(1)` and `timeout(1)` use it.
const EXIT_LAUNCHER: u8 = 125;
/// Exit status when the program exists but cannot be executed (like a shell).
const EXIT_NOT_EXECUTABLE: u8 = 126;
/// Exit status when the program is not found (like a shell).
const EXIT_NOT_FOUND: u8 = 127;

/// Options parsed from the front of the arguments.
#[derive(Debug, Default)]
pub struct Parsed {
    /// `--lib`, if given.
    pub lib: Option<OsString>,
    /// Environment variables set by options, in the order given.
    pub env: Vec<(&'static str, String)>,
    /// Index of the first argument after the options (the program).
    pub rest: usize,
}

/// Parses `--option VALUE`, `--option=VALUE` and flags from the front of
/// `args`, stopping at `--` (skipped) or at the first argument that does not
/// start with `-`. `allowed` filters which settings' options are accepted.
pub fn parse_options(args: &[OsString], allowed: impl Fn(&Setting) -> bool) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let bytes = arg.as_bytes();
        if bytes == b"--" {
            i += 1;
            break;
        }
        if !bytes.starts_with(b"-") {
            break;
        }
        let (name, inline) = match bytes.iter().position(|&b| b == b'=') {
            Some(eq) if bytes.starts_with(b"--") => (&bytes[..eq], Some(OsStr::from_bytes(&bytes[eq + 1..]))),
            _ => (bytes, None),
        };
        let name = String::from_utf8_lossy(name).into_owned();
        let setting = settings::by_option(&name)
            .filter(|s| allowed(s))
            .ok_or_else(|| format!("unknown option '{name}'"))?;
        i += 1;
        let raw: OsString = match setting.value {
            Value::Fixed(v) => {
                if inline.is_some() {
                    return Err(format!("option '{name}' takes no value"));
                }
                v.into()
            }
            _ => match inline {
                Some(v) => v.to_os_string(),
                None => {
                    let v = args.get(i).ok_or_else(|| format!("option '{name}' needs a value"))?;
                    i += 1;
                    v.clone()
                }
            },
        };
        if setting.var == LIB_VAR {
            if raw.is_empty() {
                return Err(format!("option '{name}' needs a path"));
            }
            parsed.lib = Some(raw);
            continue;
        }
        let text = raw
            .to_str()
            .ok_or_else(|| format!("invalid value '{}' for {name}: not UTF-8", raw.to_string_lossy()))?;
        let value = settings::validate(setting.value, text)
            .map_err(|why| format!("invalid value '{text}' for {name}: {why}"))?;
        parsed.env.retain(|(var, _)| *var != setting.var);
        parsed.env.push((setting.var, value));
    }
    parsed.rest = i;
    Ok(parsed)
}

/// `LD_PRELOAD` with `lib` first and `existing` (if any) kept after it.
pub fn preload_value(lib: &OsStr, existing: Option<&OsStr>) -> OsString {
    let mut value = lib.to_os_string();
    if let Some(existing) = existing.filter(|e| !e.as_bytes().iter().all(|b| *b == b':' || *b == b' ')) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// `greenhook run [OPTIONS] [--] PROG [ARGS...]`.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let parsed = match parse_options(&args, |s| s.option.is_some()) {
        Ok(p) => p,
        Err(message) => return usage_error(&message),
    };
    let Some(program) = args.get(parsed.rest) else {
        return usage_error("no program to run");
    };
    if program.is_empty() {
        return usage_error("the program name is empty");
    }
    let lib = match library::find(parsed.lib.as_ref()) {
        Ok(lib) => lib,
        Err(message) => {
            eprintln!("greenhook: {message}");
            return ExitCode::from(EXIT_LAUNCHER);
        }
    };
    // ld.so splits LD_PRELOAD on both ':' and ' ': such a path cannot be preloaded.
    if lib.as_os_str().as_bytes().iter().any(|b| *b == b':' || *b == b' ') {
        eprintln!(
            "greenhook: cannot preload {}: LD_PRELOAD cannot hold a path with ':' or ' '",
            lib.display()
        );
        return ExitCode::from(EXIT_LAUNCHER);
    }
    let preload = preload_value(lib.as_os_str(), std::env::var_os("LD_PRELOAD").as_deref());

    let mut command = Command::new(program);
    command.args(&args[parsed.rest + 1..]).env("LD_PRELOAD", preload);
    for (var, value) in &parsed.env {
        command.env(var, value);
    }
    // Only returns on failure.
    let error = command.exec();
    let name = String::from_utf8_lossy(&program.clone().into_vec()).into_owned();
    eprintln!("greenhook: cannot run '{name}': {error}");
    ExitCode::from(match error.kind() {
        ErrorKind::NotFound => EXIT_NOT_FOUND,
        _ => EXIT_NOT_EXECUTABLE,
    })
}
