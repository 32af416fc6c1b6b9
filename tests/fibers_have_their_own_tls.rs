//! Fibers of the Rust API have thread-local storage of their own (issue
//! 10), without any patching: `thread_local!`, `errno`, std's thread
//! identity, and the destructors of thread-locals and of `pthread_key`s set
//! through glibc, which run when the fiber ends, in its own context.
//! `Builder::shared_tls` opts out.
mod util;

use std::cell::Cell;
use std::ffi::{c_int, c_void, CString};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

thread_local! {
    static MINE: Cell<u32> = const { Cell::new(0) };
}

/// Eight fibers keep their own `thread_local!` and `errno` across sleeps
/// that run the others; the OS thread's stays untouched.
#[test]
fn thread_locals_and_errno_are_per_fiber() {
    let hs: Vec<_> = (1..=8u32)
        .map(|i| {
            greenhook::spawn(move || {
                MINE.with(|m| m.set(i));
                // SAFETY: this context's errno slot.
                unsafe { *libc::__errno_location() = 100 + i as i32 };
                greenhook::sleep(Duration::from_millis(10));
                // SAFETY: as above.
                let e = unsafe { *libc::__errno_location() };
                (MINE.with(|m| m.get()), e)
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        let i = i as u32 + 1;
        assert_eq!(h.join().unwrap(), (i, 100 + i as i32));
    }
    assert_eq!(MINE.with(|m| m.get()), 0);
}

/// With `shared_tls`, fibers see and change their thread's thread-locals
/// (the opt-out, for density).
#[test]
fn shared_tls_fibers_share_the_threads_thread_locals() {
    std::thread::spawn(|| {
        MINE.with(|m| m.set(41));
        let h = greenhook::Builder::new()
            .shared_tls(true)
            .spawn(|| MINE.with(|m| m.replace(42)))
            .unwrap();
        assert_eq!(h.join().unwrap(), 41);
        assert_eq!(MINE.with(|m| m.get()), 42);
    })
    .join()
    .unwrap();
}

static KEY_DESTROYED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn key_destructor(p: *mut libc::c_void) {
    // SAFETY: the value set below, a leaked Box<u32>.
    let v = unsafe { Box::from_raw(p.cast::<u32>()) };
    KEY_DESTROYED.fetch_add(*v as usize, Ordering::SeqCst);
}

/// A value set with glibc's `pthread_setspecific` in a fiber (a C library
/// keeping per-thread state) is destroyed when the fiber ends, before its
/// join returns, as at a thread's exit; keys past the first 32 too.
#[test]
fn pthread_key_destructors_run_when_the_fiber_ends() {
    let mut keys = [0 as libc::pthread_key_t; 40];
    for k in &mut keys {
        // SAFETY: a fresh key with an extern "C" destructor.
        assert_eq!(unsafe { libc::pthread_key_create(k, Some(key_destructor)) }, 0);
    }
    let (first, last) = (keys[0], keys[39]);
    let h = greenhook::spawn(move || {
        for (k, v) in [(first, 1u32), (last, 10)] {
            // SAFETY: a live key; the value is a leaked box the destructor frees.
            unsafe { libc::pthread_setspecific(k, Box::into_raw(Box::new(v)).cast()) };
        }
        greenhook::sleep(Duration::from_millis(5));
    });
    h.join().unwrap();
    assert_eq!(KEY_DESTROYED.load(Ordering::SeqCst), 11);
    for k in keys {
        // SAFETY: keys made above.
        unsafe { libc::pthread_key_delete(k) };
    }
}

/// `thread_local!` destructors run in the fiber, before its join returns.
#[test]
fn thread_local_destructors_run_in_the_fiber() {
    static DROPPED_WITH: AtomicUsize = AtomicUsize::new(0);
    struct Noted;
    impl Drop for Noted {
        fn drop(&mut self) {
            // Still in the fiber: its own MINE.
            DROPPED_WITH.store(MINE.with(|m| m.get()) as usize, Ordering::SeqCst);
        }
    }
    thread_local! {
        static NOTED: std::cell::RefCell<Option<Noted>> = const { std::cell::RefCell::new(None) };
    }
    greenhook::spawn(|| {
        MINE.with(|m| m.set(77));
        NOTED.with(|n| *n.borrow_mut() = Some(Noted));
    })
    .join()
    .unwrap();
    assert_eq!(DROPPED_WITH.load(Ordering::SeqCst), 77);
}

/// A fiber's DTV starts with room for the modules loaded when its block is
/// made and one spare, not glibc's 14; libraries with `__thread` variables
/// `dlopen`ed later make glibc grow it (`realloc`) when the fiber first
/// uses them. Three of them, loaded while fibers with TLS of their own are
/// asleep: each fiber keeps its own value in every library and sees its
/// initial ones, and so does a fiber made after the loads, on a recycled
/// block.
#[test]
fn libraries_dlopened_later_grow_each_fibers_dtv() {
    let built = util::compile_shared("tls_dlopen_lib");
    // Three copies: three modules (ld.so tells files apart by inode).
    let libs: Vec<_> = (0..3)
        .map(|i| {
            let p = built.with_file_name(format!("libtls_dlopen_copy{i}.so"));
            std::fs::copy(&built, &p).expect("copy the library");
            p
        })
        .collect();
    type Set = unsafe extern "C" fn(c_int);
    type Get = unsafe extern "C" fn() -> c_int;
    /// Each library's `tls_lib_set`, `tls_lib_get`, `tls_lib_get_initialised`.
    type Libs = [(Set, Get, Get); 3];
    let loaded: Rc<Cell<Option<Libs>>> = Rc::new(Cell::new(None));
    // Uses every library from the calling fiber: its values are `base + k`.
    let use_all = |fns: Libs, base: c_int| {
        for (k, (set, _, init)) in fns.iter().enumerate() {
            // SAFETY: the libraries' functions, loaded below and never closed.
            unsafe {
                assert_eq!(init(), 7, "the library's initial value");
                set(base + k as c_int);
            }
        }
        greenhook::sleep(Duration::from_millis(5));
        // SAFETY: as above.
        (0..3).all(|k| unsafe { fns[k].1() } == base + k as c_int)
    };
    let hs: Vec<_> = (1..=4)
        .map(|i| {
            let loaded = loaded.clone();
            greenhook::spawn(move || {
                while loaded.get().is_none() {
                    greenhook::sleep(Duration::from_millis(1));
                }
                use_all(loaded.get().unwrap(), 10 * i)
            })
        })
        .collect();
    greenhook::sleep(Duration::from_millis(5)); // every fiber waits, its DTV made
    let sym = |h: *mut c_void, name: &std::ffi::CStr| {
        // SAFETY: a handle dlopen returned; the name is NUL-terminated.
        let p = unsafe { libc::dlsym(h, name.as_ptr()) };
        assert!(!p.is_null(), "{name:?} not found");
        p
    };
    let mut all = Vec::new();
    for lib in &libs {
        let c = CString::new(lib.to_str().unwrap()).unwrap();
        // SAFETY: a library of plain C functions; never closed.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
        assert!(!h.is_null(), "dlopen {}", lib.display());
        // SAFETY: the library's functions have exactly these signatures.
        all.push(unsafe {
            (
                std::mem::transmute::<*mut c_void, Set>(sym(h, c"tls_lib_set")),
                std::mem::transmute::<*mut c_void, Get>(sym(h, c"tls_lib_get")),
                std::mem::transmute::<*mut c_void, Get>(sym(h, c"tls_lib_get_initialised")),
            )
        });
    }
    let fns: Libs = all.try_into().unwrap_or_else(|_| unreachable!());
    loaded.set(Some(fns));
    for h in hs {
        assert!(h.join().unwrap(), "a fiber lost its value in a dlopened library");
    }
    let late = greenhook::spawn(move || use_all(fns, 100));
    assert!(late.join().unwrap(), "a fiber made after the loads");
}
