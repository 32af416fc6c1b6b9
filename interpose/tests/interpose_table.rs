//! The interpose table, macOS's way to export the hooks, checked on Linux:
//!
//! ```text
//! RUSTFLAGS="--cfg greenhook_interpose_table" cargo test -p interpose --test interpose_table
//! ```
//!
//! In that build every hook is exported as `greenhook_<name>` and listed in
//! the table next to libc's `<name>`, exactly as dyld would read it from
//! `__DATA,__interpose`. `hook!` writes a hook's export and its table entry
//! together; the check below still compares the table with every
//! `greenhook_` function in the executable, so a hook exported by other
//! means (the printf trampolines) cannot be left out either.

/// Hooks of functions that no new program can bind to: glibc exports
/// `pthread_yield` as a compatibility symbol only.
#[cfg(greenhook_interpose_table)]
const UNLISTED: [&str; 1] = ["pthread_yield"];

/// The executable's load bias (PIE): the first object `dl_iterate_phdr`
/// reports is the main program.
#[cfg(greenhook_interpose_table)]
fn load_bias() -> usize {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _: libc::size_t, out: *mut libc::c_void) -> libc::c_int {
        // SAFETY: both pointers come from dl_iterate_phdr / the caller below.
        unsafe { *(out as *mut usize) = (*info).dlpi_addr as usize };
        1
    }
    let mut bias = 0usize;
    // SAFETY: the callback writes one usize through the pointer we pass.
    unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut bias).cast()) };
    bias
}

#[cfg(greenhook_interpose_table)]
#[test]
fn every_hook_is_listed_once_next_to_libcs_function() {
    use std::collections::{BTreeSet, HashMap};
    use std::ffi::{CStr, CString};

    use object::{Object, ObjectSymbol, SymbolKind};

    let table = interpose::interpose_table();
    // A macOS-shaped build (`--cfg greenhook_portable_only`) has only the
    // portable hooks.
    let least = if cfg!(greenhook_portable_only) { 4 } else { 100 };
    assert!(table.len() >= least, "only {} entries", table.len());

    let exe = std::fs::read("/proc/self/exe").unwrap();
    let file = object::File::parse(&*exe).unwrap();
    let bias = load_bias();
    // Several hooks may share one address (identical bodies are merged).
    let mut by_addr: HashMap<usize, Vec<String>> = HashMap::new();
    let mut hooks = BTreeSet::new();
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if sym.kind() == SymbolKind::Text && sym.is_definition() && name.starts_with("greenhook_") {
            by_addr
                .entry(sym.address() as usize + bias)
                .or_default()
                .push(name.to_string());
            hooks.insert(name.to_string());
        }
    }
    let libc_fn = |name: &str| {
        let c = CString::new(name).unwrap();
        // SAFETY: a plain symbol lookup.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) as usize }
    };

    let mut listed = BTreeSet::new();
    for e in table {
        let names = by_addr
            .get(&(e.replacement as usize))
            .unwrap_or_else(|| panic!("entry {:p} is not a greenhook_ function", e.replacement));
        // Aliases (`vfork`, `__vfork`) share addresses on both sides: take
        // the first name not yet listed whose libc counterpart matches.
        let ours = names
            .iter()
            .find(|n| !listed.contains(*n) && libc_fn(n.strip_prefix("greenhook_").unwrap()) == e.replacee as usize)
            .unwrap_or_else(|| panic!("{names:?}: listed twice, or the replacee is not libc's function of that name"));
        // SAFETY: Dl_info is plain data; all zeroes is a valid value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only writes `info`.
        assert_ne!(unsafe { libc::dladdr(e.replacee.cast(), &mut info) }, 0);
        // SAFETY: dladdr filled in a NUL-terminated path.
        let lib = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        assert!(lib.contains("libc.so"), "{ours}'s replacee resolves into {lib}");
        listed.insert(ours.clone());
    }
    let missing: Vec<_> = hooks
        .difference(&listed)
        .filter(|h| !UNLISTED.contains(&h.trim_start_matches("greenhook_")))
        .collect();
    assert!(
        missing.is_empty(),
        "hooks missing from the interpose table: {missing:?}"
    );
}
