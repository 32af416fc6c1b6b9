"""Correctness client for memcached's text protocol on 127.0.0.1:PORT.

THREADS threads, each on its own connection and its own keys, write values
of many sizes (1 byte to 512 KiB) with set/add/replace/append/prepend/cas,
count with incr/decr, delete some, and read everything back (get and
multi-get): every value read must equal what was written. Prints a
deterministic summary; exits 1 on any mismatch or error.

usage: memcached_check.py PORT THREADS ROUNDS
"""
import socket
import sys
import threading


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by memcached")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("connection closed by memcached")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def store(self, verb, key, value, flags=0, cas=None):
        extra = f" {cas}" if cas is not None else ""
        self.sock.sendall(f"{verb} {key} {flags} 0 {len(value)}{extra}\r\n".encode() + value + b"\r\n")
        return self.line()

    def get(self, *keys, verb="get"):
        self.sock.sendall(f"{verb} {' '.join(keys)}\r\n".encode())
        found = {}
        while True:
            head = self.line().split()
            if head == [b"END"]:
                return found
            if head[0] != b"VALUE":
                raise ValueError(f"unexpected reply {head!r}")
            n = int(head[3])
            value = self.exact(n)
            if self.exact(2) != b"\r\n":
                raise ValueError("value not followed by CRLF")
            found[head[1].decode()] = (value, int(head[2]), int(head[4]) if len(head) > 4 else None)

    def simple(self, command):
        self.sock.sendall(command.encode() + b"\r\n")
        return self.line()


def value_for(thread, key_index, rnd):
    size = [1, 10, 100, 1000, 4096, 10_000, 65_536, 100_000, 524_288][(thread + key_index + rnd) % 9]
    seed = (thread * 131 + key_index * 17 + rnd * 7) & 0xFF
    return bytes((seed + i) & 0xFF for i in range(min(size, 256))) * (size // 256) + bytes(
        (seed + i) & 0xFF for i in range(size % 256))


def worker(port, t, rounds, results):
    problems = []
    checked = 0

    def expect(what, got, want):
        nonlocal checked
        checked += 1
        if got != want:
            problems.append(f"thread {t}: {what}: got {got!r:.80}, want {want!r:.80}")

    try:
        c = Conn(port)
        keys = [f"t{t}:k{i}" for i in range(20)]
        for rnd in range(rounds):
            model = {}
            for i, k in enumerate(keys):
                v = value_for(t, i, rnd)
                expect("set", c.store("set", k, v, flags=i), b"STORED")
                model[k] = (v, i)
            for k in keys[:5]:
                expect("add existing", c.store("add", k, b"no"), b"NOT_STORED")
            expect("replace missing", c.store("replace", f"t{t}:missing{rnd}", b"no"), b"NOT_STORED")
            for k in keys[5:10]:
                expect("append", c.store("append", k, b"-tail"), b"STORED")
                expect("prepend", c.store("prepend", k, b"head-"), b"STORED")
                v, f = model[k]
                model[k] = (b"head-" + v + b"-tail", f)
            got = c.get(*keys[10:12], verb="gets")
            for k in keys[10:12]:
                cas = got[k][2]
                expect("cas", c.store("cas", k, b"swapped", flags=1, cas=cas), b"STORED")
                expect("stale cas", c.store("cas", k, b"stale", flags=1, cas=cas), b"EXISTS")
                model[k] = (b"swapped", 1)
            for k in keys[12:14]:
                expect("delete", c.simple(f"delete {k}"), b"DELETED")
                del model[k]
            counter = f"t{t}:counter"
            expect("counter set", c.store("set", counter, b"100"), b"STORED")
            for _ in range(10):
                c.simple(f"incr {counter} 7")
            expect("decr", c.simple(f"decr {counter} 3"), b"167")
            model[counter] = (b"167", 0)
            for k in keys:
                one = c.get(k)
                expect(f"get {k}", {n: (v, f) for n, (v, f, _) in one.items()},
                       {k: model[k]} if k in model else {})
            many = c.get(*keys, counter)
            expect("multi-get", {n: (v, f) for n, (v, f, _) in many.items()}, model)
        c.sock.close()
    except (OSError, ValueError, IndexError) as e:
        problems.append(f"thread {t}: {e!r}")
    results[t] = (checked, problems)


def main():
    port, threads, rounds = (int(a) for a in sys.argv[1:4])
    results = [None] * threads
    ts = [threading.Thread(target=worker, args=(port, t, rounds, results)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    checked = sum(r[0] for r in results)
    problems = [p for r in results for p in r[1]]
    print(f"{threads} connections x {rounds} rounds: {checked} checks, {len(problems)} wrong")
    for p in problems[:10]:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
