"""operator_sdk.util.conversion: a convert role's answer, the objects in the version asked for.

Written for operator-runner (operator-sdk has no conversion). An action plugin, so that an answer
costs no module process: it runs in the playbook's own process and appends the objects, as one
JSON line, to the file operator-runner names in OPERATOR_RUNNER_CONVERSION_ANSWERS for the run.
The runner reads that file when the run ends (not the task's result: a long list of objects
would not fit in ansible-runner's job events). The task's result says how many were answered.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase  # type: ignore[import-untyped,unused-ignore]

ANSWERS_ENV = "OPERATOR_RUNNER_CONVERSION_ANSWERS"


def _plain(value: Any) -> Any:
    """JSON for what json cannot write itself (Ansible's own container and text types are
    dict, list and str subclasses and need nothing)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


class ActionModule(ActionBase):  # type: ignore[misc,unused-ignore]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("object", "objects"))

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        result["changed"] = False
        args = self._task.args
        given = [key for key in ("object", "objects") if args.get(key) is not None]
        if len(given) != 1:
            return self._fail(
                result, "give one of 'object' (a converted object) or 'objects' (a list of them)"
            )
        objects = [args["object"]] if given[0] == "object" else args["objects"]
        if not isinstance(objects, list) or not all(isinstance(o, Mapping) for o in objects):
            what = (
                "'object' must be a mapping"
                if given[0] == "object"
                else ("'objects' must be a list of mappings")
            )
            return self._fail(result, f"{what} (the objects of conversion.objects, converted)")
        path = os.environ.get(ANSWERS_ENV)
        if not path:
            return self._fail(
                result,
                "operator_sdk.util.conversion answers a conversion run of "
                f"operator-runner (a watch's convert:); {ANSWERS_ENV} is not set",
            )
        line = json.dumps({"objects": objects}, default=_plain, separators=(",", ":"))
        with open(path, "a", encoding="utf-8") as answers:
            answers.write(line + "\n")
        result["answered"] = len(objects)
        return result

    @staticmethod
    def _fail(result: dict[str, Any], msg: str) -> dict[str, Any]:
        result.update(failed=True, msg=msg)
        return result
