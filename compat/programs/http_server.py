"""A ThreadingHTTPServer (one thread per connection) on 127.0.0.1:PORT.

GET /bytes/N answers N deterministic bytes, POST /echo answers the body's
SHA-256, GET /quit shuts the server down; on the way out it prints how many
requests it served and exits 0.
"""
import hashlib
import http.server
import sys
import threading

served = 0
served_lock = threading.Lock()


def payload(n):
    block = bytes(range(256))
    return (block * (n // 256 + 1))[:n]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body, status=200):
        global served
        with served_lock:
            served += 1
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/bytes/"):
            self.answer(payload(int(self.path[len("/bytes/"):])))
        elif self.path == "/quit":
            self.answer(b"bye")
            threading.Thread(target=self.server.shutdown).start()
        else:
            self.answer(b"not found", 404)

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(hashlib.sha256(body).hexdigest().encode())


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever(poll_interval=0.05)
    server.server_close()
    print(f"served {served} requests")


if __name__ == "__main__":
    main()
