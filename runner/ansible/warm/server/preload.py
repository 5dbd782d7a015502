"""What the fork servers import and warm once, before they fork jobs."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from runner.ansible.warm.patches import collectionutils, jinjamisses, routingmeta
from runner.ansible.warm.server.codecache import (
    collection_roots,
    install_code_cache,
    precompile_collections,
)
from runner.ansible.warm.server.deferred import deferring

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
        try:
            count = precompile_collections(collection_roots(os.environ, sys.path))
        except Exception as err:  # only costs speed
            print(f"forkserver[{kind}]: could not precompile collections: {err}", file=sys.stderr)
        else:
            if count:
                install_code_cache()

    if kind == "module":
        from runner.ansible.warm.server import lazykube

        try:
            lazykube.install()  # kubernetes.client's generated classes imported when used
        except Exception as err:  # the usual import follows
            print(f"forkserver[{kind}]: kubernetes.client imported in full: {err}", file=sys.stderr)
    for name in PRELOAD[kind]:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional module only costs speed
            print(f"forkserver[{kind}]: could not preload {name}: {err}", file=sys.stderr)
    if kind == "module":
        try:
            collectionutils.preload(collection_roots(os.environ, sys.path))
        except Exception as err:  # only costs speed
            print(
                f"forkserver[{kind}]: collections' module_utils not preloaded: {err}",
                file=sys.stderr,
            )
    if kind == "playbook":
        try:
            cache_default_templates()
        except Exception as err:  # only costs speed
            print(
                f"forkserver[{kind}]: templated defaults compiled per read: {err}", file=sys.stderr
            )
        try:
            with routingmeta.compacted():
                _warm_plugins()
        except Exception as err:
            print(f"forkserver[{kind}]: could not warm the plugin loaders: {err}", file=sys.stderr)
        try:
            jinjamisses.install()
            jinjamisses.warm()
        except Exception as err:  # only costs speed
            print(
                f"forkserver[{kind}]: Jinja's built-ins looked up per task: {err}", file=sys.stderr
            )


# Plugins every run loads: found, imported and their documented options registered once here
# (parsing plugin documentation is most of a short run's cost), inherited by every job.
WARM_PLUGINS = {
    "inventory": ("host_list", "script", "auto", "yaml", "ini", "toml"),
    "connection": ("local",),
    "shell": ("sh",),
    "become": ("sudo",),
    "strategy": ("linear",),
    "action": ("normal", "debug", "command", "set_fact", "include_role", "fail", "assert"),
    "cache": ("jsonfile", "memory"),
    "lookup": ("env", "file", "template"),
}
# Listed in full by every run (PlaybookExecutor.run, TaskQueueManager, the vars manager).
WARM_ALL = ("connection", "shell", "become", "vars", "filter", "test")


def _warm_plugins() -> None:
    from ansible.plugins import loader

    loader.init_plugin_loader([])
    for kind, names in WARM_PLUGINS.items():
        plugin_loader = getattr(loader, f"{kind}_loader")
        for name in names:
            plugin_loader.get(name, class_only=True)
    for kind in WARM_ALL:
        list(getattr(loader, f"{kind}_loader").all(class_only=True))
    # Every callback ansible-core ships (each run lists them all), one by one: not
    # ansible-runner's awx_display, which reads the run's artifact dir when it is imported.
    builtin = Path(loader.__file__).parent / "callback"
    for path in sorted(builtin.glob("*.py")):
        if not path.name.startswith("_"):
            loader.callback_loader.get(path.stem, class_only=True)


def cache_default_templates() -> None:
    """Ansible's ConfigManager renders a templated default (`{{ ANSIBLE_HOME ~ "/plugins" }}`)
    by compiling it with a new Jinja environment on every read: ~60 reads per run (the path
    settings a job refreshes, the plugins it loads), most of them such compilations. Each
    source is compiled once here (the server's reads fill the cache its jobs inherit); every
    read still renders it with the variables of that read. Anything unusual goes to Ansible's
    own code, which also records a failure as before."""
    from ansible.config.manager import ConfigManager
    from jinja2.nativetypes import NativeEnvironment

    original = ConfigManager.template_default
    compiled: dict[str, Any] = {}

    def template_default(
        self: ConfigManager, value: Any, variables: Any, key_name: str = "<unknown>"
    ) -> Any:
        if (
            isinstance(value, str)
            and value.startswith("{{")
            and value.endswith("}}")
            and variables is not None
        ):
            try:
                template = compiled.get(value)
                if template is None:
                    template = compiled[value] = NativeEnvironment().from_string(value)
                return template.render(variables)
            except Exception:  # Ansible's own path reports it
                pass
        return original(self, value, variables, key_name)

    ConfigManager.template_default = template_default
    # The core settings were read when ansible.constants was imported, before this: their
    # templated defaults are compiled now (the plugins' as the plugin loaders are warmed).
    import ansible.constants as C

    for definition in C.config.get_configuration_definitions().values():
        default = definition.get("default")
        if isinstance(default, str) and default.startswith("{{") and default.endswith("}}"):
            compiled.setdefault(default, NativeEnvironment().from_string(default))
