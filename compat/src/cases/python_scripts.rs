//! python3 running scripts of the suite that check their own guarantees
//! and print a line per step, the same whatever the interleaving:
//! - `compat/programs/python_sync.py`: `ThreadPoolExecutor`,
//!   `queue.Queue`, `Barrier`, `BoundedSemaphore`, `Condition`, timed
//!   waits on `Lock`, `Event` and `join`, and `threading.local`. CPython's
//!   locks are POSIX semaphores (a timed acquire is `sem_clockwait`), so
//!   every wait there is a semaphore wait: a park on the hub under
//!   greenhook.
//! - `compat/programs/python_processes.py`: `multiprocessing` under the
//!   fork, spawn and forkserver start methods (pools, a shared lock and
//!   value, queues; pipes passed by inheritance and over a Unix socket,
//!   named semaphores), `ProcessPoolExecutor`, asyncio with an executor and
//!   a subprocess, a signal from a thread, `subprocess.run`.
//! - `compat/programs/python_grpc_zmq.py`: Debian's gRPC (a server on a
//!   pool of 8, the four kinds of call, 8 client threads, a deadline, 1
//!   MiB messages, a stop with calls in flight) and pyzmq (REQ/REP,
//!   PUB/SUB, PUSH/PULL over inproc and tcp, a poller, `term`); calls
//!   after a `subprocess` (gRPC's `atfork` child handler took the parent's
//!   fd out of the shared epoll set: each later call timed out); Ctrl-C
//!   sent from a thread or another process to a main thread waiting in
//!   `Event.wait`, a gRPC call, a zmq `recv`, `time.sleep` (it ran in the
//!   sender: main waited on), and a handler during a timed `Lock.acquire`.
//! - `compat/programs/numpy_blas.py`: Debian's numpy on OpenBLAS's
//!   pthreads build, 4 threads: products (whose threads wait for each
//!   other with `sched_yield`), from 4 Python threads at once; LAPACK's SVD
//!   and solve (whose LU factorisation's threads wait for each other in
//!   loops that call nothing: each such wait ends at a preemption tick).

use std::time::Duration;

use super::{Case, Ctx, Mode, Side};
use crate::apt::{self, Need};

const TIMEOUT: Duration = Duration::from_secs(120);

pub const CASES: [Case; 4] = [
    Case {
        name: "python-sync",
        program: "python3 threading: pool, queue, barrier, semaphore, condition, timed waits, locals",
        quick: true,
        needs: &[Need::command("python3", "python3")],
        run: |ctx, mode| script(ctx, mode, "python-sync", "programs/python_sync.py"),
    },
    Case {
        name: "python-processes",
        program: "python3 multiprocessing (fork, spawn, forkserver), ProcessPoolExecutor, asyncio subprocess, signals",
        quick: true,
        needs: &[Need::command("python3", "python3")],
        run: |ctx, mode| script(ctx, mode, "python-processes", "programs/python_processes.py"),
    },
    Case {
        name: "python-grpc-zmq",
        program: "python3 gRPC and pyzmq: a server on a pool of 8, 4 kinds of call, deadlines, subprocesses between calls, Ctrl-C to a waiting main thread, zmq patterns",
        quick: true,
        needs: &[
            Need::command("python3", "python3"),
            Need::file("python3-grpcio", "/usr/lib/python3/dist-packages/grpc/__init__.py"),
            Need::file("python3-zmq", "/usr/lib/python3/dist-packages/zmq/__init__.py"),
        ],
        run: |ctx, mode| script(ctx, mode, "python-grpc-zmq", "programs/python_grpc_zmq.py"),
    },
    Case {
        name: "numpy",
        program: "python3 numpy on OpenBLAS's pthreads pool of 4 (spin waits: sched_yield, or none at all): products, from 4 threads at once, SVD, solve",
        quick: true,
        needs: &[
            Need::command("python3", "python3"),
            Need::file("python3-numpy", "/usr/lib/python3/dist-packages/numpy/__init__.py"),
            Need::file(
                "libopenblas0-pthread",
                "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
            ),
        ],
        run: |ctx, mode| script(ctx, mode, "numpy", "programs/numpy_blas.py"),
    },
];

fn script(ctx: &Ctx, mode: Mode, label: &str, file: &str) -> Side {
    super::run_script(ctx, mode, label, apt::python3(), file, TIMEOUT)
}
