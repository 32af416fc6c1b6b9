//! The JVM (OpenJDK 17) running `compat/programs/JavaTour.java` from source:
//! a thread pool with a monitor-guarded counter, a wait/notify ping-pong and
//! a timed condition, a `Future.get(300 ms)` beside a thread computing in
//! compiled code (code without unwind tables: it times out only if that
//! thread is preempted), a loopback echo between threads, a child process,
//! sleeps and collections from 8 threads. Class files come from the JDK's
//! `modules` image by `pread`, in one call each.

use std::time::Duration;

use super::{Case, Ctx, Mode, Side};
use crate::apt::{find_command, Need};

const TIMEOUT: Duration = Duration::from_secs(120);

pub const CASE: Case = Case {
    name: "java",
    program: "java 17 (OpenJDK): a thread pool, monitors, wait/notify, a timed get beside a computing thread, a loopback echo, a child process, sleeps and GC from 8 threads",
    quick: false,
    needs: &[Need::command("openjdk-17-jdk-headless", "java")],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(java) = find_command("java") else {
        return Side::broken("java is not installed".into());
    };
    super::run_script(ctx, mode, "java", java, "programs/JavaTour.java", TIMEOUT)
}
