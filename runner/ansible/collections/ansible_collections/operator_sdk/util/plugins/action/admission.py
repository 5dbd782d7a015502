"""operator_sdk.util.admission's action plugin: the answer of an admission role, validated and
returned as `admission` in the task's result, which operator-runner reads from the job events.
Runs on the controller, as ansible.builtin.set_fact does (no module job)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase  # type: ignore[import-untyped,unused-ignore]

ARGUMENT_SPEC = {
    "allowed": {"type": "bool", "default": True},
    "message": {"type": "str"},
    "warnings": {"type": "list", "elements": "str", "default": []},
    "object": {"type": "dict"},
}


class ActionModule(ActionBase):  # type: ignore[misc,unused-ignore]
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        answer: dict[str, Any] = {
            "allowed": bool(args["allowed"]),
            "warnings": [str(w) for w in args["warnings"] or []],
        }
        if args.get("message") is not None:
            answer["message"] = str(args["message"])
        if args.get("object") is not None:
            answer["object"] = args["object"]
        if not answer["allowed"] and not answer.get("message"):
            answer["message"] = "denied by the role (no message given)"
        result.update(changed=False, admission=answer)
        return result
