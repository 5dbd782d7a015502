"""The webhook server as the manager runs it: the `--webhook-*` flags resolved into settings,
the parts that use the server (admission: the watches' `validate:` and `mutate:`; conversion:
their `convert:`), and their start and stop.

Webhooks start in the serve step, before leader election: every replica serves them (a standby
too), as controller-runtime's webhook server does, and /readyz includes them. Never refuse what
cannot be judged yet: when their answers are Ansible runs, the warm executor starts at once
(not with the first review), the configurations are written only once the runs can answer at
once (admission.py's `ready`, conversion's `wait_warm`), and /readyz says not ready until then.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from runner.ansible import collections_path
from runner.ansible.executor import Executor
from runner.ansible.warm.jobenv import WARM_LOOKUPS_ENV
from runner.app.leases.lease import ElectionError, default_election_id, election_namespace
from runner.app.manager.admission import AdmissionPart, admission_watches
from runner.app.manager.config import OperatorConfig, WebhookConfig
from runner.app.manager.conversion import ConversionPart, conversion_watches
from runner.app.serving.bind import parse_bind_address
from runner.app.serving.health import Health
from runner.app.webhooks.assembly import WebhookPart, Webhooks, WebhookSettings
from runner.app.webhooks.certificates import Lifetimes
from runner.convert.converter import Conversions, ConvertOptions
from runner.dependents.ownership import Owner
from runner.dependents.proxy import Proxy
from runner.kube.client import ApiError, AsyncUpstream, KubeClient
from runner.kube.credentials import Credentials
from runner.util.redact import SecretValues
from runner.watches import Watch

log = logging.getLogger("runner.webhooks")


def webhook_settings(
    flags: WebhookConfig, watches: Sequence[Watch], environ: Mapping[str, str]
) -> WebhookSettings | None:
    """The flags, resolved (None: switched off); a bad set-up exits with one message."""
    address = parse_bind_address(flags.bind_address)
    if address is None:
        return None
    service = None
    if flags.service:
        namespace, _, name = flags.service.rpartition("/")
        if not namespace:
            try:
                namespace = election_namespace(None, environ)
            except ElectionError:
                raise SystemExit(
                    f"operator-runner: --webhook-service={flags.service}: its namespace is not "
                    "known outside a pod; give NAMESPACE/NAME (or set POD_NAMESPACE)"
                ) from None
        service = (namespace, name)
    return WebhookSettings(
        address=address,
        name=flags.configuration_name or default_election_id(w.gvk.group for w in watches),
        cert_dir=flags.cert_dir,
        service=service,
        url=flags.url,
        lifetimes=Lifetimes(ca=flags.ca_validity, cert=flags.cert_validity),
    )


@dataclass
class WebhooksRunning:
    """What `start_webhooks` started, for `stop`."""

    webhooks: Webhooks
    resources: AsyncExitStack  # what the parts need: the admission runs' proxy

    async def stop(self) -> None:
        await self.webhooks.stop()
        await self.resources.aclose()


async def _read_only_access(
    credentials: Credentials, resources: AsyncExitStack, secrets: SecretValues
) -> dict[str, str]:
    """The environment of the webhook runs (admission, conversion roles): a kubeconfig of a
    proxy in read-only mode, lookups forwarded, writes refused (closed with `resources`); the
    values of the Secrets they read go to `secrets`, masked in their answers and log lines."""
    upstream = AsyncUpstream(credentials)
    resources.push_async_callback(upstream.close)
    proxy = Proxy(upstream, inject=False, read_only=True)
    await proxy.start()
    resources.push_async_callback(proxy.stop)
    owner = Owner("operator-runner.dev/v1", "Admission", "admission", "", "")
    return resources.enter_context(proxy.run_env(owner, secrets))


def _admission_part(
    config: OperatorConfig,
    watches: Sequence[Watch],
    settings: WebhookSettings,
    client: KubeClient,
    executor: Executor,
    access: dict[str, str],
    secrets: SecretValues,
) -> AdmissionPart:
    """validate: and mutate:, their runs with the read-only `access`."""
    access = {
        **access,
        # the jobs started ahead load kubernetes.core's lookup and its client before their
        # request comes (warm/server/lookups.py): a validate role's lookups cost the API call
        WARM_LOOKUPS_ENV: "kubernetes.core.k8s",
    }
    return AdmissionPart(
        watches,
        client,
        executor,
        access,
        config.artifacts_dir / "admission",
        settings.name,
        config.namespaces,
        config.ansible_args,
        deployed=settings.service is not None,
        secrets=secrets,
    )


def _conversion_part(
    config: OperatorConfig,
    watches: Sequence[Watch],
    client: KubeClient,
    executor: Executor,
    access: dict[str, str],
    secrets: SecretValues,
    resources: AsyncExitStack,
) -> ConversionPart:
    """convert:, its roles' runs with the read-only `access` (its folder closed with
    `resources`)."""
    options = ConvertOptions(ansible_args=config.ansible_args, envvars=access, secrets=secrets)
    conversions = Conversions.of(watches, executor, options)
    resources.callback(conversions.close)
    by_ansible = any(w.convert is not None and w.convert.by_ansible for w in watches)
    return ConversionPart(conversions, client, watches, executor.wait_warm if by_ansible else None)


def _check_util(watches: Sequence[Watch]) -> None:
    """Start-up stops when an installed operator_sdk.util newer than ours (so it is the one
    used) lacks the module the webhook roles answer with."""
    installed = collections_path.newer_util_installed(os.environ)
    if installed is None:
        return
    needed = []
    if admission_watches(watches):
        needed.append(("admission", "validate:/mutate:"))
    if any(w.convert is not None and w.convert.by_ansible for w in watches):
        needed.append(("conversion", "convert:"))
    for module, keys in needed:
        if not (installed / "plugins" / "action" / f"{module}.py").exists():
            raise SystemExit(
                f"operator-runner: {keys} roles answer with operator_sdk.util.{module}, but the "
                f"operator_sdk.util installed at {installed} (newer than operator-runner's, so "
                "it is used) has no such module; remove that installation, or the keys"
            )


async def _runs_ready(ready: asyncio.Event) -> tuple[bool, str]:
    """/readyz while the webhooks' runs get ready: a deployed replica takes no reviews yet."""
    if ready.is_set():
        return True, ""
    return False, "webhooks: their runs are getting ready (the warm executor starts)"


