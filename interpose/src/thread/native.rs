//! Threads that stay OS threads: those whose start routine is in the code
//! of a library whose threads cannot be fibers.
//!
//! GCC's OpenMP runtime, `libgomp`, is the case that needs it. Its team
//! threads, and the thread that starts a team, wait on futexes by the
//! `syscall` instruction itself after spinning, so no hook sees the wait.
//! As fibers on one OS thread, the first such wait blocks the OS thread in
//! the kernel, and with it the fibers that would wake it: the program
//! hangs at its first `#pragma omp parallel`. Its threads are there to use
//! the other CPUs anyway. So `pthread_create` makes them with glibc's
//! `pthread_create`, as without greenhook. The thread that starts a team
//! (a fiber, or the root) still waits for its team in the kernel: other
//! fibers of its hub stand still until the team is done, as they do while
//! a fiber computes.
//!
//! Go's runtime is another: its threads (made by `pthread_create` where
//! cgo is linked in, the runtime's `M`s) wait on futexes by the `syscall`
//! instruction too, and schedule goroutines on other CPUs themselves. The
//! code of any object carrying Go's build ID note (an ELF note named `Go`,
//! type 4, which the Go linker writes into every executable and shared
//! library it makes) is in the list, and a Go executable keeps all its
//! threads native (`main_program_is_go`: C code called through cgo runs
//! on the runtime's threads, which wait in the kernel, so a fiber it made
//! would run only when that code happened to wait in a hook).
//!
//! `GREENHOOK_NATIVE_THREADS_FROM` adds libraries (a colon-separated list
//! of file names or their beginnings, `libtbb.so:libopenblas`), for pools
//! whose workers spin on other CPUs and gain nothing from being fibers.
//!
//! A start routine is placed by address: the executable segments of the
//! listed libraries, found with `dl_iterate_phdr` and kept until glibc's
//! count of loaded or unloaded objects changes (one early-stopped
//! `dl_iterate_phdr`, ~17 ns here, per `pthread_create`).

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock};

use libc::{c_int, dl_phdr_info, pthread_attr_t, pthread_t, size_t};

use super::{pthread_create, Start};

/// Libraries whose threads stay OS threads whatever the environment says.
const ALWAYS: &[&str] = &["libgomp.so"];

/// Where the listed libraries' code is, for one set of loaded objects.
struct Code {
    /// glibc's counts of objects loaded and unloaded when it was found.
    adds: u64,
    subs: u64,
    /// Executable segments: [start, end).
    ranges: Vec<(usize, usize)>,
}

static CODE: Mutex<Option<Code>> = Mutex::new(None);

/// The file names (or beginnings of them) whose threads stay OS threads,
/// read as the preload loads.
static NAMES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();

/// Reads `GREENHOOK_NATIVE_THREADS_FROM` (at setup: a program may empty its
/// environment before its first thread).
pub(super) fn read_settings() {
    names();
}

/// The file names (or beginnings of them) whose threads stay OS threads.
fn names() -> &'static [Vec<u8>] {
    NAMES.get_or_init(|| {
        let extra = std::env::var_os("GREENHOOK_NATIVE_THREADS_FROM").unwrap_or_default();
        let extra = extra.as_encoded_bytes();
        ALWAYS
            .iter()
            .map(|n| n.as_bytes())
            .chain(extra.split(|&b| b == b':'))
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    })
}

/// Whether a thread starting at `f` stays an OS thread.
pub(super) fn stays_native(f: Start) -> bool {
    let at = f as usize;
    let (adds, subs) = generation();
    let mut code = CODE.lock().unwrap_or_else(|e| e.into_inner());
    if !code.as_ref().is_some_and(|c| c.adds == adds && c.subs == subs) {
        *code = Some(Code {
            adds,
            subs,
            ranges: ranges(names()),
        });
    }
    code.as_ref()
        .is_some_and(|c| c.ranges.iter().any(|&(lo, hi)| (lo..hi).contains(&at)))
}

/// `f` of the first object `dl_iterate_phdr` reports (the executable),
/// the walk stopped there.
fn first_object<R: Default>(f: fn(&dl_phdr_info) -> R) -> R {
    struct First<R> {
        f: fn(&dl_phdr_info) -> R,
        out: R,
    }
    unsafe extern "C" fn first<R>(info: *mut dl_phdr_info, _: size_t, walk: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid info; `walk` is the caller's, alive
        // for the call.
        unsafe {
            let walk = &mut *(walk as *mut First<R>);
            walk.out = (walk.f)(&*info);
        }
        1
    }
    let mut walk = First { f, out: R::default() };
    // SAFETY: the callback writes only `walk`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first::<R>), &mut walk as *mut First<R> as *mut c_void) };
    walk.out
}

/// glibc's counts of objects loaded and unloaded so far.
fn generation() -> (u64, u64) {
    first_object(|info| (info.dlpi_adds, info.dlpi_subs))
}

/// The name and type of Go's build ID note (`ELF_NOTE_GOBUILDID_TAG` in
/// Go's linker; its name is written `Go\0\0`, four bytes).
const GO_NOTE: (&[u8], u32) = (b"Go", 4);

/// Whether the object `info` describes carries Go's build ID note in one of
/// its `PT_NOTE` segments.
///
/// # Safety
/// `info` as glibc's `dl_iterate_phdr` passes it: its headers and the
/// segments they describe are mapped.
unsafe fn is_go(info: &dl_phdr_info) -> bool {
    // SAFETY: the caller's promise: `dlpi_phnum` headers at `dlpi_phdr`.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    headers.iter().filter(|h| h.p_type == libc::PT_NOTE).any(|h| {
        let at = info.dlpi_addr as usize + h.p_vaddr as usize;
        // Notes are padded to 4 bytes, or to 8 in a segment aligned to 8.
        let align = if h.p_align == 8 { 8 } else { 4 };
        // SAFETY: a loaded object's note segment, mapped as its header says.
        let notes = unsafe { std::slice::from_raw_parts(at as *const u8, h.p_memsz as usize) };
        has_note(notes, align, GO_NOTE)
    })
}

