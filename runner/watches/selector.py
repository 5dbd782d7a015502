"""Label selectors (metav1.LabelSelector), validated like LabelSelectorAsSelector."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.watches.messages import (
    EXPRESSION_KEYS,
    SELECTOR_KEYS,
    SELECTOR_OPERATORS,
    Where,
    as_text,
    canonical_keys,
    describe,
    mapping_value,
)

# ---------------------------------------------------------------------------
# Label selector (metav1.LabelSelector, validated like LabelSelectorAsSelector)
# ---------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"^(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(
    r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$"
)


def _label_key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)):
        return f"label key prefix {prefix!r} is not a DNS subdomain (e.g. example.com)"
    if not (len(name) <= 63 and _LABEL_NAME.match(name)):
        return (
            f"label key {key!r} is not valid: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit, optionally after 'prefix/'"
        )
    return None


def _label_value_problem(value: str) -> str | None:
    if value == "" or (len(value) <= 63 and _LABEL_NAME.match(value)):
        return None
    unset = " (is an environment variable it names unset?)" if "$" in value else ""
    return (
        f"label value {value!r} is not valid{unset}: at most 63 letters, digits, '-', '_' "
        "or '.', starting and ending with a letter or digit"
    )


def _match_labels(raw: object, where: Where, key: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for label_key, label_value in mapping_value(raw, where, key).items():
        text_key = as_text(label_key, where, key)
        text_value = as_text(label_value, where, f"{key}.{text_key}")
        problem = _label_key_problem(text_key) or _label_value_problem(text_value)
        if problem:
            raise where.error(key, problem)
        labels[text_key] = text_value
    return labels


def _expression(raw: object, where: Where, key: str) -> dict[str, Any]:
    fields = canonical_keys(mapping_value(raw, where, key), EXPRESSION_KEYS, where, key + ".")
    label_key = as_text(fields.get("key"), where, f"{key}.key")
    operator = as_text(fields.get("operator"), where, f"{key}.operator")
    values_raw = fields.get("values", [])
    if not isinstance(values_raw, list):
        raise where.error(f"{key}.values", f"must be a list, found {describe(values_raw)}")
    values = [as_text(value, where, f"{key}.values") for value in values_raw]
    problem = _label_key_problem(label_key) or next(
        (p for p in map(_label_value_problem, values) if p), None
    )
    if operator not in SELECTOR_OPERATORS:
        problem = f"operator {operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}"
    elif operator in ("In", "NotIn") and not values:
        problem = problem or f"operator {operator} needs a non-empty 'values' list"
    elif operator in ("Exists", "DoesNotExist") and values:
        problem = problem or f"operator {operator} takes no 'values'"
    if problem:
        raise where.error(key, problem)
    return {"key": label_key, "operator": operator, "values": values}


def selector_value(values: Mapping[str, Any], where: Where) -> dict[str, Any]:
    if "selector" not in values:
        return {}
    fields = canonical_keys(
        mapping_value(values["selector"], where, "selector"), SELECTOR_KEYS, where, "selector."
    )
    selector: dict[str, Any] = {}
    labels = _match_labels(fields.get("matchLabels", {}), where, "selector.matchLabels")
    if labels:
        selector["matchLabels"] = labels
    raw_expressions = fields.get("matchExpressions", [])
    if not isinstance(raw_expressions, list):
        raise where.error(
            "selector.matchExpressions",
            f"must be a list of {{key, operator, values}}, found {describe(raw_expressions)}",
        )
    expressions = [
        _expression(item, where, f"selector.matchExpressions[{number}]")
        for number, item in enumerate(raw_expressions, start=1)
    ]
    if expressions:
        selector["matchExpressions"] = expressions
    return selector
