//! In a `patch_all()` program threads stay real, and glibc's own unwinding
//! of them — `pthread_exit`, and cancellation of a thread blocked in a
//! hooked call — must pass through greenhook's hooks as it passes through C
//! frames (a `catch_unwind` in a hook used to catch it, and glibc aborted
//! with "FATAL: exception not rethrown").

use std::sync::atomic::{AtomicUsize, Ordering};

static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// glibc's `PTHREAD_CANCELED`: `(void *) -1`.
const PTHREAD_CANCELED: usize = usize::MAX;

// glibc's functions that may unwind, declared so: the `libc` crate declares
// them `extern "C"`, and Rust then puts no cleanup around their calls.
extern "C-unwind" {
    fn pthread_exit(v: *mut libc::c_void) -> !;
    fn read(fd: libc::c_int, buf: *mut libc::c_void, n: libc::size_t) -> libc::ssize_t;
}

/// Counts the frames the forced unwind cleaned up.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

fn start(routine: extern "C-unwind" fn(*mut libc::c_void) -> *mut libc::c_void, arg: usize) -> libc::pthread_t {
    let mut t: libc::pthread_t = 0;
    // SAFETY: a valid out pointer and a start routine that takes the
    // argument as a plain number. The routine is declared C-unwind so that
    // glibc's forced unwind may leave it; libc's binding says "C", hence
    // the transmute between the two function pointer types of one ABI.
    let r = unsafe {
        libc::pthread_create(
            &mut t,
            std::ptr::null(),
            std::mem::transmute::<
                extern "C-unwind" fn(*mut libc::c_void) -> *mut libc::c_void,
                extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
            >(routine),
            arg as *mut libc::c_void,
        )
    };
    assert_eq!(r, 0);
    t
}

fn join(t: libc::pthread_t) -> usize {
    let mut v: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: a joinable thread we made, a valid out pointer.
    assert_eq!(unsafe { libc::pthread_join(t, &mut v) }, 0);
    v as usize
}

extern "C-unwind" fn exits(arg: *mut libc::c_void) -> *mut libc::c_void {
    let _c = Cleanup;
    // SAFETY: ends this thread; the unwind runs `_c`'s drop.
    unsafe { pthread_exit(arg) }
}

extern "C-unwind" fn reads_until_cancelled(arg: *mut libc::c_void) -> *mut libc::c_void {
    let _c = Cleanup;
    let fd = arg as libc::c_int;
    let mut b = [0u8; 1];
    // SAFETY: a pipe's read end, a valid buffer. Blocks until cancelled
    // (read is a cancellation point; under patch_all it is our hook).
    unsafe { read(fd, b.as_mut_ptr().cast(), 1) };
    std::ptr::null_mut()
}

#[test]
fn pthread_exit_and_cancellation_unwind_through_the_hooks() {
    greenhook::monkey::patch_all();
    let t = start(exits, 42);
    assert_eq!(join(t), 42);
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        1,
        "the forced unwind ran the thread's cleanup"
    );

    let mut p = [0; 2];
    // SAFETY: a valid array of two fds.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    let t = start(reads_until_cancelled, p[0] as usize);
    std::thread::sleep(std::time::Duration::from_millis(100));
    // SAFETY: a live thread we made.
    assert_eq!(unsafe { libc::pthread_cancel(t) }, 0);
    assert_eq!(join(t), PTHREAD_CANCELED);
    assert_eq!(DROPPED.load(Ordering::SeqCst), 2, "the cancelled thread's cleanup ran");
    // SAFETY: our fds.
    unsafe {
        libc::close(p[0]);
        libc::close(p[1]);
    }
}
