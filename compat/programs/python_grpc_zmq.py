"""gRPC and ZeroMQ from Python (Debian's python3-grpcio and python3-zmq):
two C/C++ libraries with threads of their own, under Python threads.

gRPC core runs its own pollers and timer threads (epoll, eventfds, its
own condition variables) and the server hands each call to a
ThreadPoolExecutor; libzmq has its I/O thread and signals between threads
through eventfds, polled with poll(). Under greenhook all of those are
fibers on one OS thread, so every wait in them is a park on the hub.
The steps: a gRPC server with 8 workers on 127.0.0.1 (unary, server
streaming, client streaming, bidi, 8 client threads at once, a deadline
that expires, a 1 MiB message); fork+exec beside the channel (a
library's atfork handlers must leave the parent's poller alone); Ctrl-C
as SIGINT (from a thread, or from another process) interrupting the main
thread's waits: an Event, a blocking gRPC call, a zmq recv, time.sleep,
and a timed lock acquire that a signal handler interrupts and Python
resumes; pyzmq's REQ/REP, PUB/SUB, PUSH/PULL, a Poller and
context.term(); the server stopped with calls in flight.

No protoc: the service is a generic handler on bytes. Every wait has a
timeout (and a watchdog ends the process at 60 s), so a bug shows as a
FAILED line, not a hang. Prints one line per step, the same in every run
(timings go to stderr); exits 1 if any step failed.
"""

import concurrent.futures
import faulthandler
import os
import signal
import struct
import subprocess
import sys
import threading
import time

import grpc
import zmq

WATCHDOG_S = 60
T = 10  # the timeout of every call and join that should end at once

steps = 0
failures = 0


class Failed(Exception):
    pass


def check(ok, detail=""):
    if not ok:
        raise Failed(detail)


def run(name, fn, *args):
    """One step: its line is `name: <what fn returned>`, or FAILED and why."""
    global steps, failures
    steps += 1
    t0 = time.monotonic()
    try:
        line = fn(*args)
    except Failed as e:
        failures += 1
        line = f"FAILED {e}"
    except (Exception, KeyboardInterrupt) as e:  # a stray Ctrl-C is a failure too
        failures += 1
        line = f"FAILED {type(e).__name__}: {e}"
    print(f"{name}: {line}", flush=True)
    print(f"  [{name}: {time.monotonic() - t0:.3f} s]", file=sys.stderr, flush=True)


def u32(n):
    return struct.pack("<I", n)


def du32(b):
    return struct.unpack("<I", b[:4])[0]


def ident(b):
    return b


def start_thread(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def join(threads, what):
    for t in threads:
        t.join(T)
    alive = sum(t.is_alive() for t in threads)
    check(alive == 0, f"{alive} {what} thread(s) still running after {T} s")


# --- the gRPC service: bytes in, bytes out -------------------------------

SVC = "compat.Test"
sleeping = threading.Semaphore(0)  # released by each Sleep call as it starts


def echo(req, ctx):
    return req


def count(req, ctx):
    for i in range(du32(req)):
        yield u32(i)


def add(requests, ctx):
    total = n = 0
    for m in requests:
        total += du32(m)
        n += 1
    return u32(total) + u32(n)


def reverse(requests, ctx):
    for m in requests:
        yield m[::-1]


def sleep(req, ctx):
    """Sleeps the milliseconds asked for, or until the call ends (a
    deadline, a cancel, the server stopping), whichever comes first."""
    ended = threading.Event()
    if not ctx.add_callback(ended.set):
        ended.set()
    sleeping.release()
    ended.wait(du32(req) / 1000)
    return b"slept"


HANDLERS = {
    "Echo": grpc.unary_unary_rpc_method_handler(echo, ident, ident),
    "Count": grpc.unary_stream_rpc_method_handler(count, ident, ident),
    "Add": grpc.stream_unary_rpc_method_handler(add, ident, ident),
    "Reverse": grpc.stream_stream_rpc_method_handler(reverse, ident, ident),
    "Sleep": grpc.unary_unary_rpc_method_handler(sleep, ident, ident),
}


class Stub:
    def __init__(self, channel):
        def path(name):
            return f"/{SVC}/{name}"

        self.echo = channel.unary_unary(path("Echo"), ident, ident)
        self.count = channel.unary_stream(path("Count"), ident, ident)
        self.add = channel.stream_unary(path("Add"), ident, ident)
        self.reverse = channel.stream_stream(path("Reverse"), ident, ident)
        self.sleep = channel.unary_unary(path("Sleep"), ident, ident)


def serve():
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    server = grpc.server(pool)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SVC, HANDLERS),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=T)
    return pool, server, channel, Stub(channel)


# --- 1. gRPC --------------------------------------------------------------


def grpc_unary(st):
    got = st.echo(b"hello", timeout=T)
    check(got == b"hello", repr(got))
    return "ok"


