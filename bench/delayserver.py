"""A tiny HTTP server on 127.0.0.1 that answers every GET after a delay: the "something outside
the process" an I/O-bound reconcile waits on (bench/roles/delay, the sharding scenario).

    GET /?s=2   -> 200 after 2 s (the server's default delay without ?s=)

One thread per request, so any number of waits overlap.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class _Handler(BaseHTTPRequestHandler):
    server: DelayServer

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        delay = float(query.get("s", [self.server.delay])[0])
        time.sleep(delay)  # the work: waiting on the outside
        body = b'{"waited": %.3f}' % delay
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with self.server.lock:
            self.server.answered += 1

    def log_message(self, format: str, *args: object) -> None:
        pass


class DelayServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, delay: float = 2.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay = delay
        self.lock = threading.Lock()
        self.answered = 0
        self._thread = threading.Thread(target=self.serve_forever, name="delay", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/?s={self.delay:g}"

    def __enter__(self) -> DelayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
