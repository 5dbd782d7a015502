"""Module jobs forked from the one warm server that also holds Ansible's controller side.

The warm server preloads what module jobs import (`ansible.module_utils`, `kubernetes`, ...)
first, then the controller (`ansible-playbook`'s machinery) for playbook jobs: one process
instead of two, the common imports held once. Importing the controller changes a few things
in the shared `ansible.module_utils` that a module must not see; a module job undoes them
before it runs (`become_target`), as a module's own Python would never have had them:

- `ansible.module_utils._internal.is_controller` (set by `ansible._internal`): JSON encoding,
  warnings and deprecations take their module-side paths when it is False;
- the traceback switch `ansible.utils.display` installs in `module_utils._internal._traceback`;
- the controller's collection finder (on `sys.meta_path` and `sys.path_hooks`) and any
  `ansible_collections` modules: a module imports its collection's code from its own
  AnsiballZ payload.
"""

from __future__ import annotations

import sys
from typing import Any

_STATE: dict[str, Any] = {}


def remember() -> None:
    """Called after the module preload, before the controller's: the module-side state."""
    try:
        from ansible.module_utils._internal import _traceback
    except ImportError:
        return
    _STATE["traceback"] = _traceback._is_traceback_enabled


def seal() -> None:
    """Called once everything is preloaded: which `ansible_collections` modules the controller
    imported (listed here once rather than in every job)."""
    _STATE["collections"] = [n for n in sys.modules if n.partition(".")[0] == "ansible_collections"]


def become_target() -> None:
    """In a module job: undo what importing the controller changed (nothing to do when the
    server holds the module kind alone)."""
    if "ansible._internal" not in sys.modules:
        return
    from ansible.module_utils import _internal
    from ansible.module_utils._internal import _traceback
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    _internal.is_controller = False
    if "traceback" in _STATE:
        _traceback._is_traceback_enabled = _STATE["traceback"]
    _remove_collection_finder(_AnsibleCollectionFinder)
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
