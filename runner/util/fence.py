"""The fence around another package's internals: one place per package, every patch registered.

The runner touches a few private internals of its dependencies, where their public API cannot do
what operator-sdk users expect (kopf's reactor: runner/app/source/kopf_import.py). Each such
package has one fence module, the only place the private-names check of `make lint`
(hack/private_names.py) lets touch its private names; there each patch is a `Patch`:

- its **targets**, `"module:attribute.path"`, each found before the patch is used;
- the package's **versions** it is verified on: release lines (`"1.45"` is 1.45.x), listed,
  never implied, so a release nobody tried is not patched;
- its **check**, run before it is used: the internal is as the patch expects (the keywords of a
  function it wraps, a field it reads), raising with what differs;
- its **install**, run when it is used, with what the user of the patch gives (a wrapper of
  the function it swaps), and idempotent (a second use changes nothing); None: the patch only
  reads an internal;
- what the operator does **without** it: the package's own behaviour, the fallback.

A patch is used only when the installed release is one of its versions, every target exists
and its check passes; otherwise the package is left as it is. `verify_all` (the manager, at
start-up) checks every patch of every fence and returns one warning per package that runs
without some of them, naming its version and what each missing patch costs.

The warm executor's patches of ansible-core have a registry of their own
(runner/ansible/warm/patches/registry.py): they are installed in the fork server's process, by
name, before it forks, and their failure switches to the plain executor.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Every fence created (one per foreign package), in the order their modules were imported.
FENCES: list[Fence] = []


class Unfit(Exception):
    """A patch's internal is not as the patch expects: says what differs."""


@dataclass(frozen=True)
class Patch:
    name: str
    targets: tuple[str, ...]  # "module:attribute.path", each found before it is used
    versions: tuple[str, ...]  # the package's release lines ("1.45") it is verified on
    check: Callable[[], None]  # raises (Unfit) when the internal is not as expected
    install: Callable[..., None] | None  # idempotent; None: it only reads an internal
    without: str  # what the operator does without it (the package's own behaviour)


def release_line(version: str) -> str:
    """ "1.45" for "1.45.2" (or "1.45.0rc1")."""
    major, _, rest = version.partition(".")
    minor = "".join(c for c in rest.partition(".")[0] if c.isdigit())
    return f"{major}.{minor}"


def resolve(target: str) -> object:
    """The object a target names (`module:attribute.path`); AttributeError or ImportError when
    it is not there."""
    module, _, path = target.partition(":")
    found: object = importlib.import_module(module)
    for name in filter(None, path.split(".")):
        found = getattr(found, name)
    return found


class Fence:
    """One foreign package's patches: each used only where it is verified and fits."""

    def __init__(
        self,
        package: str,
        patches: tuple[Patch, ...],
        version: str | None = None,
        *,
        register: bool = True,
    ) -> None:
        self.package = package
        self.patches = {patch.name: patch for patch in patches}
        self._version = version  # None: the installed distribution's
        self._refused: dict[str, str | None] = {}  # name -> why it is not used (None: used)
        if register:  # checked by `verify_all` (tests make fences of their own)
            FENCES.append(self)

    @property
    def version(self) -> str:
        if self._version is None:
            try:
                self._version = importlib.metadata.version(self.package)
            except importlib.metadata.PackageNotFoundError:
                self._version = "unknown"
        return self._version

    def verified(self, name: str) -> bool:
        """Whether the installed release is one the patch is verified on (nothing imported)."""
        return release_line(self.version) in self.patches[name].versions

    def refusal(self, name: str) -> str | None:
        """Why the patch is not used (checked once): None when it is."""
        if name not in self._refused:
            self._refused[name] = self._why_not(self.patches[name])
        return self._refused[name]

    def _why_not(self, patch: Patch) -> str | None:
        if not self.verified(patch.name):
            return f"not verified on {self.package} {self.version} (only on {_lines(patch)})"
        for target in patch.targets:
            try:
                resolve(target)
            except (ImportError, AttributeError) as err:
                return f"{target} is not there ({err})"
        try:
            patch.check()
        except Exception as err:  # whatever differs: the patch is not used
            return f"{type(err).__name__}: {err}" if not isinstance(err, Unfit) else str(err)
        return None

    def use(self, name: str, *args: Any) -> bool:
        """Install the patch (given `args`) when it is verified and fits; False: the package's
        own behaviour goes on (the warning of `verify_all` says so)."""
        if self.refusal(name) is not None:
            return False
        install = self.patches[name].install
        if install is not None:
            install(*args)
        return True

    def warning(self) -> str | None:
        """One line naming the version and every patch not used, with what it costs."""
        missing = [(name, why) for name in self.patches if (why := self.refusal(name))]
        if not missing:
            return None
        return f"{self.package} {self.version}: going without operator-runner's patches " + (
            "; ".join(f"{name} ({why}): {self.patches[name].without}" for name, why in missing)
        )


def verify_all() -> list[str]:
    """Check every patch of every fence imported (start-up): the warnings to log."""
    return [line for fence in FENCES if (line := fence.warning())]


def _lines(patch: Patch) -> str:
    return ", ".join(f"{line}.x" for line in patch.versions)
