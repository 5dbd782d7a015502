"""The CR annotations a reconcile reads (operator-sdk's), parsed in one place.

A bad value is a ValueError whose message names the annotation; the reconciler reports it on
the CR (status and Event) and does not run the role.
"""

from __future__ import annotations

from collections.abc import Mapping

from runner.util.durations import parse_period

VERBOSITY_ANNOTATION = "ansible.sdk.operatorframework.io/verbosity"
RECONCILE_PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"
MAX_RUNNER_ARTIFACTS_ANNOTATION = "ansible.sdk.operatorframework.io/max-runner-artifacts"


def annotation_int(
    annotations: Mapping[str, str], key: str, minimum: int | None = None
) -> int | None:
    """The annotation as an integer (at least `minimum`), None when absent."""
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"annotation {key}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"annotation {key}={raw!r} must be >= {minimum}")
    return value


def verbosity(annotations: Mapping[str, str]) -> int | None:
    return annotation_int(annotations, VERBOSITY_ANNOTATION)


def max_artifacts(annotations: Mapping[str, str], default: int) -> int:
    """The count of runs to keep: the CR's annotation when given; `"0"` keeps all of them, as
    operator-sdk passes it to ansible-runner's --rotate-artifacts (0: no rotation)."""
    value = annotation_int(annotations, MAX_RUNNER_ARTIFACTS_ANNOTATION, minimum=0)
    return default if value is None else value


def reconcile_period(annotations: Mapping[str, str], default: float | None) -> float | None:
    raw = annotations.get(RECONCILE_PERIOD_ANNOTATION)
    if raw is None:
        return default
    try:
        return parse_period(raw, "the period")
    except ValueError as err:
        raise ValueError(f"annotation {RECONCILE_PERIOD_ANNOTATION}: {err}") from None
