"""The operator's webhooks as one piece: the server, its certificates and its registrations.

Its users are *parts* (`WebhookPart`): admission (validate, mutate; runner/app/manager/
admission.py) and conversion (convert). A part hands over its handlers (path -> handler) and,
once the server listens, its registrations (the objects that send the API server here), built
with `client_config(path)`: where the API server reaches `path`:

- `make run` (no `--webhook-service`): `{"url": "https://127.0.0.1:<port><path>"}` (the local
  API server runs on this host; `--webhook-url` gives another base), certificates in memory;
  at exit its webhook configurations are deleted, and other registrations set to their
  `exit_value` (a CRD's conversion: whatever its part says);
- deployed (`--webhook-service=[NAMESPACE/]NAME`): `{"service": {namespace, name, path,
  port: 443}}`, certificates in the Secret `<name>-cert` of that namespace, shared by the
  replicas;
- a certificate folder with tls.crt and tls.key (`--webhook-cert-dir`, cert-manager's): served
  as it is; the caBundle is someone else's (cert-manager's CA injector).

`readiness` is /readyz's: the server answers TLS with a certificate the API server's bundle
verifies, and every registration is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from runner.app.serving.bind import BindAddress
from runner.app.webhooks.certificates import (
    DEFAULT_CERT_DIR,
    GeneratedCertificates,
    Lifetimes,
    MemoryStore,
    MountedCertificates,
    SecretStore,
    WebhookCertificates,
    mounted,
)
from runner.app.webhooks.registrar import Registrar, Registration
from runner.app.webhooks.server import Handler, WebhookServer
from runner.kube.client import KubeClient
from runner.kube.objects import MUTATING_WEBHOOK_CONFIGURATIONS as MUTATING
from runner.kube.objects import VALIDATING_WEBHOOK_CONFIGURATIONS as VALIDATING

log = logging.getLogger("runner.webhooks")

#: Seconds between the registrar's looks at the registrations (a GET each). A CRD has one
#: conversion webhook for the whole cluster: when another operator of the same kind pointed it
#: at itself and went away (a second `make run`, tests side by side), reads of the other
#: versions, and the garbage collection of the kind's dependents, wait for this look.
REGISTRATION_PERIOD = 10.0

ClientConfig = Callable[[str], dict[str, Any]]


class WebhookPart(Protocol):
    """A user of the webhook server: admission (validate, mutate), conversion (convert)."""

    def handlers(self) -> Mapping[str, Handler]:
        """The paths it serves."""

    async def registrations(self, client_config: ClientConfig) -> Sequence[Registration]:
        """The objects that send the API server to its paths (asked once the server listens)."""


@dataclass(frozen=True)
class WebhookSettings:
    """The `--webhook-*` flags, read."""

    address: BindAddress
    name: str  # the configurations' name; the Secret is <name>-cert
    cert_dir: Path = DEFAULT_CERT_DIR
    service: tuple[str, str] | None = None  # (namespace, name): deployed
    url: str | None = None  # the base URL the API server calls (make run); None: 127.0.0.1
    lifetimes: Lifetimes = field(default_factory=Lifetimes)


class Webhooks:
    """The server, its certificates, its registrations (module doc)."""

    def __init__(
        self, settings: WebhookSettings, client: KubeClient, parts: Sequence[WebhookPart]
    ) -> None:
        self.settings = settings
        self.client = client
        self.parts = list(parts)
        self.certificates: WebhookCertificates
        self.server: WebhookServer
        self.registrar: Registrar
        self._verify: bytes | None = None  # the CA /readyz checks with

    # -- where the API server reaches us --------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.settings.url:
            return self.settings.url.rstrip("/")
        return f"https://127.0.0.1:{self.server.port}"

    def client_config(self, path: str) -> dict[str, Any]:
        """A webhook's clientConfig for `path` (without caBundle: the registrar adds it)."""
        if self.settings.service is not None:
            namespace, name = self.settings.service
            return {"service": {"namespace": namespace, "name": name, "path": path, "port": 443}}
        return {"url": self.base_url + path}

    def server_names(self) -> list[str]:
        """The names the serving certificate carries: the Service's DNS names, or the URL's
        host (before the server listens: the port does not matter)."""
        if self.settings.service is not None:
            namespace, name = self.settings.service
            return [
                f"{name}.{namespace}.svc",
                f"{name}.{namespace}.svc.cluster.local",
                f"{name}.{namespace}",
                name,
            ]
        host = urlsplit(self.settings.url).hostname if self.settings.url else None
        return [host or "127.0.0.1", "localhost"]

    # -- lifecycle -------------------------------------------------------------------------------

    def _certificates(self) -> WebhookCertificates:
        files = mounted(self.settings.cert_dir)
        if files is not None:
            certs = MountedCertificates(files)
            self._verify = certs.ca_pem
            return certs
        if self.settings.service is not None:
            namespace, _ = self.settings.service
            store: SecretStore | MemoryStore = SecretStore(
                self.client, namespace, f"{self.settings.name}-cert"
            )
        else:
            store = MemoryStore()
        return GeneratedCertificates(store, self.server_names(), self.settings.lifetimes)

    async def start(self) -> None:
        """Certificates, then the server with every part's handlers, then the registrations.
        A certificate that cannot be made or a port that is taken stops start-up (one line);
        a registration that cannot be written is logged and tried again."""
        self.certificates = self._certificates()
        await self.certificates.start()
        self.server = WebhookServer(self.settings.address, self.certificates.context)
        for part in self.parts:
            for path, handler in part.handlers().items():
                self.server.add(path, handler)
        await self.server.start()
        self.registrar = Registrar(self.client, self.certificates, period=REGISTRATION_PERIOD)
        for part in self.parts:
            for registration in await part.registrations(self.client_config):
                self.registrar.add(self._local_or_deployed(registration))
        await self.registrar.start()

    async def readiness(self) -> tuple[bool, str]:
        bundle = self.certificates.ca_bundle() or self._verify
        ready, detail = await self.server.check(bundle, self.server_names()[0])
        if ready and self.registrar.problems:
            return False, self.registrar.problems[0]
        return ready, detail

    async def stop(self) -> None:
        """The registrations first (make run's are deleted: nothing answers them any more),
        then the server and the certificates."""
        await self.registrar.stop()
        await self.server.stop()
        await self.certificates.stop()

    def _local_or_deployed(self, registration: Registration) -> Registration:
        """make run's webhook configurations are this process's: deleted at exit; a deployed
        operator leaves everything as it is (a restart, another replica, answers next)."""
        if self.settings.service is not None:
            return replace(registration, delete_at_stop=False, exit_value=None)
        if registration.resource in (VALIDATING, MUTATING):
            return replace(registration, delete_at_stop=True)
        return registration
