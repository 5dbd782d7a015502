"""`operator-runner check-roles`: constructs a newer ansible-core line changes, found in roles
without running them (pure but for reading files). Hints, file:line each:

- a template inside a conditional (`when: "{{ x }} > 1"`; failed_when, changed_when, until,
  assert's that): an error from 2.19;
- a conditional whose value is no boolean (`when: items | length`, `when: result.resources`):
  an error from 2.19;
- a template that can render nothing (its whole text one `{% if %}`) piped into a filter
  without `default`, or as a task's whole `definition` on a task with no `when`: None from
  2.19;
- a label, an annotation or an env value templated to a number or boolean (`| int`): typed
  from 2.19, which the API refuses;
- facts read as variables (`ansible_distribution`): deprecated from 2.20.

The YAML is read with its line numbers; a file that is not YAML is skipped (with a hint that
says so, since Ansible would refuse it too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from runner.preview import porting

CONDITIONAL_KEYS = ("when", "failed_when", "changed_when", "until")
ASSERTS = ("assert", "ansible.builtin.assert", "ansible.legacy.assert")
_NOT_BOOLEAN = re.compile(
    r"(?:\|\s*(?:length|count|list|unique|flatten|dict2items|items2dict|map|select|reject|"
    r"selectattr|rejectattr)\b(?:\([^()]*\))?|\.(?:resources|results|stdout_lines))\s*$"
)
_BOOLEAN_MARKS = re.compile(r"==|!=|>|<|\bin\b|\bis\b|\bnot\b|\band\b|\bor\b|\|\s*bool\b")
_TEMPLATE_LOOKUP = re.compile(r"""lookup\(\s*['"]template['"]\s*,\s*['"]([^'"]+)['"]\s*\)""")
_WHOLE_LOOKUP = re.compile(r"""^\s*\{\{\s*lookup\(\s*['"]template['"][^{}]*\)\s*\}\}\s*$""")
_TYPED = re.compile(r"\{\{[^{}]*\|\s*(?:int|float|bool)\s*\}\}")
_FACTS = re.compile(
    r"\bansible_(?:distribution|os_family|hostname|fqdn|nodename|default_ipv4|architecture|"
    r"machine|kernel|system|python_version|date_time|processor_count|processor_vcpus|"
    r"memtotal_mb|env)\b"
)
_JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.S)


@dataclass(frozen=True)
class Hint:
    path: Path
    line: int
    change: porting.Change
    text: str  # the construct, as written

    def location(self, base: Path) -> str:
        try:
            shown = self.path.resolve().relative_to(base.resolve())
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"


def renders_nothing(template: Path) -> bool:
    """Whether a template's whole text is one `{% if %}` block (so it can render nothing)."""
    try:
        text = _JINJA_COMMENT.sub("", template.read_text(encoding="utf-8")).strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not re.match(r"^\{%-?\s*if\b", text) or not re.search(r"\{%-?\s*endif\s*-?%\}$", text):
        return False
    return len(re.findall(r"\{%-?\s*if\b", text)) == len(re.findall(r"\{%-?\s*endif\b", text))


def _role_root(path: Path) -> Path:
    for parent in path.parents:
        if parent.name in ("tasks", "handlers", "defaults", "vars", "meta"):
            return parent.parent
    return path.parent


def _template(name: str, file: Path) -> Path | None:
    root = _role_root(file)
    for candidate in (root / "templates" / name, file.parent / "templates" / name, root / name):
        if candidate.is_file():
            return candidate
    return None


class _Scan:
    def __init__(self, file: Path) -> None:
        self.file = file
        self.hints: list[Hint] = []

    def hint(self, node: yaml.Node, change: porting.Change, text: str, at: int = -1) -> None:
        """A hint at `node`; `at`: the offset of the construct in a block scalar's text (its
        line is then the line of that offset)."""
        line = node.start_mark.line + 1
        if at >= 0 and isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            before = text[:at]
            line += 1 + before.count("\n")
            text = text[len(before) - len(before.split("\n")[-1]) :].split("\n", 1)[0]
        self.hints.append(Hint(self.file, line, change, text.strip()))

    def expression(self, node: yaml.Node) -> None:
        values = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for item in values:
            if not isinstance(item, yaml.ScalarNode) or not isinstance(item.value, str):
                continue
            expr = item.value.strip()
            if "{{" in expr:
                self.hint(item, porting.EXPRESSIONS, expr)
            elif _NOT_BOOLEAN.search(expr) and not _BOOLEAN_MARKS.search(expr):
                self.hint(item, porting.CONDITIONALS, expr)

    def scalar(self, node: yaml.ScalarNode, key: str, task_has_when: bool) -> None:
        text = node.value if isinstance(node.value, str) else ""
        for match in _TEMPLATE_LOOKUP.finditer(text):
            template = _template(match[1], self.file)
            if template is None or not renders_nothing(template):
                continue
            rest = text[match.end() :].split("}}", 1)[0]
            if re.match(r"\s*\|", rest) and "default(" not in rest:
                self.hint(node, porting.NOTHING, text, match.start())
            elif key == "definition" and _WHOLE_LOOKUP.match(text) and not task_has_when:
                self.hint(node, porting.NOTHING, f"definition: {text}")
        if _FACTS.search(text):
            self.hint(node, porting.FACTS, _FACTS.search(text)[0])  # type: ignore[index]

    def typed(self, node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            for _, value in node.value:
                if isinstance(value, yaml.ScalarNode) and _TYPED.search(str(value.value)):
                    self.hint(value, porting.TYPED, str(value.value))

    def walk(self, node: yaml.Node, key: str = "", task_has_when: bool = False) -> None:
        if isinstance(node, yaml.ScalarNode):
            self.scalar(node, key, task_has_when)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self.walk(item, key, task_has_when)
        elif isinstance(node, yaml.MappingNode):
            keys = {str(k.value): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
            has_when = task_has_when or "when" in keys
            for name in CONDITIONAL_KEYS:
                if name in keys:
                    self.expression(keys[name])
            for name in ASSERTS:
                that = keys.get(name)
                if isinstance(that, yaml.MappingNode):
                    found = {str(k.value): v for k, v in that.value}
                    if "that" in found:
                        self.expression(found["that"])
            for name in ("labels", "annotations"):
                if name in keys:
                    self.typed(keys[name])
            if "name" in keys and "value" in keys and _TYPED.search(str(keys["value"].value)):
                self.hint(keys["value"], porting.TYPED, str(keys["value"].value))
            for name, value in keys.items():
                if name not in CONDITIONAL_KEYS:
                    self.walk(value, name, has_when)


def files_of(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
        else:
            for found in sorted(path.rglob("*")):
                if found.suffix in (".yml", ".yaml") and found.is_file():
                    yield found


def scan_file(file: Path) -> list[Hint]:
    scan = _Scan(file)
    try:
        documents = list(yaml.compose_all(file.read_text(encoding="utf-8"), Loader=yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    for document in documents:
        if document is not None:
            scan.walk(document)
    return scan.hints


def scan(paths: Sequence[Path], from_line: str, to_line: str) -> list[Hint]:
    """The hints of the files under `paths` for a move from `from_line` to `to_line`."""
    hints = []
    for file in files_of(paths):
        hints += [h for h in scan_file(file) if h.change.crossed(from_line, to_line)]
    return hints


def as_text(hints: Sequence[Hint], base: Path, from_line: str, to_line: str) -> str:
    lines = []
    for hint in hints:
        change = hint.change
        lines.append(
            f"{hint.location(base)}: hint: {change.title} (ansible-core {change.line}): "
            f"{hint.text.splitlines()[0] if hint.text else ''}\n"
            f"    fix: {change.fix} ({change.link})\n"
        )
    files = len({h.path for h in hints})
    lines.append(
        f"{len(hints)} hint{'s' if len(hints) != 1 else ''} in {files} file"
        f"{'s' if files != 1 else ''} for ansible-core {from_line} -> {to_line}: found without "
        "running the roles (some may be fine, and some changes only a run shows: "
        "operator-runner preview runs them)\n"
    )
    return "".join(lines)


def as_json(hints: Sequence[Hint], base: Path) -> str:
    return (
        json.dumps(
            [
                {
                    "location": h.location(base),
                    "line": h.change.line,
                    "change": h.change.key,
                    "title": h.change.title,
                    "construct": h.text,
                    "fix": h.change.fix,
                    "guide": h.change.link,
                }
                for h in hints
            ],
            indent=2,
        )
        + "\n"
    )
