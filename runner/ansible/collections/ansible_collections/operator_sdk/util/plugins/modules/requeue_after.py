#!/usr/bin/python
"""operator_sdk.util.requeue_after: ask the runner to reconcile the CR again after a delay.

Written for operator-runner; compatible with operator-sdk's module of the same name. The module
only validates and returns the period: operator-runner reads `period` from this task's result.
"""

from __future__ import annotations

import re

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped,unused-ignore]

DOCUMENTATION = r"""
module: requeue_after
short_description: Reconcile the custom resource again after a delay
version_added: "0.1.0"
author: operator-runner authors
description:
  - Tells operator-runner to reconcile the custom resource being reconciled again after
    I(period). The module itself changes nothing; the runner reads C(period) from the result of
    this task.
  - Unlike operator-sdk, the run goes on to its end and the runner still writes the status; the
    next reconciliation is scheduled after the run.
  - Compatible with operator-sdk's C(operator_sdk.util.requeue_after) (its I(time) parameter is an
    alias of I(period)).
options:
  period:
    description:
      - A Go duration, as C(time.ParseDuration) reads it, for instance C(30s), C(5m), C(1h30m),
        C(1.5h) or C(250ms). Units are C(ns), C(us) (or C(µs)), C(ms), C(s), C(m) and C(h); a
        bare C(0) is allowed; negative durations are not.
    type: str
    required: true
    aliases: [time]
"""

EXAMPLES = r"""
- name: Check again in five minutes
  operator_sdk.util.requeue_after:
    period: 5m

- name: operator-sdk's spelling
  operator_sdk.util.requeue_after:
    time: 1h30m
"""

RETURN = r"""
period:
  description: The period as given.
  returned: success
  type: str
  sample: 1h30m
period_seconds:
  description: The period in seconds.
  returned: success
  type: float
  sample: 5400.0
"""

UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek small letter mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_UNIT = "|".join(sorted(map(re.escape, UNIT_SECONDS), key=len, reverse=True))
COMPONENT = re.compile(rf"({_NUMBER})({_UNIT})")
DURATION = re.compile(rf"\+?(?:{_NUMBER}(?:{_UNIT}))+")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; ValueError with a readable reason otherwise."""
    if text in ("0", "+0"):
        return 0.0
    if text.startswith("-"):
        raise ValueError(f"period must not be negative; got {text!r}")
    if not DURATION.fullmatch(text):
        raise ValueError(
            f"invalid period {text!r}: expected a Go duration such as 30s, 5m or 1h30m "
            "(numbers each followed by a unit: ns, us, ms, s, m, h)"
        )
    return sum(float(n) * UNIT_SECONDS[unit] for n, unit in COMPONENT.findall(text))


def main() -> None:
    module = AnsibleModule(
        argument_spec={"period": {"type": "str", "required": True, "aliases": ["time"]}},
        supports_check_mode=True,
    )
    period = module.params["period"]
    try:
        seconds = parse_duration(period)
    except ValueError as exc:
        module.fail_json(msg=str(exc), period=period)
    module.exit_json(changed=False, period=period, period_seconds=seconds)


if __name__ == "__main__":
    main()