async def start_webhooks(
    config: OperatorConfig,
    watches: Sequence[Watch],
    credentials: Credentials,
    client: KubeClient,
    executor: Executor,
    health: Health,
) -> WebhooksRunning | None:
    """The webhook server with its parts, or None when no watch needs one (or it is off).

    The parts: admission (the watches' validate:/mutate:) and conversion (convert:); a new kind
    of webhook adds its watches to `wanted` and its part to `parts` here."""
    wanted = [w for w in watches if w.validate or w.mutate or w.convert]
    if not wanted:
        return None
    ansible_runs = admission_watches(watches) or any(
        w.convert is not None and w.convert.by_ansible for w in watches
    )
    _check_util(watches)
    settings = webhook_settings(config.webhooks, watches, os.environ)
    kinds = ", ".join(w.gvk.kind for w in wanted)
    if settings is None:
        log.warning(
            "webhooks are off (--webhook-bind-address=0): those of %s are not served", kinds
        )
        return None
    if ansible_runs:  # up while the certificates are made: registered once it answers
        executor.start_warm()
    runs_ready = asyncio.Event()
    health.add_check(lambda: _runs_ready(runs_ready))
    resources = AsyncExitStack()
    parts: list[WebhookPart] = []
    try:
        secrets = SecretValues()  # what the runs read of Secrets, for all of them
        access = await _read_only_access(credentials, resources, secrets) if ansible_runs else {}
        if admission_watches(watches):
            parts.append(
                _admission_part(config, watches, settings, client, executor, access, secrets)
            )
        if conversion_watches(watches):
            parts.append(
                _conversion_part(config, watches, client, executor, access, secrets, resources)
            )
        webhooks = Webhooks(settings, client, parts)
        await webhooks.start()
    except (ApiError, OSError) as err:  # the certificates' Secret: RBAC, or the API away
        await resources.aclose()
        raise SystemExit(
            f"operator-runner: webhooks: the certificates cannot be kept: {err}; a deployed "
            "operator needs get, create and update on its Secret <configuration name>-cert "
            "(deploy/webhook/role.yaml)"
        ) from None
    except BaseException:
        await resources.aclose()
        raise
    runs_ready.set()
    health.add_check(webhooks.readiness)
    where = (
        f"Service {settings.service[0]}/{settings.service[1]}"
        if settings.service
        else webhooks.base_url
    )
    log.info("webhooks of %s served for the API server at %s", kinds, where)
    return WebhooksRunning(webhooks, resources)
