"""Compiled collection code for the module fork server's jobs (zipimport's compile, cached)."""

from __future__ import annotations

import hashlib
import types
from collections.abc import Mapping
from pathlib import Path

from runner.ansible import collections_path

# --- compiled collection code for module jobs ------------------------------------------------
#
# A module's AnsiballZ payload carries its collection's Python files (the module and its
# module_utils) in a zip that Python imports with zipimport, which compiles every file from
# source in every job (a kubernetes.core.k8s job: ~60 files, ~40 ms of CPU). The module server
# compiles the collections it can see once; a job's zipimport gets the compiled code of a file
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


def precompile_collections(roots: list[Path]) -> int:
    """Compile every module and module_util of the collections under `roots`; returns how many."""
    patterns = ("*/*/plugins/module_utils/**/*.py", "*/*/plugins/modules/*.py")
    for root in roots:
        for pattern in patterns:
            for path in (root / "ansible_collections").glob(pattern):
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


def install_code_cache() -> None:
    import zipimport

    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None:  # another Python's zipimport: compile as usual
        return

    def cached(pathname: str, source: bytes) -> types.CodeType:
        code = _CODE_CACHE.get(source_key(source))
        if code is None:
            return compile_source(pathname, source)  # type: ignore[no-any-return]
        return with_filename(code, pathname)

    zipimport._compile_source = cached  # type: ignore[attr-defined]


# --- a pipelined module's AnsiballZ wrapper ---------------------------------------------------
#
# With pipelining a module job gets its AnsiballZ wrapper on stdin: Ansible's wrapper code, then
# `_ansiballz_main(...)` with the module's arguments and, last, `zip_data='<base64 payload>'`, a
# literal of ~200 KB whose compilation is most of the ~3 ms that compiling the wrapper takes.
# The wrapper is compiled with a short placeholder in that literal's place, and the payload put
# into the compiled code's constants instead: the same code object but for the column offsets
# recorded for that one line, without tokenizing the payload. A wrapper of another shape is
# compiled as it is. Like `python -` reading stdin, the compile inherits no __future__ flags.

_HEAD = "\nzip_data='"
_TAIL = "',\n)\n"
_PLACEHOLDER = "operator-runner:zip_data"


def compile_wrapper(source: str, filename: str) -> types.CodeType:
    """compile(source, filename, "exec"), without tokenizing an AnsiballZ payload literal."""
    start = source.rfind(_HEAD) + len(_HEAD)
    end = len(source.rstrip("\n")) + 1 - len(_TAIL)
    literal = source[start:end]
    if (
        start < len(_HEAD)
        or end < start
        or source[end : end + len(_TAIL)] != _TAIL
        or any(char in literal for char in ("\\", "'", "\n"))  # its text is not its value
        or _PLACEHOLDER in source
    ):
        return compile(source, filename, "exec", dont_inherit=True)
    short = source[:start] + _PLACEHOLDER + source[end:]
    code = compile(short, filename, "exec", dont_inherit=True)
    consts = list(code.co_consts)
    if consts.count(_PLACEHOLDER) != 1:
        return compile(source, filename, "exec", dont_inherit=True)
    consts[consts.index(_PLACEHOLDER)] = literal
    return code.replace(co_consts=tuple(consts))
