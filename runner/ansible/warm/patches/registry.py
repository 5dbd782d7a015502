"""Every patch the warm executor makes, in one table: its name, what it changes (module and
attribute), the ansible-core lines it is verified on, and where its install and its check are.

The fork server installs and checks them (`apply.py`) before it forks any job: a patch that is
not verified on the running line is not installed (the warm path goes without it); any
failure of an install or a check makes the operator take the plain path for good. The server's
core (what it cannot work without: the CLI entry, the configuration refresh, the collection
loader kept, the module host) is verified on `CORE_LINES`: on another line (a future 2.22) no
server starts and runs take the plain path.

Import-free (stdlib only, no ansible): the operator reads `CORE_LINES` before it starts a
server. Install and check are "module:function" names, resolved in the server.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The ansible-core lines the warm executor's core is verified on.
CORE_LINES = ("2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21")
ALL = CORE_LINES
FROM_2_19 = ("2.19", "2.20", "2.21")
UP_TO_2_18 = ("2.15", "2.16", "2.17", "2.18")
_P = "runner.ansible.warm.patches."


@dataclass(frozen=True)
class Patch:
    name: str
    kind: str  # the server's preload it belongs to: playbook, module (or both: "any")
    #: "module:Owner.attribute", each found before the install (defined on that very owner), or
    #: a description of what it changes (anything with a space).
    targets: tuple[str, ...]
    lines: tuple[str, ...]  # the ansible-core lines it is verified on
    install: str  # "module:function", called once in the server
    check: str  # "module:function", called in the server once everything is installed
    core: bool = False  # the server cannot work without it


PATCHES = (
    # -- the core -------------------------------------------------------------------------------
    Patch(
        "cli",
        "playbook",
        ("ansible.cli.playbook:main",),
        ALL,
        _P + "core:install_cli",
        _P + "core:check_cli",
        core=True,
    ),
    Patch(
        "config-refresh",
        "playbook",
        (
            "ansible.constants:config._config_file",
            "ansible.constants:set_constant",
            "ansible.config.manager:find_ini_config_file",
        ),
        ALL,
        _P + "configrefresh:install",
        _P + "configrefresh:check",
        core=True,
    ),
    Patch(
        "collection-loader",
        "playbook",
        ("ansible.plugins.loader:_configure_collection_loader",),
        ALL,
        _P + "core:keep_collection_loader",
        _P + "core:check_collection_loader",
        core=True,
    ),
    Patch(
        "module-host",
        "module",
        (
            "ansible.utils.collection_loader._collection_finder:_AnsibleCollectionFinder",
            "ansible.utils.collection_loader:AnsibleCollectionConfig._collection_finder",
        ),
        ALL,
        _P + "modulehost:remember",
        _P + "modulehost:check",
        core=True,
    ),
    Patch(
        "module-host-flags",
        "module",
        (
            "ansible.module_utils._internal:is_controller",
            "ansible.module_utils._internal._traceback:_is_traceback_enabled",
        ),
        FROM_2_19,
        _P + "modulehost:remember_flags",
        _P + "modulehost:check_flags",
        core=True,
    ),
    # -- the playbook kind's speed-ups -----------------------------------------------------------
    Patch(
        "plugin-warmup",
        "playbook",
        (
            "ansible.plugins.loader:init_plugin_loader",
            "ansible.vars.plugins: _prime_vars_loader (2.16 on)",
        ),
        ALL,
        _P + "plugins:warm",
        _P + "plugins:check",
    ),
    Patch(
        "routing-meta",
        "playbook",
        ("ansible.utils.collection_loader._collection_finder:_meta_yml_to_dict",),
        ALL,
        _P + "routingmeta:install",
        _P + "routingmeta:check",
    ),
    Patch(
        "config-defaults",
        "playbook",
        ("ansible.config.manager:NativeEnvironment",),
        ALL,
        _P + "configdefaults:install",
        _P + "configdefaults:check",
    ),
    Patch(
        "jinja-misses",
        "playbook",
        (
            "ansible.plugins.loader:PluginLoader.get",
            "ansible.plugins.loader:Jinja2Loader.get_with_context",
            "ansible.plugins.loader:filter_loader._cached_non_collection_wrappers",
            "ansible.plugins.loader:test_loader._cached_non_collection_wrappers",
        ),
        ALL,
        _P + "jinjamisses:install",
        _P + "jinjamisses:check",
    ),
    Patch(
        "template-cache",
        "playbook",
        (
            "jinja2.environment:Environment.compile",
            "ansible._internal._templating._jinja_bits:AnsibleEnvironment.compile_expression",
            "ansible._internal._templating._jinja_bits:_TemplateCompileContext",
            "ansible._internal._templating._jinja_bits:_TEMPLATE_OVERRIDE_FIELD_NAMES",
            "ansible._internal._templating._jinja_bits:_TemplateConfig.allow_embedded_templates",
            "ansible._internal._templating._jinja_plugins:JinjaPluginIntercept",
        ),
        FROM_2_19,
        _P + "templatecache:install",
        _P + "templatecache:check",
    ),
    Patch(
        "template-cache-jinja",
        "playbook",
        (
            "jinja2.environment:Environment.compile",
            "ansible.template:AnsibleEnvironment",
            "ansible.template:JinjaPluginIntercept",
        ),
        UP_TO_2_18,
        _P + "templatecache_jinja:install",
        _P + "templatecache_jinja:check",
    ),
    Patch(
        "direct",
        "playbook",
        ("ansible.plugins.connection.local:Connection.exec_command",),
        ALL,
        _P + "direct:install",
        _P + "direct:check",
    ),
    Patch(
        "localtmp",
        "playbook",
        ("ansible.plugins.connection.local:Connection.exec_command",),
        ALL,
        _P + "localtmp:install",
        _P + "localtmp:check",
    ),
    Patch(
        "ansiballz-cache",
        "playbook",
        ("ansible.executor.module_common: DEFAULT_LOCAL_TMP/ansiballz_cache",),
        ALL,
        _P + "core:install_ansiballz_cache",
        _P + "core:check_ansiballz_cache",
    ),
    Patch(
        "profile-workers",
        "playbook",
        ("ansible.executor.process.worker:WorkerProcess.run",),
        ALL,
        _P + "profiling:install",
        _P + "profiling:check",
    ),
    # -- the module kind's speed-ups -------------------------------------------------------------
    Patch(
        "code-cache",
        "module",
        ("zipimport:_compile_source",),
        ALL,
        _P + "codecache:install",
        _P + "codecache:check",
    ),
    Patch(
        "wrapper-compile",
        "module",
        ("ansible.executor.module_common: the AnsiballZ wrapper's payload literal",),
        ALL,
        _P + "codecache:install_wrapper",
        _P + "codecache:check_wrapper",
    ),
    Patch(
        "lazy-kubernetes",
        "module",
        ("kubernetes.client: its generated __init__ modules",),
        ALL,
        _P + "lazykube:install",
        _P + "lazykube:check",
    ),
    Patch(
        "kept-module-utils",
        "module",
        ("sys.meta_path: kubernetes.core's module_utils for payloads with the same files",),
        ALL,
        _P + "collectionutils:keep_module_utils",
        _P + "collectionutils:check",
    ),
    Patch(
        "immortal",
        "any",
        ("CPython's reference counts of the preloaded objects (PEP 683)",),
        ALL,
        _P + "immortal:install",
        _P + "immortal:check",
    ),
)

BY_NAME = {patch.name: patch for patch in PATCHES}


def line_of(version: str) -> str:
    """ "2.18" for "2.18.19" (or "2.18.0rc1")."""
    major, _, rest = version.partition(".")
    minor = "".join(c for c in rest.partition(".")[0] if c.isdigit())
    return f"{major}.{minor}"


def verified(line: str) -> bool:
    """Whether the warm executor's core is verified on `line`."""
    return line in CORE_LINES
