"""Correctness client for a DNS server on 127.0.0.1:PORT serving zone "test".

THREADS threads each ask QUERIES questions over UDP (A records of
host0..host49.test, each 10.0.0.N, and a name that does not exist), one
socket each; then one question over TCP. Every answer must be the one the
zone holds. Prints a deterministic summary; exits 1 on any wrong or
missing answer. First it waits (10 s at most) for one answer over UDP: a
server that accepts TCP connections may not read its UDP sockets yet, and
the kernel refuses what arrives before one is bound.

usage: dns_check.py PORT THREADS QUERIES
"""
import random
import socket
import struct
import sys
import threading
import time

NAMES = 50


def question(qid, name):
    header = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return header + labels + struct.pack(">HH", 1, 1)


def answer_of(msg, qid):
    """(rcode, [IPv4 addresses]) of a response to question `qid`."""
    rid, flags, qd, an, _, _ = struct.unpack(">HHHHHH", msg[:12])
    if rid != qid or not flags & 0x8000:
        raise ValueError(f"not the answer to {qid}")
    pos = 12
    for _ in range(qd):
        while msg[pos]:
            pos += msg[pos] + 1
        pos += 5
    addrs = []
    for _ in range(an):
        if msg[pos] & 0xC0 == 0xC0:
            pos += 2
        else:
            while msg[pos]:
                pos += msg[pos] + 1
            pos += 1
        rtype, _, _, rdlen = struct.unpack(">HHIH", msg[pos:pos + 10])
        pos += 10
        if rtype == 1:
            addrs.append(socket.inet_ntoa(msg[pos:pos + rdlen]))
        pos += rdlen
    return flags & 0xF, addrs


def expected(i):
    if i == NAMES:
        return "missing.test", (3, [])
    return f"host{i}.test", (0, [f"10.0.0.{i}"])


def ask_udp(sock, port, i, rng):
    name, want = expected(i)
    qid = rng.randrange(65536)
    sock.sendto(question(qid, name), ("127.0.0.1", port))
    for _ in range(3):
        msg, _ = sock.recvfrom(4096)
        try:
            got = answer_of(msg, qid)
        except ValueError as e:
            print(f"{name}: {e}; {msg.hex()}", file=sys.stderr)
            continue  # a late answer to an earlier question
        if got != want:
            print(f"{name}: {got}, not {want}", file=sys.stderr)
        return got == want
    return False


def worker(port, queries, seed, results, slot):
    rng = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5)
    good = 0
    for q in range(queries):
        try:
            good += ask_udp(sock, port, q % (NAMES + 1), rng)
        except OSError as e:
            print(f"question {q}: {e}", file=sys.stderr)
    results[slot] = good


def ask_tcp(port, i):
    name, want = expected(i)
    q = question(4242, name)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">H", len(q)) + q)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return answer_of(data[2:], 4242) == want


def wait_for_udp(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.5)
    rng = random.Random(-1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        qid = rng.randrange(65536)
        try:
            sock.sendto(question(qid, "host1.test"), ("127.0.0.1", port))
            answer_of(sock.recvfrom(4096)[0], qid)
            return
        except (OSError, ValueError):
            time.sleep(0.05)


def main():
    port, threads, queries = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    wait_for_udp(port)
    results = [0] * threads
    ts = [threading.Thread(target=worker, args=(port, queries, n, results, n)) for n in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    total = sum(results)
    tcp = ask_tcp(port, 7)
    print(f"udp: {total} of {threads * queries} answered as the zone says")
    print(f"tcp: {'answered' if tcp else 'wrong'}")
    sys.exit(0 if total == threads * queries and tcp else 1)


if __name__ == "__main__":
    main()
