"""Who may use the roles' API proxy: clients on the loopback with the token of a run going on;
and each run's kubeconfig, which points at the proxy with that token."""

from __future__ import annotations

import ipaddress
import json

from aiohttp import web


def kubeconfig_text(url: str, token: str, namespace: str) -> str:
    """A kubeconfig for one run: the proxy, the run's token, the CR's namespace."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "operator-runner", "cluster": {"server": url}}],
            "users": [{"name": "run", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "run",
                    "context": {
                        "cluster": "operator-runner",
                        "user": "run",
                        "namespace": namespace or "default",
                    },
                }
            ],
            "current-context": "run",
        }
    )


def is_loopback(remote: str | None) -> bool:
    if not remote:
        return False
    try:
        return ipaddress.ip_address(remote.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def token_of(request: web.Request) -> str:
    """The bearer token a request carries ("" for none)."""
    auth = request.headers.get("Authorization", "")
    return auth[len("Bearer ") :].strip() if auth.startswith("Bearer ") else ""
