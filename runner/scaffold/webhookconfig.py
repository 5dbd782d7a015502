"""config/webhook for a project that has none: one operator-sdk's ``init --plugins=ansible``
made (its Ansible plugin scaffolds no webhooks). ``create webhook`` adds what operator-runner's
``init`` writes there (the Service, the two configurations, their RBAC), the manager's webhook
flags (config/default/manager_webhook_patch.yaml) and both to config/default/kustomization.yaml,
as text: ``- ../webhook`` under ``resources:`` and the patch under ``patches:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from . import layout
from .edits import parse
from .names import ScaffoldError
from .render import Plan, project_templates, render, template

__all__ = ["plan_webhook_config"]

_DEFAULT: Final = "config/default/kustomization.yaml"
_PATCH: Final = "manager_webhook_patch.yaml"
_PATCH_ENTRY: Final = f"- path: {_PATCH}\n  target:\n    kind: Deployment\n"


def _after_key(lines: list[str], key: str, addition: str) -> bool:
    """Insert ``addition`` right below the top-level ``key:`` line; False when there is none."""
    for number, line in enumerate(lines):
        if line.rstrip() == f"{key}:":
            lines.insert(number + 1, addition)
            return True
    return False


def _with_webhook(text: str) -> str:
    """config/default/kustomization.yaml deploying ../webhook and patching the manager."""
    before = parse(text, _DEFAULT)
    if not isinstance(before, dict):
        raise ScaffoldError(f"{_DEFAULT} is not a kustomization; fix it first")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if "../webhook" not in (before.get("resources") or []) and not _after_key(
        lines, "resources", "- ../webhook\n"
    ):
        lines.append("resources:\n- ../webhook\n")
    patches: Any = before.get("patches") or []
    if not any(isinstance(p, dict) and p.get("path") == _PATCH for p in patches) and not _after_key(
        lines, "patches", _PATCH_ENTRY
    ):
        lines.append("patches:\n" + _PATCH_ENTRY)
    new = "".join(lines)
    after = parse(new, _DEFAULT)
    if (
        not isinstance(after, dict)
        or "../webhook" not in (after.get("resources") or [])
        or not any(isinstance(p, dict) and p.get("path") == _PATCH for p in after["patches"] or [])
    ):
        raise ScaffoldError(
            f"{_DEFAULT}: cannot add the webhooks as text; add `- ../webhook` to its resources "
            f"and this to its patches by hand, then run create webhook again:\n{_PATCH_ENTRY}"
        )
    return new


def plan_webhook_config(plan: Plan, root: Path, values: dict[str, str]) -> None:
    """Add config/webhook's files (and config/default's part) to ``plan`` when the project in
    ``root`` has no config/webhook/manifests.yaml; ``values`` fill the templates."""
    if (root / layout.WEBHOOK_MANIFESTS).exists():
        return
    for path in project_templates():
        if path.startswith("config/webhook/") and not (root / path).exists():
            plan.add(path, render(template(f"project/{path}"), values))
    patch = f"config/default/{_PATCH}"
    if not (root / patch).exists():
        plan.add(patch, render(template(f"project/{patch}"), values))
    try:
        text = (root / _DEFAULT).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScaffoldError(f"{_DEFAULT} cannot be read ({exc}); create webhook edits it") from None
    plan.add(_DEFAULT, _with_webhook(text))
