"""`operator-runner reconcile`: one reconcile of one CR, in the foreground.

The operator's own pieces, built the way the manager builds them (watches.yaml, `Reconciler`,
`Executor`, the roles' `Proxy`): the role gets the same extra vars, its writes the same owner
references, and the CR the same status, as under `operator-runner run`. Ansible's own output
(each task's result, and the diffs with `--diff`) goes to stdout.

`--check` runs the role in Ansible's check mode and writes nothing itself (no status, no
finalizer, no Event); with `-f`, the CR of the file is used as it is written there, so a spec
can be tried before it is applied, also when the CR is not in the cluster yet.

Exit status: 0 when the run succeeded, 2 when it failed, 1 for a usage error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from runner.ansible.artifacts import Artifacts
from runner.ansible.interface import LogEvents
from runner.app.manager.config import OperatorConfig, read_watches
from runner.app.manager.run import make_executor
from runner.app.manager.watchsettings import watch_options
from runner.dependents.proxy import Proxy
from runner.kube import client as kube
from runner.kube import clientconfig
from runner.kube import credentials as creds
from runner.kube.client import ApiError, KubeClient
from runner.kube.resources import ObjectRef, Resource, find_resource
from runner.reconcile.reconciler import Reconciler
from runner.reconcile.recorder import EventRecorder
from runner.watches import Watch

log = logging.getLogger("runner.reconcile-command")

OK, FAILED, USAGE = 0, 2, 1
# The owner of what a role would create for a CR that is not in the cluster (check mode only:
# an ownerReference needs a uid, and the API server's dry run validates one).
UNSAVED_UID = "00000000-0000-0000-0000-000000000000"


class UsageError(Exception):
    """What the user asked for cannot be done; the message says why (exit status 1)."""


def read_cr_file(path: Path) -> dict[str, Any]:
    """The one CR of a YAML or JSON file."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{path} is not YAML: {err}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise UsageError(f"{path} must hold exactly one object (found {len(docs)})")
    obj = docs[0]
    if not obj.get("apiVersion") or not obj.get("kind"):
        raise UsageError(f"{path}: the object has no apiVersion or kind")
    if not (obj.get("metadata") or {}).get("name"):
        raise UsageError(f"{path}: the object has no metadata.name")
    return obj


def _watch_names(watches: list[Watch]) -> str:
    return ", ".join(f"{w.gvk.kind}.{w.gvk.group}" if w.gvk.group else w.gvk.kind for w in watches)


async def discover_watch(client: KubeClient, watch: Watch) -> tuple[Resource, tuple[str, ...]]:
    """The watch's resource, from discovery, and the names kubectl takes for it."""
    gvk = watch.gvk
    try:
        listing = await client.send(kube.get_api_resources(gvk.group, gvk.version))
    except ApiError as err:
        if err.not_found:
            listing = {}
        else:
            raise
    found = find_resource(listing or {}, gvk.group, gvk.version, gvk.kind)
    if found is None:
        raise UsageError(
            f"the API server does not serve {gvk.kind} {gvk.api_version}: install its CRD "
            "(make install)"
        )
    return found


async def select_watch(
    client: KubeClient, watches: list[Watch], kind: str | None, obj: dict[str, Any] | None
) -> tuple[Watch, Resource]:
    """The watch of `kind` (as kubectl takes it: Kind, kind.group, plural, singular, short
    name) or of the object's apiVersion and kind, and its resource."""
    if obj is not None:
        for watch in watches:
            if watch.gvk.api_version == obj["apiVersion"] and watch.gvk.kind == obj["kind"]:
                return watch, (await discover_watch(client, watch))[0]
        raise UsageError(
            f"watches.yaml has no watch of {obj['kind']} {obj['apiVersion']} "
            f"(it watches {_watch_names(watches)})"
        )
    assert kind is not None
    wanted = kind.lower()
    for watch in watches:
        gvk = watch.gvk
        if wanted in (gvk.kind.lower(), f"{gvk.kind}.{gvk.group}".lower()):
            return watch, (await discover_watch(client, watch))[0]
    for watch in watches:  # plural, singular or short name: from discovery
        try:
            resource, names = await discover_watch(client, watch)
        except UsageError:
            continue
        group = watch.gvk.group.lower()
        if wanted in names or any(wanted == f"{n}.{group}" for n in names):
            return watch, resource
    raise UsageError(
        f"watches.yaml has no watch of kind {kind!r} (it watches {_watch_names(watches)})"
    )


