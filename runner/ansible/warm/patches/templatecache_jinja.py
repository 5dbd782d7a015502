"""Compiled Jinja templates shared by a warm server's runs, for ansible-core 2.15 to 2.18.

The same cache as `templatecache.py` (its module doc says what is cached and why), for the
environment those lines template with: `ansible.template.AnsibleEnvironment` (and its
`AnsibleNativeEnvironment`), a Jinja `NativeEnvironment` whose every `from_string` (templates,
conditionals as `{% if %}` templates, `template` lookups through its loader) compiles. Jinja's
compile there depends on the source, the environment's class, Jinja's lexer settings (a
`#jinja2:` header makes an overlay with its own) and the filters and tests it looks up through
Ansible's `JinjaPluginIntercept` (a lookup of a missing one fails the compile: never stored).
"""

from __future__ import annotations

from typing import Any

from runner.ansible.warm.patches import guard
from runner.ansible.warm.patches.templatecache import (
    cache_for,
    check_environment,
    record_lookups,
    recording,
)

NAME = "template-cache-jinja"
#: Jinja's settings its lexer (and so the compiled code) depends on.
LEXER_FIELDS = (
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "line_statement_prefix",
    "line_comment_prefix",
    "trim_blocks",
    "lstrip_blocks",
    "newline_sequence",
    "keep_trailing_newline",
)


def _signature(env: Any) -> tuple[Any, ...]:
    return tuple((field, getattr(env, field)) for field in LEXER_FIELDS)


def install() -> None:
    """Cache compiled templates in the job's $OPERATOR_RUNNER_TEMPLATE_CACHE."""
    from ansible import template
    from jinja2.utils import internalcode

    env_class = template.AnsibleEnvironment
    if "compile" in vars(template.AnsibleNativeEnvironment):
        raise AssertionError("AnsibleNativeEnvironment compiles on its own")
    plain_compile = env_class.compile

    def compile(
        self: Any,
        source: Any,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        def plain() -> Any:
            return plain_compile(self, source, name, filename, raw, defer_init)

        try:
            store = (
                None if raw or not isinstance(source, str) else cache_for(self, _signature, NAME)
            )
            key = store.key(self, ("template", name, filename, defer_init), source) if store else ""
            code = store.load(key, self) if store else None
        except Exception as err:
            guard.failed(NAME, err)
            return plain()
        if store is None:
            return plain()
        if code is None:
            code, deps = recording(plain)
            store.save(key, deps, code)
        return code

    env_class.compile = internalcode(compile)
    record_lookups(template.JinjaPluginIntercept, "_pluginloader", NAME)


def check() -> None:
    from ansible.template import AnsibleEnvironment

    check_environment(AnsibleEnvironment(), NAME)
