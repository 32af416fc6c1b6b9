//! Per-fiber thread pointers: each fiber may run with a thread control block
//! and static TLS block of its own, made the way glibc's `pthread_create`
//! makes a thread's, so that C `__thread`, C++ `thread_local`, Rust
//! `thread_local!`, `errno` and glibc's own per-thread state are per fiber.
//!
//! ```text
//!  stack slot (see stack.rs), top of the slot at the right
//!  ┌───────┬─────────────────────────────┬──────────────┬────────────────┐
//!  │ guard │ usable stack (grows down) ◀─│ static TLS   │ TCB            │
//!  │       │                             │ (surplus,    │ (struct        │
//!  │       │                             │  modules)    │  pthread)      │
//!  └───────┴─────────────────────────────┴──────────────┴────────────────┘
//!                                                       ^ tp: the fs base
//! ```
//!
//! Making a block (see [`Glibc::init_block`]): the creator's `tcbhead_t` is
//! copied (the stack-protector canary at `fs:0x28` and the pointer guard at
//! `fs:0x30` must be identical in every context of the process, or canary
//! checks and `setjmp`/`atexit` pointer demangling break); `tcb` and `self`
//! point at the block; it gets a DTV (made as ld.so's `allocate_dtv` makes
//! one, without its spare entries, see [`new_dtv`]) and ld.so's
//! `_dl_allocate_tls_init` fills it and copies every module's `.tdata`
//! (zeroing `.tbss`); `list` is an empty list (a
//! thread descriptor glibc may `list_del`), `tid` is the OS thread's, the
//! robust-mutex list is empty, `specific[0]` points at the inline key
//! block, and the rseq area's `cpu_id` says "not registered" so that
//! `sched_getcpu` asks the kernel. libc's malloc `tcache` and
//! `thread_arena` words are the creator's: the fibers of one OS thread never
//! run at once and never switch inside `malloc`, so they share the thread's
//! cache and arena exactly as they did with shared TLS (a tcache of their
//! own would cost ~640 bytes a fiber and be leaked when it ends: glibc frees
//! it only in `__libc_thread_freeres`, which is not exported). At the first
//! resume the fiber runs `__ctype_init` (glibc's thread start does); when
//! its closure returns it runs `__call_tls_dtors` (C++ and Rust thread-local
//! destructors) in its own context; when it is dropped the DTV, dynamic TLS
//! and glibc's `strsignal`/`strerror` buffers are freed.
//!
//! Every offset is found at run time, never assumed: sizes from
//! `_dl_get_tls_static_info`, `struct pthread`'s size and the offsets of
//! `list`, `tid` and `specific` from glibc's own `_thread_db_*` descriptors
//! (what libthread_db reads), the robust list head from the kernel
//! (`get_robust_list`), the rseq area from `__rseq_offset`, libc's TLS block
//! from `dl_iterate_phdr`, and the malloc and `strerror` words by probing a
//! scratch block (a `malloc` and `free` there: the libc words that changed,
//! and the one pointing at a cache holding the freed chunk is the tcache).
//! When anything does not match, fibers share their thread's TLS, and one
//! line on stderr says why.
//!
//! Switching (see [`arch`]): `wrfsbase` where the CPU and kernel allow it
//! (`AT_HWCAP2` bit 1), else `arch_prctl(ARCH_SET_FS)`. A fiber's resume sets
//! its thread pointer and restores the resumer's when it suspends.
//!
//! Only x86-64 Linux with glibc is written; elsewhere [`enabled`] is false
//! and every fiber shares its thread's TLS (aarch64 would set `tpidr_el0`
//! in [`arch`] and find the same glibc facts; nothing here could test it).

use std::ffi::c_void;
use std::sync::OnceLock;

/// The thread pointer of the calling context and how to change it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod arch {
    use std::arch::asm;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Whether `wrfsbase` may be used (else `arch_prctl`).
    pub(crate) static FSGSBASE: AtomicBool = AtomicBool::new(false);

    /// The calling context's thread pointer. glibc's TCB starts with its own
    /// address (`tcbhead_t.tcb`), and so do the blocks made here, so one
    /// load through `fs` reads it (cheaper than `rdfsbase`).
    #[inline(always)]
    pub(crate) fn thread_pointer() -> usize {
        let tp: usize;
        // SAFETY: fs:0 is mapped in every context of a glibc process: the
        // TCB's first word.
        unsafe { asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags)) };
        tp
    }

    /// Makes `tp` the calling context's thread pointer.
    ///
    /// # Safety
    /// `tp` is a complete TCB (glibc's, or one made by this module) that
    /// stays alive while it is installed; nothing of the old block may be
    /// used through TLS until it is installed again.
    #[inline(always)]
    pub(crate) unsafe fn set_thread_pointer(tp: usize) {
        if FSGSBASE.load(Ordering::Relaxed) {
            // SAFETY: the caller's contract; the kernel enabled FSGSBASE
            // (AT_HWCAP2), so the instruction does not fault.
            unsafe { asm!("wrfsbase {}", in(reg) tp, options(nostack, preserves_flags)) };
        } else {
            set_by_syscall(tp);
        }
    }

    /// `arch_prctl(ARCH_SET_FS, tp)` by the `syscall` instruction itself.
    /// Not through libc's `syscall()`: under the preload that symbol is
    /// greenhook's own hook, which would run in the middle of a switch,
    /// with the new thread pointer already in place and the old context
    /// still current, and whose return may run signal handlers or switch
    /// fibers.
    #[cold]
    #[inline(never)]
    fn set_by_syscall(tp: usize) {
        let r: isize;
        // SAFETY: ARCH_SET_FS only sets the calling thread's fs base, to a
        // TCB per `set_thread_pointer`'s contract; the instruction clobbers
        // rcx and r11 only.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") libc::SYS_arch_prctl as isize => r,
                in("rdi") 0x1002, // ARCH_SET_FS
                in("rsi") tp,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            )
        };
        // Fails only for an address that is not canonical.
        debug_assert_eq!(r, 0, "arch_prctl(ARCH_SET_FS, {tp:#x})");
    }

    /// Decides between `wrfsbase` and `arch_prctl` (once).
    pub(crate) fn detect() {
        // SAFETY: getauxval has no preconditions.
        let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
        let asked = super::setting() != super::Setting::FiberSyscall;
        FSGSBASE.store(asked && hwcap2 & 2 != 0, Ordering::Relaxed); // HWCAP2_FSGSBASE
    }

    /// How a switch installs a thread pointer, for reports.
    pub(crate) fn how() -> &'static str {
        if FSGSBASE.load(Ordering::Relaxed) {
            "wrfsbase"
        } else {
            "arch_prctl(ARCH_SET_FS), a system call per switch"
        }
    }
}

/// No per-fiber thread pointers on this target: [`enabled`] is false, so
/// these are never called with a block of ours.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) mod arch {
    #[inline(always)]
    pub(crate) fn thread_pointer() -> usize {
        0
    }
    #[inline(always)]
    pub(crate) unsafe fn set_thread_pointer(_tp: usize) {}
    pub(crate) fn detect() {}
    pub(crate) fn how() -> &'static str {
        "not available on this target"
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
pub mod loaded;

