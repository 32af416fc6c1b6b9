//! The interpose table, macOS's way to export the hooks, checked on Linux:
//!
//! ```text
//! RUSTFLAGS="--cfg greenhook_interpose_table" cargo test -p interpose --test interpose_table
//! ```
//!
//! In that build every hook is exported as `greenhook_<name>` and listed in
//! the table next to libc's `<name>`, exactly as dyld would read it from
//! `__DATA,__interpose`. A hook left out of the table is simply not linked
//! there, so a source check (run in every build) makes sure each hook
//! written with a literal name is listed.

use std::collections::BTreeSet;

/// Hooks of functions that no new program can bind to: glibc exports
/// `pthread_yield` as a compatibility symbol only.
const UNLISTED: [&str; 1] = ["pthread_yield"];

#[test]
fn every_hook_in_the_source_is_listed_in_its_modules_table() {
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut checked = 0;
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap();
        let exported: BTreeSet<&str> = src
            .split("export_name = \"greenhook_")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect();
        let listed: BTreeSet<&str> = src
            .split("crate::real::interpose! {")
            .skip(1)
            .flat_map(|rest| rest[..rest.find('}').unwrap()].split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        for name in &exported {
            assert!(
                listed.contains(name) || UNLISTED.contains(name),
                "{}: hook {name} is not in the module's interpose! list",
                path.display()
            );
            checked += 1;
        }
        for name in &listed {
            assert!(
                exported.contains(name),
                "{}: {name} is listed but not a hook here",
                path.display()
            );
        }
    }
    assert!(checked > 100, "only {checked} hooks found");
}

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
    use std::collections::HashMap;
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
