"""A preview's report (pure): a table and the details for a person, JSON for a pipeline.

The JSON is a list with one object per CR. Its names are fixed (pipelines read them): `kind`,
`group`, `version`, `namespace` ("" for a cluster-scoped CR), `name`, `outcome` (`unchanged`,
`changed` or `failed`), `seconds`, `running_line` (the line that last reconciled the CR, or
null), and for a failed CR `task`, `task_path`, `message` and `porting` (null, or the known
ansible-core change: `line`, `title`, `fix`, `guide`), with every failure in `failures`; for a
changed one `changes` (`task`, `task_path`, `diff`); `writes`: the requests the run would send.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runner.preview import porting
from runner.preview.outcome import CHANGED, FAILED, UNCHANGED, CrPreview, Failure

_VERDICT = {UNCHANGED: "unchanged", CHANGED: "would change", FAILED: "fails"}


@dataclass(frozen=True)
class Context:
    """What the report says about the preview as a whole."""

    candidate: str  # ansible-core version of the candidate: 2.19.14
    from_line: str | None  # --from-line, or None (each CR's own)
    seconds: float
    concurrency: int


def _porting(change: porting.Change | None) -> dict[str, str] | None:
    if change is None:
        return None
    return {
        "key": change.key,
        "line": change.line,
        "title": change.title,
        "fix": change.fix,
        "guide": change.link,
        "certainty": "likely" if change.likely else "known",
    }


def _failure(failure: Failure) -> dict[str, Any]:
    return {
        "task": failure.task,
        "task_path": failure.where,
        "message": failure.message,
        "porting": _porting(failure.change),
    }


def as_json(results: Sequence[CrPreview]) -> str:
    items = []
    for cr in results:
        item: dict[str, Any] = {
            "kind": cr.kind,
            "group": cr.group,
            "version": cr.version,
            "namespace": cr.namespace,
            "name": cr.name,
            "outcome": cr.outcome,
            "seconds": round(cr.seconds, 2),
            "running_line": cr.running_line,
            "was": cr.was,
        }
        if cr.outcome == FAILED and cr.failures:
            item.update(_failure(cr.failures[0]))
            item["failures"] = [_failure(f) for f in cr.failures]
        if cr.changes:
            item["changes"] = [
                {"task": c.task, "task_path": c.where, "diff": c.text} for c in cr.changes
            ]
        item["writes"] = list(cr.writes)
        items.append(item)
    return json.dumps(items, indent=2) + "\n"


def _detail(cr: CrPreview) -> str:
    if cr.outcome == FAILED and cr.failures:
        first = cr.failures[0]
        return f"task {first.task!r}" if first.task else "the run did not start"
    if cr.outcome == CHANGED:
        return f"{len(cr.changes)} task{'s' if len(cr.changes) != 1 else ''}"
    return ""


def table(results: Sequence[CrPreview]) -> str:
    rows = [("KIND", "NAMESPACE", "NAME", "OUTCOME", "TIME", "DETAIL")]
    for cr in results:
        rows.append(
            (
                cr.kind,
                cr.namespace or "-",
                cr.name,
                _VERDICT[cr.outcome],
                f"{cr.seconds:.1f}s",
                _detail(cr),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines) + "\n"


def _indent(text: str, by: str = "    ") -> str:
    return "".join(by + line if line.strip() else line for line in text.splitlines(keepends=True))


def details(results: Sequence[CrPreview]) -> str:
    """Each CR that would change or fails: what and where."""
    parts = []
    for cr in results:
        if cr.outcome == UNCHANGED:
            continue
        head = f"{cr.kind} {cr.where}: {_VERDICT[cr.outcome]}"
        body = []
        for failure in cr.failures:
            where = f" ({failure.where})" if failure.where else ""
            task = f"task {failure.task!r}{where}" if failure.task else f"the run{where}"
            body.append(f"  {task}:\n{_indent(failure.message.rstrip())}\n")
            if failure.change is not None:
                body.append(f"{_indent(porting.describe(failure.change))}\n")
        for change in cr.changes:
            where = f" ({change.where})" if change.where else ""
            body.append(f"  task {change.task!r}{where}:\n{_indent(change.text.rstrip())}\n")
        notable = [w for w in cr.writes if w.startswith(("exec", "refused"))]
        if notable:
            body.append("  not done by the preview: " + "; ".join(notable) + "\n")
        parts.append(head + "\n" + "".join(body))
    return "\n".join(parts)


def summary(results: Sequence[CrPreview], context: Context) -> str:
    counts = {o: sum(1 for r in results if r.outcome == o) for o in (UNCHANGED, CHANGED, FAILED)}
    lines = sorted({r.running_line for r in results if r.running_line})
    running = context.from_line or (", ".join(lines) if lines else "not known")
    source = "--from-line" if context.from_line else "the CRs' status"
    per_cr = context.seconds / len(results) if results else 0.0
    return (
        f"preview of {len(results)} CR{'s' if len(results) != 1 else ''}: "
        f"{counts[UNCHANGED]} unchanged, {counts[CHANGED]} would change, {counts[FAILED]} fail; "
        f"candidate ansible-core {context.candidate}, running line {running}"
        f"{f' ({source})' if context.from_line or lines else ''}; "
        f"{context.seconds:.1f} s ({per_cr:.1f} s per CR, {context.concurrency} at a time); "
        "nothing was written\n"
    )
