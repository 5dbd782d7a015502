"""Compiled Jinja templates shared by a warm server's runs and their task workers.

ansible-core compiles a template every time it renders one (no cache in 2.19: lex, parse,
generate Python, `compile()`), and each task runs in a worker forked for that task alone, so a
role's templates are compiled again in every run: ~40 compiles per EchoFlask run, ~2-8 ms of
CPU each. In a warm playbook job (installed by `forkserver._run_playbook`, when
$OPERATOR_RUNNER_TEMPLATE_CACHE names a directory) Jinja's `Environment.compile` and
`compile_expression` keep the code object of each compiled template in that directory, one
file per template, shared by every job of the server (and removed with it). The next compile
of the same template loads it instead (marshal, ~0.05 ms).

What Jinja's compile depends on is in the key or checked: the source, the environment's class
and its lexer settings (delimiters, whitespace, `#jinja2:` overrides), Ansible's compile-time
options (backslash escaping, embedded templates), the Python, Jinja and ansible-core versions;
and the filters and tests the template uses, by name, with whether each existed and how Jinja
passes it its context (`pass_context` and the like, decided at compile time): a hit whose
filters changed (a role's filter plugin edited while the server lives) compiles again. A
template that fails to compile is never stored: its error comes from Jinja, as before.
Templates compiled while Ansible's template debugging is on are not cached either.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import threading
import types
from typing import Any

from runner.ansible.warm.jobenv import TEMPLATE_CACHE_ENV

#: At most this many templates on disk per server (one file each, a few KB): a role that
#: renders ever new template strings stops adding to it and compiles them as before.
MAX_ENTRIES = 4096

#: (kind, name, pass_arg) of each filter and test a template's compile looked up.
Deps = list[tuple[str, str, str | None]]

_local = threading.local()


def install() -> None:
    """Cache compiled templates in $OPERATOR_RUNNER_TEMPLATE_CACHE (when set)."""
    directory = os.environ.get(TEMPLATE_CACHE_ENV)
    if not directory:
        return
    from ansible._internal._templating import _jinja_bits, _jinja_plugins
    from jinja2.environment import TemplateExpression
    from jinja2.utils import internalcode

    env_class = _jinja_bits.AnsibleEnvironment
    if getattr(env_class, "_operator_runner_template_cache", False):
        return
    os.makedirs(directory, mode=0o700, exist_ok=True)
    store = Store(directory)
    plain_compile = env_class.compile
    plain_expression = env_class.compile_expression

    def compile(
        self: Any,
        source: Any,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        if raw or not isinstance(source, str) or self._debuggable_template_source:
            code = plain_compile(self, source, name, filename, raw, defer_init)
            _local.last_code = code  # compile_expression's template, compiled from its nodes
            return code
        key = store.key(self, ("template", name, filename, defer_init), source)
        code = store.load(key, self)
        if code is None:
            code, deps = _recording(
                lambda: plain_compile(self, source, name, filename, raw, defer_init)
            )
            store.save(key, deps, code)
        return code

    def compile_expression(self: Any, source: str, undefined_to_none: bool = True) -> Any:
        if not isinstance(source, str) or self._debuggable_template_source:
            return plain_expression(self, source, undefined_to_none)
        key = store.key(self, ("expression",), source)
        code = store.load(key, self)
        if code is not None:
            template = self.template_class.from_code(self, code, self.make_globals(None), None)
            return TemplateExpression(template, undefined_to_none)
        _local.last_code = None
        expression, deps = _recording(lambda: plain_expression(self, source, undefined_to_none))
        if isinstance(_local.last_code, types.CodeType):
            store.save(key, deps, _local.last_code)
        return expression

    env_class.compile = internalcode(compile)
    env_class.compile_expression = internalcode(compile_expression)
    _record_lookups(_jinja_plugins.JinjaPluginIntercept)
    env_class._operator_runner_template_cache = True


class Store:
    """The directory of compiled templates (one marshal file per key), and this process's
    copies of the ones it loaded."""

    def __init__(self, directory: str) -> None:
        import ansible.release
        import jinja2

        self.directory = directory
        self.stamp = (sys.version, jinja2.__version__, ansible.release.__version__)
        self.memory: dict[str, tuple[Deps, types.CodeType]] = {}

    def key(self, env: Any, what: tuple[Any, ...], source: str) -> str:
        """What the code Jinja compiles from `source` in `env` depends on, but the filters."""
        from ansible._internal._templating import _jinja_bits

        context = _jinja_bits._TemplateCompileContext.current(optional=True)
        autoescape = env.autoescape
        signature = (
            self.stamp,
            what,
            f"{type(env).__module__}.{type(env).__qualname__}",
            tuple(
                (field, getattr(env, field)) for field in _jinja_bits._TEMPLATE_OVERRIDE_FIELD_NAMES
            ),
            env.is_async,
            env.optimized,
            tuple(sorted(env.extensions)),
            autoescape if isinstance(autoescape, bool) else "callable",
            getattr(env.finalize, "__qualname__", repr(env.finalize)),
            context.escape_backslashes if context else None,
            _jinja_bits._TemplateConfig.allow_embedded_templates,
        )
        digest = hashlib.sha256(repr(signature).encode())
        digest.update(b"\0")
        digest.update(source.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def load(self, key: str, env: Any) -> types.CodeType | None:
        entry = self.memory.get(key)
        if entry is None:
            try:
                with open(os.path.join(self.directory, key), "rb") as file:
                    deps, code = marshal.load(file)
            except (OSError, EOFError, ValueError, TypeError):
                return None
            if not isinstance(code, types.CodeType):
                return None
            entry = self.memory[key] = (deps, code)
        deps, code = entry
        if any(_lookup(env, kind, name) != passed for kind, name, passed in deps):
            return None
        return code

    def save(self, key: str, deps: Deps, code: types.CodeType) -> None:
        self.memory[key] = (deps, code)
        path = os.path.join(self.directory, key)
        try:
            if len(os.listdir(self.directory)) >= MAX_ENTRIES:
                return
            partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(partial, "wb") as file:
                marshal.dump((deps, code), file)
            os.replace(partial, path)
        except OSError:
            pass  # a full disk or a removed directory: this template compiles next time too


def _recording(compile_: Any) -> tuple[Any, Deps]:
    """Run a compile and note the filters and tests it looked up."""
    outer = getattr(_local, "deps", None)
    deps: Deps = []
    _local.deps = deps
    try:
        result = compile_()
    finally:
        _local.deps = outer
    return result, deps


def _record_lookups(intercept: Any) -> None:
    """Jinja's compiler looks each filter and test up with `.get` (and decides then how to
    pass it its context): note each lookup made while a compile is recorded."""
    plain_get = intercept.get

    def get(self: Any, key: str, default: Any = None) -> Any:
        value = plain_get(self, key, default)
        deps = getattr(_local, "deps", None)
        if deps is not None:
            deps.append((self._plugin_loader.type, key, _passed(value)))
        return value

    intercept.get = get


def _lookup(env: Any, kind: str, name: str) -> str | None:
    plugins = env.filters if kind == "filter" else env.tests
    return _passed(plugins.get(name))


def _passed(value: Any) -> str | None:
    """None for a missing filter or test, else how Jinja passes it its context ("" for not)."""
    if value is None:
        return None
    passed = getattr(value, "jinja_pass_arg", None)
    return passed.name if passed is not None else ""
