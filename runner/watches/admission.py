"""A watch's `validate:` and `mutate:` keys: admission webhooks answered by Ansible.

```yaml
validate:                      # a ValidatingWebhook for the watch's kind
  role: memcached_validate     # or playbook: ...; vars: {...} on top of the watch's
  failurePolicy: Fail          # Fail (default) | Ignore: when no answer comes in time
  timeoutSeconds: 10           # 1..30, how long the API server waits (default 10)
  operations: [CREATE, UPDATE] # default; DELETE, CONNECT, or ['*'] for all four
mutate:
  role: memcached_mutate
```

Keys are matched case-insensitively, as every other key; the role or playbook is looked up as
the watch's own. Kubernetes' own names and limits: a failurePolicy other than Fail or Ignore,
a timeout outside 1..30 s, an operation it does not know, are errors here rather than at the
API server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.watches.messages import (
    ADMISSION_KEYS,
    Where,
    as_text,
    canonical_keys,
    describe,
    mapping_value,
    vars_value,
)
from runner.watches.model import OPERATIONS, Admission
from runner.watches.roles import Search, role_and_playbook

FAILURE_POLICIES = ("Fail", "Ignore")


def _failure_policy(fields: Mapping[str, Any], where: Where, key: str) -> str:
    value = as_text(fields.get("failurePolicy"), where, f"{key}.failurePolicy") or "Fail"
    if value not in FAILURE_POLICIES:
        raise where.error(
            f"{key}.failurePolicy",
            f"must be Fail or Ignore (what the API server does when no answer comes in time: "
            f"refuse the request, or let it through), found {value!r}",
        )
    return value


def _timeout(fields: Mapping[str, Any], where: Where, key: str) -> int:
    value = fields.get("timeoutSeconds", 10)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 30:
        raise where.error(
            f"{key}.timeoutSeconds",
            f"must be a whole number of seconds from 1 to 30 (the API server's limits), "
            f"found {describe(value)}",
        )
    return value


def _operations(fields: Mapping[str, Any], where: Where, key: str) -> tuple[str, ...]:
    raw = fields.get("operations", ["CREATE", "UPDATE"])
    name = f"{key}.operations"
    if not isinstance(raw, list) or not raw:
        raise where.error(
            name, f"must be a non-empty list such as [CREATE, UPDATE], found {describe(raw)}"
        )
    operations = [as_text(item, where, name) for item in raw]
    if "*" in operations:
        if len(operations) > 1:
            raise where.error(name, "'*' means every operation: write it alone, ['*']")
        return OPERATIONS
    unknown = [op for op in operations if op not in OPERATIONS]
    if unknown:
        raise where.error(
            name,
            f"{', '.join(map(repr, unknown))} is not an operation; use {', '.join(OPERATIONS)} "
            "(upper case) or '*'",
        )
    return tuple(dict.fromkeys(operations))


def admission_value(
    values: Mapping[str, Any], key: str, search: Search, where: Where
) -> Admission | None:
    """The entry's `validate` or `mutate` (`key`), validated; None when absent."""
    if key not in values:
        return None
    raw = values[key]
    if isinstance(raw, Mapping):
        fields = canonical_keys(mapping_value(raw, where, key), ADMISSION_KEYS, where, key + ".")
    else:
        raise where.error(
            key,
            f"must be a mapping with a 'role' or a 'playbook', e.g. {key}: "
            f"{{role: memcached_{key}}}, found {describe(raw)}",
        )
    role, playbook = role_and_playbook(fields, search, where, key + ".")
    if role is None and playbook is None:
        raise where.error(
            key,
            f"needs a 'role' or a 'playbook': the Ansible that answers the API server "
            f"(e.g. {key}: {{role: memcached_{key}}})",
        )
    return Admission(
        role=role,
        playbook=playbook,
        vars=vars_value(fields, where, key + "."),
        failure_policy=_failure_policy(fields, where, key),
        timeout_seconds=_timeout(fields, where, key),
        operations=_operations(fields, where, key),
    )
