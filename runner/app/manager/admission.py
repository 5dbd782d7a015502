"""The watches' `validate:` and `mutate:` as a part of the webhook server (webhooks/assembly.py):
one `Admitter` (runner/admit) per watch and hook, served on its Kubebuilder path, and the
ValidatingWebhookConfiguration and MutatingWebhookConfiguration that send the API server there.

The runs reach the API through a proxy of their own in read-only mode (lookups work, writes
are refused), with one kubeconfig for all of them. The playbook of a `role:` hook is written
once, under the artifacts folder; it never gathers facts (a request waits for the answer).
What the configurations need from the cluster is asked when the server listens: the kinds'
resource names (discovery; before the CRD is installed: Kubebuilder's plural of the kind) and
who the operator is (a SelfSubjectReview), so that its own writes skip its webhooks: when it
runs deployed or as a service account; under `make run` it runs as the developer, whose requests
must be admitted (its finalizer updates are then allowed by the admitter without a run). They
are handed over once every admitter can answer at once (`ready`: a job started ahead reads its
vars), so that nothing is refused because the operator was not ready yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.admit import configurations
from runner.admit.admitter import Admitter, RunSettings
from runner.ansible.interface import QuickRuns, role_playbook_text
from runner.app.webhooks.registrar import Registration
from runner.app.webhooks.server import Handler
from runner.kube import client as kube
from runner.kube import objects
from runner.kube.client import ApiError, KubeClient
from runner.kube.resources import find_resource
from runner.scaffold.names import plural as kubebuilder_plural
from runner.util.redact import SecretValues
from runner.watches import GVK, Watch

log = logging.getLogger("runner.webhooks")

#: Admission runs at once, for all the webhooks together (more wait their turn, within their
#: deadline).
ADMISSION_RUNS = 4
#: Seconds the configurations wait for the runs to be ready (AdmissionPart.ready).
READY_WITHIN = 120.0


def admission_watches(watches: Sequence[Watch]) -> list[Watch]:
    return [w for w in watches if w.validate is not None or w.mutate is not None]


def write_playbook(folder: Path, watch: Watch, hook_kind: str) -> Path:
    """The playbook of `watch`'s hook: its own, or one that runs its role (no facts)."""
    hook = configurations.hook_of(watch, hook_kind)
    assert hook is not None
    if hook.playbook is not None:
        return Path(hook.playbook)
    assert hook.role is not None
    gvk = watch.gvk
    path = folder / (gvk.group or "core") / gvk.version / gvk.kind / f"{hook_kind}.yml"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(role_playbook_text(hook.role, skip_facts=True), encoding="utf-8")
    return path


async def whoami(client: KubeClient) -> str | None:
    """The operator's username (SelfSubjectReview); None, with a warning, when unknown."""
    try:
        review = await client.send(objects.self_subject_review())
    except (ApiError, OSError) as err:
        log.warning(
            "webhooks: who the operator is could not be asked (SelfSubjectReview: %s); its own "
            "writes (finalizers) go through its webhooks too",
            err,
        )
        return None
    username = ((review or {}).get("status") or {}).get("userInfo", {}).get("username")
    return str(username) if username else None


async def plural_of(client: KubeClient, gvk: GVK) -> str:
    """The kind's resource name from discovery, else Kubebuilder's plural of it."""
    try:
        found = find_resource(
            await client.send(kube.get_api_resources(gvk.group, gvk.version)) or {},
            gvk.group,
            gvk.version,
            gvk.kind,
        )
    except (ApiError, OSError):
        found = None
    if found is not None:
        return found[0].plural
    guess = kubebuilder_plural(gvk.kind)
    log.warning(
        "webhooks: %s %s is not served yet (CRD not installed?); its webhook rule names the "
        "resource %s",
        gvk.kind,
        gvk.api_version,
        guess,
    )
    return guess


class AdmissionPart:
    """validate: and mutate: as webhook handlers and configurations (module doc)."""

    def __init__(
        self,
        watches: Sequence[Watch],
        client: KubeClient,
        runs: QuickRuns,
        access: Mapping[str, str],
        playbooks: Path,
        configuration_name: str,
        namespaces: Sequence[str] = (),
        ansible_args: tuple[str, ...] = (),
        deployed: bool = False,
        secrets: SecretValues | None = None,
    ) -> None:
        self.watches = admission_watches(watches)
        self.deployed = deployed
        self.client = client
        self.name = configuration_name
        self.namespaces = list(namespaces)
        slots = asyncio.Semaphore(ADMISSION_RUNS)
        self.admitters: dict[str, Admitter] = {}
        for watch in self.watches:
            for hook_kind in configurations.HOOK_KINDS:
                if configurations.hook_of(watch, hook_kind) is None:
                    continue
                settings = RunSettings(
                    playbook=write_playbook(playbooks, watch, hook_kind),
                    envvars=dict(access),
                    cmdline=ansible_args,
                    secrets=secrets,
                )
                path = configurations.webhook_path(hook_kind, watch.gvk)
                self.admitters[path] = Admitter(watch, hook_kind, runs, settings, slots)

    def handlers(self) -> Mapping[str, Handler]:
        return {path: admitter.review for path, admitter in self.admitters.items()}

    async def registrations(
        self, client_config: Callable[[str], dict[str, Any]]
    ) -> Sequence[Registration]:
        username = await whoami(self.client)
        if username and not (self.deployed or username.startswith("system:serviceaccount:")):
            log.info(
                "webhooks: the operator runs as %s, likely your own identity (make run): the "
                "webhooks do not leave its requests out by name (its finalizer updates are "
                "allowed without a run)",
                username,
            )
            username = None
        plurals = {w.gvk: await plural_of(self.client, w.gvk) for w in self.watches}
        await self.ready()
        result = []
        for hook_kind, resource in (
            ("validate", objects.VALIDATING_WEBHOOK_CONFIGURATIONS),
            ("mutate", objects.MUTATING_WEBHOOK_CONFIGURATIONS),
        ):
            entries = configurations.webhooks(
                self.watches, hook_kind, plurals, client_config, self.namespaces, username
            )
            if entries:
                result.append(Registration(resource, self.name, ("webhooks",), entries))
        for path in sorted(self.admitters):
            admitter = self.admitters[path]
            log.info(
                "webhooks: %s %s %s on %s (failurePolicy %s, timeout %d s%s)",
                admitter.kind,
                admitter.watch.gvk.kind,
                "/".join(admitter.hook.operations),
                path,
                admitter.hook.failure_policy,
                admitter.hook.timeout_seconds,
                f"; not for {username}" if username else "",
            )
        return result

    async def ready(self) -> None:
        """Wait until every admitter can answer at once (a job started ahead reads its vars:
        the warm executor up, or given up, and ansible-playbook's start done), so that the
        configurations sent to the API server never refuse a request because the operator
        was not ready yet; at most READY_WITHIN seconds (then they are registered anyway,
        with a warning)."""
        began = time.monotonic()
        tasks = [asyncio.ensure_future(a.prepare()) for a in self.admitters.values()]
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, timeout=READY_WITHIN)
        took = time.monotonic() - began
        answered = [t for t in done if not t.cancelled() and t.exception() is None]
        if pending or len(answered) < len(tasks) or not all(t.result() for t in answered):
            log.warning(
                "webhooks: their runs are not ready after %.1f s; registered anyway (a review "
                "that comes now waits for a run to start)",
                took,
            )
            return
        log.info("webhooks: their runs ready in %.1f s; registering them", took)
