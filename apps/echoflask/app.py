"""The EchoFlask app of seed 004 (the image takeyan/flask:0.0.3 that the EchoFlask operator runs).

GET /api/echo?Hello=World! answers JSON that names the Pod that served it:

    {"api": "echo", "nodename": "real-node", "pod_ip": "10.244.0.7",
     "podname": "example-echoflask-deployment-...", "query_string": ["Hello=World!"],
     "timestamp": "2026-12-03T08:00:00.000000+00:00"}

nodename, pod_ip and podname come from the downward-API variables NODE_NAME, POD_IP and
POD_NAME that the echoflask role's Deployment sets (podname falls back to the host name, which
is the Pod's name in Kubernetes). Listens on 0.0.0.0:5000 (PORT overrides the port).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from datetime import datetime, timezone
from urllib.parse import unquote

from flask import Flask, Response, jsonify, request

app = Flask(__name__)


@app.get("/api/echo")
def echo() -> Response:
    raw = request.query_string.decode("latin-1")
    return jsonify(
        api="echo",
        nodename=os.environ.get("NODE_NAME", ""),
        pod_ip=os.environ.get("POD_IP", ""),
        podname=os.environ.get("POD_NAME") or socket.gethostname(),
        query_string=[unquote(part) for part in raw.split("&") if part],
        timestamp=datetime.now(timezone.utc).isoformat(),
    )


@app.get("/healthz")
def healthz() -> Response:
    return jsonify(status="ok")


def exit_on_sigterm() -> None:
    """Exit at once on SIGTERM. In a container the app is PID 1, for which the kernel ignores
    signals that have no handler: without this, deleting or scaling down waits out the whole
    grace period (30 s) before the kubelet kills it."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))


if __name__ == "__main__":
    exit_on_sigterm()
    app.run(host="0.0.0.0", port=int(os.environ.get("PORT", "5000")))
