"""Load for compat/programs/http_server.py: THREADS client threads, each with
its own keep-alive connection, send REQUESTS requests (GETs of varied sizes
and POSTs of varied bodies) and check every answer; then GET /quit.

usage: http_load.py PORT THREADS REQUESTS. Prints a deterministic summary;
exits 1 on any wrong answer or error.
"""
import hashlib
import http.client
import sys
import threading


def payload(n):
    block = bytes(range(256))
    return (block * (n // 256 + 1))[:n]


def client(port, index, count, results):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ok = 0
    errors = []
    for i in range(count):
        try:
            if i % 2 == 0:
                n = (index * 7919 + i * 104729) % 200_000
                conn.request("GET", f"/bytes/{n}")
                resp = conn.getresponse()
                body = resp.read()
                good = resp.status == 200 and body == payload(n)
            else:
                data = bytes((index + i + k) & 0xFF for k in range((i * 37) % 5000))
                conn.request("POST", "/echo", body=data)
                resp = conn.getresponse()
                good = resp.read() == hashlib.sha256(data).hexdigest().encode()
            if good:
                ok += 1
            else:
                errors.append(f"request {i}: wrong answer")
        except (OSError, http.client.HTTPException) as e:
            errors.append(f"request {i}: {e!r}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.close()
    results[index] = (ok, errors)


def main():
    port, threads, count = (int(a) for a in sys.argv[1:4])
    results = [None] * threads
    workers = [threading.Thread(target=client, args=(port, t, count, results)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    ok = sum(r[0] for r in results)
    errors = [e for r in results for e in r[1]]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/quit")
    quit_answer = conn.getresponse().read()
    print(f"{threads} clients x {count} requests: {ok} correct answers, {len(errors)} errors; quit: {quit_answer.decode()}")
    for e in errors[:5]:
        print(e, file=sys.stderr)
    sys.exit(0 if not errors else 1)


if __name__ == "__main__":
    main()
