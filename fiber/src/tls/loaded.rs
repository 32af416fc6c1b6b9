//! The static TLS of libraries `dlopen`ed while fibers with TLS of their
//! own exist.
//!
//! glibc puts a library's TLS in the surplus of the static TLS block when
//! the library needs it there (initial-exec accesses: `DF_STATIC_TLS`) or
//! when room is left and its accesses allow it (TLSDESC), and then, before
//! the library's constructors run, copies its initial image into every
//! thread descriptor it lists (`__pthread_init_static_tls`). Fibers' blocks
//! are in no list of glibc's, so a fiber made before the `dlopen` found
//! zeros there, or what an earlier fiber on its stack slot left (a fiber
//! made after gets the image when `_dl_allocate_tls_init` makes its block).
//! The preload's `dlopen` hook takes [`Before`] first; once the library is
//! loaded, [`Before::loaded`] says where the new libraries' static TLS is
//! and [`Loaded::init`] writes their images into each fiber's block, as
//! glibc does for its threads.
//!
//! The calling context, when it is a fiber with TLS of its own, has already
//! run the constructors on its block: there the image goes only into the
//! bytes the constructors left as they were (compared with a copy of the
//! block taken before the `dlopen`). A constructor that reads its own
//! library's thread-locals still reads zeros in that fiber.

use std::ffi::c_void;

use super::{block_low, glibc, static_offset, sym};

/// A loaded object with TLS: its TLS module id and load address.
type Key = (usize, usize);

/// A loaded object's TLS initial image (PT_TLS).
struct Module {
    key: Key,
    image: *const u8,
    filesz: usize,
    memsz: usize,
}

/// The objects with TLS loaded now.
fn modules() -> Vec<Module> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info; `data` is our Vec.
        unsafe {
            let info = &*info;
            if info.dlpi_tls_modid == 0 {
                return 0;
            }
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            if let Some(tls) = phdrs.iter().find(|p| p.p_type == libc::PT_TLS) {
                (*(data as *mut Vec<Module>)).push(Module {
                    key: (info.dlpi_tls_modid, info.dlpi_addr as usize),
                    image: (info.dlpi_addr as usize + tls.p_vaddr as usize) as *const u8,
                    filesz: tls.p_filesz as usize,
                    memsz: tls.p_memsz as usize,
                });
            }
        }
        0
    }
    let mut found = Vec::new();
    // SAFETY: the callback only reads what the loader passes and pushes to `found`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut found).cast()) };
    found
}

/// What a `dlopen` is measured against: the objects with TLS loaded before
/// it, and a copy of the caller's own block if it is a fiber's.
pub struct Before {
    keys: Vec<Key>,
    caller: Option<Copy>,
}

/// A copy of the static TLS block (below the thread pointer) at `tp`.
struct Copy {
    tp: usize,
    low: usize,
    bytes: Vec<u8>,
}

impl Before {
    /// Before a `dlopen`. `caller_tp` is the calling fiber's own thread
    /// pointer, when it has TLS of its own.
    pub fn take(caller_tp: Option<usize>) -> Before {
        let caller = caller_tp.and_then(|tp| {
            let low = block_low(glibc().ok()?, tp);
            // SAFETY: the calling context's block is mapped from `low` up
            // to its thread pointer.
            let bytes = unsafe { std::slice::from_raw_parts(low as *const u8, tp - low) }.to_vec();
            Some(Copy { tp, low, bytes })
        });
        Before {
            keys: modules().into_iter().map(|m| m.key).collect(),
            caller,
        }
    }

    /// After the `dlopen` (or `dlmopen`) returned a handle: the static TLS
    /// of the objects it loaded. Called in the same context as [`Before::take`].
    pub fn loaded(self) -> Loaded {
        let Ok(get_addr) = sym("__tls_get_addr") else {
            return Loaded {
                images: Vec::new(),
                caller: None,
            };
        };
        // SAFETY: ld.so's `void *__tls_get_addr(tls_index *)`.
        let get_addr: unsafe extern "C" fn(*const [usize; 2]) -> *mut c_void = unsafe { std::mem::transmute(get_addr) };
        let images = modules()
            .into_iter()
            .filter(|m| !self.keys.contains(&m.key))
            .filter_map(|m| {
                // Where the object's block is in the calling context: in the
                // static block for an object glibc gave static TLS (glibc
                // then answers with that place and touches nothing), else
                // its dynamic block, allocated now as a first use would.
                // SAFETY: a loaded object's module id, offset 0.
                let at = unsafe { get_addr(&[m.key.0, 0]) } as usize;
                let offset = static_offset(at)?;
                Some(Image {
                    offset,
                    image: m.image,
                    filesz: m.filesz,
                    memsz: m.memsz,
                })
            })
            .collect();
        Loaded {
            images,
            caller: self.caller,
        }
    }
}

/// One new object's static TLS: at `offset` from a thread pointer, `filesz`
/// bytes of `image` then zeros up to `memsz`.
struct Image {
    offset: isize,
    image: *const u8,
    filesz: usize,
    memsz: usize,
}

/// The static TLS of the objects a `dlopen` loaded (see the module docs).
pub struct Loaded {
    images: Vec<Image>,
    caller: Option<Copy>,
}

impl Loaded {
    /// Whether the `dlopen` gave no object static TLS.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }

    /// Writes the new objects' initial images into the static block of the
    /// fiber whose thread pointer is `tp`; in the calling fiber's, only into
    /// the bytes its constructors left unchanged.
    ///
    /// # Safety
    /// `tp` is the thread pointer of a live fiber's own block, made before
    /// the `dlopen`, and no other OS thread runs that fiber meanwhile.
    pub unsafe fn init(&self, tp: usize) {
        let caller = self.caller.as_ref().filter(|c| c.tp == tp);
        for i in &self.images {
            let dest = (tp as isize + i.offset) as *mut u8;
            for k in 0..i.memsz {
                // SAFETY: the image has `filesz` bytes; the destination is
                // the object's part of a block made as glibc makes a
                // thread's, where glibc put it in every one.
                unsafe {
                    let v = if k < i.filesz { *i.image.add(k) } else { 0 };
                    let d = dest.add(k);
                    if let Some(c) = caller {
                        if *d != c.bytes[d as usize - c.low] {
                            continue; // written by a constructor
                        }
                    }
                    *d = v;
                }
            }
        }
    }
}
