"""A playbook job's Ansible settings: the server's, recomputed where the job's working directory
and environment make them differ, or the job handed back to the plain path.

ansible-core reads its configuration when `ansible.constants` is imported, in the server. A
job's environment matches the server's in every variable Ansible reads at import
(`ANSIBLE_*`; the server refuses other jobs), but its working directory is the run's project
and a few variables are per run. So each job recomputes the settings `settings_to_refresh`
names (every path: relative ones follow the working directory; a `tmppath` is made per
process) before it tells the client its pid.

What the server set up from its settings cannot be recomputed that way: the configuration file
it found, the plugin loaders' configured paths and the collection loader's search path. A job
whose settings differ there (an `ansible.cfg` in the project folder, a relative plugin path) is
refused: the client runs the real ansible-playbook, as the plain path would.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# Environment variables Ansible reads when it is imported; a job must match the server's.
IMPORT_TIME_PREFIXES = ("ANSIBLE_",)
# Read through the configuration at run time (refreshed in each job), so they may differ.
RUNTIME_ONLY = frozenset({"ANSIBLE_CACHE_PLUGIN_CONNECTION"})
# Settings whose value depends on the working directory or is made per process.
_PATH_TYPES = frozenset({"path", "pathspec", "pathlist", "tmppath", "temppath", "tmp"})
# Settings the server set its collection loader up with (the CLI does not do it again).
_COLLECTION_SETTINGS = ("COLLECTIONS_PATHS", "COLLECTIONS_SCAN_SYS_PATH")

_SERVER: dict[str, Any] = {}


def import_time_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)}


def comparable(env: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment a playbook job must share with the server."""
    return {k: v for k, v in import_time_env(env).items() if k not in RUNTIME_ONLY}


def settings_to_refresh(
    definitions: Mapping[str, Mapping[str, object]],
    server_env: Mapping[str, str],
    job_env: Mapping[str, str],
) -> list[str]:
    """The settings a job must recompute: those read from an environment variable whose value
    differs from the server's, and every path (relative paths follow the job's working
    directory; `tmppath` makes a directory per process)."""
    changed = {
        key
        for key in set(import_time_env(server_env)) | set(import_time_env(job_env))
        if server_env.get(key) != job_env.get(key)
    }
    names = []
    for name, definition in definitions.items():
        env_names = {
            str(entry.get("name"))
            for entry in definition.get("env", None) or []  # type: ignore[attr-defined]
            if isinstance(entry, Mapping)
        }
        if env_names & changed or definition.get("type") in _PATH_TYPES:
            names.append(name)
    return names


def install() -> None:
    """In the server, once the controller is imported: what the jobs are compared with."""
    import ansible.constants as C
    from ansible.plugins import loader

    configs = [
        each.config for each in vars(loader).values() if isinstance(each, loader.PluginLoader)
    ]
    fixed = {
        name
        for name, value in vars(C).items()
        if name.isupper() and isinstance(value, list) and any(value is c for c in configs)
    }
    _SERVER.update(
        env=dict(os.environ),
        config_file=C.config._config_file,
        fixed=sorted(fixed | {n for n in _COLLECTION_SETTINGS if hasattr(C, n)}),
    )


def check() -> None:
    import ansible.constants as C
    from ansible.config.manager import find_ini_config_file

    definitions = C.config.get_configuration_definitions()
    names = settings_to_refresh(definitions, _SERVER["env"], _SERVER["env"])
    if "DEFAULT_LOCAL_TMP" not in names:
        raise AssertionError(f"no per-process temp setting among {len(definitions)} settings")
    if find_ini_config_file() != _SERVER["config_file"]:
        raise AssertionError("the configuration file is not the one Ansible found")
    if not {"DEFAULT_FILTER_PLUGIN_PATH", "DEFAULT_MODULE_PATH"} <= set(_SERVER["fixed"]):
        raise AssertionError(f"the plugin loaders' settings not found: {_SERVER['fixed']}")
    for name in _SERVER["fixed"]:
        C.config.get_config_value(name, variables=vars(C))
    if not callable(C.set_constant):
        raise AssertionError("ansible.constants.set_constant is not callable")


def refresh() -> str | None:
    """In a playbook job: recompute its settings; why the job must go to the plain path
    instead, or None."""
    import ansible.constants as C
    from ansible.config.manager import find_ini_config_file

    found = find_ini_config_file()
    if found != _SERVER["config_file"]:
        return f"its configuration file ({found}) is not the server's"
    definitions = C.config.get_configuration_definitions()
    fixed = _SERVER["fixed"]
    for setting in settings_to_refresh(definitions, _SERVER["env"], os.environ):
        value = C.config.get_config_value(setting, variables=vars(C))
        if setting in fixed and value != getattr(C, setting, None):
            return f"its {setting} differs from the server's"
        C.set_constant(setting, value)
    return None