def grpc_server_streaming(st):
    got = [du32(m) for m in st.count(u32(100), timeout=T)]
    check(got == list(range(100)), f"{len(got)} messages")
    return "100 messages in order"


def grpc_client_streaming(st):
    got = st.add((u32(i) for i in range(500)), timeout=T)
    check((du32(got), du32(got[4:])) == (124750, 500), f"sum {du32(got)} of {du32(got[4:])}")
    return "500 messages summed to 124750"


def grpc_bidi(st):
    msgs = [b"message %03d" % i for i in range(100)]
    got = list(st.reverse(iter(msgs), timeout=T))
    check(got == [m[::-1] for m in msgs], f"{len(got)} replies")
    return "100 messages, each answered"


def grpc_threads(st):
    def client(k):
        bad = 0
        for i in range(100):
            m = b"client %d call %d" % (k, i)
            bad += st.echo(m, timeout=T) != m
        return bad

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        bad = sum(ex.map(client, range(8), timeout=30))
    check(bad == 0, f"{bad} wrong answers")
    return "8 threads x 100 unary calls, all answered right"


def grpc_deadline(st):
    t0 = time.monotonic()
    try:
        st.sleep(u32(5000), timeout=0.2)
        raise Failed("the call returned")
    except grpc.RpcError as e:
        code = e.code()
    waited = time.monotonic() - t0
    check(code == grpc.StatusCode.DEADLINE_EXCEEDED, str(code))
    check(waited < 3, f"after {waited:.1f} s")
    return "DEADLINE_EXCEEDED"


def grpc_big(st):
    msg = bytes(range(256)) * 4096
    got = st.echo(msg, timeout=T)
    check(got == msg, f"{len(got)} bytes back")
    return "1 MiB there and back"


# --- 2. fork+exec beside the channel ------------------------------------


def fork_exec(st, round_):
    p = subprocess.Popen(["/bin/true"])
    check(p.wait(timeout=T) == 0, f"/bin/true exited {p.returncode}")
    got = [st.echo(b"after fork %d-%d" % (round_, i), timeout=T) for i in range(20)]
    check(got == [b"after fork %d-%d" % (round_, i) for i in range(20)], "wrong echoes")
    n = len(list(st.count(u32(100), timeout=T)))
    check(n == 100, f"{n} streamed")
    r = subprocess.run(["/bin/sh", "-c", "exit 3"], timeout=T)
    check(r.returncode == 3, f"sh exited {r.returncode}")
    check(st.echo(b"after sh", timeout=T) == b"after sh", "echo after sh")
    return "Popen(/bin/true) exit 0, then 20 calls and a stream; sh exit 3, then a call"


# --- 3. signals to the main thread --------------------------------------


def interrupted(wait, within):
    """Runs wait(); True if a KeyboardInterrupt ended it within `within` s."""
    t0 = time.monotonic()
    try:
        wait()
    except KeyboardInterrupt:
        took = time.monotonic() - t0
        print(f"  [KeyboardInterrupt after {took:.3f} s]", file=sys.stderr)
        check(took < within, f"KeyboardInterrupt after {took:.1f} s")
        return True
    raise Failed(f"returned after {time.monotonic() - t0:.1f} s, no KeyboardInterrupt")


def sigint_later(delay):
    t = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


def signal_event():
    t = sigint_later(0.2)
    interrupted(lambda: threading.Event().wait(timeout=10), 5)
    join([t], "timer")
    return "ok"


def signal_grpc(st):
    kill = subprocess.Popen(["/bin/sh", "-c", f"sleep 0.2; kill -INT {os.getpid()}"])
    try:
        interrupted(lambda: st.sleep(u32(3000), timeout=T), 2.5)
    finally:
        kill.wait(timeout=T)
    check(st.echo(b"after ctrl-c", timeout=T) == b"after ctrl-c", "echo after the interrupt")
    return "kill -INT from a shell interrupted a 3 s call; the channel still works"


def signal_zmq():
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.linger = 0
    pull.rcvtimeo = 5000
    pull.bind("inproc://nothing-comes")
    t = sigint_later(0.2)
    try:
        interrupted(pull.recv, 4)
    finally:
        join([t], "timer")
        pull.close()
        ctx.term()
    return "a thread's SIGINT interrupted recv() on an empty PULL socket"


def signal_lock():
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *_: got.append(threading.current_thread() is threading.main_thread()))
    lock = threading.Lock()
    lock.acquire()
    t = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
    t.start()
    t0 = time.monotonic()
    try:
        acquired = lock.acquire(timeout=2)
        waited = time.monotonic() - t0
    finally:
        join([t], "timer")
        signal.signal(signal.SIGUSR1, old)
    print(f"  [acquire returned after {waited:.3f} s]", file=sys.stderr)
    check(got == [True], f"handler calls {got}")
    check(acquired is False, "acquired a held lock")
    check(1.9 <= waited < 4, f"acquire gave up after {waited:.2f} s")
    return "the handler ran on the main thread; acquire(timeout=2) went on and timed out"


