"""Metrics that roles define with `operator_sdk.util.osdk_metric`, served on `/metrics`.

operator-sdk's module POSTs `{name, description, counter|gauge|histogram|summary}` as JSON to
`http://localhost:5050/metrics`, where the Ansible operator keeps a Prometheus metric of that
name and applies the operation. We listen the same way (`--role-metrics-bind-address`,
default `127.0.0.1:5050`: the loopback only, as the roles run beside the operator), so both
our bundled module and an installed operator_sdk.util of operator-sdk's reach us; runs get the
listener's URL in `OPERATOR_RUNNER_METRICS_URL` (the bundled module's default address) in case
it is not on port 5050. The metrics join the operator's own registry and are served with them
on `--metrics-bind-address`.

Operations, as operator-sdk's: counter `increment` / `add`; gauge `set`, `increment`,
`decrement`, `add`, `subtract`, `set_to_current_time`; histogram and summary `observe`. The
first call with a name creates the metric (an empty operation only creates it); a later call
with another type is refused (400). Counters are exposed with the `_total` suffix that the
Python Prometheus client always adds (operator-sdk's Go client exposes the name as given
unless it ends in `_total` already).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary

log = logging.getLogger("runner.rolemetrics")

TYPES = ("counter", "gauge", "histogram", "summary")
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_OPERATIONS: dict[str, dict[str, type]] = {
    "counter": {"increment": bool, "add": float},
    "gauge": {
        "set": float,
        "increment": bool,
        "decrement": bool,
        "add": float,
        "subtract": float,
        "set_to_current_time": bool,
    },
    "histogram": {"observe": float},
    "summary": {"observe": float},
}


class MetricError(ValueError):
    """A request the role must fix (bad name, unknown operation, type mismatch)."""


class RoleMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._metrics: dict[str, tuple[str, Any]] = {}

    def apply(self, payload: Mapping[str, Any]) -> None:
        name = str(payload.get("name") or "")
        if not _NAME.match(name):
            raise MetricError(f"metric name {name!r} is not a Prometheus metric name")
        description = str(payload.get("description") or name)
        given = [t for t in TYPES if isinstance(payload.get(t), Mapping)]
        if len(given) != 1:
            raise MetricError(f"metric {name}: give exactly one of {', '.join(TYPES)}")
        [kind] = given
        operation = payload[kind]
        metric = self._metric(name, description, kind)
        allowed = _OPERATIONS[kind]
        for key, value in operation.items():
            if value is None:
                continue
            if key not in allowed:
                raise MetricError(f"metric {name}: a {kind} has no {key!r} ({', '.join(allowed)})")
            if allowed[key] is bool:
                if value is True:
                    _boolean(metric, key)
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise MetricError(f"metric {name}: {key} needs a number, got {value!r}") from None
            _numeric(metric, key, number, name)

    def _metric(self, name: str, description: str, kind: str) -> Any:
        known = self._metrics.get(name)
        if known is not None:
            if known[0] != kind:
                raise MetricError(f"metric {name} is a {known[0]}, not a {kind}")
            return known[1]
        factory = {"counter": Counter, "gauge": Gauge, "histogram": Histogram, "summary": Summary}
        try:
            metric = factory[kind](name, description, registry=self.registry)
        except ValueError as err:  # a name the operator's own metrics use
            raise MetricError(f"metric {name}: {err}") from None
        self._metrics[name] = (kind, metric)
        log.info("role metric %s (%s) created", name, kind)
        return metric

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024)
        app.router.add_post("/metrics", self._post)
        return app

    async def _post(self, request: web.Request) -> web.Response:
        try:
            payload = json.loads(await request.read())
        except ValueError:
            return web.Response(status=400, text="the body must be JSON")
        if not isinstance(payload, dict):
            return web.Response(status=400, text="the body must be a JSON object")
        try:
            self.apply(payload)
        except MetricError as err:
            return web.Response(status=400, text=str(err))
        return web.Response(status=200, text="ok")


def _boolean(metric: Any, key: str) -> None:
    if key == "increment":
        metric.inc()
    elif key == "decrement":
        metric.dec()
    elif key == "set_to_current_time":
        metric.set_to_current_time()


def _numeric(metric: Any, key: str, number: float, name: str) -> None:
    if key == "add":
        if isinstance(metric, Counter) and number < 0:
            raise MetricError(f"metric {name}: a counter cannot go down ({number})")
        metric.inc(number)
    elif key == "subtract":
        metric.dec(number)
    elif key == "set":
        metric.set(number)
    elif key == "observe":
        metric.observe(number)
