"""A task's name as written in its file, for the per-task metrics' `task` label.

Ansible shows (and its job events carry) a task's name templated: `Create {{ name }}` becomes
`Create web-1` for one CR and `Create web-2` for the next, a label per CR without bound. The
event's `task_path` (`file:line`, the line where the task's mapping starts) leads back to the
source, where the name is as the role's author wrote it: bounded by the role's code. A task
without a name is shown, and labelled, by its action; Ansible's implicit fact gathering by its
own name. When the file cannot be read (or the task not found in it), the label is the event's
name: the metrics cap the labels per role anyway (runner/app/serving/taskmetrics.py).

Files are read once and kept while their mtime stays (a role edited under `--watch-roles` is
read again); a cache bounded in files.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import yaml

from runner.ansible.results import TaskResult

#: A label is cut to this many characters.
MAX_LABEL = 120
#: Files kept; the cache is emptied when more are read (a project has a few dozen).
MAX_FILES = 512
GATHER_FACTS = frozenset({"gather_facts", "setup", "ansible.builtin.gather_facts"})
_GATHERING = "Gathering Facts"
_KEY = re.compile(r"(?P<indent>\s*(?:-\s+)*)(?P<key>[^\s#][^:#]*?)\s*:(?:\s+(?P<value>.*))?$")


def name_in(lines: list[str], line: int) -> str | None:
    """The `name:` of the YAML mapping that starts on `line` (1-based) of `lines`, as written
    (a plain or quoted scalar); None when it has none, or it cannot be read so simply (a block
    scalar, a flow mapping)."""
    if not 0 < line <= len(lines):
        return None
    first = _KEY.match(lines[line - 1])
    if first is None:
        return None
    column = len(first.group("indent"))
    for number in range(line - 1, len(lines)):
        text = lines[number]
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        match = _KEY.match(text)
        if number > line - 1:
            indent = len(text) - len(text.lstrip(" "))
            if indent < column:
                return None  # the mapping ended
            if match is None or indent > column or len(match.group("indent")) != column:
                continue  # a nested value, a list's item
        if match is not None and match.group("key") == "name":
            return _scalar(match.group("value") or "")
    return None


def _scalar(text: str) -> str | None:
    text = text.strip()
    if not text or text[0] in "|>&*!{[":
        return None
    try:
        value = yaml.safe_load(f"v: {text}")["v"]
    except (yaml.YAMLError, TypeError, KeyError):
        return None
    return value if isinstance(value, str) and value else None


@dataclass(slots=True)
class _File:
    """A task file as read: its lines, and the names found at the lines asked about."""

    mtime: int
    lines: list[str]
    found: dict[int, str | None] = field(default_factory=dict)


class TaskNames:
    """The names of tasks in their files (module doc); safe to use from several threads."""

    def __init__(self) -> None:
        self._files: dict[str, _File] = {}
        self._lock = threading.Lock()

    def label(
        self,
        result: TaskResult,
        mtimes: dict[str, int | None] | None = None,
        redact: Callable[[str], str] = str,
    ) -> str:
        """`result`'s label: its name as written, else its action, else Ansible's name (which
        a template may have filled in: `redact` masks the run's secrets in it)."""
        if result.action in GATHER_FACTS and result.task == _GATHERING:
            return _GATHERING
        name = None
        file, _, line = result.path.rpartition(":")
        if file and line.isdigit():
            names = self._names(file, mtimes)
            if names is not None:
                number = int(line)
                if number not in names.found:
                    names.found[number] = name_in(names.lines, number)
                # a task found with no name is shown by its action
                name = names.found[number] or result.action or None
        if name is None:
            name = redact(result.task) if result.task else (result.action or "task")
        return name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"

    def fill(self, results: Iterable[TaskResult], redact: Callable[[str], str] = str) -> None:
        """Give each result its label (each file's mtime looked at once)."""
        mtimes: dict[str, int | None] = {}
        for result in results:
            result.label = self.label(result, mtimes, redact)

    def _names(self, file: str, mtimes: dict[str, int | None] | None) -> _File | None:
        if mtimes is not None and file in mtimes:
            mtime = mtimes[file]
        else:
            try:
                mtime = os.stat(file).st_mtime_ns
            except OSError:
                mtime = None
            if mtimes is not None:
                mtimes[file] = mtime
        if mtime is None:
            return None
        with self._lock:
            kept = self._files.get(file)
        if kept is not None and kept.mtime == mtime:
            return kept
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                read = _File(mtime, f.read().splitlines())
        except OSError:
            return None
        with self._lock:
            if len(self._files) >= MAX_FILES:
                self._files.clear()
            self._files[file] = read
        return read
