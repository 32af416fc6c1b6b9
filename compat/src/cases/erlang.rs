//! Erlang/OTP's BEAM running `compat/programs/erlang_tour.erl` as an
//! escript: 4 schedulers, 4 dirty CPU and 8 dirty I/O schedulers, 4 async
//! threads and the poll thread, all fibers under greenhook. 20,000
//! processes and a ring, timers, links and monitors, a TCP echo with 32
//! clients, a UDP echo one datagram at a time, inets' HTTP server and
//! client, files and dets on the dirty I/O schedulers, ports (`os:cmd`,
//! `cat`, an exit status), ets from 8 processes, crypto hashes on the
//! dirty CPU schedulers, garbage collection.
//!
//! The BEAM waits for its own work with raw futex calls (hooked through
//! `syscall`), and its idle schedulers spin and `sched_yield` before they
//! sleep: until `sched_yield` let what I/O woke run first, each hop of the
//! UDP echo waited for a round of them (350 µs a round trip, 31–57 µs
//! unpatched; now ~26 µs).

use std::time::Duration;

use super::{run_script, Case, Ctx, Mode, Side};
use crate::apt::{find_command, Need};

const TIMEOUT: Duration = Duration::from_secs(120);

pub const CASE: Case = Case {
    name: "erlang",
    program: "Erlang/OTP 25 escript (4 schedulers, 12 dirty, 4 async threads): 20,000 processes, timers, TCP/UDP echoes, HTTP, files, dets, ports",
    quick: true,
    needs: &[
        Need::command("erlang-base", "escript"),
        // OTP's applications, in directories named by their versions.
        Need::versioned("erlang-crypto", "/usr/lib/erlang/lib", "ebin/crypto.app"),
        Need::versioned("erlang-inets", "/usr/lib/erlang/lib", "ebin/inets.app"),
    ],
    run,
};

fn run(ctx: &Ctx, mode: Mode) -> Side {
    let Some(escript) = find_command("escript") else {
        return Side::broken("escript is not installed".into());
    };
    run_script(ctx, mode, "erlang", escript, "programs/erlang_tour.erl", TIMEOUT)
}