/// What this module found out about glibc, once per process.
pub(crate) struct Glibc {
    /// `_dl_get_tls_static_info`: bytes of a static TLS block, TCB included.
    pub(crate) static_size: usize,
    /// ... and its alignment.
    pub(crate) align: usize,
    /// `sizeof(struct pthread)`: the TCB, at and above the thread pointer.
    pub(crate) tcb_size: usize,
    /// `tcbhead_t`: the part copied from the creator.
    header_size: usize,
    list: usize,
    tid: usize,
    robust_head: usize,
    specific: usize,
    specific_1stblock: usize,
    /// The rseq area's `cpu_id`, if glibc has one.
    rseq_cpu_id: Option<usize>,
    /// `errno`, relative to the thread pointer (negative: below it).
    pub(crate) errno: isize,
    /// libc's `tcache` and `thread_arena`, relative to the thread pointer
    /// (None only while the probe looks for them).
    malloc_words: Option<MallocWords>,
    /// `tls_state.strsignal_buf` and `strerror_l_buf`, if found.
    tls_state: Option<[usize; 2]>,
    /// `specific_used` (a bool), if found: whether a key slot may be set.
    specific_used: Option<usize>,
    /// glibc's `__pthread_keys`: `{seq, destr}` for each of its 1024 keys.
    pthread_keys: *const [usize; 2],
    allocate_tls_init: unsafe extern "C" fn(*mut c_void, bool) -> *mut c_void,
    deallocate_tls: unsafe extern "C" fn(*mut c_void, bool),
    call_tls_dtors: unsafe extern "C" fn(),
    ctype_init: unsafe extern "C" fn(),
}

// SAFETY: the pointer names glibc's static key table, which lives as long
// as the process and is only read here.
unsafe impl Send for Glibc {}
// SAFETY: as above.
unsafe impl Sync for Glibc {}

static GLIBC: OnceLock<Result<Glibc, String>> = OnceLock::new();

/// What glibc looks like here, found on first use.
pub(crate) fn glibc() -> Result<&'static Glibc, &'static str> {
    GLIBC
        .get_or_init(|| {
            arch::detect();
            // SAFETY: run once, from the context of a thread's own TLS or a
            // fiber sharing it (no block of ours exists before this).
            unsafe { discover() }
        })
        .as_ref()
        .map_err(|e| e.as_str())
}

/// Whether fibers get TLS of their own by default: the platform allows it,
/// glibc is as expected, and `GREENHOOK_TLS` is not `shared`. The first
/// call decides (and says on stderr, once, why per-fiber TLS is off when
/// it could not be set up).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        if !env_allows() {
            return false;
        }
        match glibc() {
            Ok(_) => true,
            Err(why) => {
                eprintln!(
                    "greenhook: per-fiber TLS is not available ({why}); fibers share their thread's TLS{}",
                    shared_by_fibers()
                );
                false
            }
        }
    })
}

/// What `GREENHOOK_TLS` asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setting {
    /// `fiber` (the default): TLS of their own, switched by `wrfsbase`
    /// where the CPU and kernel allow it.
    Fiber,
    /// `fiber-syscall`: TLS of their own, always switched by
    /// `arch_prctl`, as on a machine without FSGSBASE (to test and
    /// measure that path on one that has it).
    FiberSyscall,
    /// `shared`: fibers share their thread's TLS.
    Shared,
}

/// `GREENHOOK_TLS`, read once: a program may empty its environment before
/// its first fiber (nginx does), so the preload reads it when it loads
/// ([`read_env`]).
fn setting() -> Setting {
    static SETTING: OnceLock<Setting> = OnceLock::new();
    *SETTING.get_or_init(|| match std::env::var("GREENHOOK_TLS").as_deref() {
        Ok("shared") => Setting::Shared,
        Ok("fiber-syscall") => Setting::FiberSyscall,
        Ok("fiber") | Err(_) => Setting::Fiber,
        Ok(other) => {
            eprintln!(
                "greenhook: GREENHOOK_TLS={other:?} is none of \"fiber\", \"fiber-syscall\" and \"shared\"; using \"fiber\""
            );
            Setting::Fiber
        }
    })
}

/// Whether `GREENHOOK_TLS` leaves per-fiber TLS on (not `shared`).
fn env_allows() -> bool {
    setting() != Setting::Shared
}

/// Reads this module's environment settings now (see [`setting`]).
pub fn read_env() {
    setting();
}

/// Where the calling context's thread-local at `addr` lies relative to
/// its thread pointer, if it lies in the static TLS block: then the same
/// variable of every fiber with TLS of its own is at that offset from the
/// fiber's [`Fiber::thread_pointer`](crate::Fiber::thread_pointer), from
/// the moment the fiber is made, and its creator may write it there before
/// the fiber first runs. None for a variable in dynamic TLS (a module
/// `dlopen`ed after start), which a block gets only when first used.
pub fn static_offset(addr: usize) -> Option<isize> {
    let g = glibc().ok()?;
    let tp = arch::thread_pointer();
    (block_low(g, tp)..tp)
        .contains(&addr)
        .then(|| addr as isize - tp as isize)
}

/// How a switch installs a fiber's thread pointer ("wrfsbase", or the
/// system call), for reports.
pub fn switch_mechanism() -> &'static str {
    arch::how()
}

/// Runs the calling context's C++ `thread_local` and Rust `thread_local!`
/// destructors now (glibc's `__call_tls_dtors`), then the destructors of
/// the `pthread_key_create` keys it set through glibc (the block's own key
/// slots; the interposer's emulated keys are its business), as a thread's
/// exit runs them, if it is a fiber with TLS of its own; else does nothing
/// (a fiber sharing its thread's TLS must not run the thread's
/// destructors). Idempotent: destructors registered meanwhile run too, and
/// a second call finds none.
///
/// For a scheduler that ends a fiber early (`pthread_exit`): the fiber's
/// own return runs them anyway.
///
/// # Safety
/// Called by the fiber's own code, on its stack, and `own` says whether
/// that fiber has TLS of its own.
pub unsafe fn run_destructors(own: bool) {
    if own {
        if let Ok(g) = glibc() {
            // SAFETY: the calling context's TLS is the fiber's own block.
            unsafe {
                (g.call_tls_dtors)();
                g.run_key_destructors(arch::thread_pointer());
            }
        }
    }
}

/// Runs `f` with the OS thread's own thread pointer `home` installed instead
/// of the calling fiber's, then reinstalls the fiber's; afterwards copies
/// the thread's `tid` and `errno` into the fiber's block (what a `fork`
/// child needs: the kernel wrote its new tid into the thread's descriptor).
/// For `fork`: glibc's bookkeeping in the child (its list of thread
/// descriptors, the robust list, the stack cache) then acts on the thread's
/// own descriptor, as it did before fibers had TLS of their own, and never
/// on a fiber's block, which glibc must not link into its lists.
///
/// # Safety
/// `home` is the calling OS thread's own thread pointer; `f` must not
/// switch fibers.
pub unsafe fn with_thread_pointer<R>(home: usize, f: impl FnOnce() -> R) -> R {
    let cur = arch::thread_pointer();
    if cur == home {
        return f();
    }
    // SAFETY: the caller's contract: `home` is this thread's TCB.
    unsafe { arch::set_thread_pointer(home) };
    let r = f();
    let home_errno = crate::errno::get();
    // SAFETY: `cur` was installed a moment ago and is alive (the fiber runs).
    unsafe { arch::set_thread_pointer(cur) };
    if let Ok(g) = glibc() {
        // SAFETY: both are complete blocks: `home` the thread's, `cur` ours
        // (made by init_block, whose `tid` offset is `g.tid`).
        unsafe { ((cur + g.tid) as *mut i32).write(((home + g.tid) as *const i32).read()) };
    }
    crate::errno::set(home_errno);
    r
}

