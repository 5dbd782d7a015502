"""The ansible-core changes that break roles written for older lines, and their fixes (pure).

One catalogue for the preview's failures (`explain`: a failed task's message in, the change
that explains it out) and for `check-roles`'s hints (rolescan.py): each change names the line
it came with, what it is, the fix docs/migrating-from-operator-sdk.md gives, and the anchor of
that section. A change is named only for a jump that crosses its line (from a line older than
it to one at least as new), or, when the line jumped from is not known, for any candidate line
that has it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GUIDE = "docs/migrating-from-operator-sdk.md"


def line_tuple(line: str) -> tuple[int, int]:
    """`2.19` -> (2, 19); anything else sorts first."""
    major, _, minor = line.partition(".")
    try:
        return int(major), int(minor.split(".")[0])
    except ValueError:
        return (0, 0)


@dataclass(frozen=True)
class Change:
    key: str
    line: str  # the ansible-core line that brought it
    title: str
    fix: str
    anchor: str
    patterns: tuple[str, ...] = ()
    likely: bool = False  # its messages have other causes too: "likely", not "is"

    @property
    def link(self) -> str:
        return f"{GUIDE}#{self.anchor}"

    def matches(self, message: str) -> bool:
        return any(re.search(p, message) for p in self.patterns)

    def crossed(self, from_line: str | None, to_line: str) -> bool:
        """Whether a jump from `from_line` (None: not known) to `to_line` brings it."""
        mine, to = line_tuple(self.line), line_tuple(to_line)
        if to < mine:
            return False
        return from_line is None or line_tuple(from_line) < mine


CONDITIONALS = Change(
    "conditional-not-boolean",
    "2.19",
    "a conditional must be a boolean",
    "compare, or test, what the expression gives: `when: entries | length > 0`, "
    "`when: result.resources | length > 0`; until the roles are fixed, "
    "ANSIBLE_ALLOW_BROKEN_CONDITIONALS=True in the operator's environment",
    "conditionals-must-be-booleans",
    (
        r"Conditional result \((?:True|False)\) was derived from value of type",
        r"Conditionals must have a boolean result",
    ),
)
EXPRESSIONS = Change(
    "template-in-expression",
    "2.19",
    "no templates inside expressions",
    'write the expression without delimiters: `when: replicas > 1`, not `when: "{{ replicas '
    "}} > 1\"` (also failed_when, changed_when, until and assert's that)",
    "no-templates-in-expressions",
    (r"Template delimiters are not supported in expressions",),
)
NOTHING = Change(
    "template-renders-none",
    "2.19",
    "a template that renders nothing is None, no longer an empty string",
    "`| default('', true)` before a filter (`indent`, `from_yaml`); skip the task of an object "
    "whose template is switched off (`when: optional_enabled | bool`)",
    "templates-that-render-nothing",
    (
        r"'NoneType'",
        r"NoneType' object",
        r"The `items` field in the body must be populated",
    ),
)
TYPED = Change(
    "typed-templates",
    "2.19",
    "templates keep their type (a number stays a number)",
    "say `| string` where the API wants text (labels, annotations, env values); operator-runner "
    "turns numbers in ConfigMap and Secret data into text itself",
    "templates-keep-their-type",
    (r"cannot unmarshal (?:number|bool|array|object)\S* into Go (?:struct field|value)",),
)
EXCEPTION = Change(
    "failed-when-exception",
    "2.20",
    "failed_when moves a suppressed failure's `exception` to `failed_when_suppressed_exception`",
    "read `result.failed_when_suppressed_exception` where the role read `result.exception`",
    "from-219-to-220",
    (r"has no attribute '?exception'?",),
)
INCLUDE_VARS = Change(
    "include-vars-lists",
    "2.20",
    "include_vars wants `extensions` and `ignore_files` as lists",
    "give them as YAML lists",
    "from-219-to-220",
    (r"The '(?:extensions|ignore_files)' option must be a list",),
)
UNDEFINED = Change(
    "undefined-is-an-error",
    "2.19",
    "undefined values are errors in more places",
    "fix the expression (a misspelt attribute: `result.stat.exists`), or give a default "
    "(`| default(...)`)",
    "undefined-values-are-errors",
    (r"is undefined", r"has no attribute"),
    likely=True,
)
FACTS = Change(
    "facts-as-variables",
    "2.20",
    "facts injected as variables (`ansible_distribution`) are deprecated",
    "read them from `ansible_facts` (`ansible_facts['distribution']`)",
    "from-219-to-220",
)

#: The order matters: the first change whose patterns match explains a failure.
CHANGES: tuple[Change, ...] = (
    CONDITIONALS,
    EXPRESSIONS,
    TYPED,
    INCLUDE_VARS,
    EXCEPTION,
    NOTHING,
    UNDEFINED,
    FACTS,
)


def explain(message: str, from_line: str | None, to_line: str) -> Change | None:
    """The known change that explains a failure's `message` on a jump to `to_line`."""
    for change in CHANGES:
        if change.patterns and change.crossed(from_line, to_line) and change.matches(message):
            return change
    return None


def describe(change: Change) -> str:
    """One line: the change, its fix and where the guide says so."""
    verb = "likely" if change.likely else "is"
    return (
        f"{verb} ansible-core {change.line}'s change: {change.title}. Fix: {change.fix} "
        f"({change.link})"
    )