async def reconcile_once(
    config: OperatorConfig,
    watches: list[Watch],
    *,
    target: str | None,
    namespace: str | None,
    cr_file: Path | None,
    check: bool,
    diff: bool,
) -> int:
    try:
        credentials = clientconfig.load(config.kubeconfig)
    except creds.CredentialsError as err:
        raise UsageError(str(err)) from None
    client = KubeClient(credentials)
    upstream = kube.AsyncUpstream(credentials)
    proxy = Proxy(upstream, inject=config.inject_owner_ref)  # no dependent watches to start
    executor = make_executor(config)
    try:
        from_file = read_cr_file(cr_file) if cr_file else None
        kind, _, name = (target or "").partition("/")
        if from_file is None and (not kind or not name):
            raise UsageError(f"expected KIND/NAME or -f FILE, got {target!r}")
        watch, resource = await select_watch(client, watches, kind or None, from_file)
        if from_file is not None:
            meta = from_file.setdefault("metadata", {})
            name = meta["name"]
            namespace = meta.get("namespace") or namespace
        namespace = (
            (namespace or credentials.namespace or "default") if resource.namespaced else None
        )
        ref = ObjectRef(resource, namespace, name)
        live = await client.get_or_none(ref)
        given: dict[str, Any] | None = None
        if from_file is not None and check:
            given = _as_given(from_file, live, namespace)
        elif live is None:
            hint = " (with --check, a CR from -f need not be in the cluster)" if cr_file else ""
            raise UsageError(f"{ref} not found{hint}")
        options = watch_options(config, watch, os.environ)
        options = replace(
            options,
            ansible_args=(*options.ansible_args, *(["--diff"] if diff else [])),
            check=check,
            echo=True,
            log_events=LogEvents.NOTHING,  # Ansible's own output shows each task
        )
        await proxy.start()
        recorder = EventRecorder(client)
        artifacts = Artifacts(config.artifacts_dir / "reconcile")  # apart from the operator's
        reconciler = Reconciler(watch, options, client, executor, artifacts, recorder, proxy)
        outcome = await reconciler.reconcile(ref, given)
    finally:
        await proxy.stop()
        await upstream.close()
        executor.close()
        await client.close()
    sys.stdout.flush()
    verdict = "failed" if outcome.failed else "succeeded"
    print(
        f"operator-runner: reconcile of {ref} {verdict}"
        f"{' (check mode: nothing changed in the cluster)' if check else ''}"
        f"{': ' + outcome.detail if outcome.failed and outcome.detail else ''}",
        file=sys.stderr,
    )
    return FAILED if outcome.failed else OK


def _as_given(
    obj: dict[str, Any], live: dict[str, Any] | None, namespace: str | None
) -> dict[str, Any]:
    """The file's CR as the role sees it: the cluster's metadata (uid, generation, ...) when the
    CR is there, the file's spec."""
    given = dict(obj)
    meta = dict(obj.get("metadata") or {})
    if live is not None:
        meta = {**(live.get("metadata") or {}), **meta}
        given.setdefault("status", live.get("status"))
    if namespace:
        meta["namespace"] = namespace
    meta.setdefault("uid", UNSAVED_UID)
    meta.setdefault("generation", 1)
    given["metadata"] = meta
    return given


def run_reconcile_command(
    config: OperatorConfig,
    *,
    target: str | None,
    namespace: str | None,
    cr_file: Path | None,
    check: bool,
    diff: bool,
) -> int:
    if config.kubeconfig:
        os.environ["KUBECONFIG"] = config.kubeconfig
    watches = read_watches(config.watches_file)
    if watches is None:
        return USAGE
    try:
        return asyncio.run(
            reconcile_once(
                config,
                watches,
                target=target,
                namespace=namespace,
                cr_file=cr_file,
                check=check,
                diff=diff,
            )
        )
    except UsageError as err:
        print(f"operator-runner reconcile: {err}", file=sys.stderr)
        return USAGE
    except ApiError as err:
        print(f"operator-runner reconcile: the API server answered {err}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return FAILED
