"""Bind addresses of the operator's own HTTP endpoints (metrics, health probes).

The syntax of controller-runtime's `--metrics-bind-address` and `--health-probe-bind-address`:
`:8080` (every interface), `127.0.0.1:8080`, `localhost:8080`, `[::1]:8080`; `0` switches the
endpoint off (an empty value too). Port 0 in an address asks the kernel for a free port.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger("runner.bind")


class BindAddressError(ValueError):
    """A bind address that cannot be parsed."""


@dataclass(frozen=True)
class BindAddress:
    host: str | None  # None: every interface (IPv4 and IPv6)
    port: int

    def __str__(self) -> str:
        if self.host is None:
            return f":{self.port}"
        if ":" in self.host:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"


def parse_bind_address(text: str) -> BindAddress | None:
    """`host:port`, `:port` or `[v6]:port` -> BindAddress; `0` or empty -> None (disabled)."""
    value = text.strip()
    if value in ("", "0"):
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise BindAddressError(
            f"bind address {text!r} has no port: use host:port, :port, or 0 to switch it off"
        )
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise BindAddressError(f"bind address {text!r}: unbalanced brackets")
        host = host[1:-1]
    elif ":" in host:
        raise BindAddressError(f"bind address {text!r}: write IPv6 addresses in brackets, [::1]:80")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BindAddressError(f"bind address {text!r}: port must be a number 0-65535")
    return BindAddress(host=host or None, port=int(port_text))


class Endpoint:
    """An aiohttp application served on one address, on the operator's event loop.

    `stop()` gives requests still in flight `stop_grace` seconds, then cancels them: aiohttp's
    default (60 s) let one stuck request (a role's watch through the proxy, an admission review
    the API server gave up on) hold the operator's exit for a minute after SIGTERM."""

    def __init__(
        self,
        name: str,
        app: web.Application,
        address: BindAddress,
        flag: str = "",
        ssl_context: ssl.SSLContext | None = None,
        stop_grace: float = 5.0,
    ) -> None:
        from aiohttp import web  # not at import time: the CLI validates addresses with this module

        self.name = name
        self.address = address
        self.flag = flag  # the flag that sets the address, named when it cannot be used
        self.ssl_context = ssl_context  # HTTPS when given
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=stop_grace
        )
        self.bound: list[str] = []

    def bind_error(self, err: OSError) -> str:
        """One message that says what to change: the flag, another port, or 0."""
        reason = err.strerror or str(err)
        flag = self.flag or "the bind address"
        hint = f"choose another address with {flag} (e.g. {flag}=:{self.address.port + 1})"
        if self.address.port == 8080 and self.flag == "--metrics-bind-address":
            hint += (
                " (:8080 is operator-sdk's default, and also where kubectl and other clients "
                "look for an API server when no kubeconfig is set)"
            )
        return (
            f"operator-runner: cannot serve {self.name} on {self.address}: {reason}; "
            f"{hint}, or {flag}=0 to switch it off"
        )

    async def start(self) -> None:
        await self._runner.setup()
        from aiohttp import web

        site = web.TCPSite(
            self._runner,
            self.address.host,
            self.address.port,
            reuse_address=True,
            ssl_context=self.ssl_context,
        )
        try:
            await site.start()
        except OSError as err:
            await self._runner.cleanup()
            raise SystemExit(self.bind_error(err)) from None
        self.bound = [_format(a) for a in self._runner.addresses]
        scheme = "https" if self.ssl_context is not None else "http"
        log.info("serving %s on %s (%s)", self.name, ", ".join(self.bound), scheme)

    async def stop(self) -> None:
        await self._runner.cleanup()


def _format(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = str(address[0]), address[1]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return str(address)