/// Whether the thread control block at `tp` (a holder's descriptor, as
/// glibc's locks record it) belongs to the calling OS thread: its kernel
/// thread id is the calling context's. Every context of one OS thread, its
/// fibers' blocks included, records the same id.
///
/// # Safety
/// `tp` is a live thread control block (glibc's or one made here).
pub unsafe fn same_os_thread(tp: usize) -> bool {
    match glibc() {
        // SAFETY: the caller's contract; `g.tid` is the tid field's offset
        // in every TCB, and the calling context's own is live.
        Ok(g) => unsafe {
            ((tp + g.tid) as *const i32).read_volatile() == ((arch::thread_pointer() + g.tid) as *const i32).read()
        },
        Err(_) => tp == arch::thread_pointer(),
    }
}

/// An `extern "C"` symbol of the process, by name.
fn sym(name: &str) -> Result<*mut c_void, String> {
    let c = std::ffi::CString::new(name).expect("no NUL in symbol names");
    // SAFETY: RTLD_DEFAULT.
    let p = unsafe { dlsym_quietly(libc::RTLD_DEFAULT, &c) };
    if p.is_null() {
        Err(format!("{name} not found"))
    } else {
        Ok(p)
    }
}

/// Runs `f` (greenhook's own code) with the calling context's `dlerror()`
/// state set aside, and puts it back.
///
/// glibc keeps that state in a thread-local (`__libc_dlerror_result`), and
/// every `dl*` call starts by freeing the message a `dlerror()` call
/// returned. A program that called `dlerror()` and then, say, `printf` with
/// the message, would find it freed by the `dlsym` our first `printf` hook
/// makes to find libc's function, or by the one std makes when our offload
/// pool starts its first thread (`__pthread_get_minstack`). So the state is
/// set aside around such code (its place found by [`note_dlerror_slot`], at
/// load), and an error of our own is consumed with two `dlerror()` calls
/// (the second frees it) before the program's is put back. Where the
/// thread-local is not found, `f` just runs.
///
/// Not for code that runs the program's own (a callback may `dlopen`, and
/// its `dlerror()` state must then stay).
pub fn keeping_dlerror<R>(f: impl FnOnce() -> R) -> R {
    let Some(slot) = dlerror_slot() else { return f() };
    // SAFETY: `slot` is the calling context's own glibc thread-local (its
    // offset is the same in every block; `f` runs in this context); dlerror
    // only frees what glibc allocated for our own failed call.
    unsafe {
        let saved = slot.replace(std::ptr::null_mut());
        let r = f();
        if !slot.read().is_null() {
            libc::dlerror();
            libc::dlerror();
        }
        slot.write(saved);
        r
    }
}

/// `dlsym`, leaving the calling context's `dlerror()` state as it was (see
/// [`keeping_dlerror`]).
///
/// `RTLD_NEXT` means the objects after the one this function is in: the
/// preload library (or the test executable), as for a direct call.
///
/// # Safety
/// `handle` is `RTLD_DEFAULT`, `RTLD_NEXT` or a live handle from `dlopen`.
#[inline(never)]
pub unsafe fn dlsym_quietly(handle: *mut c_void, name: &std::ffi::CStr) -> *mut c_void {
    // SAFETY: dlsym with a valid handle (the contract) only reads the
    // loader's tables.
    keeping_dlerror(|| unsafe { libc::dlsym(handle, name.as_ptr()) })
}

/// Where glibc keeps a thread's stack block in its descriptor: the offset
/// of `stackblock` (`stackblock_size` follows it), plus one; 0 while
/// unknown (see [`note_stack_block`]).
static STACK_BLOCK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The size of glibc's `struct pthread` (libthread_db's
/// `_thread_db_sizeof_pthread`), for [`note_stack_block`]. A `dlsym`: not
/// from a thread that another holding the loader's lock waits for.
pub fn descriptor_size() -> Option<usize> {
    size_of_db("_thread_db_sizeof_pthread").ok()
}

/// Notes where glibc keeps a thread's stack block in its descriptor, from
/// one of glibc's own threads: `descriptor` is its `THREAD_SELF`, of
/// `tcb` bytes ([`descriptor_size`]), and `[block, block + size)` its stack
/// block as `pthread_getattr_np` gives it. The two words must be found side
/// by side, once. Blocks made for fibers from then on say where their
/// stack is: glibc's `__libc_alloca_cutoff` reads a quarter of that size
/// (at most 64 KiB) as what its functions may `alloca`, and with the zero
/// of a descriptor glibc did not make it allowed 64 KiB on any stack (a
/// 64 KiB thread's is 17 KiB). Reads memory only: no lock is taken.
///
/// # Safety
/// `descriptor` is the live descriptor of one of glibc's threads, of
/// `tcb` bytes.
pub unsafe fn note_stack_block(descriptor: usize, tcb: usize, block: usize, size: usize) {
    let mut found = None;
    // Past the header's first words (tcb, dtv, self, flags), which a
    // block's set-up writes itself.
    for off in (32..tcb.saturating_sub(16)).step_by(8) {
        // SAFETY: inside the descriptor (the contract), 8-aligned (glibc
        // aligns descriptors to 64).
        if unsafe { word(descriptor + off) == block && word(descriptor + off + 8) == size } {
            if found.is_some() {
                return;
            }
            found = Some(off);
        }
    }
    if let Some(off) = found {
        STACK_BLOCK.store(off + 1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Writes the stack block `[lo, lo + size)` into the block at `tp` where
/// glibc keeps a thread's, once known (see [`note_stack_block`]).
///
/// # Safety
/// `tp` is a complete block of ours (made by [`Glibc::init_block`]).
pub(crate) unsafe fn set_stack_block(tp: usize, lo: usize, size: usize) {
    let off = STACK_BLOCK.load(std::sync::atomic::Ordering::Relaxed);
    if off != 0 {
        // SAFETY: the caller's block; the offset was found inside glibc's
        // descriptor, which the block's is a copy of the layout of.
        unsafe {
            ((tp + off - 1) as *mut usize).write(lo);
            ((tp + off - 1 + 8) as *mut usize).write(size);
        }
    }
}

/// Notes where glibc's `dlerror()` state is (see [`keeping_dlerror`]):
/// once, early (the preload's constructor), since the lookup is itself a
/// `dlsym`.
pub fn note_dlerror_slot() {
    dlerror_offset();
}

/// Where `__libc_dlerror_result` is relative to the thread pointer (libc's
/// TLS is static, so the same in every context), found on first use.
fn dlerror_offset() -> Option<isize> {
    static OFFSET: OnceLock<Option<isize>> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        if cfg!(not(all(
            target_arch = "x86_64",
            target_os = "linux",
            target_env = "gnu"
        ))) {
            return None;
        }
        // SAFETY: dlsym only reads the loader's tables; for a thread-local
        // it answers with its place in the calling context.
        let at = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_dlerror_result".as_ptr()) } as usize;
        let tp = arch::thread_pointer();
        // In the static block, below the thread pointer.
        (at != 0 && at < tp && tp - at < 1 << 20).then(|| at as isize - tp as isize)
    })
}

/// The calling context's `__libc_dlerror_result`, if its place is known.
fn dlerror_slot() -> Option<*mut *mut c_void> {
    Some((arch::thread_pointer() as isize + dlerror_offset()?) as *mut *mut c_void)
}

/// A `_thread_db_sizeof_*` size, in bytes.
fn size_of_db(name: &str) -> Result<usize, String> {
    // SAFETY: glibc defines these as `const uint32_t`.
    Ok(unsafe { *(sym(name)? as *const u32) } as usize)
}

/// A `_thread_db_*` field descriptor: `{bits, count, offset}`.
fn field(name: &str) -> Result<(usize, usize), String> {
    // SAFETY: glibc defines these as `const uint32_t[3]`.
    let d = unsafe { *(sym(name)? as *const [u32; 3]) };
    Ok((d[2] as usize, d[0] as usize / 8))
}

/// Reads a word at `addr`.
///
/// # Safety
/// `addr` is readable and aligned.
unsafe fn word(addr: usize) -> usize {
    // SAFETY: the caller's contract.
    unsafe { (addr as *const usize).read() }
}

/// Where libc.so.6's TLS block is in the calling context, and its size.
#[cfg(target_os = "linux")]
fn libc_tls() -> Option<(usize, usize)> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info; `data` is our Option.
        unsafe {
            let info = &*info;
            if info.dlpi_name.is_null() {
                return 0;
            }
            let name = std::ffi::CStr::from_ptr(info.dlpi_name).to_bytes();
            let base = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
            if !base.starts_with(b"libc.so") || info.dlpi_tls_data.is_null() {
                return 0;
            }
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            let Some(tls) = phdrs.iter().find(|p| p.p_type == libc::PT_TLS) else {
                return 0;
            };
            *(data as *mut Option<(usize, usize)>) = Some((info.dlpi_tls_data as usize, tls.p_memsz as usize));
            1
        }
    }
    let mut found: Option<(usize, usize)> = None;
    // SAFETY: the callback only reads what the loader passes and writes `found`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut found).cast()) };
    found
}

