"""Python's multiprocessing under each start method, and its neighbours.

For fork, spawn and forkserver: a Pool of 4 mapping over 1,000 numbers, 4
processes sharing a Lock and a Value through a Queue, a duplex Pipe (a
socketpair) to a child that waits for its message, then a
ProcessPoolExecutor; asyncio with an executor and a subprocess; a signal
sent from a thread; subprocess.run with input. spawn and forkserver pass
pipes and sockets to other processes by inheritance (pass_fds, the
resource tracker) and over a Unix socket (the forkserver's requests;
Connection objects), and their semaphores
are named POSIX semaphores (sem_open) shared across processes. Prints one
deterministic line per step; exits 1 on a broken guarantee.
"""

import asyncio
import concurrent.futures as cf
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time


def square(x):
    return x * x


def bump(q, lock, counter):
    for _ in range(200):
        with lock:
            counter.value += 1
    q.put(os.getpid())


def double(conn):
    # Whether the inherited socket shows as blocking, as it was made.
    blocking = os.get_blocking(conn.fileno())
    conn.send((conn.recv() * 2, blocking))


def check(step, ok, detail=""):
    if not ok:
        print(f"{step}: FAILED {detail}", flush=True)
        sys.exit(1)


def start_methods():
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(4) as pool:
            total = sum(pool.map(square, range(1000)))
        q, lock, counter = ctx.Queue(), ctx.Lock(), ctx.Value("i", 0)
        procs = [ctx.Process(target=bump, args=(q, lock, counter)) for _ in range(4)]
        for p in procs:
            p.start()
        pids = {q.get(timeout=60) for _ in procs}
        for p in procs:
            p.join()
        # A duplex Pipe (a socketpair): the child waits for the first message.
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=double, args=(theirs,))
        p.start()
        time.sleep(0.2)
        mine.send(21)
        doubled, blocking = mine.recv()
        p.join()
        codes = [p.exitcode for p in procs + [p]]
        check(method, total == 332833500 and counter.value == 800 and len(pids) == 4 and doubled == 42
              and blocking and codes == [0] * 5,
              f"sum {total}, counter {counter.value}, {len(pids)} pids, pipe {doubled} (blocking: {blocking}), "
              f"exit codes {codes}")
        print(f"{method}: pool sum {total}; 4 processes counted to {counter.value} under one lock; "
              f"a duplex pipe, blocking in the child, answered {doubled}; exit codes 0")


def executor():
    with cf.ProcessPoolExecutor(3) as ex:
        total = sum(ex.map(square, range(100)))
    check("executor", total == 328350, str(total))
    print(f"executor: ProcessPoolExecutor sum {total}")


async def with_loop():
    loop = asyncio.get_running_loop()
    squares = await asyncio.gather(*[loop.run_in_executor(None, square, i) for i in range(50)])
    proc = await asyncio.create_subprocess_exec("sh", "-c", "echo hi; exit 2", stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    await asyncio.sleep(0.01)
    return sum(squares), out.decode().strip(), proc.returncode


def signals_and_subprocess():
    got = []
    signal.signal(signal.SIGUSR1, lambda *_: got.append(threading.current_thread() is threading.main_thread()))
    t = threading.Thread(target=lambda: (time.sleep(0.05), os.kill(os.getpid(), signal.SIGUSR1)))
    t.start()
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    t.join()
    check("signal", got == [True], str(got))
    run = subprocess.run(["sh", "-c", "cat; exit 5"], input=b"xyz", capture_output=True)
    check("subprocess", run.stdout == b"xyz" and run.returncode == 5, repr(run))
    print("signal: a thread's SIGUSR1 handled on the main thread; subprocess.run: input echoed, exit 5")


if __name__ == "__main__":
    start_methods()
    executor()
    print("asyncio: executor sum, subprocess output and status: %s" % (asyncio.run(with_loop()),))
    signals_and_subprocess()
    print("done: 6 steps")
