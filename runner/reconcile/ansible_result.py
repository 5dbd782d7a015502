"""`ansibleResult`: the counts of a run's stats event, as operator-sdk writes them in the
status conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AnsibleResult:
    """Task counts of one ansible-runner run, as reported by its ``playbook_on_stats`` event.

    ``failures`` includes unreachable hosts (``dark``); ``unreachable``, ``rescued`` and
    ``ignored`` are kept for logging but are not part of :meth:`to_dict`, whose keys are the
    ones operator-sdk writes in ``ansibleResult``.
    """

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    unreachable: int = 0
    rescued: int = 0
    ignored: int = 0
    completion: str | None = None

    @classmethod
    def from_stats_event(
        cls,
        event: Mapping[str, Any],
        host: str | None = "localhost",
        *,
        created: str | None = None,
    ) -> AnsibleResult:
        """Build the result from a ``playbook_on_stats`` event.

        ``event`` is either the whole event (with ``event_data`` and ``created`` keys, as
        ansible-runner's event handler and ``job_events/*.json`` give it) or just its
        ``event_data``; in the latter case pass the event's time as ``created``.
        ``host=None`` sums the counts of all hosts instead of reading one host.
        ``completion`` is the event's ``created`` string, unchanged.
        """
        data: Mapping[str, Any] = event
        nested = event.get("event_data")
        if isinstance(nested, Mapping):
            data = nested
            if created is None and isinstance(event.get("created"), str):
                created = event["created"]
        dark = _host_count(data, "dark", host)
        return cls(
            ok=_host_count(data, "ok", host),
            changed=_host_count(data, "changed", host),
            skipped=_host_count(data, "skipped", host),
            failures=_host_count(data, "failures", host) + dark,
            unreachable=dark,
            rescued=_host_count(data, "rescued", host),
            ignored=_host_count(data, "ignored", host),
            completion=created,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the ``ansibleResult`` of a condition; ``completion`` is omitted if unknown."""
        result: dict[str, Any] = {
            "ok": self.ok,
            "changed": self.changed,
            "skipped": self.skipped,
            "failures": self.failures,
        }
        if self.completion is not None:
            result["completion"] = self.completion
        return result


def _host_count(data: Mapping[str, Any], key: str, host: str | None) -> int:
    """Return the count of ``host`` (or of all hosts if None) in ``data[key]``; 0 if unusable."""
    per_host = data.get(key)
    if not isinstance(per_host, Mapping):
        return 0
    values = per_host.values() if host is None else [per_host.get(host)]
    return sum(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0)