/// Whether `notes`, a note segment's bytes, holds a note of this name
/// (less the NULs that end it) and type.
fn has_note(mut notes: &[u8], align: usize, (name, kind): (&[u8], u32)) -> bool {
    let pad = |n: usize| n.div_ceil(align) * align;
    let word = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    while notes.len() >= 12 {
        let (namesz, descsz, ty) = (word(notes, 0), word(notes, 4), word(notes, 8));
        let Some(this) = notes.get(12..12 + namesz) else {
            return false;
        };
        let len = this.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        if &this[..len] == name && ty == kind as usize {
            return true;
        }
        let next = 12 + pad(namesz) + pad(descsz);
        notes = notes.get(next..).unwrap_or_default();
    }
    false
}

/// Whether the program's executable was made by Go's linker (its threads
/// all stay native: see the [module](self) docs).
pub(super) fn main_program_is_go() -> bool {
    // SAFETY: as `dl_iterate_phdr` passes it.
    first_object(|info| unsafe { is_go(info) })
}

/// The executable segments of the loaded objects whose file name begins
/// with one of `names`, and of those Go made.
fn ranges(names: &[Vec<u8>]) -> Vec<(usize, usize)> {
    struct Walk<'a> {
        names: &'a [Vec<u8>],
        ranges: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn each(info: *mut dl_phdr_info, _: size_t, walk: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid info whose name is a C string (or
        // null) and whose headers are `dlpi_phnum` entries; `walk` is the
        // caller's, alive for the call.
        unsafe {
            let (info, walk) = (&*info, &mut *(walk as *mut Walk<'_>));
            let path = if info.dlpi_name.is_null() {
                &[][..]
            } else {
                CStr::from_ptr(info.dlpi_name).to_bytes()
            };
            let file = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
            let listed = !file.is_empty() && walk.names.iter().any(|n| file.starts_with(n));
            if !listed && !is_go(info) {
                return 0;
            }
            for h in std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) {
                if h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0 {
                    let lo = info.dlpi_addr as usize + h.p_vaddr as usize;
                    walk.ranges.push((lo, lo + h.p_memsz as usize));
                }
            }
        }
        0
    }
    let mut walk = Walk {
        names,
        ranges: Vec::new(),
    };
    // SAFETY: the callback reads what glibc passes and writes only `walk`,
    // which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut walk as *mut Walk<'_> as *mut c_void) };
    walk.ranges
}

/// glibc's `pthread_create`, made from a fiber or the root as from the OS
/// thread itself: on the OS thread's own TLS (glibc marks the creating
/// thread's descriptor, and reads its scheduling to inherit), and with the
/// caller's signal mask (a fiber's is virtual) for the new thread to
/// inherit, as glibc's new threads inherit their creator's.
///
/// # Safety
/// The caller's `pthread_create` arguments.
pub(super) unsafe fn create(t: *mut pthread_t, attr: *const pthread_attr_t, f: Start, arg: *mut c_void) -> c_int {
    let mask = crate::signal::virtual_masks().then(crate::signal::current_mask);
    hub::on_thread_tls(|| {
        let _kernel = mask.as_ref().map(crate::signal::KernelMask::set);
        // SAFETY: the caller's arguments, unchanged, to glibc's.
        unsafe { pthread_create::real(t, attr, f, arg) }
    })
}

#[cfg(test)]
mod tests {
    use super::{has_note, GO_NOTE};

    /// A note segment of `(name, type, desc)` notes padded to `align`.
    fn segment(notes: &[(&[u8], u32, &[u8])], align: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, ty, desc) in notes {
            for w in [name.len() as u32, desc.len() as u32, *ty] {
                out.extend(w.to_ne_bytes());
            }
            for part in [*name, *desc] {
                out.extend(part);
                out.resize(out.len().div_ceil(align) * align, 0);
            }
        }
        out
    }

    #[test]
    fn finds_go_build_id_among_other_notes() {
        let gnu = (&b"GNU\0"[..], 3, &[7u8; 20][..]);
        let go = (&b"Go\0\0"[..], 4, &b"abc/def"[..]);
        assert!(has_note(&segment(&[gnu, go], 4), 4, GO_NOTE));
        assert!(has_note(&segment(&[go], 8), 8, GO_NOTE));
        assert!(!has_note(&segment(&[gnu], 4), 4, GO_NOTE));
        // Another type under Go's name (Go's package list note is type 1).
        assert!(!has_note(&segment(&[(&b"Go\0\0"[..], 1, &b"x"[..])], 4), 4, GO_NOTE));
        // A name that only begins with "Go".
        assert!(!has_note(&segment(&[(&b"Gold\0"[..], 4, &b"x"[..])], 4), 4, GO_NOTE));
    }

    #[test]
    fn truncated_notes_are_not_read_past_their_end() {
        let seg = segment(&[(&b"GNU\0"[..], 3, &[1u8; 20][..])], 4);
        for cut in 0..seg.len() {
            assert!(!has_note(&seg[..cut], 4, GO_NOTE));
        }
        // A size that claims more than the segment holds.
        let mut bad = segment(&[(&b"Go\0\0"[..], 4, &b"x"[..])], 4);
        bad[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(!has_note(&bad, 4, GO_NOTE));
    }
}