def signal_sleep():
    t = sigint_later(0.2)
    interrupted(lambda: time.sleep(1), 0.9)
    join([t], "timer")
    return "ok"


# --- 4. pyzmq -------------------------------------------------------------


def sock(ctx, kind, timeout_ms=5000):
    s = ctx.socket(kind)
    s.linger = 0
    s.rcvtimeo = timeout_ms
    s.sndtimeo = timeout_ms
    return s


def bind(s, endpoint):
    s.bind(endpoint)
    return s.getsockopt(zmq.LAST_ENDPOINT).decode()


def zmq_reqrep(ctx, transport):
    rep = sock(ctx, zmq.REP)
    addr = bind(rep, "inproc://reqrep" if transport == "inproc" else "tcp://127.0.0.1:*")

    def server():
        for _ in range(100):
            rep.send(rep.recv()[::-1])

    th = start_thread(server)
    req = sock(ctx, zmq.REQ)
    req.connect(addr)
    bad = 0
    for i in range(100):
        m = b"request %d" % i
        req.send(m)
        bad += req.recv() != m[::-1]
    join([th], "server")
    req.close()
    rep.close()
    check(bad == 0, f"{bad} wrong replies")
    return "100 round trips"


def zmq_pubsub(ctx):
    pub = sock(ctx, zmq.PUB)
    pub.sndhwm = 0
    addr = bind(pub, "tcp://127.0.0.1:*")
    ready = sock(ctx, zmq.PULL)
    bind(ready, "inproc://sub-ready")
    got = []

    def subscriber():
        sub = sock(ctx, zmq.SUB)
        sub.rcvhwm = 0
        sub.subscribe(b"")
        sub.connect(addr)
        ack = sock(ctx, zmq.PUSH)
        ack.connect("inproc://sub-ready")
        acked = False
        try:
            while True:
                m = sub.recv()
                if m == b"hello":
                    if not acked:
                        ack.send(b"ready")
                        acked = True
                elif m == b"end":
                    break
                else:
                    got.append(int(m))
        except zmq.Again:
            got.append("timed out")
        finally:
            sub.close()
            ack.close()

    th = start_thread(subscriber)
    # The handshake: hello until the subscriber says it hears them.
    deadline = time.monotonic() + T
    while not ready.poll(10):
        check(time.monotonic() < deadline, "the subscriber never heard hello")
        pub.send(b"hello")
    ready.recv()
    for i in range(1000):
        pub.send(b"%d" % i)
    pub.send(b"end")
    join([th], "subscriber")
    pub.close()
    ready.close()
    check(got == list(range(1000)), f"{len(got)} received, first {got[:3]}, last {got[-3:]}")
    return "1000 messages received in order after a handshake"


def zmq_pushpull(ctx):
    tasks = sock(ctx, zmq.PUSH)
    taddr = bind(tasks, "inproc://tasks")
    sink = sock(ctx, zmq.PULL)
    saddr = bind(sink, "tcp://127.0.0.1:*")
    done = [0] * 4

    def worker(k):
        pull = sock(ctx, zmq.PULL)
        pull.connect(taddr)
        push = sock(ctx, zmq.PUSH)
        push.linger = 2000
        push.connect(saddr)
        push.send(b"ready")
        try:
            while True:
                m = pull.recv()
                if m == b"stop":
                    break
                push.send(b"%d" % (int(m) ** 2))
                done[k] += 1
        finally:
            pull.close()
            push.close()

    ths = [start_thread(worker, k) for k in range(4)]
    for _ in ths:
        check(sink.recv() == b"ready", "a worker's ready")
    for i in range(1000):
        tasks.send(b"%d" % i)
    total = sum(int(sink.recv()) for _ in range(1000))
    for _ in ths:
        tasks.send(b"stop")
    join(ths, "worker")
    tasks.close()
    sink.close()
    check(total == sum(i * i for i in range(1000)), f"sum {total}")
    check(sum(done) == 1000 and min(done) > 0, f"tasks per worker {done}")
    return f"1000 tasks to 4 workers, results summed to {total}"


