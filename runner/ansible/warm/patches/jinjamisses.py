"""Jinja's own filters and tests, looked up once per server instead of once per task worker.

Ansible looks every filter and test a template uses up in its plugin loaders before it falls
back to Jinja's built-ins (`first`, `list`, `map`, `selectattr`, `defined`, `equalto`, ...).
For a short name that is no Ansible plugin, `Jinja2Loader.get_with_context` lists the modules
of ansible-core's own filter (or test) package and loads each of them to look for it: ~1 ms per
name, in every task worker, because each task runs in a worker forked for it alone and
ansible-core remembers nothing of the search.

A short name's answer depends only on the loader's non-collection plugins (ansible-core's and
those of the configured and added plugin paths, which Ansible itself caches in
`_cached_non_collection_wrappers`, emptied whenever a path is added) and on ansible-core's own
`ansible.builtin` package and routing, fixed for an installation. So a miss is remembered
together with that cache: when Ansible replaces the cache (a role with `filter_plugins/` was
loaded), the remembered misses go with it. Found plugins, redirects and errors are never
remembered: they take Ansible's own path every time, with its warnings. The fork server looks
Jinja's built-in names up once before it forks (`warm`), so its jobs and their workers inherit
the answers.
"""

from __future__ import annotations

from typing import Any

from runner.ansible.warm.patches import guard

NAME = "jinja-misses"
_ATTRIBUTE = "_operator_runner_misses"


def install() -> None:
    """Remember the short names a Jinja plugin loader did not find (see the module doc), and
    look Jinja's built-in names up once (`warm`)."""
    from ansible.plugins.loader import Jinja2Loader

    if getattr(Jinja2Loader, _ATTRIBUTE, False):
        return
    plain_get = Jinja2Loader.get

    def get(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        short = name.removeprefix("ansible.legacy.")
        if "." in short or guard.broken(NAME):
            return plain_get(self, name, *args, **kwargs)
        try:
            misses = _misses(self)
        except Exception as err:  # ours: Ansible's look-up from now on
            guard.failed(NAME, err)
            return plain_get(self, name, *args, **kwargs)
        if short in misses:
            return None
        found = plain_get(self, name, *args, **kwargs)  # Ansible's errors, as before
        if found is None:
            misses.add(short)
        return found

    Jinja2Loader.get = get
    setattr(Jinja2Loader, _ATTRIBUTE, True)
    warm()


def _misses(loader: Any) -> set[str]:
    """The misses that belong to the loader's current non-collection plugin cache."""
    wrappers = loader._cached_non_collection_wrappers
    remembered = loader.__dict__.get(_ATTRIBUTE)
    if remembered is None or remembered[0] is not wrappers:
        remembered = (wrappers, set())
        loader.__dict__[_ATTRIBUTE] = remembered
    misses: set[str] = remembered[1]
    return misses


def warm() -> None:
    """Look Jinja's built-in filter and test names up once (in the server, before it forks)."""
    from ansible.plugins.loader import filter_loader, test_loader
    from jinja2.filters import FILTERS
    from jinja2.tests import TESTS

    for loader, names in ((filter_loader, FILTERS), (test_loader, TESTS)):
        _misses(loader)  # our own look-up's errors are the install's, never swallowed below
        for name in names:
            try:
                loader.get(name)
            except Exception:  # Ansible's: it reports it when a template uses the name
                continue


def check() -> None:
    from ansible.plugins.loader import filter_loader, test_loader

    if guard.broken(NAME):
        raise AssertionError("the look-up failed while warming")
    for loader, name in ((filter_loader, "first"), (test_loader, "equalto")):
        if loader.get(name) is not None or name not in _misses(loader):
            raise AssertionError(f"Jinja's {name!r} is not remembered as a miss")
    if filter_loader.get("to_json") is None:
        raise AssertionError("Ansible's to_json filter is not found")
