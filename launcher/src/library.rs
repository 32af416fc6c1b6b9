//! Finding the `libgreenhook.so` to preload.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::settings::LIB_VAR;

/// The library's file name.
pub const LIB_NAME: &str = "libgreenhook.so";

/// Finds the library: `explicit` (from `--lib`), else `$GREENHOOK_LIB`, else
/// `libgreenhook.so` in the launcher's own directory, else in `../lib/` from
/// there (the `PREFIX/bin` + `PREFIX/lib` layout of `make install`).
///
/// Returns an absolute, canonical path to an existing regular file, or a
/// message saying where it looked.
pub fn find(explicit: Option<&OsString>) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return check(Path::new(path), "--lib");
    }
    if let Some(path) = std::env::var_os(LIB_VAR).filter(|p| !p.is_empty()) {
        return check(Path::new(&path), LIB_VAR);
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the greenhook executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [dir.join(LIB_NAME), dir.join("..").join("lib").join(LIB_NAME)];
    for candidate in &candidates {
        if candidate.is_file() {
            return check(candidate, "the launcher's directory");
        }
    }
    Err(format!(
        "{LIB_NAME} not found (looked at {} and {}); use --lib PATH or set {LIB_VAR}",
        candidates[0].display(),
        candidates[1].display()
    ))
}

/// Checks that `path` (named by `source`) is a regular file and makes it absolute.
fn check(path: &Path, source: &str) -> Result<PathBuf, String> {
    let canonical = path
        .canonicalize()
        .map_err(|e| format!("{} (from {source}): {e}", path.display()))?;
    if !canonical.is_file() {
        return Err(format!("{} (from {source}) is not a regular file", path.display()));
    }
    Ok(canonical)
}
