"""``create webhook --convert``: a conversion webhook for a kind with several versions.

Called by ``create webhook`` (webhook.py) with the kind's watched group and version. It adds to
the plan:

- ``roles/<kind>_convert/tasks/main.yml``: a convert role that answers every object unchanged
  (right while the versions' schemas are the same), with an example of a renamed field;
- ``convert: {role: <kind>_convert}`` in the kind's watches.yaml entry;
- a comment in the CRD before ``spec.versions``, when it has no ``spec.conversion``: the
  operator writes it (Webhook, ConversionReview v1, its own address and CA) when it starts. The
  file holds none, so that ``kubectl apply`` of it (``make install``) leaves the operator's as
  it is: a clientConfig in the file (``url``) would be merged beside the operator's
  (``service``, deployed), which the API server refuses (one of another strategy is left to
  the author);
- the rule that lets the deployed operator keep it written: get and patch of that one CRD by
  name, in config/rbac/role.yaml.

A kind that has ``convert:`` already, or a role folder that exists, writes nothing.
"""

from __future__ import annotations

from typing import Any

import yaml

from . import edits, layout
from .names import ScaffoldError, snake_kind
from .render import Plan, render, template
from .version import find_crd

__all__ = ["plan_conversion"]

WATCHES = layout.WATCHES
RBAC_ROLE = layout.RBAC_ROLE
CONVERSION = {
    "strategy": "Webhook",
    "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:9443/convert"},
    },
}
CONVERSION_TEXT = """\
# spec.conversion is written by the operator when it starts (watches.yaml: convert): strategy
# Webhook, its own address (make run: a url on 127.0.0.1; deployed: the webhook Service) and
# its CA. It is not in this file, so that `kubectl apply` of it (make install) leaves the
# operator's as it is; until the operator first starts, the versions are not converted.
"""
RULE = """\
  # @kind@'s conversion webhook (watches.yaml convert:): the operator keeps the CRD's
  # spec.conversion pointing at its webhook, with its CA: get and patch of that CRD, by name.
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    resourceNames: [@crd@]
    verbs: [get, patch]
"""


def _text(plan: Plan, name: str) -> str:
    if name in plan.files:
        return plan.files[name]
    try:
        return (plan.root / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScaffoldError(f"{name} cannot be read ({exc}); create webhook edits it") from None


def _watch_entry(text: str, group: str, version: str, kind: str) -> tuple[int, dict[str, Any]]:
    document = edits.parse(text, WATCHES)
    for index, (g, v, k) in enumerate(edits.watched_kinds(text, WATCHES)):
        if (g, v, k) == (group, version, kind):
            return index, document[index]
    raise ScaffoldError(f"{kind} {group}/{version} is not in {WATCHES}")


def _with_conversion(text: str, name: str) -> str:
    """The CRD's text with CONVERSION_TEXT before `spec.versions` (its indentation)."""
    root = yaml.compose(text)
    spec = next(
        (v for k, v in getattr(root, "value", []) if getattr(k, "value", None) == "spec"), None
    )
    versions = next(
        (k for k, _ in getattr(spec, "value", []) if getattr(k, "value", None) == "versions"),
        None,
    )
    if not isinstance(versions, yaml.ScalarNode):
        raise ScaffoldError(f"{name}: spec.versions not found; add spec.conversion by hand")
    line, indent = versions.start_mark.line, versions.start_mark.column
    lines = text.splitlines(keepends=True)
    block = "".join(" " * indent + row + "\n" for row in CONVERSION_TEXT.splitlines())
    new = "".join([*lines[:line], block, *lines[line:]])
    try:
        after = yaml.safe_load(new)
    except yaml.YAMLError:
        after = None
    if not isinstance(after, dict) or after != yaml.safe_load(text):
        raise ScaffoldError(f"{name}: cannot add the conversion's comment as text")
    return new


def _has_crd_rule(text: str, crd: str) -> bool:
    document = edits.parse(text, RBAC_ROLE)
    for rule in (document or {}).get("rules") or []:
        if (
            isinstance(rule, dict)
            and "apiextensions.k8s.io" in (rule.get("apiGroups") or [])
            and "customresourcedefinitions" in (rule.get("resources") or [])
            and crd in (rule.get("resourceNames") or [])
            and {"get", "patch"} <= set(rule.get("verbs") or [])
        ):
            return True
    return False


def plan_conversion(plan: Plan, group: str, version: str, kind: str) -> None:
    """Add the conversion webhook's files for ``kind`` to ``plan`` (nothing written yet)."""
    snake = snake_kind(kind)
    watches = _text(plan, WATCHES)
    index, entry = _watch_entry(watches, group, version, kind)
    if "convert" in {str(key).casefold() for key in entry}:
        raise ScaffoldError(f"{kind}'s entry in {WATCHES} has 'convert:' already")
    role = f"roles/{snake}_convert/tasks/main.yml"
    if (plan.root / role).exists():
        raise ScaffoldError(f"{role} exists already; create webhook does not overwrite it")
    values = {
        "kind": kind,
        "a_kind": f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind}",
        "group": group,
    }
    plan.add(role, render(template("webhook/convert.yml"), values))
    addition = f"  convert:\n    role: {snake}_convert\n"
    plan.add(WATCHES, edits.add_to_watch(watches, WATCHES, index, addition))
    crd = find_crd(plan.root, group, kind)
    conversion = crd.document["spec"].get("conversion")
    if conversion is None:
        plan.add(crd.path, _with_conversion(crd.text, crd.path))
    elif not isinstance(conversion, dict) or conversion.get("strategy") != "Webhook":
        raise ScaffoldError(
            f"{crd.path}: spec.conversion is {conversion!r}; make it the operator's by hand "
            f"(strategy: Webhook, as below) or remove it and run create webhook again:\n"
            f"{yaml.safe_dump({'conversion': CONVERSION}, sort_keys=False)}"
        )
    crd_name = crd.document["metadata"]["name"]
    rbac = _text(plan, RBAC_ROLE)
    if not _has_crd_rule(rbac, crd_name):
        rule = render(RULE, {**values, "crd": crd_name})
        plan.add(RBAC_ROLE, edits.append_rbac_rules(rbac, RBAC_ROLE, rule, layout.RULES_MARKER))
