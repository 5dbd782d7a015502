"""What a kind's watch runs, written by ``create api``: a role (``roles/<kind>/``: tasks, the
spec's keys as defaults, meta) or a playbook (``playbooks/<kind>.yml``).
"""

from __future__ import annotations

import keyword
from typing import TYPE_CHECKING, Any

from .render import Plan, dump_yaml, render, template

if TYPE_CHECKING:
    from .api import ApiRequest

__all__ = ["content_files", "indent", "role_defaults"]


def indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(True))


def role_defaults(spec: dict[str, Any] | None, request: ApiRequest, snake: str) -> dict[str, Any]:
    """The role's defaults: the sample's spec keys as the runner passes them (snake_case)."""
    from runner.reconcile.snakecase import snake_keys

    values: dict[str, Any] = {}
    if spec:
        converted = snake_keys(spec)
        assert isinstance(converted, dict)
        # Keys that are no Ansible variable name ("my.key") reach the role only inside
        # _<group>_<kind>_spec; they cannot be defaults.
        values.update(
            (key, value)
            for key, value in converted.items()
            if isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)
        )
    if not request.namespaced:
        values[f"{snake}_namespace"] = "default"
    return values


def content_files(plan: Plan, request: ApiRequest, values: dict[str, str], spec: Any) -> str:
    """The role or playbook; returns what watches.yaml names (``role: x``/``playbook: x``)."""
    snake = values["snake_kind"]
    tasks = render(template("api/tasks.yml"), values)
    defaults = role_defaults(spec, request, snake)
    header = (
        f"# The {request.kind}'s spec keys, as operator-runner passes them to Ansible (camelCase\n"
        "# keys in snake_case, recursively), with the sample's values as defaults.\n"
    )
    if request.generate_playbook:
        play_vars = ""
        if defaults:
            play_vars = "  vars:\n" + indent(header + dump_yaml(defaults), 4)
        plan.add(
            f"playbooks/{snake}.yml",
            f"---\n# {request.kind} ({values['api_version']}): what operator-runner runs for "
            f"every {request.kind}\n# (watches.yaml: playbook). Extra vars (the spec) win over "
            "the play's vars.\n"
            f"- name: Reconcile {values['a_kind']}\n  hosts: localhost\n  gather_facts: false\n"
            f"{play_vars}  tasks:\n{indent(tasks, 4)}",
        )
        return f"playbook: playbooks/{snake}.yml"
    dumped = dump_yaml(defaults) if defaults else "{}\n"
    plan.add(f"roles/{snake}/defaults/main.yml", "---\n" + header + dumped)
    plan.add(
        f"roles/{snake}/tasks/main.yml",
        f"---\n# {request.kind} ({values['api_version']}): what operator-runner runs for every "
        f"{request.kind}.\n# Variables: the spec's keys (defaults/main.yml), "
        "ansible_operator_meta.name and .namespace.\n\n" + tasks,
    )
    plan.add(f"roles/{snake}/meta/main.yml", render(template("api/meta.yml"), values))
    return f"role: {snake}"
