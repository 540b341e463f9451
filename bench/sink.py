#!/usr/bin/env python3
"""bench/sink.py - a local HTTP sink for the benchmarks: answers every POST
with 200 and an empty body, which is a valid (empty) OTLP/HTTP
ExportTraceServiceResponse and a successful Pyroscope /ingest.  It keeps
only counters: GET /stats returns "requests bytes" (POSTs received, body
bytes).

    python3 bench/sink.py PORTFILE     # writes the port it listens on

Listens on a free 127.0.0.1 port, HTTP/1.1 keep-alive, one thread per
connection.  Stops on SIGTERM/SIGINT.
"""
import http.server
import os
import signal
import sys
import threading

lock = threading.Lock()
counts = {"requests": 0, "bytes": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # no per-request logging
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 20))
            if not chunk:
                break
            remaining -= len(chunk)
        with lock:
            counts["requests"] += 1
            counts["bytes"] += length - remaining
        ctype = "application/x-protobuf" if self.path.startswith("/v1/") else "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        with lock:
            body = ("%d %d\n" % (counts["requests"], counts["bytes"])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, sys.argv[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
