"""Correctness client for compat's nginx case, on 127.0.0.1:PORT.

Writes four files of different sizes into HTML (1 byte to 1.5 MB), then
THREADS threads make REQUESTS requests in all, each on a new connection:
GETs of the files, and PUTs of 300 KB bodies (nginx's DAV module writes
them to a temp file, then renames them into place) each read back with a
GET. Every body is checked (size and sha256). Every answer carries the
worker's pid and the configuration's generation (X-Worker, X-Generation).

When half of the requests are done, the client replaces CONF by NEXT_CONF
(the same server, generation 2) and sends SIGHUP to the master (MASTER_PID):
nginx forks new workers and the old ones finish their requests. No request
may fail across the reload, generation 2 must answer afterwards (if the
load ended first, the client asks until it does), and no worker may have
answered for both generations.

usage: nginx_check.py PORT MASTER_PID HTML CONF NEXT_CONF THREADS REQUESTS
Prints a deterministic summary; exits 1 on any failure.
"""
import hashlib
import http.client
import os
import random
import signal
import sys
import threading
import time

FILES = {"one": 1, "small": 10_000, "medium": 200_000, "large": 1_500_000}
PUT_SIZE = 300_000


class Load:
    def __init__(self, port, master, conf, next_conf, total):
        self.port = port
        self.master = master
        self.conf = conf
        self.next_conf = next_conf
        self.total = total
        self.lock = threading.Lock()
        self.done = 0
        self.ok = 0
        self.bytes = 0
        self.failures = []
        self.reloaded = False
        self.workers = {"1": set(), "2": set()}

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.getheader("X-Generation"), resp.getheader("X-Worker"), data
        finally:
            conn.close()

    def one(self, index, i, files):
        """Request i of thread index: (problem or None, body bytes checked)."""
        kind = (index + i) % 5
        if kind < 4:
            name = list(FILES)[kind]
            status, gen, worker, data = self.request("GET", f"/files/{name}")
            self.saw(gen, worker)
            want = files[name]
            if status != 200 or len(data) != len(want) or hashlib.sha256(data).digest() != hashlib.sha256(want).digest():
                return f"GET {name}: status {status}, {len(data)} bytes", 0
            return None, len(data)
        body = random.Random(index * 100_003 + i).randbytes(PUT_SIZE)
        path = f"/uploads/t{index}-r{i}"
        status, gen, worker, data = self.request("PUT", path, body)
        self.saw(gen, worker)
        if status != 201:
            return f"PUT {path}: status {status}", 0
        status, gen, worker, data = self.request("GET", path)
        self.saw(gen, worker)
        if status != 200 or hashlib.sha256(data).digest() != hashlib.sha256(body).digest():
            return f"GET {path} after PUT: status {status}, {len(data)} bytes", 0
        return None, len(body) + len(data)

    def settle(self, want, seconds=30):
        """On a slow machine the load may end before the new workers
        answer: asks (uncounted, but checked) until generation 2 does."""
        deadline = time.monotonic() + seconds
        while self.reloaded and not self.workers.get("2") and time.monotonic() < deadline:
            try:
                status, gen, worker, data = self.request("GET", "/files/one")
                self.saw(gen, worker)
                if status != 200 or data != want:
                    self.failures.append(f"GET one after the load: status {status}, {len(data)} bytes")
            except (OSError, http.client.HTTPException) as e:
                self.failures.append(f"GET one after the load: {e!r}")
            time.sleep(0.01)

    def saw(self, gen, worker):
        with self.lock:
            self.workers.setdefault(gen, set()).add(worker)

    def worker(self, index, count, files):
        for i in range(count):
            try:
                problem, checked = self.one(index, i, files)
            except (OSError, http.client.HTTPException) as e:
                problem, checked = f"thread {index} request {i}: {e!r}", 0
            reload_now = False
            with self.lock:
                self.done += 1
                if problem is None:
                    self.ok += 1
                    self.bytes += checked
                else:
                    self.failures.append(problem)
                if self.done == self.total // 2:
                    reload_now = True
            if reload_now:
                os.replace(self.next_conf, self.conf)
                os.kill(self.master, signal.SIGHUP)
                self.reloaded = True


def main():
    port, master = int(sys.argv[1]), int(sys.argv[2])
    html, conf, next_conf = sys.argv[3:6]
    threads, total = int(sys.argv[6]), int(sys.argv[7])
    files = {}
    os.makedirs(os.path.join(html, "files"), exist_ok=True)
    for n, (name, size) in enumerate(FILES.items()):
        files[name] = random.Random(n).randbytes(size)
        with open(os.path.join(html, "files", name), "wb") as f:
            f.write(files[name])
    load = Load(port, master, conf, next_conf, total)
    counts = [total // threads + (1 if t < total % threads else 0) for t in range(threads)]
    ts = [threading.Thread(target=load.worker, args=(t, counts[t], files)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    load.settle(files["one"])
    gen1, gen2 = load.workers.get("1", set()), load.workers.get("2", set())
    odd = sorted(g for g in load.workers if g not in ("1", "2"))
    print(f"{total} requests from {threads} threads: {load.ok} ok, {len(load.failures)} failed, "
          f"{load.bytes} body bytes checked")
    print(f"SIGHUP sent halfway: {'yes' if load.reloaded else 'no'}; generation 2 answered: "
          f"{'yes' if gen2 else 'no'}; a worker in both generations: {'yes' if gen1 & gen2 else 'no'}"
          f"{'; answers without a generation: ' + str(odd) if odd else ''}")
    # For the suite's log, not compared: which workers answered.
    print(f"generation 1 workers {sorted(gen1)}, generation 2 workers {sorted(gen2)}", file=sys.stderr)
    for p in load.failures[:10]:
        print(p, file=sys.stderr)
    good = not load.failures and load.reloaded and gen1 and gen2 and not gen1 & gen2 and not odd
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
