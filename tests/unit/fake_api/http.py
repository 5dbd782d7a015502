"""A fake API server for the unit tests of our clients: a thread on 127.0.0.1 that answers every
GET with a Lease, over plain HTTP or TLS, and records each request's headers (its certificates
from tests/pki.py). Shared by the unit tests (not a test module)."""

from __future__ import annotations

import http.server
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from tests.pki import Pki


class LeaseHandler(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []  # the headers of each request, in order

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        body = b'{"kind": "Lease"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """The server's URL while it runs: http://127.0.0.1:PORT, or https:// with the server
    context `tls`. `LeaseHandler.seen` starts empty."""
    LeaseHandler.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), LeaseHandler)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def serving_certificate_for(name: str, folder: Path) -> Iterator[tuple[str, Path]]:
    """https://127.0.0.1:PORT, whose certificate names only `name` (not the address); and the
    file of the CA that signed it (written to `folder`)."""
    ca, cert, key = Pki(name, names=[name]).write(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serving(context) as url:
        yield url, ca