def zmq_poller(ctx):
    a = sock(ctx, zmq.PULL)
    aaddr = bind(a, "inproc://poll-a")
    b = sock(ctx, zmq.PULL)
    baddr = bind(b, "tcp://127.0.0.1:*")

    def feeder():
        pa = sock(ctx, zmq.PUSH)
        pa.linger = 2000
        pa.connect(aaddr)
        pb = sock(ctx, zmq.PUSH)
        pb.linger = 2000
        pb.connect(baddr)
        for i in range(20):
            time.sleep(0.02)
            (pa if i % 2 == 0 else pb).send(b"%d" % i)
        pa.close()
        pb.close()

    th = start_thread(feeder)
    poller = zmq.Poller()
    poller.register(a, zmq.POLLIN)
    poller.register(b, zmq.POLLIN)
    got = {a: [], b: []}
    empty = 0
    deadline = time.monotonic() + T
    while len(got[a]) + len(got[b]) < 20 and time.monotonic() < deadline:
        ready = dict(poller.poll(10))
        if not ready:
            empty += 1
        for s in (a, b):
            if ready.get(s, 0) & zmq.POLLIN:
                got[s].append(int(s.recv(zmq.NOBLOCK)))
    join([th], "feeder")
    t0 = time.monotonic()
    last = poller.poll(10)
    waited = time.monotonic() - t0
    a.close()
    b.close()
    print(f"  [{empty} empty polls; a last poll(10) took {waited * 1000:.1f} ms]", file=sys.stderr)
    check(got[a] == list(range(0, 20, 2)) and got[b] == list(range(1, 20, 2)), f"got {got[a]} and {got[b]}")
    check(empty > 0, "no poll timed out")
    check(last == [] and 0.009 <= waited < 2, f"last poll {last} after {waited:.3f} s")
    return "20 messages over 2 sockets, in order on each, between 10 ms timeouts"


def term(ctx):
    """ctx.term() in a thread, so that a term that never ends fails."""
    th = start_thread(ctx.term)
    join([th], "term")


def zmq_term(ctx):
    # Sockets with messages that can never go: linger 0 drops them.
    ctx2 = zmq.Context()
    push = sock(ctx2, zmq.PUSH)
    push.connect("tcp://127.0.0.1:1")
    dealer = sock(ctx2, zmq.DEALER)
    dealer.connect("tcp://127.0.0.1:1")
    for i in range(5):
        dealer.send(b"never %d" % i)
    push.close()
    dealer.close()
    term(ctx2)
    term(ctx)
    return "two contexts ended, their linger=0 sockets closed with messages unsent"


# --- 5. the server stopped with calls in flight --------------------------


def grpc_stop(pool, server, channel, st):
    # Drain any release left by earlier calls (the interrupted one).
    while sleeping.acquire(blocking=False):
        pass
    calls = [st.sleep.future(u32(ms), timeout=T) for ms in (200, 300, 3000, 3000)]
    for _ in calls:
        check(sleeping.acquire(timeout=T), "the calls never started")
    t0 = time.monotonic()
    stopped = server.stop(grace=1)
    check(stopped.wait(timeout=T), "stop(grace=1) never finished")
    took = time.monotonic() - t0
    outcomes = []
    for f in calls:
        try:
            outcomes.append(f.result(timeout=T))
        except grpc.RpcError as e:
            outcomes.append(e.code().name)
    print(f"  [stop took {took:.3f} s; outcomes {outcomes}]", file=sys.stderr)
    channel.close()
    pool.shutdown(wait=False)
    return "stop(grace=1) returned"


def main():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    signal.alarm(WATCHDOG_S + 15)  # if even faulthandler's thread cannot run
    # Ctrl-C raises KeyboardInterrupt even if we were started with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.monotonic()

    pool, server, channel, st = serve()
    run("grpc unary", grpc_unary, st)
    run("grpc server streaming", grpc_server_streaming, st)
    run("grpc client streaming", grpc_client_streaming, st)
    run("grpc bidi", grpc_bidi, st)
    run("grpc 8 client threads", grpc_threads, st)
    run("grpc deadline", grpc_deadline, st)
    run("grpc 1 MiB", grpc_big, st)

    run("fork+exec 1", fork_exec, st, 1)
    run("fork+exec 2", fork_exec, st, 2)

    run("sigint from a thread, main in Event.wait", signal_event)
    run("sigint from a process, main in a gRPC call", signal_grpc, st)
    run("sigint from a thread, main in zmq recv", signal_zmq)
    run("sigusr1 from a thread, main in Lock.acquire(timeout=2)", signal_lock)
    run("sigint from a thread, main in time.sleep", signal_sleep)

    ctx = zmq.Context()
    run("zmq req/rep inproc", zmq_reqrep, ctx, "inproc")
    run("zmq req/rep tcp", zmq_reqrep, ctx, "tcp")
    run("zmq pub/sub", zmq_pubsub, ctx)
    run("zmq push/pull", zmq_pushpull, ctx)
    run("zmq poller", zmq_poller, ctx)
    run("zmq term", zmq_term, ctx)

    run("grpc stop with 4 calls in flight", grpc_stop, pool, server, channel, st)

    print(f"  [total {time.monotonic() - t0:.3f} s]", file=sys.stderr)
    print(f"done: {steps} steps", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
