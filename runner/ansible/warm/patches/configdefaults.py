"""Ansible's templated configuration defaults compiled once per server.

ansible-core's ConfigManager renders a templated default (`{{ ANSIBLE_HOME ~ "/plugins" }}`) by
compiling it with a new Jinja environment on every read (`NativeEnvironment().from_string(value)`
in `ansible.config.manager`, on every line from 2.15 to 2.21): ~60 reads per run (the path
settings a job refreshes, the plugins it loads), most of them such compilations. Here the name
`NativeEnvironment` of that module gives one shared environment whose `from_string` keeps each
source's compiled template: each source is compiled once in the server (the server's reads
fill the cache its jobs inherit); every read still renders it with the variables of that read,
and a source that does not compile raises as before (Ansible's own code catches it).
"""

from __future__ import annotations

from typing import Any

from runner.ansible.warm.patches import guard

NAME = "config-defaults"
_SHARED: list[Any] = []


class _SharedEnvironment:
    """What `NativeEnvironment()` gives Ansible's ConfigManager here."""

    def __init__(self, plain: type) -> None:
        self.plain = plain
        self.environment = plain()
        self.compiled: dict[str, Any] = {}

    def __call__(self) -> _SharedEnvironment:
        return self

    def from_string(self, source: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not isinstance(source, str) or guard.broken(NAME):
            return self.plain().from_string(source, *args, **kwargs)
        try:
            template = self.compiled.get(source)
        except Exception as err:
            guard.failed(NAME, err)
            return self.plain().from_string(source)
        if template is None:
            template = self.environment.from_string(source)  # its errors are Jinja's, as before
            self.compiled[source] = template
        return template


def install() -> None:
    from ansible.config import manager
    from jinja2.nativetypes import NativeEnvironment

    if manager.NativeEnvironment is not NativeEnvironment:
        raise AssertionError(
            f"ansible.config.manager.NativeEnvironment is {manager.NativeEnvironment}"
        )
    shared = _SharedEnvironment(NativeEnvironment)
    manager.NativeEnvironment = shared
    _SHARED[:] = [shared]
    # The core settings were read when ansible.constants was imported, before this: their
    # templated defaults are compiled now (the plugins' as the plugin loaders are warmed).
    import ansible.constants as C

    for definition in C.config.get_configuration_definitions().values():
        default = definition.get("default")
        if isinstance(default, str) and default.startswith("{{") and default.endswith("}}"):
            try:
                shared.from_string(default)
            except Exception:  # Ansible's own reads report it
                continue


def check() -> None:
    import ansible.constants as C
    from ansible.config import manager

    shared = _SHARED[0]
    if manager.NativeEnvironment is not shared:
        raise AssertionError("ansible.config.manager.NativeEnvironment is not the shared one")
    templated = [
        name
        for name, definition in C.config.get_configuration_definitions().items()
        if str(definition.get("default", "")).startswith("{{")
    ]
    if not templated:
        raise AssertionError("no templated defaults")
    for name in templated[:3]:
        default = C.config.get_configuration_definitions()[name]["default"]
        ours = shared.from_string(default).render(vars(C))
        plain = shared.plain().from_string(default).render(vars(C))
        if ours != plain:
            raise AssertionError(f"{name}: {ours!r} != {plain!r}")
