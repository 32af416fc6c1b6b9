//! Two cfgs for the platform split:
//! - `greenhook_table`: export the hooks through an interpose table (see
//!   `real::interpose!`) instead of under libc's names. On for macOS; on
//!   Linux with `--cfg greenhook_interpose_table`, to test the table.
//! - `greenhook_linux_hooks`: the hook modules written against Linux and
//!   glibc. On for Linux unless `--cfg greenhook_portable_only` asks for
//!   exactly what a macOS build compiles (checked in CI).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(greenhook_table, greenhook_linux_hooks)");
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let has = |cfg: &str| std::env::var_os(format!("CARGO_CFG_{}", cfg.to_uppercase())).is_some();
    if os == "macos" || has("greenhook_interpose_table") {
        println!("cargo::rustc-cfg=greenhook_table");
    }
    if os == "linux" && !has("greenhook_portable_only") {
        println!("cargo::rustc-cfg=greenhook_linux_hooks");
    }
}
