"""The registry's patches installed and checked in the fork server, and its start-up report.

`start` reads the ansible-core version and refuses a line the core is not verified on;
`install_phase(phase)` is called by the preload and the server where that phase falls (the
order of the imports matters) and installs the registry's patches of the phase, in their
order, each only when it is verified on the running line (`install` refuses a patch outside its
phase); `check_all` runs the installed patches' checks. Any exception is a `PatchFailed` naming
the patch: the server reports it (`report`, read by the operator's `WarmPool`: with the patches
each phase installed) and exits, and the operator takes the plain path for good.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runner.ansible.warm.jobenv import TEST_RENAME_ENV
from runner.ansible.warm.patches import registry
from runner.ansible.warm.patches.registry import BY_NAME, CORE_LINES, line_of


class PatchFailed(Exception):
    def __init__(self, patch: str, error: str) -> None:
        super().__init__(f"{patch}: {error}")
        self.patch = patch
        self.error = error


@dataclass
class Applied:
    version: str
    line: str
    kinds: frozenset[str]
    installed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # not verified on this line
    unused: list[str] = field(default_factory=list)  # not needed here (said its install)
    phase: str = ""  # the phase being installed
    phases: dict[str, list[str]] = field(default_factory=dict)  # phase -> installed, in order


_APPLIED: list[Applied] = []


def state() -> Applied:
    if not _APPLIED:
        raise RuntimeError("apply.start() was not called")
    return _APPLIED[0]


def start(kinds: Iterable[str], version: str | None = None) -> Applied:
    """The running ansible-core's version and line; `PatchFailed("core", ...)` on a line the
    core is not verified on."""
    if version is None:
        from ansible.release import __version__

        version = str(__version__)
    applied = Applied(version, line_of(version), frozenset(kinds))
    _APPLIED[:] = [applied]
    if applied.line not in CORE_LINES:
        raise PatchFailed(
            "core",
            f"ansible-core {version} is not among the lines the warm executor is verified on "
            f"({CORE_LINES[0]} to {CORE_LINES[-1]})",
        )
    rename_for_test("server")
    return applied


def resolve(where: str) -> Callable[[], Any]:
    module, _, name = where.partition(":")
    function: Callable[[], Any] = getattr(importlib.import_module(module), name)
    return function


def find_target(target: str) -> None:
    """Raise when `target` ("module:Owner.attribute") is not there, the attribute defined on
    that very owner (not inherited from a base class ansible-core moved it to), or is not
    written that way."""
    if not registry.TARGET.match(target):
        raise ValueError(f"{target!r} is not a target (module:Owner.attribute)")
    module, _, path = target.partition(":")
    owner: Any = importlib.import_module(module)
    *parents, attribute = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    there = attribute in vars(owner) if isinstance(owner, type) else hasattr(owner, attribute)
    if not there:
        raise AttributeError(f"{target} is not there")


def install_phase(phase: str) -> list[str]:
    """Install the registry's patches of `phase`, in their order (module doc); the names of
    those installed."""
    applied = state()
    applied.phase = phase
    try:
        return [patch.name for patch in registry.in_phase(phase) if install(patch.name)]
    finally:
        applied.phase = ""


def install(name: str) -> bool:
    """Install patch `name` (in its phase: `install_phase`) if it is verified on the running
    line and its kind is served; False when it is not (or it says it does not apply here)."""
    applied, patch = state(), BY_NAME[name]
    if applied.phase != patch.phase:
        raise PatchFailed(name, f"install: outside its phase {patch.phase} ({applied.phase!r})")
    if patch.kind != "any" and patch.kind not in applied.kinds:
        return False
    if applied.line not in patch.verified_on:
        if applied.line not in patch.absent_on:
            applied.skipped.append(name)
        return False
    try:
        for target in patch.targets_on(applied.line):
            find_target(target)
        done = resolve(patch.install)()
    except Exception as err:
        raise PatchFailed(name, f"install: {type(err).__name__}: {err}") from err
    if done is False:
        applied.unused.append(name)
        return False
    applied.installed.append(name)
    applied.phases.setdefault(patch.phase, []).append(name)
    return True


def installed(name: str) -> bool:
    return bool(_APPLIED) and name in _APPLIED[0].installed


def check(name: str) -> None:
    try:
        resolve(BY_NAME[name].check)()
    except Exception as err:
        raise PatchFailed(name, f"check: {type(err).__name__}: {err}") from err


def check_all() -> None:
    for name in state().installed:
        check(name)


def report(path: str, failure: PatchFailed | None) -> None:
    """The start-up report the operator reads (written before the sockets appear)."""
    applied = _APPLIED[0] if _APPLIED else None
    body: dict[str, Any] = {
        "ansible": applied.version if applied else None,
        "line": applied.line if applied else None,
        "installed": applied.installed if applied else [],
        "skipped": applied.skipped if applied else [],
        "unused": applied.unused if applied else [],
        "phases": applied.phases if applied else {},
        "failed": {"patch": failure.patch, "error": failure.error} if failure else None,
    }
    partial = f"{path}.tmp"
    with open(partial, "w", encoding="utf-8") as file:
        json.dump(body, file)
    os.replace(partial, path)


def rename_for_test(phase: str, environ: dict[str, str] | None = None) -> None:
    """Test-only ($OPERATOR_RUNNER_WARM_TEST_RENAME=PHASE:MODULE:ATTRIBUTE): rename that
    attribute (to ATTRIBUTE_renamed) as an ansible-core release that renamed it would, in the
    server before the patches are installed (`server`) or in each job (`job`)."""
    spec = (environ if environ is not None else os.environ).get(TEST_RENAME_ENV, "")
    wanted, _, where = spec.partition(":")
    if wanted != phase or not where:
        return
    module, _, path = where.partition(":")
    owner: Any = importlib.import_module(module)
    *parents, attribute = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    setattr(owner, f"{attribute}_renamed", getattr(owner, attribute))
    delattr(owner, attribute)
