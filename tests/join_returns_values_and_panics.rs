//! join returns the fiber's value, propagates panics like std, and works
//! from fibers (nested spawns) as well as from the root.
use std::time::Duration;

#[test]
fn join_returns_the_value() {
    let h = greenhook::spawn(|| String::from("hello"));
    assert_eq!(h.join().unwrap(), "hello");
}

#[test]
fn a_panic_is_returned_to_the_joiner() {
    let h = greenhook::Builder::new()
        .name("boom".into())
        .spawn(|| -> u32 { panic!("kaboom {}", 7) })
        .unwrap();
    let err = h.join().unwrap_err();
    // A literal-only format string may be folded to a &'static str payload.
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert_eq!(msg, "kaboom 7");
    // The hub survives: more fibers run fine.
    assert_eq!(greenhook::spawn(|| 5).join().unwrap(), 5);
}

#[test]
fn nested_spawns_join_from_fibers() {
    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            greenhook::sleep(Duration::from_millis(1));
            return 1;
        }
        let a = greenhook::spawn(move || tree(depth - 1));
        let b = greenhook::spawn(move || tree(depth - 1));
        a.join().unwrap() + b.join().unwrap()
    }
    let h = greenhook::spawn(|| tree(8));
    assert_eq!(h.join().unwrap(), 256);
}

#[test]
fn names_and_ids() {
    let root = greenhook::current();
    assert_eq!(root.id(), greenhook::current().id());
    // The root context is the OS thread: it has the thread's std name.
    assert_eq!(root.name(), std::thread::current().name());
    assert!(format!("{:?}", root.id()).starts_with("ThreadId(root "));
    let h = greenhook::Builder::new()
        .name("worker".into())
        .stack_size(64 * 1024)
        .spawn(|| {
            let me = greenhook::current();
            (me.id(), me.name().map(str::to_owned))
        })
        .unwrap();
    let id = h.thread().id();
    assert_eq!(h.thread().name(), Some("worker"));
    let (inner_id, name) = h.join().unwrap();
    assert_eq!(inner_id, id);
    assert_ne!(id, root.id());
    assert_eq!(name.as_deref(), Some("worker"));
    let unnamed = greenhook::spawn(|| greenhook::current().name().map(str::to_owned));
    assert_eq!(unnamed.thread().name(), None);
    assert_eq!(unnamed.join().unwrap(), None);
}

#[test]
fn root_ids_differ_between_os_threads() {
    let here = greenhook::current().id();
    let there = std::thread::spawn(|| greenhook::current().id()).join().unwrap();
    assert_ne!(here, there);
    let fiber = greenhook::spawn(|| greenhook::current().id()).join().unwrap();
    assert_ne!(fiber, here);
}

#[test]
fn a_nul_in_the_name_panics_as_in_std() {
    let r = std::panic::catch_unwind(|| greenhook::Builder::new().name("a\0b".into()).spawn(|| ()));
    let err = r.unwrap_err();
    assert_eq!(
        err.downcast_ref::<&str>(),
        Some(&"thread name may not contain interior null bytes")
    );
}

#[test]
fn is_finished_tracks_completion() {
    let h = greenhook::spawn(|| greenhook::sleep(Duration::from_millis(5)));
    assert!(!h.is_finished());
    greenhook::sleep(Duration::from_millis(50));
    assert!(h.is_finished());
    h.join().unwrap();
}
