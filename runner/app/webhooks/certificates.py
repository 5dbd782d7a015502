"""The webhook server's certificates: made and rotated by the operator, or read from a folder.

Two sources, one interface (`WebhookCertificates`: the SSL context the server serves with, the
caBundle the API server must trust, a callback when it changes):

- `MountedCertificates` (`--webhook-cert-dir` holds tls.crt and tls.key, cert-manager's way):
  served as they are and read again when they change; the caBundle is someone else's business
  (cert-manager's CA injector), so `ca_bundle` is None and nothing is written into the cluster.
- `GeneratedCertificates`: a CA and a serving certificate it signs, kept in a `store` (a Secret
  in the operator's namespace when deployed, so that every replica serves the same; memory for
  `make run`), and rotated:
  * the serving certificate is signed again when a third of its lifetime is left, or when the
    names it must carry changed;
  * the CA is replaced when a third of its lifetime is left: the new CA joins the bundle
    (old + new) at once, and the serving certificate moves to it only `settle` seconds later,
    once the webhook configurations carry the new bundle (subscribers are told first);
  * a CA leaves the bundle when it has expired.
  Replicas that write at once are told apart by the Secret's resourceVersion: the loser reads
  the winner's state and uses it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runner.app.serving.tlsfiles import CertFiles, ReloadingTLS, load_pem, server_context
from runner.app.webhooks import ca as webhookca
from runner.kube import objects
from runner.kube.client import ApiError, KubeClient

log = logging.getLogger("runner.webhooks")

DEFAULT_CERT_DIR = Path(tempfile.gettempdir()) / "k8s-webhook-server" / "serving-certs"
DAY = 86400.0
MAX_CHECK_EVERY = 3600.0  # seconds between looks at the certificates, at most
Data = dict[str, bytes]
Subscriber = Callable[[], Awaitable[None]]


class WebhookCertificates(Protocol):
    """What the webhook server and the caBundle writers (registrar.py) see."""

    context: ssl.SSLContext

    def ca_bundle(self) -> bytes | None:
        """The PEM bundle the API server must trust; None when it is not ours to write."""

    def subscribe(self, callback: Subscriber) -> None:
        """`callback` is awaited after each change of the bundle (and not before `start`)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class MountedCertificates:
    """tls.crt and tls.key from a folder, read again when they change."""

    def __init__(self, files: CertFiles) -> None:
        self._tls = ReloadingTLS(files, "webhooks")
        self.context = self._tls.context
        self.files = files
        ca = files.cert.parent / "ca.crt"  # cert-manager's Secret has it: used by /readyz
        self.ca_pem = ca.read_bytes() if ca.is_file() else None

    def ca_bundle(self) -> bytes | None:
        return None

    def subscribe(self, callback: Subscriber) -> None:
        pass  # the bundle is not ours

    async def start(self) -> None:
        self._tls.start()
        log.info("webhooks: serving %s (read again when it changes)", self.files.cert)

    async def stop(self) -> None:
        await self._tls.stop()


def mounted(cert_dir: Path) -> CertFiles | None:
    """The folder's tls.crt and tls.key, when both are there."""
    files = CertFiles(cert_dir / "tls.crt", cert_dir / "tls.key")
    return files if files.present() else None


# --- where generated certificates are kept ------------------------------------------------


class Store(Protocol):
    async def read(self) -> tuple[Data, str] | None:
        """The data and its version, or None when there is none yet."""

    async def write(self, data: Data, version: str | None) -> bool:
        """Write `data` over `version` (None: create); False when someone else wrote first."""


class MemoryStore:
    """For `make run`: the configurations are written at every start, nothing to keep."""

    def __init__(self) -> None:
        self._data: tuple[Data, str] | None = None
        self._version = 0

    def __str__(self) -> str:
        return "memory (made at every start)"

    async def read(self) -> tuple[Data, str] | None:
        return self._data

    async def write(self, data: Data, version: str | None) -> bool:
        if version != (self._data[1] if self._data else None):
            return False
        self._version += 1
        self._data = (dict(data), str(self._version))
        return True


