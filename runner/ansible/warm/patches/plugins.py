"""The plugins every run loads, found, imported and their documented options registered once in
the server (parsing plugin documentation is most of a short run's cost), inherited by every
job."""

from __future__ import annotations

from pathlib import Path

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
WARM_ALL = ("connection", "shell", "become", "filter", "test")


def warm() -> None:
    from ansible.plugins import loader

    loader.init_plugin_loader([])
    for kind, names in WARM_PLUGINS.items():
        plugin_loader = getattr(loader, f"{kind}_loader")
        for name in names:
            plugin_loader.get(name, class_only=True)
    for kind in WARM_ALL:
        list(getattr(loader, f"{kind}_loader").all(class_only=True))
    _prime_vars_plugins()
    # Every callback ansible-core ships (each run lists them all), one by one: not
    # ansible-runner's awx_display, which reads the run's artifact dir when it is imported.
    builtin = Path(loader.__file__).parent / "callback"
    for path in sorted(builtin.glob("*.py")):
        if not path.name.startswith("_"):
            loader.callback_loader.get(path.stem, class_only=True)


def _prime_vars_plugins() -> None:
    """The vars plugins as Ansible's first look-up leaves them. From 2.16 on, ansible-core keeps
    the enabled vars plugins' instances in the vars loader and fills that cache only when it
    finds the loader's paths unset (`_prime_vars_loader`): listing the classes alone (as the
    other kinds are warmed) set the paths and left the cache empty, so a job ran no vars plugin
    at all (host_group_vars: an inventory's group_vars/ and host_vars/ were ignored)."""
    from ansible.vars import plugins

    prime = getattr(plugins, "_prime_vars_loader", None)
    if prime is not None:  # 2.16 and later
        prime()
    # 2.15 lists the vars plugins on every look-up (`vars_loader.all()`): nothing to keep


def check() -> None:
    import ansible.constants as C
    from ansible.plugins.loader import vars_loader

    cache = getattr(vars_loader, "_plugin_instance_cache", None)
    if cache is None:  # 2.15
        return
    primed = {name.rpartition(".")[2] for name in cache}
    enabled = {str(name).rpartition(".")[2] for name in C.VARIABLE_PLUGINS_ENABLED}
    if "host_group_vars" in enabled and "host_group_vars" not in primed:
        raise AssertionError(f"host_group_vars is enabled but not primed: {sorted(cache)}")
