"""The webhooks that send the API server to the admission roles (pure): one entry of a
ValidatingWebhookConfiguration or MutatingWebhookConfiguration per watch with `validate:` or
`mutate:`.

- path: Kubebuilder's, `/validate-<group with dashes>-<version>-<kind>` (`/mutate-...`);
- name: `validate.<kind>.<group>` (`mutate....`): what the user reads in a refusal,
  `admission webhook "validate.echoflask.swallowlab.com" denied the request: ...`;
- rules: the watch's group, version and resource, its operations, the main resource only
  (a status write is a subresource: never admitted here, so the operator's status updates are
  not at the mercy of its own webhooks);
- failurePolicy, timeoutSeconds from watches.yaml; sideEffects None (an admission run writes
  nothing, so dry-run requests come here too); admissionReviewVersions v1;
- namespaceSelector: the operator's namespaces (WATCH_NAMESPACE) when it has a list;
  objectSelector: the watch's `selector`, so that the same CRs are admitted and reconciled;
- matchConditions: the operator's own requests (its username, from a SelfSubjectReview) skip
  its webhooks: adding and removing its finalizer never waits for a role, or for a webhook
  that cannot answer. Only when that identity is its own (deployed, a service account): under
  `make run` it is the developer's, whose requests must be admitted; the admitter then allows
  finalizer-only updates without a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.watches import GVK, Admission, Watch

ClientConfig = Callable[[str], dict[str, Any]]
HOOK_KINDS = ("validate", "mutate")
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def webhook_path(hook_kind: str, gvk: GVK) -> str:
    group = gvk.group.replace(".", "-") or "core"
    return f"/{hook_kind}-{group}-{gvk.version}-{gvk.kind.lower()}"


def webhook_name(hook_kind: str, gvk: GVK) -> str:
    return f"{hook_kind}.{gvk.kind.lower()}.{gvk.group or 'core'}"


def not_the_operator(username: str) -> dict[str, str]:
    """A matchCondition (CEL) that lets the operator's own requests skip the webhook."""
    return {
        "name": "not-the-operator",
        "expression": f"request.userInfo.username != {json.dumps(username)}",
    }


def hook_of(watch: Watch, hook_kind: str) -> Admission | None:
    return watch.validate if hook_kind == "validate" else watch.mutate


def webhook(
    watch: Watch,
    hook_kind: str,
    plural: str,
    client_config: ClientConfig,
    namespaces: Sequence[str] = (),
    username: str | None = None,
) -> dict[str, Any]:
    """The configuration's entry for `watch`'s `hook_kind` (module doc)."""
    hook = hook_of(watch, hook_kind)
    assert hook is not None
    gvk = watch.gvk
    entry: dict[str, Any] = {
        "name": webhook_name(hook_kind, gvk),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": hook.failure_policy,
        "timeoutSeconds": hook.timeout_seconds,
        "matchPolicy": "Equivalent",
        "clientConfig": client_config(webhook_path(hook_kind, gvk)),
        "rules": [
            {
                "apiGroups": [gvk.group],
                "apiVersions": [gvk.version],
                "operations": list(hook.operations),
                "resources": [plural],
                "scope": "*",
            }
        ],
    }
    if namespaces:
        entry["namespaceSelector"] = {
            "matchExpressions": [
                {"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(namespaces)}
            ]
        }
    if watch.selector:
        entry["objectSelector"] = dict(watch.selector)
    if username:
        entry["matchConditions"] = [not_the_operator(username)]
    if hook_kind == "mutate":
        entry["reinvocationPolicy"] = "Never"
    return entry


def webhooks(
    watches: Sequence[Watch],
    hook_kind: str,
    plurals: Mapping[GVK, str],
    client_config: ClientConfig,
    namespaces: Sequence[str] = (),
    username: str | None = None,
) -> list[dict[str, Any]]:
    """Every watch's entry for `hook_kind`, in watches.yaml's order."""
    return [
        webhook(watch, hook_kind, plurals[watch.gvk], client_config, namespaces, username)
        for watch in watches
        if hook_of(watch, hook_kind) is not None
    ]
