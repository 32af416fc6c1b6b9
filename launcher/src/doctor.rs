//! `greenhook doctor PROG`: can this program be interposed, which of the
//! blocking functions it imports do our hooks cover, and which of the kinds
//! of software the compatibility suite runs does it resemble (its allocator,
//! io_uring)?

mod blocking;
mod resembles;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use object::elf;
use object::read::elf::{ElfFile, FileHeader, ProgramHeader};
use object::{Endianness, FileKind, Object, ObjectSymbol, SymbolKind};

use crate::library;
use crate::run::parse_options;
use crate::settings::LIB_VAR;

/// Nothing important is uncovered.
const EXIT_OK: u8 = 0;
/// Some blocking imports are not covered by the hooks.
const EXIT_UNCOVERED: u8 = 1;
/// The program cannot be interposed at all.
const EXIT_NOT_INTERPOSABLE: u8 = 2;
/// Usage or I/O error (including: not an ELF file).
const EXIT_ERROR: u8 = 3;

/// What `doctor` needs from one ELF file.
#[derive(Debug, Default)]
struct ElfInfo {
    /// "ELF64 x86-64" and the like.
    kind: String,
    /// `e_ident[EI_CLASS]` and `e_machine`: a preload must match both.
    class_machine: (u8, u16),
    /// `ET_DYN`: a shared object or a PIE.
    shared_or_pie: bool,
    /// `PT_INTERP`'s path, if any.
    interpreter: Option<String>,
    /// `DT_NEEDED` entries.
    needed: Vec<String>,
    /// Undefined dynamic function symbols (what the program imports).
    imports: BTreeSet<String>,
    /// Defined global dynamic function symbols (what a library exports).
    exports: BTreeSet<String>,
    /// Why it looks like a Go binary, if it does.
    go: Option<&'static str>,
    /// Set-user-ID or set-group-ID: the loader ignores LD_PRELOAD paths.
    setid: bool,
    /// Symbols defined here that reveal a kind of software linked in
    /// statically: (index into [`resembles::KINDS`], symbol), one per kind.
    resembles: Vec<(usize, String)>,
}

/// Prints a doctor usage error (status 3: `doctor`'s scripts tell usage
/// errors from findings by status).
fn doctor_usage(message: &str) -> ExitCode {
    eprintln!("greenhook doctor: {message}");
    eprintln!("usage: greenhook doctor [--lib PATH] PROG");
    ExitCode::from(EXIT_ERROR)
}

fn fail(message: &str) -> ExitCode {
    eprintln!("greenhook doctor: {message}");
    ExitCode::from(EXIT_ERROR)
}

/// `greenhook doctor [--lib PATH] PROG`.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let parsed = match parse_options(&args, |s| s.var == LIB_VAR) {
        Ok(p) => p,
        Err(message) => return doctor_usage(&message),
    };
    let program = match &args[parsed.rest..] {
        [program] => program,
        [] => return doctor_usage("no program given"),
        [_, extra, ..] => return doctor_usage(&format!("unexpected argument '{}'", extra.to_string_lossy())),
    };
    let path = match resolve(Path::new(program)) {
        Ok(p) => p,
        Err(message) => return fail(&message),
    };
    let info = match read_elf(&path) {
        Ok(info) => info,
        Err(message) => return fail(&message),
    };

    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", path.display(), info.kind);
    let code = report(&mut out, &info, parsed.lib.as_ref());
    print!("{out}");
    match code {
        Ok(code) => ExitCode::from(code),
        Err(message) => fail(&message),
    }
}

