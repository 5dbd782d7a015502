"""What the fork server imports and warms once, before it forks jobs, with the registry's
patches installed in the phases the registry gives them (`apply.install_phase`: in their order,
only those verified on the running line). Where each phase falls between the imports is here;
which patches it installs, and in which order, is the registry's."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import nullcontext

from runner.ansible.warm.patches import apply, routingmeta
from runner.ansible.warm.patches.deferred import deferring

PRELOAD = {
    "playbook": (
        "ansible.cli.playbook",
        "ansible.executor.playbook_executor",
        "ansible.executor.task_queue_manager",
        "ansible.executor.process.worker",
        "ansible.playbook",
        "ansible.template",
        "ansible.vars.manager",
        "ansible.inventory.manager",
        "ansible.plugins.loader",
        "ansible.plugins.connection.local",
        "ansible.plugins.action.normal",
        "ansible.plugins.strategy.linear",
        "ansible.executor.module_common",
    ),
    # Not kubernetes.core's module_utils: importing any ansible_collections package here would
    # hide the other collections inside each module's AnsiballZ payload (collectionutils.py
    # imports those and takes them out of sys.modules again).
    "module": (
        "ansible.module_utils.basic",
        "ansible.module_utils.common.text.converters",
        "yaml",
        "jinja2",
        "kubernetes",
        "kubernetes.client",
        "kubernetes.config",
        "kubernetes.dynamic",
        "kubernetes.dynamic.discovery",
        "urllib3",
        "requests",
        # What kubernetes.core's k8s modules import besides their collection, from ansible-core
        # and site-packages (never from the payload): with the email package underneath, ~5 ms
        # of every such module job.
        "ansible.module_utils.urls",
        "jsonpatch",
    ),
}


# Imported by the playbook kind's modules with a plain `import`, used by hardly any run: made
# at import, run by the first job that uses them (deferred.py). curses: ansible's Display, for
# prompts only (~0.4 MB with libtinfo); tomllib: the toml inventory plugin, for a .toml
# inventory only. Each with the module that must be there for it to import (curses needs its
# C extension, which a Python may lack: then it is imported, and fails, as usual).
DEFERRED = {"playbook": {"curses": "_curses", "tomllib": "tomllib"}}


def preload_for(kind: str) -> None:
    deferred = [
        name
        for name, needs in DEFERRED.get(kind, {}).items()
        if name not in sys.modules and importlib.util.find_spec(needs) is not None
    ]
    with deferring(deferred):
        _preload(kind)


def _preload(kind: str) -> None:
    import importlib

    if kind == "module":
        apply.install_phase("module-first")
    for name in PRELOAD[kind]:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional module only costs speed
            print(f"forkserver[{kind}]: could not preload {name}: {err}", file=sys.stderr)
    if kind == "module":
        apply.install_phase("module-imported")
    if kind == "playbook":
        apply.install_phase("playbook-imported")
        compacting = routingmeta.compacted() if apply.installed("routing-meta") else nullcontext()
        with compacting:
            apply.install_phase("playbook-warmup")
        apply.install_phase("playbook-warmed")
