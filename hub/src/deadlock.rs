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
        let mut msg = String::from("greenhook: deadlock: all fibers are asleep and nothing can wake them\n");
        msg.push_str(&describe(&self.root));
        for t in self.tasks.borrow().iter() {
            msg.push_str(&describe(t));
        }
        let _g = internal::Guard::new();
        eprint!("{msg}");
        std::process::exit(DEADLOCK_EXIT_CODE);
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
