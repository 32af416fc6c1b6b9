//! A stack overflow in a fiber is reported by id, name and size, in a child
//! process (it aborts); faults outside fibers keep their normal behaviour.
use std::process::Command;

fn recurse(n: u64) -> u64 {
    let buf = [n as u8; 1024];
    std::hint::black_box(&buf);
    if n == 0 {
        return 0;
    }
    recurse(n - 1) + buf[7] as u64
}

fn child(test: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("GREENHOOK_TEST_CHILD", "1")
        .output()
        .unwrap()
}

#[test]
fn overflow_names_the_fiber() {
    if std::env::var_os("GREENHOOK_TEST_CHILD").is_some() {
        let h = greenhook::Builder::new()
            .name("deep".into())
            .stack_size(64 * 1024)
            .spawn(|| recurse(1_000_000))
            .unwrap();
        let _ = h.join();
        unreachable!();
    }
    let out = child("overflow_names_the_fiber");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("greenhook: fiber "), "{err}");
    assert!(err.contains("'deep' overflowed its 64 KiB stack"), "{err}");
}

/// The overflowing fiber is named even when it runs because another handed
/// it control directly (a yield between two fibers skips the root), and
/// even when the one that handed over has a bigger stack.
#[test]
fn overflow_in_a_handed_over_fiber_names_it() {
    if std::env::var_os("GREENHOOK_TEST_CHILD").is_some() {
        let partner = greenhook::Builder::new()
            .name("partner".into())
            .stack_size(256 * 1024)
            .spawn(|| loop {
                greenhook::yield_now();
            })
            .unwrap();
        let h = greenhook::Builder::new()
            .name("deep".into())
            .stack_size(64 * 1024)
            .spawn(|| {
                for _ in 0..10 {
                    greenhook::yield_now();
                }
                recurse(1_000_000)
            })
            .unwrap();
        let _ = h.join();
        drop(partner);
        unreachable!();
    }
    let out = child("overflow_in_a_handed_over_fiber_names_it");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("'deep' overflowed its 64 KiB stack"), "{err}");
}

#[test]
fn other_segfaults_are_not_reported_as_overflow() {
    if std::env::var_os("GREENHOOK_TEST_CHILD").is_some() {
        greenhook::spawn(|| ()).join().unwrap(); // installs the handler
                                                 // SAFETY: deliberately faulting in a child process.
        unsafe { std::ptr::null_mut::<u64>().write_volatile(1) };
        unreachable!();
    }
    let out = child("other_segfaults_are_not_reported_as_overflow");
    let err = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{err}");
    assert!(!err.contains("overflowed"), "{err}");
}
