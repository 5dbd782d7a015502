"""Module jobs forked from the one warm server that also holds Ansible's controller side.

The warm server preloads what module jobs import (`ansible.module_utils`, `kubernetes`, ...)
first, then the controller (`ansible-playbook`'s machinery) for playbook jobs: one process
instead of two, the common imports held once. Importing the controller changes a few things
in the shared `ansible.module_utils` that a module must not see; a module job undoes them
before it runs (`become_target`), as a module's own Python would never have had them:

- (2.19 on) `ansible.module_utils._internal.is_controller` (set by `ansible._internal`): JSON
  encoding, warnings and deprecations take their module-side paths when it is False;
- (2.19 on) the traceback switch `ansible.utils.display` installs in
  `module_utils._internal._traceback`;
- (every line) the controller's collection finder (on `sys.meta_path` and `sys.path_hooks`) and any
  `ansible_collections` modules: a module imports its collection's code from its own
  AnsiballZ payload.

And one thing a module's own Python would have that a module job lacks: its `ansible` package
is the server's (site-packages), so what the payload adds to it (a role's `library/` module,
`ansible.legacy.NAME` or `ansible.modules.NAME`; a role's `module_utils/` file) is not found
there. `become_target` lets such names be found in the payload (`_PayloadAnsible`, asked last).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_STATE: dict[str, Any] = {}


def remember() -> None:
    """Called after the module preload, before the controller's: that the module kind is served
    (the finder's type, to remove it in a job)."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    _STATE["finder_type"] = _AnsibleCollectionFinder
    _STATE["site"] = frozenset(sys.path)  # the server's own entries (not a payload's)


def remember_flags() -> None:
    """2.19 on, after the module preload: the module-side traceback switch."""
    from ansible.module_utils import _internal
    from ansible.module_utils._internal import _traceback

    if not hasattr(_internal, "is_controller"):
        raise AssertionError("ansible.module_utils._internal.is_controller")
    _STATE["traceback"] = _traceback._is_traceback_enabled


def seal() -> None:
    """Called once everything is preloaded: whether the controller was (then a module job has
    something to undo), and which `ansible_collections` modules it imported (listed here once
    rather than in every job)."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    _STATE["controller"] = AnsibleCollectionConfig.collection_finder is not None
    _STATE["collections"] = [n for n in sys.modules if n.partition(".")[0] == "ansible_collections"]


def check() -> None:
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if not hasattr(AnsibleCollectionConfig, "_collection_finder"):
        raise AssertionError("AnsibleCollectionConfig._collection_finder")
    if _STATE.get("controller"):
        finder_type = _STATE["finder_type"]
        if not any(isinstance(f, finder_type) for f in sys.meta_path):
            raise AssertionError("the controller's collection finder is not on sys.meta_path")
        if not any(isinstance(getattr(h, "__self__", None), finder_type) for h in sys.path_hooks):
            raise AssertionError("the controller's collection finder has no path hook")


def check_flags() -> None:
    from ansible.module_utils import _internal
    from ansible.module_utils._internal import _traceback

    if _STATE.get("controller") and _internal.is_controller is not True:
        raise AssertionError("is_controller is not set by the controller")
    if not callable(_traceback._is_traceback_enabled) or not callable(_STATE["traceback"]):
        raise AssertionError("_traceback._is_traceback_enabled is not a function")


class _PayloadAnsible(importlib.abc.MetaPathFinder):
    """`ansible.*` modules the server's `ansible` package does not have, found where a fresh
    Python would have imported `ansible` from: the payload (a directory or zip on sys.path)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("ansible."):
            return None
        parent = fullname.rpartition(".")[0].split(".")
        for entry in sys.path:
            if not entry or entry in _STATE.get("site", ()):
                continue
            spec = importlib.machinery.PathFinder.find_spec(
                fullname, [os.path.join(entry, *parent)]
            )
            if spec is not None:
                return spec
        return None


def become_target() -> None:
    """In a module job: let the payload's own `ansible` modules be found, and undo what
    importing the controller changed (nothing to do when the server holds the module kind
    alone)."""
    sys.meta_path.append(_PayloadAnsible())
    if not _STATE.get("controller"):
        return
    if "traceback" in _STATE:
        from ansible.module_utils import _internal
        from ansible.module_utils._internal import _traceback

        _internal.is_controller = False
        _traceback._is_traceback_enabled = _STATE["traceback"]
    _remove_collection_finder(_STATE["finder_type"])
    # Out of sys.modules but still referenced: freeing them would touch (copy) many pages.
    _STATE["set_aside"] = [sys.modules.pop(name, None) for name in _STATE.get("collections", ())]


def _remove_collection_finder(finder_type: type) -> None:
    """As `_AnsibleCollectionFinder._remove`, without emptying `sys.path_importer_cache`
    (every later import would list the directories of `sys.path` again): only the entries
    the finder's path hook made go."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, finder_type)]
    ours = [h for h in sys.path_hooks if isinstance(getattr(h, "__self__", None), finder_type)]
    for hook in ours:
        sys.path_hooks.remove(hook)
    for path, importer in list(sys.path_importer_cache.items()):
        if importer is not None and type(importer).__module__ == finder_type.__module__:
            del sys.path_importer_cache[path]
    AnsibleCollectionConfig._collection_finder = None