#[cfg(not(target_os = "linux"))]
fn libc_tls() -> Option<(usize, usize)> {
    None
}

/// Finds everything [`Glibc`] holds (see the module docs), probing a scratch
/// block for the malloc and `strerror` words.
///
/// # Safety
/// Called once, from a context whose thread pointer is its OS thread's own.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
unsafe fn discover() -> Result<Glibc, String> {
    type GetStaticInfo = unsafe extern "C" fn(*mut usize, *mut usize);
    type DeallocateTls = unsafe extern "C" fn(*mut c_void, bool);
    type AllocateTlsInit = unsafe extern "C" fn(*mut c_void, bool) -> *mut c_void;
    type NoArgs = unsafe extern "C" fn();
    // SAFETY: each symbol transmuted here is glibc's function of exactly
    // this signature (ld.so's GLIBC_PRIVATE interface that pthread_create
    // uses, and libc's thread-start and thread-exit helpers).
    let get_static_info = unsafe { std::mem::transmute::<*mut c_void, GetStaticInfo>(sym("_dl_get_tls_static_info")?) };
    // SAFETY: as above (2.36: `void *_dl_allocate_tls_init (void *, bool)`).
    let allocate_tls_init =
        unsafe { std::mem::transmute::<*mut c_void, AllocateTlsInit>(sym("_dl_allocate_tls_init")?) };
    // SAFETY: as above.
    let deallocate_tls = unsafe { std::mem::transmute::<*mut c_void, DeallocateTls>(sym("_dl_deallocate_tls")?) };
    // SAFETY: as above.
    let call_tls_dtors = unsafe { std::mem::transmute::<*mut c_void, NoArgs>(sym("__call_tls_dtors")?) };
    // SAFETY: as above.
    let ctype_init = unsafe { std::mem::transmute::<*mut c_void, NoArgs>(sym("__ctype_init")?) };
    let (mut static_size, mut align) = (0usize, 0usize);
    // SAFETY: two out-parameters.
    unsafe { get_static_info(&mut static_size, &mut align) };
    let tcb_size = size_of_db("_thread_db_sizeof_pthread")?;
    let (list, _) = field("_thread_db_pthread_list")?;
    let (tid, tid_bytes) = field("_thread_db_pthread_tid")?;
    let (specific, specific_bytes) = field("_thread_db_pthread_specific")?;
    let key_data = size_of_db("_thread_db_sizeof_pthread_key_data")?;
    // `specific_1stblock` is the array of 32 key slots right before `specific`.
    let first_block = specific
        .checked_sub(32 * key_data)
        .ok_or("struct pthread is not as expected")?;
    let key_struct = size_of_db("_thread_db_sizeof_pthread_key_struct")?;
    let pthread_keys = sym("__pthread_keys")? as *const [usize; 2];
    let plausible = align.is_power_of_two()
        && align >= 16
        && tcb_size < static_size
        && (64..=1024).contains(&list)
        && list + 16 <= tid
        && tid_bytes == 4
        && specific_bytes == 32 * 8
        && first_block > tid
        && key_data == 16
        && key_struct == 16
        && specific + specific_bytes <= tcb_size;
    if !plausible {
        return Err(format!(
            "struct pthread is not as expected (size {tcb_size}, list {list}, tid {tid}, specific {specific}, static TLS {static_size}/{align})"
        ));
    }
    let tp = arch::thread_pointer();
    // SAFETY: tp is the calling thread's TCB; its first three words are
    // tcb, dtv and self.
    if unsafe { word(tp) != tp || word(tp + 16) != tp } {
        return Err("the thread control block does not point at itself".into());
    }
    let mut head: usize = 0;
    let mut len: usize = 0;
    // SAFETY: get_robust_list(0, ...) reads the calling thread's head.
    let r = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) };
    let robust_head = head.wrapping_sub(tp);
    if r != 0 || robust_head <= tid || robust_head + 24 > tcb_size {
        return Err("no robust mutex list registered in struct pthread".into());
    }
    let rseq_cpu_id = sym("__rseq_offset").ok().and_then(|p| {
        // SAFETY: glibc defines `const ptrdiff_t __rseq_offset`.
        let off = unsafe { *(p as *const isize) };
        (off > 0 && (off as usize) + 8 <= tcb_size).then_some(off as usize + 4)
    });
    let errno = (crate::errno::location() as usize).wrapping_sub(tp) as isize;
    let below = (static_size - tcb_size) as isize;
    if !(-below..0).contains(&errno) {
        return Err("errno is not in the static TLS block".into());
    }
    let (libc_block, libc_len) = libc_tls().ok_or("libc.so.6's TLS block not found")?;
    let libc_off = libc_block.wrapping_sub(tp) as isize;
    if libc_off < -below || libc_off + libc_len as isize > 0 {
        return Err("libc's TLS is not in the static TLS block".into());
    }
    let mut g = Glibc {
        static_size,
        align,
        tcb_size,
        header_size: list,
        list,
        tid,
        robust_head,
        specific,
        specific_1stblock: first_block,
        rseq_cpu_id,
        errno,
        malloc_words: None,
        tls_state: None,
        specific_used: None,
        pthread_keys,
        allocate_tls_init,
        deallocate_tls,
        call_tls_dtors,
        ctype_init,
    };
    // Whether `malloc` is glibc's, whose words the probe finds. Another
    // allocator (jemalloc, tcmalloc, mimalloc, linked in or preloaded)
    // keeps per-thread state in TLS and registers it globally
    // (jemalloc lists every thread's): each fiber is then one more thread to
    // it, set up at its first `malloc` and taken down by the key destructor
    // the allocator set, as a thread's exit runs it. So the probe's scratch
    // block runs its key destructors before it is unmapped ([`probe`]), and
    // key values are glibc's own in a fiber with TLS of its own (the
    // interposer's `pthread_setspecific`), whose destructors run once more
    // as the fiber's last act ([`run_destructors`]): a `malloc` made by the
    // fiber's way out after the first round set the allocator up again.
    let ours = matches!(allocator(), Allocator::Glibc);
    // SAFETY: the caller's contract; `g` holds everything init_block needs
    // but the words the probe is about to find.
    let probed = unsafe { probe(&g, tp, libc_off, libc_len, ours)? };
    g.malloc_words = probed.malloc_words;
    g.tls_state = probed.tls_state;
    g.specific_used = probed.specific_used;
    Ok(g)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
