"""The keys of one entry, validated: group/version/kind, periods, blacklist, watchReads,
finalizer (and convert, in convert.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.util.durations import parse_go_duration
from runner.watches.admission import admission_value
from runner.watches.convert import convert_value
from runner.watches.messages import (
    ENTRY_KEYS,
    FINALIZER_KEYS,
    GVK_KEYS,
    Where,
    as_text,
    canonical_keys,
    describe,
    flag_value,
    mapping_value,
    vars_value,
)
from runner.watches.model import DEFAULT_MAX_RUNNER_ARTIFACTS, GVK, Finalizer, Watch
from runner.watches.roles import Search, role_and_playbook
from runner.watches.selector import selector_value

# ---------------------------------------------------------------------------
# Other entry keys
# ---------------------------------------------------------------------------


def _gvk(values: Mapping[str, Any], where: Where) -> GVK:
    group, version, kind = (as_text(values.get(key), where, key) for key in GVK_KEYS)
    for key, text in (("version", version), ("kind", kind)):
        if not text:
            raise where.error(
                key,
                f"missing; every entry needs 'version' and 'kind' "
                f"('group' may be left out for core resources), e.g. {key}: "
                + ("v1alpha1" if key == "version" else "Memcached"),
            )
    return GVK(group, version, kind)


def _reconcile_period(values: Mapping[str, Any], where: Where) -> float | None:
    key = "reconcilePeriod"
    if key not in values:
        return None
    value = values[key]
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = parse_go_duration(value)
        except ValueError as exc:
            raise where.error(
                key, f"{exc}; write a Go duration such as 30s, 1m30s, 1h or 500ms"
            ) from None
    else:
        raise where.error(
            key, f"must be a duration such as 30s, 1m30s or 1h, found {describe(value)}"
        )
    if seconds < 0:
        raise where.error(key, f"must not be negative ({value!r}); use 0 to turn it off")
    if seconds == 0:
        where.warn(
            key,
            "0 turns periodic reconciliation off (operator-sdk would instead use its "
            "--reconcile-period default); leave the key out to use the default",
        )
    return seconds


def _max_runner_artifacts(values: Mapping[str, Any], where: Where) -> int:
    key = "maxRunnerArtifacts"
    value = values.get(key, DEFAULT_MAX_RUNNER_ARTIFACTS)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(key, f"must be a whole number, found {describe(value)}")
    if value < 0:
        raise where.error(key, f"must not be negative, found {value}")
    if value == 0:
        where.warn(
            key,
            f"0 means the default ({DEFAULT_MAX_RUNNER_ARTIFACTS}), as in operator-sdk; "
            "to keep every artifact set the annotation "
            "ansible.sdk.operatorframework.io/max-runner-artifacts: '0' on the resource",
        )
        return DEFAULT_MAX_RUNNER_ARTIFACTS
    return value


def _gvk_list(values: Mapping[str, Any], key: str, where: Where, matches: str) -> tuple[GVK, ...]:
    """A list of {group, version, kind} (`blacklist`, `watchReads`); `matches` ends the
    message of an entry without version or kind."""
    raw = values.get(key, [])
    if not isinstance(raw, list):
        raise where.error(
            key, f"must be a list of {{group, version, kind}} mappings, found {describe(raw)}"
        )
    result = []
    for number, item in enumerate(raw, start=1):
        item_key = f"{key}[{number}]"
        fields = canonical_keys(
            mapping_value(item, where, item_key), GVK_KEYS, where, item_key + "."
        )
        group, version, kind = (as_text(fields.get(k), where, f"{item_key}.{k}") for k in GVK_KEYS)
        if not version or not kind:
            raise where.error(
                item_key,
                f"needs 'version' and 'kind' ('group' may be empty for core resources); {matches}",
            )
        result.append(GVK(group, version, kind))
    return tuple(result)


def _blacklist(values: Mapping[str, Any], where: Where) -> tuple[GVK, ...]:
    return _gvk_list(
        values, "blacklist", where, "a blacklist entry matches one exact group/version/kind"
    )


def _watch_reads(values: Mapping[str, Any], where: Where) -> tuple[GVK, ...]:
    """`watchReads`: the kinds whose objects, once a run of a CR read them, reconcile it."""
    kinds = _gvk_list(
        values, "watchReads", where, "a watchReads entry follows one exact group/version/kind"
    )
    return tuple(dict.fromkeys(kinds))  # each once, in the file's order


# ---------------------------------------------------------------------------
# Finalizer and entry
# ---------------------------------------------------------------------------


def _finalizer(values: Mapping[str, Any], search: Search, where: Where) -> Finalizer | None:
    if "finalizer" not in values:
        return None
    fields = canonical_keys(
        mapping_value(values["finalizer"], where, "finalizer"), FINALIZER_KEYS, where, "finalizer."
    )
    name = as_text(fields.get("name"), where, "finalizer.name")
    if not name:
        raise where.error(
            "finalizer.name", "missing; a finalizer needs a name, e.g. name: example.com/finalizer"
        )
    role, playbook = role_and_playbook(fields, search, where, "finalizer.")
    finalizer_vars = vars_value(fields, where, "finalizer.")
    if role is None and playbook is None and not finalizer_vars:
        raise where.error(
            "finalizer",
            "needs a 'role', a 'playbook' or non-empty 'vars' (vars alone re-run the "
            "watch's own role or playbook with those vars)",
        )
    return Finalizer(name=name, role=role, playbook=playbook, vars=finalizer_vars)


def entry_watch(raw: Mapping[Any, Any], search: Search, where: Where) -> Watch:
    values = canonical_keys(raw, ENTRY_KEYS, where, "")
    gvk = _gvk(values, where)
    role, playbook = role_and_playbook(values, search, where, "")
    if role is None and playbook is None:
        raise where.error(
            "role",
            "missing; set 'role' (a role name or path) or 'playbook' (a playbook path)",
        )
    return Watch(
        gvk=gvk,
        role=role,
        playbook=playbook,
        vars=vars_value(values, where, ""),
        reconcile_period=_reconcile_period(values, where),
        manage_status=flag_value(values, "manageStatus", True, where),
        watch_dependent_resources=flag_value(values, "watchDependentResources", True, where),
        watch_cluster_scoped_resources=flag_value(
            values, "watchClusterScopedResources", False, where
        ),
        snake_case_parameters=flag_value(values, "snakeCaseParameters", True, where),
        watch_annotations_changes=flag_value(values, "watchAnnotationsChanges", False, where),
        mark_unsafe=flag_value(values, "markUnsafe", True, where),
        selector=selector_value(values, where),
        blacklist=_blacklist(values, where),
        watch_reads=_watch_reads(values, where),
        finalizer=_finalizer(values, search, where),
        max_runner_artifacts=_max_runner_artifacts(values, where),
        validate=admission_value(values, "validate", search, where),
        mutate=admission_value(values, "mutate", search, where),
        convert=convert_value(values, search, where),
    )
