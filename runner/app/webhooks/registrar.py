"""The objects that send the API server to the webhooks, kept as the operator wants them.

A `Registration` names one object and the part of it the operator owns: the `webhooks` of a
Validating- or MutatingWebhookConfiguration, the `spec.conversion` of a CRD. The `Registrar`
writes each one: creates it when it is missing (`make run`'s url webhooks; a deployed operator
finds the ones its manifests made; a CRD is never created, its registration waits for it),
otherwise merge-patches the owned part when it differs, with
the certificates' caBundle (when it is ours) in every `clientConfig` there. It looks again when
the bundle changes and every `period` seconds (a manifest applied again, an edit by hand), and
deletes at `stop` the registrations that ask for it, or sets their part to `exit_value`
(`make run`'s: they point at this process).
A write that fails is logged once and tried again at the next look; it never stops the operator.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.app.webhooks.certificates import WebhookCertificates
from runner.kube import objects
from runner.kube.client import ApiError, KubeClient
from runner.kube.resources import Resource

log = logging.getLogger("runner.webhooks")

LABELS = {"app.kubernetes.io/managed-by": "operator-runner"}


@dataclass(frozen=True)
class Registration:
    """`value` at `path` of the object `name` of `resource` is the operator's."""

    resource: Resource
    name: str
    path: tuple[str, ...]  # ("webhooks",) or ("spec", "conversion")
    value: Any
    delete_at_stop: bool = False  # the object is this process's (make run's configurations)
    exit_value: Any = None  # else what the part at `path` becomes at stop (None: left as is)
    body: dict[str, Any] = field(default_factory=dict, hash=False)  # the rest, to create it
    create: bool = True  # False: someone else makes the object (a CRD); written once it is there

    def __str__(self) -> str:
        return f"{self.resource.kind} {self.name}"


class NotThere(Exception):
    """A registration's object that is not the operator's to create does not exist (yet)."""


def with_ca_bundle(value: Any, bundle: bytes | None) -> Any:
    """A copy of `value` with `caBundle` (base64 of the PEM) in every `clientConfig` mapping;
    `value` itself when the bundle is not ours (None)."""
    if bundle is None:
        return value
    encoded = base64.b64encode(bundle).decode()

    def put(node: Any) -> Any:
        if isinstance(node, dict):
            result = {key: put(item) for key, item in node.items()}
            if isinstance(result.get("clientConfig"), dict):
                result["clientConfig"] = {**result["clientConfig"], "caBundle": encoded}
            return result
        if isinstance(node, list):
            return [put(item) for item in node]
        return node

    return put(copy.deepcopy(value))


def keep_ca_bundles(existing: Any, wanted: Any) -> Any:
    """`wanted` with the caBundles `existing` has where `wanted` has none (a mounted
    certificate's, put there by cert-manager's CA injector); webhooks matched by name."""
    if isinstance(wanted, dict) and isinstance(existing, dict):
        result = {key: keep_ca_bundles(existing.get(key), item) for key, item in wanted.items()}
        old = existing.get("clientConfig")
        new = result.get("clientConfig")
        if isinstance(old, dict) and isinstance(new, dict) and old.get("caBundle"):
            result["clientConfig"] = {"caBundle": old["caBundle"], **new}
        return result
    if isinstance(wanted, list) and isinstance(existing, list):
        by_name = {e.get("name"): e for e in existing if isinstance(e, dict)}
        return [
            keep_ca_bundles(by_name.get(w.get("name")) if isinstance(w, dict) else None, w)
            for w in wanted
        ]
    return wanted


def contains(existing: Any, wanted: Any) -> bool:
    """Whether `existing` says everything `wanted` says (what the API server adds, defaults,
    may be there too); lists item by item, of the same length."""
    if isinstance(wanted, dict):
        return isinstance(existing, dict) and all(
            contains(existing.get(key), item) for key, item in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(existing, list)
            and len(existing) == len(wanted)
            and all(contains(e, w) for e, w in zip(existing, wanted, strict=True))
        )
    return bool(existing == wanted)


def replacing_patch(existing: Any, wanted: Any) -> Any:
    """A merge patch that makes `existing` exactly `wanted` (keys it lacks set to null)."""
    if isinstance(wanted, dict) and isinstance(existing, dict):
        patch = {key: replacing_patch(existing.get(key), item) for key, item in wanted.items()}
        patch.update({key: None for key in existing if key not in wanted})
        return patch
    return wanted