unsafe fn discover() -> Result<Glibc, String> {
    Err("written for x86-64 Linux with glibc only".into())
}

/// Whose `malloc` the program calls (see [`allocator`]).
pub enum Allocator {
    /// glibc's.
    Glibc,
    /// One linked into the program itself (redis links jemalloc so).
    Program,
    /// A shared object's other than libc (jemalloc, tcmalloc, mimalloc by
    /// `DT_NEEDED` or `LD_PRELOAD`).
    Library {
        /// Its `malloc`'s address.
        malloc: usize,
    },
    /// Not found.
    Unknown,
}

/// Whose `malloc` the program calls, asked of the loader.
///
/// The `malloc` that `dlsym` finds may be no definition at all: a non-PIE
/// executable that takes `malloc`'s address in its code (node does) exports
/// an undefined `malloc` whose value is its PLT entry, the function's
/// canonical address, and `dlsym` returns that. Its calls still go to the
/// first object after it that defines `malloc`, which is then the one
/// judged.
pub fn allocator() -> Allocator {
    let Ok(m) = sym("malloc") else {
        return Allocator::Unknown;
    };
    let (file, malloc) = match defined_in(m) {
        Some(Defined { file, import: true }) => definer_after_program(c"malloc").unwrap_or((file, m as usize)),
        Some(Defined { file, import: false }) => (file, m as usize),
        None => return Allocator::Unknown,
    };
    if file.rsplit('/').next().is_some_and(|b| b.starts_with("libc.so")) {
        Allocator::Glibc
    } else if file.is_empty() {
        Allocator::Program
    } else {
        Allocator::Library { malloc }
    }
}

/// The object a symbol's address `p` lies in.
struct Defined {
    /// Its file name as the loader has it ("" for the program).
    file: String,
    /// The symbol there is an undefined one with a value: a PLT entry
    /// standing for the function's address, not its definition.
    import: bool,
}

/// `dladdr1`'s request for the symbol's table entry (glibc's `<dlfcn.h>`).
const RTLD_DL_SYMENT: libc::c_int = 1;
/// `dladdr1`'s request for the object's link map (glibc's `<dlfcn.h>`).
const RTLD_DL_LINKMAP: libc::c_int = 2;

/// The public head of glibc's `struct link_map` (`<link.h>`).
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    /// The object's file name; empty for the program.
    l_name: *const libc::c_char,
}
/// The section index of an undefined symbol (`<elf.h>`).
const SHN_UNDEF: u16 = 0;

/// Which object the symbol at `p` belongs to (see [`Defined`]).
fn defined_in(p: *mut c_void) -> Option<Defined> {
    let mut info: libc::Dl_info = unsafe_zeroed();
    let mut sym: *const libc::Elf64_Sym = std::ptr::null();
    // SAFETY: dladdr1 only reads the loader's tables and writes `info` and
    // `sym` (a pointer into the object's symbol table, or null).
    let found = unsafe { libc::dladdr1(p, &mut info, (&raw mut sym).cast(), RTLD_DL_SYMENT) } != 0;
    if !found || info.dli_fname.is_null() {
        return None;
    }
    // For the program `dladdr` names `argv[0]`; its link map's name is
    // empty, which is what tells it from a library.
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: as above; `map` receives a pointer to the object's link map.
    let program = unsafe { libc::dladdr1(p, &mut info, (&raw mut map).cast(), RTLD_DL_LINKMAP) } != 0
        && !map.is_null()
        // SAFETY: the loader's link map of a loaded object, whose name is
        // a NUL-terminated string or null.
        && unsafe { (*map).l_name.is_null() || *(*map).l_name == 0 };
    let file = if program {
        String::new()
    } else {
        // SAFETY: a NUL-terminated name from the loader.
        unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: when not null, `sym` points into the object's symbol table,
    // mapped while it is loaded.
    let import = !sym.is_null() && unsafe { (*sym).st_shndx } == SHN_UNDEF;
    Some(Defined { file, import })
}

/// The file of the first loaded object after the program (in load order,
/// which is the order the loader searches the objects loaded at start)
/// that itself defines `name`. (Only an executable has an undefined symbol
/// with a value, and the program is the one executable.)
fn definer_after_program(name: &std::ffi::CStr) -> Option<(String, usize)> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info; `data` is our Vec.
        unsafe {
            let info = &*info;
            let names = &mut *(data as *mut Vec<std::ffi::CString>);
            let name = if info.dlpi_name.is_null() {
                c""
            } else {
                std::ffi::CStr::from_ptr(info.dlpi_name)
            };
            names.push(name.to_owned());
        }
        0
    }
    let mut names: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback only reads what the loader passes and pushes to
    // `names`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut names).cast()) };
    // The program is the first object.
    names.iter().skip(1).filter(|n| !n.is_empty()).find_map(|file| {
        // SAFETY: a loaded object's own name; RTLD_NOLOAD loads nothing,
        // and the reference it takes is dropped below.
        let handle = keeping_dlerror(|| unsafe { libc::dlopen(file.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) });
        if handle.is_null() {
            return None;
        }
        // SAFETY: a live handle; dlsym searches the object, then its
        // dependencies, hence the check of where the address lies.
        let p = unsafe { dlsym_quietly(handle, name) };
        // SAFETY: the handle dlopen returned, once.
        keeping_dlerror(|| unsafe { libc::dlclose(handle) });
        let d = defined_in(p).filter(|d| !p.is_null() && !d.import)?;
        (d.file.as_bytes() == file.to_bytes()).then_some((d.file, p as usize))
    })
}

/// libc's `tcache` and `thread_arena` relative to the thread pointer.
type MallocWords = [isize; 2];

