#!/usr/bin/python
"""operator_sdk.util.osdk_metric: create or update a Prometheus metric of the operator.

Written for operator-runner; takes operator-sdk's arguments. The module POSTs the metric's name,
description and operation as JSON to the operator (as operator-sdk's module does), which keeps
the metric and serves it on its own `/metrics`.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped,unused-ignore]

DOCUMENTATION = r"""
module: osdk_metric
short_description: Create or update a Prometheus metric served by the operator
version_added: "0.5.0"
author: operator-runner authors
description:
  - Sends a metric's name, description and one operation to the operator, which creates the
    metric the first time its name is used and serves it on its C(/metrics) endpoint
    (C(--metrics-bind-address)) beside its own metrics.
  - Compatible with operator-sdk's C(operator_sdk.util.osdk_metric). See
    U(https://prometheus.io/docs/concepts/metric_types/) for what each type means.
  - A name used first for one type cannot be used for another; counters are exposed with
    the C(_total) suffix.
options:
  name:
    description: Name of the Prometheus metric.
    type: str
    required: true
  description:
    description: Help text of the metric.
    type: str
    required: true
  address:
    description:
      - Where the operator receives metrics. Default C(OPERATOR_RUNNER_METRICS_URL) (set by
        operator-runner for every run), else C(http://localhost:5050/metrics) (operator-sdk's).
    type: str
  counter:
    description: A counter; C({}) only creates it.
    type: dict
    suboptions:
      increment: {description: Add one., type: bool}
      add: {description: Add this (not negative)., type: float}
  gauge:
    description: A gauge.
    type: dict
    suboptions:
      set: {description: Set to this value., type: float}
      increment: {description: Add one., type: bool}
      decrement: {description: Subtract one., type: bool}
      add: {description: Add this value., type: float}
      subtract: {description: Subtract this value., type: float}
      set_to_current_time: {description: Set to the current Unix time., type: bool}
  histogram:
    description: A histogram (Prometheus' default buckets).
    type: dict
    suboptions:
      observe: {description: Add one observation., type: float}
  summary:
    description: A summary.
    type: dict
    suboptions:
      observe: {description: Add one observation., type: float}
"""

EXAMPLES = r"""
- name: Count reconciles of this kind
  operator_sdk.util.osdk_metric:
    name: my_reconciles
    description: Reconciles that got this far
    counter:
      increment: true

- name: The size asked for
  operator_sdk.util.osdk_metric:
    name: my_size
    description: Replicas the CR asks for
    gauge:
      set: "{{ size }}"
"""

RETURN = r"""
msg:
  description: The operator's answer when it refused the metric.
  returned: failure
  type: str
status_code:
  description: HTTP status of that answer.
  returned: failure
  type: int
"""

DEFAULT_ADDRESS = "http://localhost:5050/metrics"
TYPES = ("counter", "gauge", "histogram", "summary")


def argument_spec() -> dict[str, Any]:
    def options(**names: str) -> dict[str, Any]:
        return {key: {"type": kind} for key, kind in names.items()}

    return {
        "name": {"type": "str", "required": True},
        "description": {"type": "str", "required": True},
        "address": {"type": "str"},
        "counter": {"type": "dict", "options": options(increment="bool", add="float")},
        "gauge": {
            "type": "dict",
            "options": options(
                set="float",
                increment="bool",
                decrement="bool",
                add="float",
                subtract="float",
                set_to_current_time="bool",
            ),
        },
        "histogram": {"type": "dict", "options": options(observe="float")},
        "summary": {"type": "dict", "options": options(observe="float")},
    }


def payload(params: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"name": params["name"], "description": params["description"]}
    for kind in TYPES:
        if params.get(kind) is not None:
            body[kind] = {k: v for k, v in params[kind].items() if v is not None}
    return body


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[list(TYPES)],
        required_one_of=[list(TYPES)],
        supports_check_mode=True,
    )
    if module.check_mode:
        module.exit_json(changed=False)
    address = (
        module.params.get("address")
        or os.environ.get("OPERATOR_RUNNER_METRICS_URL")
        or DEFAULT_ADDRESS
    )
    request = urllib.request.Request(
        address,
        data=json.dumps(payload(module.params)).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
    except urllib.error.HTTPError as err:
        module.fail_json(msg=err.read().decode(errors="replace"), status_code=err.code)
    except OSError as err:
        module.fail_json(msg=f"cannot reach the operator's metrics at {address}: {err}")
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