/// Writes the report on `info` to `out`; returns the exit status, or an
/// error when the library cannot be read.
fn report(out: &mut String, info: &ElfInfo, lib: Option<&OsString>) -> Result<u8, String> {
    match &info.interpreter {
        Some(interp) => {
            let _ = writeln!(out, "  dynamically linked (interpreter {interp})");
        }
        None if info.needed.is_empty() => {
            let _ = writeln!(
                out,
                "  statically linked (no PT_INTERP, no DT_NEEDED): cannot be interposed, LD_PRELOAD has no effect on it"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  {} without an interpreter: interposed only when loaded into a dynamically linked program",
                if info.shared_or_pie { "shared object" } else { "object" }
            );
        }
    }
    let _ = writeln!(out, "  libraries ({}): {}", info.needed.len(), join(&info.needed));
    if let Some(why) = info.go {
        let _ = writeln!(
            out,
            "  Go binary ({why}): the Go runtime makes its own system calls and runs its own scheduler; \
             not interposable in practice"
        );
    }
    if info.interpreter.is_none() && info.needed.is_empty() || info.go.is_some() {
        let _ = writeln!(out, "verdict: cannot be interposed");
        return Ok(EXIT_NOT_INTERPOSABLE);
    }
    if info.setid {
        let _ = writeln!(
            out,
            "  warning: set-user-ID/set-group-ID: the loader ignores LD_PRELOAD paths when it runs with privileges"
        );
    }

    resembles::report(out, &info.needed, &info.resembles, info.exports.contains("malloc"));

    let lib_path = library::find(lib)?;
    let lib_info = read_elf(&lib_path).map_err(|e| format!("cannot read the hooks library: {e}"))?;
    let _ = writeln!(
        out,
        "  hooks: {} ({} exported functions)",
        lib_path.display(),
        lib_info.exports.len()
    );
    if lib_info.class_machine != info.class_machine {
        let _ = writeln!(
            out,
            "  {} is {}, the program is {}: the loader would ignore the preload",
            lib_path.display(),
            lib_info.kind,
            info.kind
        );
        let _ = writeln!(out, "verdict: cannot be interposed with this library");
        return Ok(EXIT_NOT_INTERPOSABLE);
    }

    let covered: Vec<&str> = info
        .imports
        .iter()
        .filter(|f| lib_info.exports.contains(*f))
        .map(String::as_str)
        .collect();
    let mut uncovered: Vec<(&str, &str)> = info
        .imports
        .iter()
        .filter(|f| !lib_info.exports.contains(*f))
        .filter_map(|f| blocking::area(f).map(|area| (area, f.as_str())))
        .collect();
    uncovered.sort();
    let partly: Vec<(&str, &str, bool)> = info
        .imports
        .iter()
        .filter_map(|f| blocking::partial_note(f).map(|note| (f.as_str(), note, lib_info.exports.contains(f))))
        .collect();
    let others = info.imports.len() - covered.len() - uncovered.len();

    let _ = writeln!(out, "  imported functions: {}", info.imports.len());
    let _ = writeln!(out, "  covered ({}): {}", covered.len(), join(&covered));
    for (name, note, hooked) in &partly {
        if *hooked {
            let _ = writeln!(out, "  partly covered: {name}: {note}");
        } else {
            let _ = writeln!(out, "  not hooked: {name}: every call passes through ({note})");
        }
    }
    if uncovered.is_empty() {
        let _ = writeln!(out, "  NOT covered, may block the hub (0): none");
    } else {
        let names: Vec<&str> = uncovered.iter().map(|(_, f)| *f).collect();
        let _ = writeln!(
            out,
            "  NOT covered, may block the hub ({}): {}",
            uncovered.len(),
            join(&names)
        );
        let mut areas: Vec<&str> = uncovered.iter().map(|(a, _)| *a).collect();
        areas.dedup();
        for area in areas {
            let in_area: Vec<&str> = uncovered.iter().filter(|(a, _)| *a == area).map(|(_, f)| *f).collect();
            let _ = writeln!(out, "    {area}: {}", join(&in_area));
        }
    }
    let _ = writeln!(out, "  other imports, not known to block: {others}");
    let _ = writeln!(
        out,
        "  note: only the program's own imports are checked; calls made inside the libraries it links are not seen"
    );
    if uncovered.is_empty() {
        let _ = writeln!(out, "verdict: ok, every known blocking import is hooked");
        Ok(EXIT_OK)
    } else {
        let _ = writeln!(
            out,
            "verdict: {} blocking import(s) not hooked: while one waits, every fiber waits",
            uncovered.len()
        );
        Ok(EXIT_UNCOVERED)
    }
}

fn join<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    items.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(" ")
}

