"""Metrics that roles define with osdk_metric, as operator-sdk's Ansible operator keeps them."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from runner.app.serving.rolemetrics import MetricError, RoleMetrics


def _value(metrics: RoleMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


def test_every_type_and_operation() -> None:
    metrics = RoleMetrics(CollectorRegistry())
    metrics.apply({"name": "c", "description": "a counter", "counter": {}})
    assert _value(metrics, "c_total") == 0
    metrics.apply({"name": "c", "description": "a counter", "counter": {"increment": True}})
    metrics.apply({"name": "c", "description": "a counter", "counter": {"add": 2.5}})
    assert _value(metrics, "c_total") == 3.5
    for op, expected in (
        ({"set": 4}, 4),
        ({"increment": True}, 5),
        ({"decrement": True}, 4),
        ({"add": 2}, 6),
        ({"subtract": 1.5}, 4.5),
    ):
        metrics.apply({"name": "g", "description": "a gauge", "gauge": op})
        assert _value(metrics, "g") == expected
    metrics.apply({"name": "g", "description": "a gauge", "gauge": {"set_to_current_time": True}})
    assert (_value(metrics, "g") or 0) > 1e9
    metrics.apply({"name": "h", "description": "h", "histogram": {"observe": 0.3}})
    assert _value(metrics, "h_count") == 1
    metrics.apply({"name": "s", "description": "s", "summary": {"observe": 2}})
    assert _value(metrics, "s_sum") == 2
    assert b"# HELP g a gauge" in generate_latest(metrics.registry)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"name": "bad name", "description": "d", "counter": {}}, "not a Prometheus metric name"),
        ({"name": "x", "description": "d"}, "exactly one of"),
        ({"name": "x", "description": "d", "counter": {}, "gauge": {}}, "exactly one of"),
        ({"name": "x", "description": "d", "counter": {"set": 1}}, "has no 'set'"),
        ({"name": "x", "description": "d", "counter": {"add": -1}}, "cannot go down"),
        ({"name": "x", "description": "d", "gauge": {"set": "many"}}, "needs a number"),
    ],
)
def test_mistakes_are_refused_with_a_reason(payload: dict[str, object], message: str) -> None:
    with pytest.raises(MetricError, match=message):
        RoleMetrics().apply(payload)


def test_a_name_keeps_its_type() -> None:
    metrics = RoleMetrics()
    metrics.apply({"name": "m", "description": "d", "counter": {}})
    with pytest.raises(MetricError, match="is a counter, not a gauge"):
        metrics.apply({"name": "m", "description": "d", "gauge": {"set": 1}})
