"""Compiled collection code for the module fork server's jobs (zipimport's compile, cached)."""

from __future__ import annotations

import hashlib
import types
from collections.abc import Iterable, Mapping
from pathlib import Path

from runner.ansible import collections_path
from runner.ansible.warm.patches import guard

# --- compiled collection code for module jobs ------------------------------------------------
#
# A module's AnsiballZ payload carries its collection's Python files (the module and its
# module_utils) in a zip that Python imports with zipimport, which compiles every file from
# source in every job (a kubernetes.core.k8s job: ~60 files, ~40 ms of CPU). The module server
# compiles those of `COLLECTIONS` once; a job's zipimport gets the compiled code of a file
# whose bytes are identical (looked up by their SHA-256), with the zip's file name put in, and
# compiles anything else itself, as before. The payload's files stay the ones that run (the
# module_utils collectionutils.py keeps are used only where the payload's bytes are the same).

_CODE_CACHE: dict[bytes, types.CodeType] = {}


def collection_roots(env: Mapping[str, str], sys_path: list[str]) -> list[Path]:
    """The search path's directories that hold an `ansible_collections` tree, once each."""
    roots: list[Path] = []
    for root in collections_path.collection_roots(env, sys_path):
        if root.name == "ansible_collections":
            root = root.parent
        if (root / "ansible_collections").is_dir() and root not in roots:
            roots.append(root)
    return roots


def source_key(source: bytes) -> bytes:
    return hashlib.sha256(source).digest()


#: The collections whose modules and module_utils are compiled once: those operators' roles
#: run in nearly every task. Not every collection the server can see: a virtualenv with the
#: `ansible` community package holds ~100 of them (~10,000 files, 214 MB of bytecode), which
#: took 90 % of the server's start-up (~20 s on two busy CPUs) and would stay resident.
COLLECTIONS = ("kubernetes.core", "operator_sdk.util")


def precompile_collections(roots: list[Path], collections: Iterable[str] = COLLECTIONS) -> int:
    """Compile every module and module_util of `collections` under `roots`; how many in all."""
    patterns = ("plugins/module_utils/**/*.py", "plugins/modules/*.py")
    for root in roots:
        for collection in collections:
            base = root.joinpath("ansible_collections", *collection.split("."))
            for pattern in patterns:
                for path in base.glob(pattern):
                    try:
                        source = path.read_bytes()
                        code = compile(_normalize(source), str(path), "exec", dont_inherit=True)
                    except (OSError, SyntaxError, ValueError):
                        continue
                    _CODE_CACHE[source_key(source)] = code
    return len(_CODE_CACHE)