/// A scratch block's malloc and `strerror` words (see the module docs).
///
/// # Safety
/// As for [`discover`]; `tp` is the caller's thread pointer.
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
unsafe fn probe(g: &Glibc, tp: usize, libc_off: isize, libc_len: usize, glibc_malloc: bool) -> Result<Probed, String> {
    extern "C" {
        fn strsignal(sig: libc::c_int) -> *mut libc::c_char;
    }
    type KeyCreate = unsafe extern "C" fn(*mut libc::pthread_key_t, Option<unsafe extern "C" fn(*mut c_void)>) -> i32;
    type SetSpecific = unsafe extern "C" fn(libc::pthread_key_t, *const c_void) -> i32;
    type KeyDelete = unsafe extern "C" fn(libc::pthread_key_t) -> i32;
    let next = |name: &std::ffi::CStr| {
        // SAFETY: RTLD_NEXT.
        let p = unsafe { dlsym_quietly(libc::RTLD_NEXT, name) };
        (!p.is_null()).then_some(p)
    };
    // glibc's own key functions (the interposer may hook these names).
    let keys = match (
        next(c"pthread_key_create"),
        next(c"pthread_setspecific"),
        next(c"pthread_key_delete"),
    ) {
        // SAFETY: glibc's functions of exactly these signatures.
        (Some(c), Some(s), Some(d)) => unsafe {
            Some((
                std::mem::transmute::<*mut c_void, KeyCreate>(c),
                std::mem::transmute::<*mut c_void, SetSpecific>(s),
                std::mem::transmute::<*mut c_void, KeyDelete>(d),
            ))
        },
        _ => None,
    };
    let len = g.static_size + g.align;
    // SAFETY: a fresh private mapping, ours alone.
    let mem = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if mem == libc::MAP_FAILED {
        return Err("no memory for a scratch TLS block".into());
    }
    let scratch = block_pointer(g, mem as usize + len);
    // SAFETY: `scratch` has static_size bytes around it (block_pointer),
    // all ours; `tp` is a complete block to copy the header from.
    if let Err(e) = unsafe { g.init_block(scratch, tp, 0) } {
        // SAFETY: our mapping, unused.
        unsafe { libc::munmap(mem, len) };
        return Err(format!("no DTV for a scratch TLS block: {e}"));
    }
    let words = libc_len / 8;
    let libc_at = |t: usize| (t as isize + libc_off) as usize;
    let snapshot = |t: usize| -> Vec<usize> {
        // SAFETY: libc's TLS block of a complete block, 8-aligned.
        (0..words).map(|i| unsafe { word(libc_at(t) + 8 * i) }).collect()
    };
    let tcb_words = |t: usize| -> Vec<usize> {
        // SAFETY: the TCB of a complete block.
        (0..g.tcb_size / 8).map(|i| unsafe { word(t + 8 * i) }).collect()
    };
    // No signal handler may run on the scratch block.
    let all = !0u64;
    let mut old = 0u64;
    // SAFETY: a raw rt_sigprocmask on two local 8-byte sets.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &all, &mut old, 8) };
    let before = snapshot(scratch);
    // SAFETY: the scratch block is complete; only the calls below run on
    // it (signals are blocked), and the thread's own block is reinstalled
    // right after them.
    let (malloc_words, tcb_before, tcb_after, used) = unsafe {
        arch::set_thread_pointer(scratch);
        let mw = if glibc_malloc {
            // The first malloc on a fresh block makes its cache and attaches
            // it to an arena: the two libc words that change.
            libc::free(libc::malloc(24));
            let after = snapshot(scratch);
            identify_malloc_words(&before, &after, libc_off, tp).map(Some)
        } else {
            Ok(None)
        };
        let (mut tcb_before, mut tcb_after) = (Vec::new(), Vec::new());
        if let Ok(words) = &mw {
            // From here the scratch block uses the thread's cache and arena,
            // as every fiber's will; then see which TCB words strsignal and
            // strerror of unknown numbers allocate.
            for off in words.iter().flatten() {
                let (dst, src) = ((scratch as isize + off) as usize, (tp as isize + off) as usize);
                (dst as *mut usize).write(word(src));
            }
            tcb_before = tcb_words(scratch);
            strsignal(12345);
            libc::strerror(12345);
            tcb_after = tcb_words(scratch);
        }
        // The byte glibc's pthread_setspecific sets besides the key's slot:
        // `specific_used`, which tells a thread's exit whether any key
        // slot may hold a value.
        let mut used = None;
        if let Some((create, set, delete)) = keys {
            let mut k: libc::pthread_key_t = 0;
            if create(&mut k, None) == 0 {
                let bytes = |t: usize| std::slice::from_raw_parts(t as *const u8, g.tcb_size).to_vec();
                let before = bytes(scratch);
                set(k, std::ptr::dangling::<c_void>());
                let after = bytes(scratch);
                set(k, std::ptr::null());
                delete(k);
                let slot = g.specific_1stblock + 16 * k as usize..g.specific_1stblock + 16 * (k as usize + 1);
                let changed: Vec<usize> = (0..g.tcb_size)
                    .filter(|&i| before[i] != after[i] && !slot.contains(&i))
                    .collect();
                if let [b] = changed[..] {
                    used = (after[b] == 1).then_some(b);
                }
            }
        }
        if !glibc_malloc {
            // Another allocator's state for the scratch block ends as a
            // thread's does, through the key destructor it set.
            g.run_key_destructors(scratch);
        }
        arch::set_thread_pointer(tp);
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &old,
            std::ptr::null_mut::<u64>(),
            8,
        );
        (mw, tcb_before, tcb_after, used)
    };
    let tls_state = {
        let changed: Vec<usize> = (0..tcb_after.len())
            .filter(|&i| tcb_after[i] != tcb_before[i])
            .collect();
        match changed[..] {
            [a, b] if b == a + 1 => Some([8 * a, 8 * b]),
            _ => None,
        }
    };
    // SAFETY: the scratch block is no longer installed anywhere. Its
    // strsignal/strerror buffers are freed with it; its own tcache (and the
    // arena the probe's malloc attached it to) stays: once per process.
    unsafe {
        if let Some(ts) = tls_state {
            for off in ts {
                libc::free(word(scratch + off) as *mut c_void);
            }
        }
        (g.deallocate_tls)(scratch as *mut c_void, false);
        libc::munmap(mem, len);
    }
    Ok(Probed {
        malloc_words: malloc_words?,
        tls_state,
        specific_used: used,
    })
}

/// What [`probe`] found on a scratch block.
struct Probed {
    malloc_words: Option<MallocWords>,
    tls_state: Option<[usize; 2]>,
    specific_used: Option<usize>,
}

/// From libc's TLS words before and after a `malloc(24)` + `free` on a
/// fresh block: `[tcache, thread_arena]` relative to the thread pointer; an
/// error when the words are not as glibc 2.26+ lays them out.
///
/// Of the two words that changed, the tcache is the one whose cache holds
/// a chunk just freed. That takes a size whose bin has room: a malloc
/// served from a reused arena's fastbin or smallbin moves the other chunks
/// of that size into the cache, up to its 7, and a free then goes to the
/// arena instead. So a few sizes are tried, each a bin of its own.
///
/// # Safety
/// Runs on the fresh block, as the `malloc` before it did.
unsafe fn identify_malloc_words(
    before: &[usize],
    after: &[usize],
    libc_off: isize,
    tp: usize,
) -> Result<MallocWords, String> {
    let changed: Vec<usize> = (0..after.len()).filter(|&i| after[i] != before[i]).collect();
    if changed.is_empty() {
        return Err("glibc's malloc left no trace in its TLS".into());
    }
    let [a, b] = changed[..] else {
        return Err(format!("{} libc TLS words changed in malloc, not 2", changed.len()));
    };
    // The cache: `uint16_t counts[64]` then `entries[64]`, bins 16 bytes
    // apart from the 32-byte minimum chunk; `entries[bin]` is the last chunk
    // freed into it.
    let holds = |w: usize, bin: usize, chunk: usize| {
        w != 0
            // SAFETY: a word that malloc just set, pointing at its cache.
            && unsafe { (w as *const u16).add(bin).read() >= 1 && word(w + 128 + 8 * bin) == chunk }
    };
    let mut found = None;
    for size in [24usize, 280, 520, 1000] {
        let bin = ((size + 8 + 15) & !15).max(32) / 16 - 2;
        // SAFETY: a plain allocation, freed at once (the caller's contract
        // for the block it runs on).
        let chunk = unsafe { libc::malloc(size) };
        // SAFETY: as above.
        unsafe { libc::free(chunk) };
        found = [(a, b), (b, a)]
            .into_iter()
            .find(|&(t, _)| holds(after[t], bin, chunk as usize));
        if found.is_some() {
            break;
        }
    }
    let Some((tcache, arena)) = found else {
        return Err("glibc's malloc tcache not found".into());
    };
    let off = |i: usize| libc_off + 8 * i as isize;
    // SAFETY: the thread's own block; both words are in libc's TLS.
    let thread_has =
        unsafe { word((tp as isize + off(tcache)) as usize) != 0 && word((tp as isize + off(arena)) as usize) != 0 };
    if !thread_has {
        return Err("the thread has no malloc cache to share".into());
    }
    Ok([off(tcache), off(arena)])
}

