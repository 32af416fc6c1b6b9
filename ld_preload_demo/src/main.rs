//! ld_preload_demo
fn main() {}