class SecretStore:
    """A Secret in the operator's namespace (RBAC: get, update by resourceName; create)."""

    def __init__(self, client: KubeClient, namespace: str, name: str) -> None:
        self.client = client
        self.ref = objects.ref(objects.SECRETS, namespace, name)

    def __str__(self) -> str:
        return f"Secret {self.ref.namespace}/{self.ref.name}"

    async def read(self) -> tuple[Data, str] | None:
        secret: dict[str, Any] | None = await self.client.send_or_none(objects.get(self.ref))
        if secret is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        return data, str(secret["metadata"]["resourceVersion"])

    async def write(self, data: Data, version: str | None) -> bool:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": self.ref.name,
                "namespace": self.ref.namespace,
                "labels": {"app.kubernetes.io/managed-by": "operator-runner"},
            },
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }
        try:
            if version is None:
                await self.client.send(objects.create(objects.SECRETS, self.ref.namespace, body))
            else:
                body["metadata"]["resourceVersion"] = version
                await self.client.send(objects.replace(self.ref, body))
        except ApiError as err:
            if err.status in (409, 404):
                return False
            raise
        return True


# --- generated certificates -----------------------------------------------------------------


@dataclass(frozen=True)
class Lifetimes:
    """How long the CA and the serving certificates live (seconds)."""

    ca: float = 3 * 365 * DAY
    cert: float = 365 * DAY

    @property
    def settle(self) -> float:
        """How long a new CA is in the bundle before certificates are signed by it."""
        return min(30.0, self.ca / 20)


CA_CRT, CA_KEY, BUNDLE, TLS_CRT, TLS_KEY = "ca.crt", "ca.key", "ca-bundle.crt", "tls.crt", "tls.key"
OLD_CRT, OLD_KEY = "previous-ca.crt", "previous-ca.key"  # signs while a new CA settles
ROTATED_AT = "ca-rotated-at"  # when the CA was replaced (seconds since the epoch, as text)


def _due(pem: bytes, now: datetime.datetime) -> bool:
    """A third of the certificate's lifetime, or less, is left."""
    return webhookca.not_after(pem) - now <= webhookca.lifetime_of(pem) / 3


def plan(data: Data | None, names: Sequence[str], lifetimes: Lifetimes, now: float) -> Data | None:
    """The certificates' next state from `data` at time `now`; None when nothing is due (pure)."""
    moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
    ca_life = datetime.timedelta(seconds=lifetimes.ca)
    cert_life = datetime.timedelta(seconds=lifetimes.cert)
    try:
        if data is None or not {CA_CRT, CA_KEY, BUNDLE, TLS_CRT, TLS_KEY} <= set(data):
            raise ValueError("incomplete")
        ca = webhookca.KeyPair(data[CA_CRT], data[CA_KEY])
        bundle = webhookca.split_bundle(data[BUNDLE])
        tls = data[TLS_CRT]
        webhookca.not_after(tls)
    except ValueError:  # none yet, or not ours to read: start afresh
        ca = webhookca.new_ca("operator-runner-webhook-ca", ca_life, moment)
        tls_pair = webhookca.sign_serving(ca, names, cert_life, moment)
        return {
            CA_CRT: ca.cert,
            CA_KEY: ca.key,
            BUNDLE: ca.cert,
            TLS_CRT: tls_pair.cert,
            TLS_KEY: tls_pair.key,
        }
    new = dict(data)
    kept = [pem for pem in bundle if webhookca.not_after(pem) > moment]
    if _due(ca.cert, moment):  # the next CA joins the bundle; certificates follow after settle
        new.update({OLD_CRT: ca.cert, OLD_KEY: ca.key, ROTATED_AT: str(now).encode()})
        ca = webhookca.new_ca("operator-runner-webhook-ca", ca_life, moment)
        new.update({CA_CRT: ca.cert, CA_KEY: ca.key})
    if ca.cert not in kept:
        kept.insert(0, ca.cert)
    new[BUNDLE] = b"".join(kept)
    signer = ca
    if now < float(new.get(ROTATED_AT, b"0")) + lifetimes.settle and new.get(OLD_CRT) in kept:
        signer = webhookca.KeyPair(new[OLD_CRT], new[OLD_KEY])  # the new CA is not known yet
    unknown_issuer = not any(webhookca.signed_by(tls, pem) for pem in kept)
    if (
        _due(tls, moment)
        or not set(names) <= webhookca.names_of(tls)
        or not webhookca.signed_by(tls, signer.cert)
        or unknown_issuer
    ):
        pair = webhookca.sign_serving(signer, names, cert_life, moment)
        new.update({TLS_CRT: pair.cert, TLS_KEY: pair.key})
    return None if new == data else new