/// [`read_max_tls_modid`] as last read, 0 when it must be read again. A
/// fresh block's DTV is sized by it, and reading it takes the loader's
/// lock and walks every loaded object (~380 instructions a fiber made
/// without a pooled block). A stale value is safe: glibc grows a DTV
/// shorter than the highest module id when it initialises the block (see
/// [`new_dtv`]); the `dlopen` hook clears it.
static MAX_TLS_MODID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The highest TLS module id of the loaded objects (see [`MAX_TLS_MODID`]).
fn max_tls_modid() -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    match MAX_TLS_MODID.load(Relaxed) {
        0 => {
            let max = read_max_tls_modid();
            MAX_TLS_MODID.store(max, Relaxed);
            max
        }
        max => max,
    }
}

/// Objects may have been loaded or unloaded (a `dlopen`): the next fresh
/// block reads the highest TLS module id again.
pub fn loaded_objects_changed() {
    MAX_TLS_MODID.store(0, std::sync::atomic::Ordering::Relaxed);
}

/// For the line that says per-fiber TLS is off: the loaded objects with
/// thread-locals (a `PT_TLS` segment) that every fiber of an OS thread will
/// then share, leaving out glibc's and the loader's (which greenhook keeps
/// per fiber where it must: `errno`, keys), greenhook's own and a
/// replacement allocator's (per OS thread by design). A program or library
/// that keeps per-thread state in the others (a worker's index, an
/// exception in flight) sees every fiber as one thread: BIND's `named`,
/// whose workers each keep their id in a thread-local, hangs at start.
#[cfg(target_os = "linux")]
fn shared_by_fibers() -> String {
    const KEPT: [&str; 7] = [
        "libc.so",
        "ld-linux",
        "libgreenhook",
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
        "libpthread",
    ];
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info; `data` is our Vec.
        unsafe {
            let info = &*info;
            let out = &mut *(data as *mut Vec<String>);
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            if !phdrs.iter().any(|p| p.p_type == libc::PT_TLS && p.p_memsz > 0) {
                return 0;
            }
            let name = if info.dlpi_name.is_null() || *info.dlpi_name == 0 {
                "the program".to_string()
            } else {
                let full = std::ffi::CStr::from_ptr(info.dlpi_name).to_string_lossy();
                full.rsplit('/').next().unwrap_or_default().to_string()
            };
            out.push(name);
        }
        0
    }
    let mut names: Vec<String> = Vec::new();
    // SAFETY: the callback only reads what the loader passes and pushes to
    // `names`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut names).cast()) };
    names.retain(|n| !KEPT.iter().any(|k| n.starts_with(k)));
    if names.is_empty() {
        return String::new();
    }
    let more = names.len().saturating_sub(6);
    names.truncate(6);
    format!(
        ", so the thread-locals of {}{} are one per OS thread for all its fibers: \
         a program that keeps per-thread state there breaks (GREENHOOK_THREADS=native keeps pthreads OS threads)",
        names.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(not(target_os = "linux"))]
fn shared_by_fibers() -> String {
    String::new()
}

/// The highest TLS module id of the objects loaded now (ld.so numbers
/// them from 1: the executable's, then its libraries', then `dlopen`ed
/// ones'); at least 1.
#[cfg(target_os = "linux")]
fn read_max_tls_modid() -> usize {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info; `data` is our usize.
        unsafe {
            let max = &mut *(data as *mut usize);
            *max = (*max).max((*info).dlpi_tls_modid);
        }
        0
    }
    let mut max = 1usize;
    // SAFETY: the callback only reads what the loader passes and writes `max`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut max).cast()) };
    max
}

#[cfg(not(target_os = "linux"))]
fn read_max_tls_modid() -> usize {
    1
}

/// A DTV for a new block, as ld.so's `allocate_dtv` makes one (`calloc`ed
/// `dtv_t`s: the length, the generation, one entry per module id), but
/// with one spare entry instead of 14: glibc's spares cost 208 bytes of
/// heap a fiber more, and a DTV that turns out short is grown by glibc
/// itself (with `realloc`, in `_dl_allocate_tls_init` and when
/// `__tls_get_addr` meets a module `dlopen`ed later), as it grows a
/// thread's once its spares are used up. The one spare is for
/// `_dl_tls_get_addr_soft` (what `dl_iterate_phdr` reports as a module's
/// `dlpi_tls_data`), which takes the last entry for out of range while the
/// DTV is not current.
fn new_dtv() -> std::io::Result<usize> {
    let len = max_tls_modid() + 1;
    // SAFETY: a plain allocation; glibc reallocs and frees it as its own
    // (it is one, from the same malloc).
    let p = unsafe { libc::calloc(len + 2, 16) };
    if p.is_null() {
        return Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
    }
    // SAFETY: the first of `len + 2` entries: the length, in its counter.
    unsafe { (p as *mut usize).write(len) };
    Ok(p as usize + 16)
}

