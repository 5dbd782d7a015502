"""TLS with a server name of its own (a kubeconfig's `tls-server-name`)."""

from __future__ import annotations

import ssl
import sys
from typing import Any


class ServerNamedContext(ssl.SSLContext):
    """`ssl.create_default_context()`'s client context that sends and checks one server name.

    The name goes in where asyncio (aiohttp) and `ssl.wrap_socket` pass the host they dial, so
    every client made with this context honours it: the operator's, the roles' proxy's and the
    dependent watches' sessions alike, none with a per-request argument of its own."""

    server_name: str

    def __new__(cls, server_name: str, cafile: str | None = None) -> ServerNamedContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname

    def __init__(self, server_name: str, cafile: str | None = None) -> None:
        self.server_name = server_name
        self.verify_flags |= _DEFAULT_VERIFY_FLAGS
        if cafile:
            self.load_verify_locations(cafile)
        else:
            self.load_default_certs(ssl.Purpose.SERVER_AUTH)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return super().wrap_bio(incoming, outgoing, server_side, self.server_name, session)

    def wrap_socket(
        self,
        sock: Any,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        return super().wrap_socket(
            sock,
            server_side,
            do_handshake_on_connect,
            suppress_ragged_eofs,
            self.server_name,
            session,
        )


# what create_default_context adds to a client context's flags (3.13: strict X.509 checks)
_DEFAULT_VERIFY_FLAGS = (
    ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    if sys.version_info >= (3, 13)
    else ssl.VerifyFlags(0)
)
