"""Compiled Jinja templates shared by a warm server's runs and their task workers.

ansible-core compiles a template every time it renders one (no cache, 2.15 to 2.21: lex, parse,
generate Python, `compile()`), and each task runs in a worker forked for that task alone, so a
role's templates are compiled again in every run: ~40 compiles per EchoFlask run, ~2-8 ms of
CPU each. In a warm playbook job (installed in the server; active in a job whose
$OPERATOR_RUNNER_TEMPLATE_CACHE names a directory) Jinja's `Environment.compile` (and, from
2.19, `compile_expression`) of Ansible's environment keep the code object of each compiled
template in that directory, one file per template, shared by every job of the server (and
removed with it). The next compile of the same template loads it instead (marshal, ~0.05 ms).

What Jinja's compile depends on is in the key or checked: the source, the environment's class
and its lexer settings (delimiters, whitespace, `#jinja2:` overrides), Ansible's compile-time
options (2.19 on: backslash escaping, embedded templates), the Python, Jinja and ansible-core
versions; and the filters and tests the template uses, by name, with whether each existed and
how Jinja passes it its context (`pass_context` and the like, decided at compile time): a hit
whose filters changed (a role's filter plugin edited while the server lives) compiles again. A
template that fails to compile is never stored: its error comes from Jinja, as before.
Templates compiled while Ansible's template debugging is on are not cached either.

This module holds the store and the 2.19+ environment (`ansible._internal._templating`);
`templatecache_jinja.py` the 2.15-2.18 one (`ansible.template`).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import shutil
import sys
import tempfile
import threading
import types
from collections.abc import Callable
from typing import Any

from runner.ansible.warm.jobenv import TEMPLATE_CACHE_ENV
from runner.ansible.warm.patches import guard

NAME = "template-cache"
#: At most this many templates on disk per server (one file each, a few KB): a role that
#: renders ever new template strings stops adding to it and compiles them as before.
MAX_ENTRIES = 4096

#: (kind, name, pass_arg) of each filter and test a template's compile looked up.
Deps = list[tuple[str, str, str | None]]

_local = threading.local()
_STORES: dict[str, Store] = {}


def install() -> None:
    """Cache compiled templates (2.19 on) in the job's $OPERATOR_RUNNER_TEMPLATE_CACHE."""
    from ansible._internal._templating import _jinja_bits, _jinja_plugins
    from jinja2.environment import TemplateExpression
    from jinja2.utils import internalcode

    env_class = _jinja_bits.AnsibleEnvironment
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
        def plain() -> Any:
            code = plain_compile(self, source, name, filename, raw, defer_init)
            _local.last_code = code  # compile_expression's template, compiled from its nodes
            return code

        try:
            store = None if raw or not isinstance(source, str) else cache_for(self)
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

    def compile_expression(self: Any, source: str, undefined_to_none: bool = True) -> Any:
        try:
            store = cache_for(self) if isinstance(source, str) else None
            key = store.key(self, ("expression",), source) if store else ""
            code = store.load(key, self) if store else None
            if code is not None:
                template = self.template_class.from_code(self, code, self.make_globals(None), None)
                return TemplateExpression(template, undefined_to_none)
        except Exception as err:
            guard.failed(NAME, err)
            store = None
        if store is None:
            return plain_expression(self, source, undefined_to_none)
        _local.last_code = None
        expression, deps = recording(lambda: plain_expression(self, source, undefined_to_none))
        if isinstance(_local.last_code, types.CodeType):
            store.save(key, deps, _local.last_code)
        return expression

    env_class.compile = internalcode(compile)
    env_class.compile_expression = internalcode(compile_expression)
    record_lookups(_jinja_plugins.JinjaPluginIntercept, "_plugin_loader")


def _signature(env: Any) -> tuple[Any, ...]:
    """What Jinja's compile in a 2.19+ environment depends on, but the source and the filters."""
    from ansible._internal._templating import _jinja_bits

    context = _jinja_bits._TemplateCompileContext.current(optional=True)
    return (
        tuple((field, getattr(env, field)) for field in _jinja_bits._TEMPLATE_OVERRIDE_FIELD_NAMES),
        context.escape_backslashes if context else None,
        _jinja_bits._TemplateConfig.allow_embedded_templates,
    )


Signature = Callable[[Any], tuple[Any, ...]]