fn unsafe_zeroed<T>() -> T {
    // SAFETY: only used for plain C structs (Dl_info) where all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// The thread pointer of a block whose memory ends at `top`: the TCB at
/// the top, aligned down, the static TLS blocks below it.
pub(crate) fn block_pointer(g: &Glibc, top: usize) -> usize {
    (top - g.tcb_size) & !(g.align - 1)
}

/// The lowest address of the block whose thread pointer is `tp`.
pub(crate) fn block_low(g: &Glibc, tp: usize) -> usize {
    tp + g.tcb_size - g.static_size
}

impl Glibc {
    /// Makes the block at `tp` (see the module docs), copying the header
    /// and the malloc words from the block at `from`; with `dtv` (one a
    /// block of this slot had, kept by [`Glibc::release_block`]) instead
    /// of a new one ([`new_dtv`]).
    ///
    /// # Safety
    /// `[block_low(tp), tp + tcb_size)` is writable memory owned by the
    /// caller and not an installed block; `from` is a complete block; a
    /// non-zero `dtv` is one `release_block` kept, used by no other block.
    pub(crate) unsafe fn init_block(&self, tp: usize, from: usize, dtv: usize) -> std::io::Result<()> {
        let dtv = if dtv != 0 { dtv } else { new_dtv()? };
        // SAFETY: the caller's contract covers every address written.
        unsafe {
            // The header is copied whole; the rest of struct pthread starts
            // as zeros, as a new thread's descriptor does (one pass each:
            // a recycled block's header is not zeroed first for nothing).
            std::ptr::copy_nonoverlapping(from as *const u8, tp as *mut u8, self.header_size);
            std::ptr::write_bytes((tp + self.header_size) as *mut u8, 0, self.tcb_size - self.header_size);
            let w = |off: usize, v: usize| ((tp + off) as *mut usize).write(v);
            // tcb, dtv, self
            w(0, tp);
            w(8, dtv);
            w(16, tp);
            // multiple_threads: glibc's single-thread shortcuts (no atomic
            // lock prefix) must never apply, since a fiber's real
            // pthread_create would mark only its own block.
            ((tp + 24) as *mut i32).write(1);
            // gscope_flag
            ((tp + 28) as *mut i32).write(0);
            // What `_dl_allocate_tls` does after making a DTV: resizes it
            // if it is shorter than the highest module id, marks every
            // module's entry unallocated, copies the static TLS images.
            (self.allocate_tls_init)(tp as *mut c_void, true);
            w(self.list, tp + self.list);
            w(self.list + 8, tp + self.list);
            ((tp + self.tid) as *mut i32).write(((from + self.tid) as *const i32).read());
            let head = tp + self.robust_head;
            w(self.robust_head, head);
            w(self.robust_head + 8, word(from + self.robust_head + 8)); // futex_offset
            w(self.specific, tp + self.specific_1stblock);
            if let Some(off) = self.rseq_cpu_id {
                // RSEQ_CPU_ID_REGISTRATION_FAILED: sched_getcpu asks the kernel.
                ((tp + off) as *mut i32).write(-2);
            }
            for off in self.malloc_words.into_iter().flatten() {
                let (dst, src) = ((tp as isize + off) as usize, (from as isize + off) as usize);
                (dst as *mut usize).write(word(src));
            }
        }
        Ok(())
    }

    /// Frees what a block holds besides its memory and its DTV: the
    /// dynamic TLS of `dlopen`ed modules (what `_dl_deallocate_tls` frees
    /// but the DTV itself, whose entries are left unallocated) and glibc's
    /// `strsignal`/`strerror` buffers. Returns the DTV, for the next block
    /// of the same memory ([`Glibc::init_block`]) or [`Glibc::free_dtv`]:
    /// a spawn on a pooled stack then allocates nothing for its TLS.
    ///
    /// # Safety
    /// `tp` is a complete block, not installed, never used again as one.
    pub(crate) unsafe fn release_block(&self, tp: usize) -> usize {
        /// glibc's `TLS_DTV_UNALLOCATED`.
        const UNALLOCATED: usize = usize::MAX;
        // SAFETY: the caller's contract; the DTV is glibc's array of
        // `{val, to_free}` entries, its length in entry -1 (dtv_t is 16
        // bytes: `_thread_db_dtv_t_pointer_val` agrees).
        unsafe {
            // Most of these words are null: no call for them.
            if let Some(ts) = self.tls_state {
                for off in ts {
                    let buf = word(tp + off);
                    if buf != 0 {
                        libc::free(buf as *mut c_void);
                        ((tp + off) as *mut usize).write(0);
                    }
                }
            }
            let dtv = word(tp + 8);
            if dtv == 0 {
                return 0;
            }
            let len = word(dtv - 16);
            for i in 1..=len {
                let entry = dtv + 16 * i;
                let to_free = word(entry + 8);
                if to_free != 0 {
                    libc::free(to_free as *mut c_void);
                    ((entry + 8) as *mut usize).write(0);
                }
                (entry as *mut usize).write(UNALLOCATED);
            }
            dtv
        }
    }

    /// Frees a DTV [`Glibc::release_block`] kept (as `_dl_deallocate_tls`
    /// does: the array starts one entry before what the TCB points at).
    ///
    /// # Safety
    /// `dtv` came from `release_block` and is used by no block.
    pub(crate) unsafe fn free_dtv(&self, dtv: usize) {
        if dtv != 0 {
            // SAFETY: the caller's contract; glibc calloc'ed it.
            unsafe { libc::free((dtv - 16) as *mut c_void) };
        }
    }

    /// glibc's `__nptl_deallocate_tsd` for the block at `tp` (which is not
    /// exported): each key slot set through glibc whose key still exists
    /// with the same sequence number gets its destructor, for up to
    /// `PTHREAD_DESTRUCTOR_ITERATIONS` (4) rounds while destructors set
    /// new values; then the second-level slot blocks are freed.
    ///
    /// # Safety
    /// `tp` is the calling context's block, a fiber's own.
    unsafe fn run_key_destructors(&self, tp: usize) {
        /// Key slots per second-level block, and blocks.
        const PER_BLOCK: usize = 32;
        let used = self.specific_used.map(|off| (tp + off) as *mut u8);
        // SAFETY: the flag byte of a complete block.
        if used.is_some_and(|u| unsafe { u.read() } == 0) {
            return; // no key slot was ever set: the common case
        }
        for _round in 0..4 {
            if let Some(u) = used {
                // SAFETY: as above; glibc's setspecific sets it again if a
                // destructor stores a new value.
                unsafe { u.write(0) };
            }
            let mut ran = false;
            for block in 0..PER_BLOCK {
                // SAFETY: `specific[block]` of a complete block.
                let level2 = unsafe { word(tp + self.specific + 8 * block) } as *mut [usize; 2];
                if level2.is_null() {
                    continue;
                }
                for inner in 0..PER_BLOCK {
                    // SAFETY: a slot block glibc allocated (or the inline
                    // first one), 32 `{seq, data}` entries; keys index
                    // glibc's 1024-entry table.
                    unsafe {
                        let slot = &mut *level2.add(inner);
                        if slot[1] == 0 {
                            continue;
                        }
                        let data = std::mem::replace(&mut slot[1], 0);
                        let [seq, destr] = *self.pthread_keys.add(block * PER_BLOCK + inner);
                        if slot[0] == seq && destr != 0 {
                            let destr: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(destr);
                            destr(data as *mut c_void);
                            ran = true;
                        }
                    }
                }
            }
            // SAFETY: as above.
            let again = used.map_or(ran, |u| unsafe { u.read() } != 0);
            if !again {
                break;
            }
        }
        for block in 1..PER_BLOCK {
            let at = tp + self.specific + 8 * block;
            // SAFETY: as above; glibc allocated these blocks with calloc.
            unsafe {
                let p = word(at);
                if p != 0 {
                    libc::free(p as *mut c_void);
                    (at as *mut usize).write(0);
                }
            }
        }
    }

    /// What glibc's thread start does in the new thread before its start
    /// routine: the locale's ctype tables for this block.
    ///
    /// # Safety
    /// Called in the fiber whose block is installed.
    pub(crate) unsafe fn thread_started(&self) {
        // SAFETY: the caller's contract.
        unsafe { (self.ctype_init)() }
    }

    /// `errno` of the block at `tp`.
    pub(crate) fn errno_of(&self, tp: usize) -> *mut i32 {
        (tp as isize + self.errno) as *mut i32
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// On this platform everything is found, the optional words included,
    /// and agrees with what glibc 2.36's layout says where it is known.
    #[test]
    fn glibc_is_understood() {
        let g = glibc().expect("per-fiber TLS set up");
        assert!(g.tcb_size > g.header_size && g.static_size > g.tcb_size);
        assert!(g.tls_state.is_some(), "strerror/strsignal buffers not found");
        assert!(g.specific_used.is_some(), "specific_used not found");
        let [tcache, arena] = g.malloc_words.expect("malloc words");
        assert!(tcache < 0 && arena < 0, "malloc words below the thread pointer");
    }

    /// A block made here looks like glibc's own: self pointers, the
    /// canary and pointer guard of the creator, its own errno.
    #[test]
    fn a_block_is_a_thread_control_block() {
        let g = glibc().unwrap();
        let pool = crate::StackPool::leak();
        let f = crate::Fiber::new(pool, None, None, crate::Tls::Own, |_| {
            crate::errno::set(5);
        })
        .unwrap();
        let tp = f.thread_pointer();
        assert_ne!(tp, 0);
        let me = arch::thread_pointer();
        // SAFETY: both are complete blocks.
        unsafe {
            assert_eq!(word(tp), tp);
            assert_eq!(word(tp + 16), tp);
            assert_eq!(word(tp + 0x28), word(me + 0x28), "stack guard");
            assert_eq!(word(tp + 0x30), word(me + 0x30), "pointer guard");
            assert!(same_os_thread(tp));
        }
        assert!(f.resume());
        assert_eq!(f.saved_errno(), 5);
        assert_ne!(g.errno_of(tp), crate::errno::location());
    }
}