def next_look(data: Data, lifetimes: Lifetimes, now: float) -> float:
    """Seconds until something may be due: a third of a lifetime left, a CA that settled or
    expired; at least 1 s, at most MAX_CHECK_EVERY."""
    times = []
    for pem in (data[CA_CRT], data[TLS_CRT], *webhookca.split_bundle(data[BUNDLE])):
        end = webhookca.not_after(pem).timestamp()
        times += [end - webhookca.lifetime_of(pem).total_seconds() / 3, end]
    rotated = float(data.get(ROTATED_AT, b"0"))
    times.append(rotated + lifetimes.settle)
    ahead = [t - now for t in times if t > now]
    return max(1.0, min([MAX_CHECK_EVERY, *ahead]))


class GeneratedCertificates:
    """A CA and a serving certificate for `names`, kept in `store`, rotated (module doc)."""

    def __init__(
        self,
        store: Store,
        names: Sequence[str],
        lifetimes: Lifetimes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.names = list(names)
        self.lifetimes = lifetimes or Lifetimes()
        self.context = server_context()
        self._clock = clock
        self._data: Data | None = None
        self._served: bytes | None = None
        self._subscribers: list[Subscriber] = []
        self._task: asyncio.Task[None] | None = None

    def ca_bundle(self) -> bytes | None:
        return self._data[BUNDLE] if self._data else None

    @property
    def serving_cert(self) -> bytes | None:
        return self._served

    def subscribe(self, callback: Subscriber) -> None:
        self._subscribers.append(callback)

    async def ensure(self) -> None:
        """One look: read the store, rotate what is due, write it back, serve it; the
        subscribers are told when the bundle changed, before a new certificate is served."""
        for _ in range(5):
            found = await self.store.read()
            data, version = found if found is not None else (None, None)
            wanted = plan(data, self.names, self.lifetimes, self._clock())
            if wanted is None:
                assert data is not None
                break
            if await self.store.write(wanted, version):
                data = wanted
                log.info("webhooks: certificates kept in %s", self.store)
                break
        else:
            raise RuntimeError(f"webhooks: {self.store} keeps changing under us")
        old_bundle = self.ca_bundle()
        self._data = data
        if data[BUNDLE] != old_bundle:
            for callback in self._subscribers:
                await callback()
        if data[TLS_CRT] != self._served:
            load_pem(self.context, data[TLS_CRT], data[TLS_KEY])
            self._served = data[TLS_CRT]
            end = webhookca.not_after(data[TLS_CRT])
            log.info("webhooks: serving a certificate for %s, valid until %s", self.names, end)

    async def start(self) -> None:
        """The first look (failures raise: start-up says what is wrong), then one whenever
        something may be due."""
        await self.ensure()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="webhook-certs")

    async def _loop(self) -> None:
        while True:
            assert self._data is not None
            await asyncio.sleep(next_look(self._data, self.lifetimes, self._clock()))
            try:
                await self.ensure()
            except Exception as err:  # the API server away, or RBAC: next time
                log.warning("webhooks: certificates not checked: %s; trying again in 10 s", err)
                await asyncio.sleep(10.0)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