def cache_for(env: Any, signature: Signature = _signature, name: str = NAME) -> Store | None:
    """The store of the job's $OPERATOR_RUNNER_TEMPLATE_CACHE; None when there is none, the
    cache (patch `name`) failed in this process, or Ansible's template debugging is on."""
    directory = os.environ.get(TEMPLATE_CACHE_ENV)
    if not directory or guard.broken(name) or getattr(env, "_debuggable_template_source", False):
        return None
    store = _STORES.get(directory)
    if store is None:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        store = _STORES[directory] = Store(directory, signature, name)
    return store


def check() -> None:
    from ansible._internal._templating import _jinja_bits

    check_environment(_jinja_bits.AnsibleEnvironment())


def check_environment(env: Any, name: str = NAME) -> None:
    """Compile a template twice through `env` with a cache of its own: the first compile is
    stored, the second one loaded, and both are the code Jinja compiled."""
    directory = tempfile.mkdtemp(prefix="template-cache-check-")
    before = os.environ.get(TEMPLATE_CACHE_ENV)
    os.environ[TEMPLATE_CACHE_ENV] = directory
    try:
        source = "{{ (numbers | sort | join(',')) ~ ' ' ~ who | upper }}"
        first = env.compile(source)
        store = _STORES[directory]
        if len(store.memory) != 1 or len(os.listdir(directory)) != 1:
            raise AssertionError(f"not stored: {len(store.memory)} in memory")
        store.memory.clear()
        second = env.compile(source)
        if first != second or len(store.memory) != 1:
            raise AssertionError("the stored code is not the code Jinja compiled")
        if guard.broken(name):
            raise AssertionError("the cache failed while checking")
    finally:
        _STORES.pop(directory, None)
        shutil.rmtree(directory, ignore_errors=True)
        if before is None:
            os.environ.pop(TEMPLATE_CACHE_ENV, None)
        else:
            os.environ[TEMPLATE_CACHE_ENV] = before


class Store:
    """The directory of compiled templates (one marshal file per key), and this process's
    copies of the ones it loaded."""

    def __init__(self, directory: str, signature: Signature, name: str) -> None:
        """`signature`: the environment's compile settings that are not Jinja's own; `name`:
        the patch (for the guard)."""
        import ansible.release
        import jinja2

        self.directory = directory
        self.signature = signature
        self.name = name
        self.stamp = (sys.version, jinja2.__version__, ansible.release.__version__)
        self.memory: dict[str, tuple[Deps, types.CodeType]] = {}

    def key(self, env: Any, what: tuple[Any, ...], source: str) -> str:
        """What the code Jinja compiles from `source` in `env` depends on, but the filters."""
        autoescape = env.autoescape
        signature = (
            self.stamp,
            what,
            f"{type(env).__module__}.{type(env).__qualname__}",
            self.signature(env),
            env.is_async,
            env.optimized,
            tuple(sorted(env.extensions)),
            autoescape if isinstance(autoescape, bool) else "callable",
            getattr(env.finalize, "__qualname__", repr(env.finalize)),
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
        if guard.broken(self.name):  # the filters it used were not all noted
            return
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


def recording(compile_: Callable[[], Any]) -> tuple[Any, Deps]:
    """Run a compile and note the filters and tests it looked up."""
    outer = getattr(_local, "deps", None)
    deps: Deps = []
    _local.deps = deps
    try:
        result = compile_()
    finally:
        _local.deps = outer
    return result, deps


def record_lookups(intercept: Any, loader_attribute: str, name: str = NAME) -> None:
    """Jinja's compiler looks each filter and test up with `.get` (and decides then how to
    pass it its context): note each lookup made while a compile is recorded."""
    plain_get = intercept.get

    def get(self: Any, key: str, default: Any = None) -> Any:
        value = plain_get(self, key, default)
        deps = getattr(_local, "deps", None)
        if deps is not None and not guard.broken(name):
            try:
                kind = getattr(self, loader_attribute).type
            except Exception as err:  # the compile goes on; its code is not stored
                guard.failed(name, err)
            else:
                deps.append((kind, key, _passed(value)))
        return value

    intercept.get = get


_GONE = "<failed>"  # a filter or test whose look-up fails now: compiled again (Jinja reports it)


def _lookup(env: Any, kind: str, name: str) -> str | None:
    plugins = env.filters if kind == "filter" else env.tests
    try:
        return _passed(plugins.get(name))
    except Exception:  # Ansible's own error (2.15-2.18: a filter it cannot load any more)
        return _GONE


def _passed(value: Any) -> str | None:
    """None for a missing filter or test, else how Jinja passes it its context ("" for not)."""
    if value is None:
        return None
    passed = getattr(value, "jinja_pass_arg", None)
    return passed.name if passed is not None else ""