def _normalize(source: bytes) -> bytes:  # as zipimport does before compiling
    return source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(
        with_filename(const, filename) if isinstance(const, types.CodeType) else const
        for const in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def install() -> bool:
    """Compile the collections the module server can see, and let zipimport use that code."""
    import os
    import sys

    if not precompile_collections(collection_roots(os.environ, sys.path)):
        return False
    install_code_cache()
    return True


def install_code_cache() -> None:
    import zipimport

    compile_source = zipimport._compile_source  # type: ignore[attr-defined]
    _PLAIN_COMPILE[:] = [compile_source]

    def cached(pathname: str, source: bytes) -> types.CodeType:
        if guard.broken(NAME):
            return compile_source(pathname, source)  # type: ignore[no-any-return]
        try:
            code = _CODE_CACHE.get(source_key(source))
            if code is not None:
                return with_filename(code, pathname)
        except Exception as err:  # ours: zipimport's own compile from now on
            guard.failed(NAME, err)
        return compile_source(pathname, source)  # type: ignore[no-any-return]

    zipimport._compile_source = cached  # type: ignore[attr-defined]


def check() -> None:
    import zipimport

    source = b"def where():\n    return 1\n"
    code = compile(source, "/x.py", "exec", dont_inherit=True)
    _CODE_CACHE[source_key(source)] = code
    try:
        got = zipimport._compile_source("/payload.zip/x.py", source)  # type: ignore[attr-defined]
    finally:
        del _CODE_CACHE[source_key(source)]
    if got.co_filename != "/payload.zip/x.py" or got.co_code != code.co_code:
        raise AssertionError("zipimport's compile does not use the compiled collections")


_PLAIN_COMPILE: list[object] = []
NAME = "code-cache"


# --- a pipelined module's AnsiballZ wrapper ---------------------------------------------------
#
# With pipelining a module job gets its AnsiballZ wrapper on stdin: Ansible's wrapper code with
# the module's zipped payload as one base64 literal of ~200 KB, whose compilation is most of the
# ~3 ms that compiling the wrapper takes. The wrapper is compiled with a short placeholder in
# that literal's place, and the payload put into the compiled code's constants instead: the
# same code objects but for the column offsets recorded for that one line, without tokenizing
# the payload. The literal is `zip_data='...'` in the call that ends the wrapper (2.19 on),
# `ZIPDATA = '...'` (2.16 to 2.18) or `ZIPDATA = """..."""` (2.15) in `_ansiballz_main`. A
# wrapper of another shape is compiled as it is. Like `python -` reading stdin, the compile
# inherits no __future__ flags.

_LITERALS = (("\nzip_data='", "'"), ("ZIPDATA = '", "'"), ('ZIPDATA = """', '"""'))
_PLACEHOLDER = "operator-runner:zip_data"
WRAPPER = "wrapper-compile"


def compile_wrapper(source: str, filename: str) -> types.CodeType:
    """compile(source, filename, "exec"), without tokenizing an AnsiballZ payload literal."""
    try:
        code = None if guard.broken(WRAPPER) else _compile_without_literal(source, filename)
    except Exception as err:  # ours: Python's compile from now on
        guard.failed(WRAPPER, err)
        code = None
    return code or compile(source, filename, "exec", dont_inherit=True)


def _compile_without_literal(source: str, filename: str) -> types.CodeType | None:
    for head, quote in _LITERALS:
        found = source.rfind(head)
        if found < 0:
            continue
        start = found + len(head)
        end = source.find(quote, start)
        literal = source[start:end]
        if (
            end < 0
            or len(literal) < 1024
            or any(char in literal for char in ("\\", "'", '"', "\n"))  # its text is not its value
            or _PLACEHOLDER in source
        ):
            return None
        code = compile(
            source[:start] + _PLACEHOLDER + source[end:], filename, "exec", dont_inherit=True
        )
        replaced, count = _replace_constant(code, _PLACEHOLDER, literal)
        return replaced if count == 1 else None
    return None


def _replace_constant(code: types.CodeType, old: str, new: str) -> tuple[types.CodeType, int]:
    """`code` with the constant `old` replaced by `new` (in nested code objects too), and how
    many times it was."""
    count = 0
    consts = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            const, inner = _replace_constant(const, old, new)
            count += inner
        elif isinstance(const, str) and const == old:
            const, count = new, count + 1
        consts.append(const)
    return (code.replace(co_consts=tuple(consts)) if count else code), count


def install_wrapper() -> None:
    """Nothing to install: module jobs compile their wrapper with `compile_wrapper`."""


def check_wrapper() -> None:
    """This line's AnsiballZ wrapper compiles to the same code without its payload literal."""
    import base64

    payload = base64.b64encode(bytes(range(256)) * 8).decode()
    source = sample_wrapper(payload)
    code = _compile_without_literal(source, "<stdin>")
    if code is None:
        raise AssertionError("this line's AnsiballZ wrapper has another shape")
    if constants(code) != constants(compile(source, "<stdin>", "exec", dont_inherit=True)):
        raise AssertionError("the wrapper compiles to other code")


def sample_wrapper(zip_data: str) -> str:
    """A pipelined module's wrapper, built as the running ansible-core builds it."""
    import datetime
    import json

    from ansible.executor import module_common

    date_time = datetime.datetime(2026, 12, 3, 17, 0, 0)
    decoys = "zip_data='y',\nZIPDATA = 'z'"  # what a literal of the payload's shape looks like
    params = json.dumps({"ANSIBLE_MODULE_ARGS": {"kind": "Pod", "x": decoys}})
    if hasattr(module_common, "_get_ansiballz_code"):  # 2.19 on
        args = dict(
            ansible_module="k8s_info",
            module_fqn="ansible_collections.kubernetes.core.plugins.modules.k8s_info",
            profile="legacy",
            date_time=date_time,
            rlimit_nofile=0,
            params=params,
            extensions={},
            zip_data=zip_data,
        )
        args_string = "\n".join(f"{key}={value!r}," for key, value in args.items())
        code = module_common._get_ansiballz_code("#!/usr/bin/python")
        return f'{code}\n\n\nif __name__ == "__main__":\n    _ansiballz_main(\n{args_string}\n)\n'
    template: str = module_common.ACTIVE_ANSIBALLZ_TEMPLATE
    values = dict(
        zipdata=zip_data,
        ansible_module="k8s_info",
        module_fqn="ansible_collections.kubernetes.core.plugins.modules.k8s_info",
        params=repr(params),
        shebang="#!/usr/bin/python",
        coding=module_common.ENCODING_STRING,
        date_time=tuple(date_time.timetuple())[:6],  # 2.16 to 2.18
        coverage="",
        rlimit="",
        **{unit: getattr(date_time, unit) for unit in ("year", "month", "day")},  # 2.15
        **{unit: getattr(date_time, unit) for unit in ("hour", "minute", "second")},
    )
    return template % values


def constants(code: object) -> list[object]:
    """Every constant of a code object and the code objects inside it, with their bytecode."""
    assert isinstance(code, types.CodeType)
    found: list[object] = [code.co_code, code.co_names, code.co_flags]
    for const in code.co_consts:
        found.extend(constants(const) if isinstance(const, types.CodeType) else [const])
    return found
