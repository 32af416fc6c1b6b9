//! What the programs under test need from the system, and installing it
//! from Debian's packages with `apt-get` (as `.ci/run` does for gcc): a
//! fresh machine has only the Rust toolchain, gcc, python3 and git.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::proc::{self, Scratch};

/// A command or a shared library, and the Debian package that brings it.
#[derive(Debug, Clone, Copy)]
pub struct Need {
    pub package: &'static str,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    Command(&'static str),
    Library(&'static str),
    Versioned(&'static str, &'static str),
    File(&'static str),
}

impl Need {
    /// `command`, looked up in `PATH`.
    pub const fn command(package: &'static str, command: &'static str) -> Need {
        Need {
            package,
            what: What::Command(command),
        }
    }

    /// The shared library `soname`, looked up in the system's library directories.
    pub const fn library(package: &'static str, soname: &'static str) -> Need {
        Need {
            package,
            what: What::Library(soname),
        }
    }

    /// `file` under one of the version directories in `parent`, outside
    /// `PATH` (PostgreSQL's `/usr/lib/postgresql/<major>/bin/postgres`).
    pub const fn versioned(package: &'static str, parent: &'static str, file: &'static str) -> Need {
        Need {
            package,
            what: What::Versioned(parent, file),
        }
    }

    /// The file at the absolute `path` (a daemon in `/usr/sbin`, which a
    /// user's `PATH` may lack).
    pub const fn file(package: &'static str, path: &'static str) -> Need {
        Need {
            package,
            what: What::File(path),
        }
    }

    /// Already on the system.
    pub fn present(&self) -> bool {
        match self.what {
            What::Command(c) => find_command(c).is_some(),
            What::Library(l) => find_library(l).is_some(),
            What::Versioned(parent, file) => find_versioned(Path::new(parent), file).is_some(),
            What::File(path) => Path::new(path).is_file(),
        }
    }
}

/// `name` in `PATH`.
pub fn find_command(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The shared library `soname` in the directories ld.so searches by default
/// (Debian's multiarch ones first).
pub fn find_library(soname: &str) -> Option<PathBuf> {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    [
        Path::new("/usr/lib").join(&multiarch),
        Path::new("/lib").join(&multiarch),
        PathBuf::from("/usr/lib64"),
        PathBuf::from("/usr/lib"),
        PathBuf::from("/lib"),
    ]
    .into_iter()
    .map(|dir| dir.join(soname))
    .find(|p| p.is_file())
}

/// `parent/<version>/file` for the highest version that has it (versions
/// compared number by number: 9.6 < 15 < 16.1), or `None`.
pub fn find_versioned(parent: &Path, file: &str) -> Option<PathBuf> {
    let key = |name: &str| -> Vec<u64> { name.split('.').map(|n| n.parse().unwrap_or(0)).collect() };
    std::fs::read_dir(parent)
        .ok()?
        .filter_map(|entry| entry.ok())
        .map(|entry| (key(&entry.file_name().to_string_lossy()), entry.path().join(file)))
        .filter(|(_, path)| path.is_file())
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, path)| path)
}

/// The python3 to run scripts with: Debian's own if there is one (a
/// version manager's `python3` in `PATH` may be a shell script that would
/// run under the preload too), else the one in `PATH`.
pub fn python3() -> PathBuf {
    let debian = Path::new("/usr/bin/python3");
    if debian.is_file() {
        debian.to_path_buf()
    } else {
        find_command("python3").unwrap_or_else(|| PathBuf::from("python3"))
    }
}

/// Installs the packages of every missing `need` (`apt-get update`, then
/// `apt-get install`), or says why it cannot.
pub fn install(needs: &[Need], scratch: &Scratch, allowed: bool) -> Result<(), String> {
    let mut missing: Vec<&str> = needs.iter().filter(|n| !n.present()).map(|n| n.package).collect();
    missing.sort_unstable();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    if !allowed || !root || find_command("apt-get").is_none() {
        return Err(format!(
            "missing Debian packages: {list} (install them: apt-get install {list})"
        ));
    }
    eprintln!("compat: installing {list}");
    let dir = scratch.subdir("apt").map_err(|e| e.to_string())?;
    let mut update = Command::new("apt-get");
    update.args(["update", "-qq"]);
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    for cmd in [&mut update, &mut install] {
        let ran = proc::run(cmd, &dir, Duration::from_secs(900)).map_err(|e| e.to_string())?;
        if !ran.succeeded() {
            return Err(format!(
                "{:?} failed ({}):\n{}",
                cmd.get_args().next().unwrap_or_default(),
                ran.status,
                ran.stderr.trim_end()
            ));
        }
    }
    match needs.iter().find(|n| !n.present()) {
        Some(n) => Err(format!("installed {list}, but {n:?} is still missing")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_version_that_has_the_file_is_found() {
        let scratch = Scratch::new().unwrap();
        let parent = scratch.subdir("versions").unwrap();
        for (version, has_it) in [("9.6", true), ("15", true), ("16", false), ("common", true)] {
            let bin = parent.join(version).join("bin");
            std::fs::create_dir_all(&bin).unwrap();
            if has_it {
                std::fs::write(bin.join("postgres"), "").unwrap();
            }
        }
        assert_eq!(
            find_versioned(&parent, "bin/postgres"),
            Some(parent.join("15/bin/postgres"))
        );
        assert_eq!(find_versioned(&parent, "bin/psql"), None);
        assert_eq!(find_versioned(&parent.join("nowhere"), "bin/postgres"), None);
    }
}