/// Finds the program like a shell would (a name without '/' is looked up in
/// `PATH`), except that a file of that name in the current directory is
/// taken first: `doctor` only reads it.
fn resolve(program: &Path) -> Result<PathBuf, String> {
    let has_slash = program.as_os_str().as_encoded_bytes().contains(&b'/');
    if has_slash || program.exists() {
        return Ok(program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("cannot find '{}' (not a file here, not in PATH)", program.display()))
}

/// Reads and inspects an ELF file.
fn read_elf(path: &Path) -> Result<ElfInfo, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("cannot read '{}': not a regular file", path.display()));
    }
    let data = std::fs::read(path).map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
    let mut info = match FileKind::parse(&*data) {
        Ok(FileKind::Elf32) => inspect::<elf::FileHeader32<Endianness>>(&data),
        Ok(FileKind::Elf64) => inspect::<elf::FileHeader64<Endianness>>(&data),
        _ if data.starts_with(b"#!") => {
            let line = data[2..].split(|&b| b == b'\n').next().unwrap_or_default();
            return Err(format!(
                "'{}' is not an ELF file but a script for '{}': check its interpreter instead",
                path.display(),
                String::from_utf8_lossy(line).trim()
            ));
        }
        _ => return Err(format!("'{}' is not an ELF file", path.display())),
    }
    .map_err(|e| format!("'{}': malformed ELF file: {e}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    info.setid = meta.permissions().mode() & 0o6000 != 0;
    Ok(info)
}

/// Inspects one ELF file of class `Elf`.
fn inspect<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> object::Result<ElfInfo> {
    let file = ElfFile::<Elf>::parse(data)?;
    let endian = file.endian();
    let header = file.elf_header();
    let machine = header.e_machine(endian);
    let class = header.e_ident().class;
    let mut info = ElfInfo {
        kind: format!(
            "ELF{} {}",
            if class == elf::ELFCLASS64 { 64 } else { 32 },
            machine_name(machine)
        ),
        class_machine: (class.0, machine.0),
        shared_or_pie: header.e_type(endian) == elf::ET_DYN,
        ..ElfInfo::default()
    };
    for segment in file.elf_program_headers() {
        if segment.p_type(endian) == elf::PT_INTERP {
            let interp = segment.interpreter(endian, data)?.unwrap_or_default();
            info.interpreter = Some(String::from_utf8_lossy(interp).into_owned());
        }
    }
    for library in file.import_libraries()? {
        info.needed.push(String::from_utf8_lossy(library?.name()).into_owned());
    }
    for symbol in file.dynamic_symbols() {
        let Ok(name) = symbol.name() else { continue };
        if name.is_empty() || !matches!(symbol.kind(), SymbolKind::Text | SymbolKind::Unknown) {
            continue;
        }
        if symbol.is_undefined() {
            info.imports.insert(name.to_string());
        } else if symbol.is_definition() && symbol.kind() == SymbolKind::Text && !symbol.is_local() {
            info.exports.insert(name.to_string());
        }
    }
    for symbol in file.symbols().chain(file.dynamic_symbols()) {
        if !symbol.is_definition() {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        if let Some(kind) = resembles::defined_by(name) {
            if !info.resembles.iter().any(|(k, _)| *k == kind) {
                info.resembles.push((kind, name.to_string()));
            }
        }
    }
    info.go = if file.section_by_name(".go.buildinfo").is_some() {
        Some("has a .go.buildinfo section")
    } else if file.section_by_name(".note.go.buildid").is_some() {
        Some("has a .note.go.buildid section")
    } else if file
        .symbols()
        .chain(file.dynamic_symbols())
        .any(|s| s.name_bytes().is_ok_and(|n| n == b"runtime.main"))
    {
        Some("defines runtime.main")
    } else {
        None
    };
    Ok(info)
}

fn machine_name(machine: elf::Machine) -> String {
    match machine {
        elf::EM_X86_64 => "x86-64".into(),
        elf::EM_386 => "i386".into(),
        elf::EM_AARCH64 => "AArch64".into(),
        elf::EM_ARM => "ARM".into(),
        elf::EM_RISCV => "RISC-V".into(),
        elf::EM_PPC64 => "PowerPC64".into(),
        elf::EM_S390 => "s390".into(),
        elf::EM_LOONGARCH => "LoongArch".into(),
        other => format!("machine {}", other.0),
    }
}
