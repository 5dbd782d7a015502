"""Status conditions of a custom resource, as operator-sdk's Ansible operator writes them.

The condition types, reasons and messages are the ones operator-sdk's Ansible operator uses
(``Running``, ``Successful``, ``Failure``), so dashboards and scripts written for it keep
working. Where operator-sdk says something untrue, this module says the truth instead:

* Starting a run does not flip ``Successful`` to ``False`` while keeping reason ``Successful``
  (users read that as "the last run failed"). ``Successful`` and ``Failure`` always describe the
  last *finished* reconciliation; only ``Running`` describes what is happening now.
* After a successful run, ``Running`` stays ``True`` with reason ``Successful``, as operator-sdk
  leaves it (users' waits rely on it); its reason is ``Running`` while a run goes on.
* A kstatus ``Ready``: ``True`` only when the last run for the current ``metadata.generation``
  succeeded; ``False`` with reason ``Reconciling`` while a new generation is reconciled (a
  resync at the same generation leaves it ``True``), ``Failed`` after a failure.
* Every condition we write has a non-empty CamelCase reason and an ``observedGeneration``.

All functions are pure: they take the current ``status`` mapping (which may be ``None``, lack
``conditions`` or hold garbage entries, which are dropped) and return a new, plain ``dict``.
Keys other than ``conditions`` (for example ones the role wrote, such as ``nodes``) are
copied untouched. ``lastTransitionTime`` changes only when a condition's ``status`` changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from runner.reconcile.ansible_result import AnsibleResult
from runner.reconcile.conditionlist import (
    STATUS_FALSE,
    STATUS_TRUE,
    STATUS_UNKNOWN,
    TYPE_FAILURE,
    TYPE_READY,
    TYPE_RUNNING,
    TYPE_SUCCESSFUL,
    Condition,
    _plain,
    clean_conditions,
    find_condition,
    set_condition,
)

Outcome = Literal["succeeded", "failed"] | None

REASON_RUNNING = "Running"
REASON_SUCCESSFUL = "Successful"
REASON_FAILED = "Failed"
REASON_UNKNOWN = "Unknown"
REASON_RECONCILING = "Reconciling"

MESSAGE_RUNNING = "Running reconciliation"
MESSAGE_AWAITING = "Awaiting next reconciliation"
MESSAGE_SUCCEEDED = "Last reconciliation succeeded"
MESSAGE_FAILED = "Last reconciliation failed"
MESSAGE_NO_FAILURE_DETAILS = "Reconciliation failed, but no failure message was reported"
MESSAGE_UNKNOWN = "The outcome of the last reconciliation is unknown"

#: Kubernetes' limit for ``metav1.Condition.message``; longer messages are truncated.
MAX_MESSAGE_LENGTH = 32768
_TRUNCATION_MARKER = "\n... (truncated)"


def _truncate(message: str) -> str:
    """Cut ``message`` to :data:`MAX_MESSAGE_LENGTH` characters, marking the cut."""
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    return message[: MAX_MESSAGE_LENGTH - len(_TRUNCATION_MARKER)] + _TRUNCATION_MARKER


def _condition(
    ctype: str,
    status: str,
    reason: str,
    message: str,
    generation: int,
    result: AnsibleResult | None = None,
) -> Condition:
    """Build a condition (without ``lastTransitionTime``, which :func:`set_condition` sets)."""
    condition: Condition = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": _truncate(message),
        "observedGeneration": generation,
    }
    if result is not None:
        condition["ansibleResult"] = result.to_dict()
    return condition


def _apply(
    status: Mapping[str, Any] | None, conditions: Iterable[Condition], now: datetime
) -> dict[str, Any]:
    """Return a copy of ``status`` with ``conditions`` set, one after the other."""
    new_status: dict[str, Any] = _plain(status) if isinstance(status, Mapping) else {}
    current = clean_conditions(new_status.get("conditions"))
    for condition in conditions:
        current = set_condition(current, condition, now)
    new_status["conditions"] = current
    return new_status


# --------------------------------------------------------------------------------------------
# Carrying the last outcome across a new run (repairing what operator-sdk left behind)


def _last_outcome(successful: Condition | None, failure: Condition | None) -> Outcome:
    """Infer the outcome of the last finished run from its ``Successful``/``Failure`` conditions.

    Besides our own conditions this reads what operator-sdk leaves behind: while it runs,
    ``Successful=False`` with reason ``Successful`` (the last run succeeded) or
    ``Failure=False`` with reason ``Failed`` (the last run failed).
    """
    if failure is not None and failure["status"] == STATUS_TRUE:
        return "failed"
    if successful is not None and successful["status"] == STATUS_TRUE:
        return "succeeded"
    if successful is not None and successful.get("reason") == REASON_SUCCESSFUL:
        return "succeeded"
    if failure is not None and failure.get("reason") == REASON_FAILED:
        return "failed"
    return None


_EXPECTED: dict[tuple[Outcome, str], tuple[str, str, str]] = {
    ("succeeded", TYPE_SUCCESSFUL): (STATUS_TRUE, REASON_SUCCESSFUL, MESSAGE_SUCCEEDED),
    ("succeeded", TYPE_FAILURE): (STATUS_FALSE, REASON_SUCCESSFUL, ""),
    ("failed", TYPE_SUCCESSFUL): (STATUS_FALSE, REASON_FAILED, MESSAGE_FAILED),
    ("failed", TYPE_FAILURE): (STATUS_TRUE, REASON_FAILED, MESSAGE_NO_FAILURE_DETAILS),
    (None, TYPE_SUCCESSFUL): (STATUS_UNKNOWN, REASON_UNKNOWN, MESSAGE_UNKNOWN),
    (None, TYPE_FAILURE): (STATUS_UNKNOWN, REASON_UNKNOWN, MESSAGE_UNKNOWN),
}


def _repaired(condition: Condition, outcome: Outcome) -> Condition:
    """Return ``condition`` unchanged if it tells ``outcome`` our way, else a corrected copy.

    Only ``status``, ``reason`` and ``message`` are corrected; a failure's own message is kept.
    """
    status, reason, message = _EXPECTED[(outcome, condition["type"])]
    old_message = condition.get("message")
    if (condition["status"], condition.get("reason")) == (status, reason) and isinstance(
        old_message, str
    ):
        return condition
    keep_message = (
        outcome == "failed"
        and condition["type"] == TYPE_FAILURE
        and isinstance(old_message, str)
        and old_message != ""
    )
    return {
        **condition,
        "status": status,
        "reason": reason,
        "message": old_message if keep_message else message,
    }


def _carried_outcome(status: Mapping[str, Any] | None) -> list[Condition]:
    """Return the existing ``Successful``/``Failure`` conditions, repaired where needed."""
    successful = find_condition(status, TYPE_SUCCESSFUL)
    failure = find_condition(status, TYPE_FAILURE)
    outcome = _last_outcome(successful, failure)
    return [_repaired(c, outcome) for c in (successful, failure) if c is not None]


# --------------------------------------------------------------------------------------------
# Transitions


def _ready_while_running(status: Mapping[str, Any] | None, generation: int) -> Condition:
    """``Ready`` as a run starts: unchanged when it is ``True`` for this very generation (a
    resync), else ``False``/``Reconciling``."""
    ready = find_condition(status, TYPE_READY)
    if (
        ready is not None
        and ready["status"] == STATUS_TRUE
        and ready.get("observedGeneration") == generation
    ):
        return ready
    return _condition(
        TYPE_READY,
        STATUS_FALSE,
        REASON_RECONCILING,
        f"Reconciling generation {generation}",
        generation,
    )


def running(status: Mapping[str, Any] | None, *, generation: int, now: datetime) -> dict[str, Any]:
    """Return ``status`` for a reconciliation that is starting.

    ``Running`` becomes ``True``/``Running``/"Running reconciliation". ``Successful`` and
    ``Failure`` keep describing the last finished run and are left as they are, unlike
    operator-sdk, which sets ``Successful=False`` with reason ``Successful`` (read by users as
    a failure). If they are inconsistent (for instance that very operator-sdk leftover, or an
    empty reason), they are repaired to tell the last outcome our way, or ``Unknown`` when it
    cannot be told; they are never added when absent.
    """
    running_condition = _condition(
        TYPE_RUNNING, STATUS_TRUE, REASON_RUNNING, MESSAGE_RUNNING, generation
    )
    ready = _ready_while_running(status, generation)
    return _apply(status, [running_condition, *_carried_outcome(status), ready], now)


def succeeded(
    status: Mapping[str, Any] | None,
    *,
    generation: int,
    now: datetime,
    result: AnsibleResult,
) -> dict[str, Any]:
    """Return ``status`` for a reconciliation whose run succeeded.

    * ``Running=True``, reason ``Successful``, "Awaiting next reconciliation", with
      ``ansibleResult``, as operator-sdk writes it.
    * ``Successful=True``/``Successful``/"Last reconciliation succeeded", also with
      ``ansibleResult``, so the result survives while the next run is ``Running``.
    * ``Failure=False``, reason ``Successful`` (never empty), message "".
    * ``Ready=True``, reason ``Successful``, for this ``generation``.
    """
    return _apply(
        status,
        [
            _condition(
                TYPE_RUNNING, STATUS_TRUE, REASON_SUCCESSFUL, MESSAGE_AWAITING, generation, result
            ),
            _condition(
                TYPE_SUCCESSFUL,
                STATUS_TRUE,
                REASON_SUCCESSFUL,
                MESSAGE_SUCCEEDED,
                generation,
                result,
            ),
            _condition(TYPE_FAILURE, STATUS_FALSE, REASON_SUCCESSFUL, "", generation),
            _condition(
                TYPE_READY,
                STATUS_TRUE,
                REASON_SUCCESSFUL,
                f"Last reconciliation of generation {generation} succeeded",
                generation,
            ),
        ],
        now,
    )


def _failure_message(messages: Iterable[str]) -> str:
    """Join the non-blank failure ``messages`` by newlines, or explain that there are none."""
    kept = [m for m in messages if m.strip()]
    return "\n".join(kept) if kept else MESSAGE_NO_FAILURE_DETAILS


def _failed_conditions(
    generation: int, message: str, result: AnsibleResult | None
) -> list[Condition]:
    """Build the three conditions of a failed reconciliation."""
    return [
        _condition(TYPE_RUNNING, STATUS_FALSE, REASON_FAILED, MESSAGE_AWAITING, generation),
        _condition(TYPE_SUCCESSFUL, STATUS_FALSE, REASON_FAILED, MESSAGE_FAILED, generation),
        _condition(TYPE_FAILURE, STATUS_TRUE, REASON_FAILED, message, generation, result),
        _condition(
            TYPE_READY,
            STATUS_FALSE,
            REASON_FAILED,
            f"Last reconciliation of generation {generation} failed",
            generation,
        ),
    ]


def failed(
    status: Mapping[str, Any] | None,
    *,
    generation: int,
    now: datetime,
    messages: Sequence[str],
    result: AnsibleResult | None,
) -> dict[str, Any]:
    """Return ``status`` for a reconciliation whose run failed.

    ``Failure=True``/``Failed`` with the failing tasks' ``messages`` joined by newlines (blank
    ones dropped; a clear fallback when none is left; truncated to
    :data:`MAX_MESSAGE_LENGTH`) and ``ansibleResult`` when ``result`` is known;
    ``Successful=False``/``Failed``/"Last reconciliation failed";
    ``Running=False``/``Failed``/"Awaiting next reconciliation"; ``Ready=False``/``Failed``.
    """
    return _apply(status, _failed_conditions(generation, _failure_message(messages), result), now)


def errored(
    status: Mapping[str, Any] | None, *, generation: int, now: datetime, message: str
) -> dict[str, Any]:
    """Return ``status`` for an error before or around the run, as :func:`failed` without result.

    For example a bad annotation, ansible-runner not starting, or a run that ended without a
    stats event.
    """
    return _apply(status, _failed_conditions(generation, _failure_message([message]), None), now)
