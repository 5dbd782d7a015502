"""``operator-runner create webhook``: admission webhooks for a kind of the project.

``--validate`` writes ``roles/<kind>_validate/`` (an example that refuses in a frozen namespace,
with the variables and the answer explained), ``--mutate`` ``roles/<kind>_mutate/`` (an example
that copies the namespace's team label), adds ``validate:``/``mutate:`` to the kind's
watches.yaml entry and the webhook entries to ``config/webhook/manifests.yaml`` (what the
operator computes for them; it keeps them written when deployed). ``--convert`` is passed to the
conversion scaffold (conversion.py). A project without config/webhook (operator-sdk's) gets it
first (webhookconfig.py). Every check runs first: a kind that is not watched, a hook
it has already, a file that exists, write nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import edits, layout
from .conversion import plan_conversion
from .names import (
    ScaffoldError,
    check_kind,
    check_version,
    full_group,
    plural,
    snake_kind,
    spec_var,
)
from .projectfile import load_project
from .render import Plan, dump_yaml, render, template
from .webhookconfig import plan_webhook_config

__all__ = ["WebhookRequest", "create_webhook"]

WATCHES = layout.WATCHES
MANIFESTS = layout.WEBHOOK_MANIFESTS
CONFIGURATIONS = {
    "validate": "ValidatingWebhookConfiguration",
    "mutate": "MutatingWebhookConfiguration",
}


@dataclass(frozen=True)
class WebhookRequest:
    """The options of ``create webhook``."""

    kind: str
    group: str | None = None
    version: str | None = None
    validate: bool = False
    mutate: bool = False
    convert: bool = False


def _read(root: Path, name: str, hint: str) -> str:
    try:
        return (root / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScaffoldError(f"{name} cannot be read ({exc}); {hint}") from None


def _entry(text: str, request: WebhookRequest, domain: str) -> tuple[int, str, str]:
    """The kind's watches.yaml entry: its index, group and version."""
    found = [
        (index, group, version)
        for index, (group, version, kind) in enumerate(edits.watched_kinds(text, WATCHES))
        if kind == request.kind
        and (request.group is None or group == full_group(request.group, domain))
        and (request.version is None or version == request.version)
    ]
    if not found:
        raise ScaffoldError(
            f"{request.kind} is not in {WATCHES}; add the kind first with "
            f"operator-runner create api --kind {request.kind} ..."
        )
    if len(found) > 1:
        seen = ", ".join(f"{g}/{v}" for _, g, v in found)
        raise ScaffoldError(
            f"{request.kind} is watched more than once ({seen}); say which with --group and "
            "--version"
        )
    return found[0]


def _manifests(text: str, entries: dict[str, dict[str, Any]]) -> str:
    """config/webhook/manifests.yaml with `entries` (hook -> webhook) added."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ScaffoldError(f"{MANIFESTS} is not valid YAML ({exc}); fix it first") from None
    by_kind = {d.get("kind"): d for d in documents if isinstance(d, dict)}
    for hook, entry in entries.items():
        configuration = by_kind.get(CONFIGURATIONS[hook])
        if configuration is None:
            raise ScaffoldError(
                f"{MANIFESTS} has no {CONFIGURATIONS[hook]}; add one (operator-runner init "
                "writes it) and run create webhook again"
            )
        webhooks = configuration.get("webhooks") or []
        if any(w.get("name") == entry["name"] for w in webhooks if isinstance(w, dict)):
            raise ScaffoldError(f"{MANIFESTS} has a webhook {entry['name']} already")
        configuration["webhooks"] = [*webhooks, entry]
    header = "".join(line for line in text.splitlines(True) if line.startswith("#"))
    return header + "---\n".join(dump_yaml(document) for document in documents)


def create_webhook(root: Path, request: WebhookRequest) -> Plan:
    """Check everything, then add the webhooks to the project in ``root``."""
    if not (request.validate or request.mutate or request.convert):
        raise ScaffoldError("say which webhooks: --validate, --mutate and/or --convert")
    check_kind(request.kind)
    if request.version is not None:
        check_version(request.version)
    project = load_project(root)
    hint = (
        "run create webhook in the root folder of an Ansible operator project "
        "(operator-runner init, or operator-sdk's init --plugins=ansible)"
    )
    watches = _read(root, WATCHES, hint)
    index, group, version = _entry(watches, request, project.domain)
    document = yaml.safe_load(watches)
    keys = {str(k).casefold() for k in document[index]}
    snake = snake_kind(request.kind)
    values = {
        "kind": request.kind,
        "a_kind": f"{'an' if request.kind[0] in 'AEIOU' else 'a'} {request.kind}",
        "lower_kind": request.kind.lower(),
        "snake_kind": snake,
        "group": group,
        "group_dashes": group.replace(".", "-"),
        "version": version,
        "plural": plural(request.kind),
        "project_name": project.name,
        "namespace": f"{project.name}-system",
        "spec_var": spec_var(group, request.kind),
    }
    plan = Plan(root)
    plan_webhook_config(plan, root, values)
    hooks = [hook for hook in ("validate", "mutate") if getattr(request, hook)]
    addition = ""
    entries: dict[str, dict[str, Any]] = {}
    for hook in hooks:
        if hook.casefold() in keys:
            raise ScaffoldError(f"{request.kind}'s entry in {WATCHES} has '{hook}:' already")
        path = f"roles/{snake}_{hook}/tasks/main.yml"
        if (root / path).exists():
            raise ScaffoldError(f"{path} exists already; create webhook does not overwrite it")
        plan.add(path, render(template(f"webhook/{hook}.yml"), values))
        addition += f"  {hook}:\n    role: {snake}_{hook}\n"
        entries[hook] = yaml.safe_load(
            render(template("webhook/entry.yaml"), {**values, "hook": hook})
        )
        if hook == "mutate":
            entries[hook]["reinvocationPolicy"] = "Never"
    if hooks:
        plan.add(WATCHES, edits.add_to_watch(watches, WATCHES, index, addition))
        manifests = plan.files.get(MANIFESTS) or _read(
            root, MANIFESTS, "operator-runner init writes config/webhook/"
        )
        plan.add(MANIFESTS, _manifests(manifests, entries))
    if request.convert:
        plan_conversion(plan, group, version, request.kind)
    plan.write()
    return plan
