"""Python's threading primitives, each checked by what it must guarantee.

CPython builds its locks on POSIX semaphores (a timed acquire is
sem_clockwait on CLOCK_MONOTONIC), and Condition, Event, Semaphore,
Barrier and queue.Queue on those locks; ThreadPoolExecutor on a queue.
Under greenhook every thread here is a fiber and every one of those waits
a park on the hub. Prints one line per step, the same whatever the
threads' interleaving; exits 1 at the first broken guarantee.
"""

import concurrent.futures
import hashlib
import queue
import sys
import threading
import time


def check(step, ok, detail=""):
    if not ok:
        print(f"{step}: FAILED {detail}", flush=True)
        sys.exit(1)


def pool():
    """ThreadPoolExecutor: results in submission order, whatever ran first."""
    blocks = [bytes([i]) * (4096 + i) for i in range(200)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
        got = list(ex.map(lambda b: hashlib.sha256(b).hexdigest(), blocks))
    want = [hashlib.sha256(b).hexdigest() for b in blocks]
    check("pool", got == want)
    digest = hashlib.sha256("".join(got).encode()).hexdigest()[:16]
    print(f"pool: 200 hashes by 8 workers, in order, digest {digest}")


def producers_consumers():
    """queue.Queue(maxsize=4): 4 producers, 4 consumers, every item once."""
    q = queue.Queue(maxsize=4)
    per = 5000
    seen = []
    seen_lock = threading.Lock()

    def produce(p):
        for i in range(per):
            q.put((p, i))

    def consume():
        mine = []
        while True:
            item = q.get()
            if item is None:
                break
            mine.append(item)
        with seen_lock:
            seen.extend(mine)

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join()
    for _ in consumers:
        q.put(None)
    for t in consumers:
        t.join()
    check("queue", sorted(seen) == [(p, i) for p in range(4) for i in range(per)], f"{len(seen)} items")
    print(f"queue: {len(seen)} items through a queue of 4, each once")


def barrier():
    """Barrier(6): nobody starts round r+1 before all 6 finished round r."""
    parties, rounds = 6, 200
    b = threading.Barrier(parties)
    done = [0] * rounds
    lock = threading.Lock()
    errors = []

    def run():
        for r in range(rounds):
            with lock:
                done[r] += 1
            b.wait()
            with lock:
                if done[r] != parties:
                    errors.append(r)
            b.wait()

    ts = [threading.Thread(target=run) for _ in range(parties)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("barrier", not errors and done == [parties] * rounds, f"rounds {errors[:5]}")
    print(f"barrier: {parties} threads x {rounds} rounds in step")


def semaphore():
    """BoundedSemaphore(3): never more than 3 inside, and 3 get in at once."""
    s = threading.BoundedSemaphore(3)
    inside = 0
    most = 0
    lock = threading.Lock()

    def run():
        nonlocal inside, most
        for _ in range(20):
            with s:
                with lock:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.001)
                with lock:
                    inside -= 1

    ts = [threading.Thread(target=run) for _ in range(10)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("semaphore", most == 3, f"at most {most} inside")
    try:
        s.release()
        check("semaphore", False, "a release past the bound was allowed")
    except ValueError:
        pass
    print("semaphore: at most 3 of 10 threads inside, 3 reached; over-release refused")


def condition():
    """Condition: a ping-pong of 2,000 turns; wait_for with a timeout."""
    c = threading.Condition()
    turn = [0]
    turns = 2000

    def side(me):
        for _ in range(turns):
            with c:
                c.wait_for(lambda: turn[0] == me)
                turn[0] = 1 - me
                c.notify()

    ts = [threading.Thread(target=side, args=(m,)) for m in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with c:
        t0 = time.monotonic()
        got = c.wait_for(lambda: False, timeout=0.05)
        waited = time.monotonic() - t0
    check("condition", got is False and waited >= 0.05, f"wait_for gave {got} after {waited:.3f} s")
    print(f"condition: {turns} turns each way; wait_for timed out after >= 50 ms")


def timeouts():
    """Timed waits end on time and report it: Lock, Event, join."""
    held = threading.Lock()
    held.acquire()
    results = {}

    def try_lock():
        t0 = time.monotonic()
        results["lock"] = (held.acquire(timeout=0.05), time.monotonic() - t0)

    def try_event():
        e = threading.Event()
        t0 = time.monotonic()
        results["event"] = (e.wait(timeout=0.05), time.monotonic() - t0)

    ts = [threading.Thread(target=f) for f in (try_lock, try_event)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for name, (got, waited) in sorted(results.items()):
        check("timeouts", got is False and waited >= 0.05, f"{name}: {got} after {waited:.3f} s")
    sleeper = threading.Thread(target=time.sleep, args=(0.3,))
    sleeper.start()
    sleeper.join(timeout=0.05)
    check("timeouts", sleeper.is_alive(), "join(timeout) waited for the end")
    sleeper.join()
    # A lock released by another thread wakes a timed acquire early.
    threading.Timer(0.02, held.release).start()
    t0 = time.monotonic()
    got = held.acquire(timeout=5)
    check("timeouts", got and time.monotonic() - t0 < 2.5, "the release did not wake the acquire")
    print("timeouts: lock, event and join timed out after >= 50 ms; a release woke a timed acquire")


def local_and_ident():
    """threading.local and thread identities: one value per thread."""
    local = threading.local()
    out = {}
    lock = threading.Lock()
    # All alive at once when they record their idents (an ended thread's
    # may be reused).
    together = threading.Barrier(32)

    def run(i):
        local.value = i
        time.sleep(0.001 * (i % 3))
        together.wait()
        with lock:
            out[i] = (local.value, threading.get_ident())

    ts = [threading.Thread(target=run, args=(i,)) for i in range(32)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("local", all(v == i for i, (v, _) in out.items()), "a thread saw another's value")
    idents = {ident for _, ident in out.values()}
    check("local", len(idents) == 32, f"{len(idents)} distinct idents for 32 live threads")
    print("local: 32 threads, each its own threading.local value and ident")


for step in (pool, producers_consumers, barrier, semaphore, condition, timeouts, local_and_ident):
    step()
print("done: 7 steps")