def _at(obj: Any, path: Sequence[str]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _nested(path: Sequence[str], value: Any) -> dict[str, Any]:
    result: Any = value
    for key in reversed(path):
        result = {key: result}
    assert isinstance(result, dict)
    return result


class Registrar:
    """Keeps the registrations written (module doc)."""

    def __init__(
        self,
        client: KubeClient,
        certificates: WebhookCertificates | None,
        period: float = 60.0,
    ) -> None:
        self.client = client
        self.certificates = certificates
        self.period = period
        self.registrations: list[Registration] = []
        self._failed: dict[str, str] = {}  # what failed at the last look, by registration
        self._as_wanted: set[str] = set()  # registrations seen as this process wants them
        self._warned: set[str] = set()  # changed by someone else: said once, at warning level
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def add(self, registration: Registration) -> None:
        self.registrations.append(registration)

    @property
    def problems(self) -> list[str]:
        """What could not be written at the last look (empty: all written)."""
        return list(self._failed.values())

    async def sync(self) -> bool:
        """Write every registration that differs; True when all are as wanted."""
        async with self._lock:
            bundle = self.certificates.ca_bundle() if self.certificates is not None else None
            for registration in self.registrations:
                try:
                    await self._write(registration, bundle)
                except (ApiError, OSError, NotThere) as err:
                    self._failed_with(registration, _explain(registration, err))
                else:
                    self._as_wanted.add(str(registration))
                    if self._failed.pop(str(registration), None) is not None:
                        log.info("webhooks: %s written", registration)
            return not self._failed

    def _failed_with(self, registration: Registration, message: str) -> None:
        if self._failed.get(str(registration)) != message:
            log.error("webhooks: %s", message)
        self._failed[str(registration)] = message

    async def _write(self, registration: Registration, bundle: bytes | None) -> None:
        ref = objects.ref(registration.resource, None, registration.name)
        wanted = with_ca_bundle(registration.value, bundle)
        existing = await self.client.send_or_none(objects.get(ref))
        if existing is None and not registration.create:
            raise NotThere(
                f"{registration} is not there (install it: make install); its "
                f"{'.'.join(registration.path)} is written when it is"
            )
        if existing is None:
            body = copy.deepcopy(registration.body)
            body.update(
                apiVersion=registration.resource.api_version, kind=registration.resource.kind
            )
            metadata = body.setdefault("metadata", {})
            metadata["name"] = registration.name
            metadata.setdefault("labels", {}).update(LABELS)
            target = body
            for key in registration.path[:-1]:
                target = target.setdefault(key, {})
            target[registration.path[-1]] = wanted
            await self.client.send(objects.create(registration.resource, None, body))
            log.info("webhooks: %s created", registration)
            return
        current = _at(existing, registration.path)
        if bundle is None:
            wanted = keep_ca_bundles(current, wanted)
        if contains(current, wanted):
            return
        patch = _nested(registration.path, replacing_patch(current, wanted))
        await self.client.send(objects.merge_patch(ref, patch))
        self._said_updated(registration, current)

    def _said_updated(self, registration: Registration, current: Any) -> None:
        """An update is news when this process had it as wanted: someone else changed it since
        (another operator of the kind pointing a CRD's one conversion at itself, or an edit by
        hand). The first time at warning level, naming where it pointed."""
        key = str(registration)
        if key in self._as_wanted and key not in self._warned:
            self._warned.add(key)
            log.warning(
                "webhooks: %s was changed by someone else (it pointed at %s), set back to this "
                "process; another operator serving the same kind? Each sets it back every %g s",
                registration,
                _pointed_at(current) or "nothing",
                self.period,
            )
        else:
            log.info("webhooks: %s updated", registration)

    async def start(self) -> None:
        """The first writes (failures are logged, and tried again), then the looks."""
        await self.sync()
        if self.certificates is not None:
            self.certificates.subscribe(self._bundle_changed)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="webhook-configs")

    async def _bundle_changed(self) -> None:
        await self.sync()

    async def _loop(self) -> None:
        ok = not self._failed
        while True:  # a schedule: look again, sooner after a failure
            await asyncio.sleep(self.period if ok else min(self.period, 10.0))
            ok = await self.sync()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for registration in self.registrations:
            ref = objects.ref(registration.resource, None, registration.name)
            try:
                if registration.delete_at_stop:
                    await self.client.send_or_none(objects.delete(ref))
                    log.info("webhooks: %s deleted (it pointed at this process)", registration)
                elif registration.exit_value is not None:
                    patch = _nested(registration.path, registration.exit_value)
                    await self.client.send_or_none(objects.merge_patch(ref, patch))
                    log.info("webhooks: %s set back (it pointed at this process)", registration)
            except (ApiError, OSError) as err:
                log.warning("webhooks: %s not set back: %s", registration, err)


def _pointed_at(node: Any) -> str | None:
    """The first clientConfig's url or service in `node`, for a log line."""
    if isinstance(node, dict):
        config = node.get("clientConfig")
        if isinstance(config, dict):
            if config.get("url"):
                return str(config["url"])
            service = config.get("service")
            if isinstance(service, dict):
                return "service {}/{}:{}{}".format(
                    service.get("namespace"),
                    service.get("name"),
                    service.get("port", 443),
                    service.get("path") or "",
                )
        children: list[Any] = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        return None
    return next((found for c in children if (found := _pointed_at(c)) is not None), None)


def _explain(registration: Registration, err: Exception) -> str:
    if isinstance(err, NotThere):
        return str(err)
    if isinstance(err, ApiError) and err.status == 403:
        verbs = "get and patch" + ("" if registration.delete_at_stop else " (by resourceName)")
        return (
            f"{registration} cannot be written: {err.message}; the operator needs {verbs} on "
            f"{registration.resource.plural}.{registration.resource.group} (and create, unless "
            "its manifests make it: deploy/webhook/)"
        )
    return f"{registration} cannot be written: {err}"
