//! The deadlock report: when the root must wait and nothing can ever wake
//! anything (no runnable fiber, no timer, no fd wait, no pending wake-up
//! from another thread), the hub says who waits on what and exits.

use crate::{internal, Hub, Task, Waiting};

/// Exit status used when every fiber is blocked and nothing can wake any of
/// them (like Go's "all goroutines are asleep - deadlock!").
pub const DEADLOCK_EXIT_CODE: i32 = 86;

impl Hub {
    /// Prints every task and what it waits on, then exits with
    /// [`DEADLOCK_EXIT_CODE`].
    #[cold]
    pub(crate) fn deadlock(&self) -> ! {
        self.report("all fibers are asleep and nothing can wake them");
        std::process::exit(DEADLOCK_EXIT_CODE);
    }

    /// The report alone, once per process, when only a signal can still
    /// wake anything (see [`internal::set_signals_may_wake`]).
    #[cold]
    pub(crate) fn report_deadlock_once(&self) {
        static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !TOLD.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.report(
                "all fibers are asleep; only a signal can wake them now (a handler is installed), waiting for one",
            );
        }
    }

    fn report(&self, why: &str) {
        let _g = internal::Guard::new();
        let mut msg = format!("greenhook: deadlock: {why}\n");
        msg.push_str(&describe(&self.root));
        for t in self.tasks.borrow().iter() {
            msg.push_str(&describe(t));
        }
        eprint!("{msg}");
    }
}

/// One line of the report: the task, its name, and what it waits on.
fn describe(t: &Task) -> String {
    let name = t
        .name()
        .map(str::to_owned)
        .or_else(|| internal::user_name(t.user()))
        .filter(|n| !n.is_empty())
        .map(|n| format!(" '{n}'"))
        .unwrap_or_default();
    let what = match t.waiting() {
        Waiting::Nothing => "is not waiting".to_string(),
        Waiting::Sleep => "sleeps".to_string(),
        Waiting::Fd(fd, i) => format!("waits for fd {fd} to be {i:?}"),
        Waiting::Park(a) => format!("waits on address {a:#x}"),
        Waiting::Object(kind, a) => format!("waits on {kind} {a:#x}{}", internal::owner_of(kind, a)),
        Waiting::Join(id) => format!("joins fiber {id}"),
        Waiting::Remote => "waits for another thread".to_string(),
    };
    if t.is_root() {
        format!("  main (root){name} {what}\n")
    } else {
        format!("  fiber {}{name} {what}\n", t.id())
    }
}
