"""Every patch the warm executor makes, in one table, the single source of what the server
installs, where and on which lines: each patch's name, the phase of the server's start-up it
belongs to and its order there, what it changes (module and attribute), the ansible-core lines
it is verified on, the lines it has nothing to do on, and where its install and check are.

The fork server runs the phases in `PHASES`' order (server/preload.py and forkserver.py say
where each one falls between the imports) and installs each phase's patches in their `order`
(`apply.install_phase`): a patch not verified on the running line is not installed (the warm
path goes without it); any failure of an install or a check makes the operator take the plain
path for good. A patch's targets are all looked up before its install: one that is not there
(or is not a `module:Owner.attribute`) fails it.

The lines are listed, never implied: a patch's `lines` and `absent` are literal lists, and a
line added to runner/util/lines.txt is verified on no patch until someone runs the
verification of docs/contributing-lines-and-patches.md and lists it (tests/unit/
test_registry.py fails meanwhile). The server's core (what it cannot work without: the CLI
entry, the configuration refresh, the collection loader kept, the module host) decides the
lines a server starts on at all (`CORE_LINES`): on any other, runs take the plain path.

Import-free (stdlib only, no ansible): the operator reads `CORE_LINES` before it starts a
server. Install and check are "module:function" names, resolved in the server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.util.lines import line_of

__all__ = ["BY_NAME", "CORE_LINES", "PATCHES", "PHASES", "Patch", "Target", "line_of"]

#: The server's start-up phases, in order: (phase, the kind whose preload it belongs to, when).
PHASES = (
    ("module-first", "module", "before the module kind's imports"),
    ("module-imported", "module", "after the module kind's imports"),
    ("playbook-imported", "playbook", "after the playbook kind's imports"),
    ("playbook-warmup", "playbook", "the plugin warm-up, inside routing-meta's compaction"),
    ("playbook-warmed", "playbook", "after the plugin warm-up"),
    ("sealed", "any", "every kind preloaded and checked: the last step before serving"),
)
KIND_OF_PHASE = {phase: kind for phase, kind, _ in PHASES}
TARGET = re.compile(r"^[\w.]+:[\w.]+$")  # module:Owner.attribute
_P = "runner.ansible.warm.patches."


@dataclass(frozen=True)
class Target:
    """A target that is there on some of the patch's lines only."""

    where: str  # module:Owner.attribute
    lines: str  # the lines it is there on, listed


@dataclass(frozen=True)
class Patch:
    name: str
    phase: str  # one of PHASES
    order: int  # its place in its phase
    what: str  # what it changes, in a few words
    #: "module:Owner.attribute" (or a Target, on some lines only): each looked up before the
    #: install, defined on that very owner
    targets: tuple[str | Target, ...]
    lines: str  # the ansible-core lines it is verified on, listed ("2.15 2.16 ...")
    install: str  # "module:function", called once in the server
    check: str  # "module:function", called in the server once its phase is installed
    core: bool = False  # the server cannot work without it
    absent: str = ""  # the lines it has nothing to do on (its targets are not there)

    @property
    def kind(self) -> str:
        return KIND_OF_PHASE[self.phase]

    @property
    def verified_on(self) -> tuple[str, ...]:
        return tuple(self.lines.split())

    @property
    def absent_on(self) -> tuple[str, ...]:
        return tuple(self.absent.split())

    def targets_on(self, line: str) -> list[str]:
        """The targets to look up on `line`."""
        return [
            t if isinstance(t, str) else t.where
            for t in self.targets
            if isinstance(t, str) or line in t.lines.split()
        ]


PATCHES = (
    # -- module-first: before `kubernetes` and Ansible's module_utils are imported ---------------
    Patch(
        "code-cache",
        "module-first",
        1,
        "zipimport compiles the collections' module_utils from code compiled once",
        ("zipimport:_compile_source",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "codecache:install",
        _P + "codecache:check",
    ),
    Patch(
        "wrapper-compile",
        "module-first",
        2,
        "a pipelined AnsiballZ wrapper compiled without tokenizing its payload literal",
        (
            Target(
                "ansible.executor.module_common:ACTIVE_ANSIBALLZ_TEMPLATE", "2.15 2.16 2.17 2.18"
            ),
            Target("ansible.executor.module_common:_get_ansiballz_code", "2.19 2.20 2.21"),
        ),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "codecache:install_wrapper",
        _P + "codecache:check_wrapper",
    ),
    Patch(
        "lazy-kubernetes",
        "module-first",
        3,
        "kubernetes.client's generated packages import their classes when used",
        ("sys:meta_path",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "lazykube:install",
        _P + "lazykube:check",
    ),
    # -- module-imported ------------------------------------------------------------------------
    Patch(
        "kept-module-utils",
        "module-imported",
        1,
        "kubernetes.core's module_utils imported once, for payloads with the same files",
        ("sys:meta_path",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "collectionutils:keep_module_utils",
        _P + "collectionutils:check",
    ),
    Patch(
        "module-host",
        "module-imported",
        2,
        "a module job undoes the controller's collection finder",
        (
            "ansible.utils.collection_loader._collection_finder:_AnsibleCollectionFinder",
            "ansible.utils.collection_loader:AnsibleCollectionConfig._collection_finder",
        ),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "modulehost:remember",
        _P + "modulehost:check",
        core=True,
    ),
    Patch(
        "module-host-flags",
        "module-imported",
        3,
        "a module job runs with the module side's flags (2.19's controller marks)",
        (
            "ansible.module_utils._internal:is_controller",
            "ansible.module_utils._internal._traceback:_is_traceback_enabled",
        ),
        "2.19 2.20 2.21",
        _P + "modulehost:remember_flags",
        _P + "modulehost:check_flags",
        core=True,
        absent="2.15 2.16 2.17 2.18",
    ),
    # -- playbook-imported: ansible-playbook's machinery imported --------------------------------
    Patch(
        "cli",
        "playbook-imported",
        1,
        "a playbook job runs ansible-playbook's CLI in the forked process",
        ("ansible.cli.playbook:main",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "core:install_cli",
        _P + "core:check_cli",
        core=True,
    ),
    Patch(
        "config-refresh",
        "playbook-imported",
        2,
        "a job reads its own configuration file and environment",
        (
            "ansible.constants:config._config_file",
            "ansible.constants:set_constant",
            "ansible.config.manager:find_ini_config_file",
        ),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "configrefresh:install",
        _P + "configrefresh:check",
        core=True,
    ),
    Patch(
        "config-defaults",
        "playbook-imported",
        3,
        "the configuration's defaults templated once",
        ("ansible.config.manager:NativeEnvironment",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "configdefaults:install",
        _P + "configdefaults:check",
    ),
    Patch(
        "routing-meta",
        "playbook-imported",
        4,
        "ansible.builtin's routing metadata kept compact (around the plugin warm-up)",
        ("ansible.utils.collection_loader._collection_finder:_meta_yml_to_dict",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "routingmeta:install",
        _P + "routingmeta:check",
    ),
    # -- playbook-warmup ------------------------------------------------------------------------
    Patch(
        "plugin-warmup",
        "playbook-warmup",
        1,
        "the plugins every run loads, found and their documentation parsed once",
        (
            "ansible.plugins.loader:init_plugin_loader",
            Target("ansible.vars.plugins:_prime_vars_loader", "2.16 2.17 2.18 2.19 2.20 2.21"),
        ),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "plugins:warm",
        _P + "plugins:check",
    ),
    # -- playbook-warmed ------------------------------------------------------------------------
    Patch(
        "jinja-misses",
        "playbook-warmed",
        1,
        "a filter or test name looked up in vain is remembered as missing",
        (
            "ansible.plugins.loader:PluginLoader.get",
            "ansible.plugins.loader:Jinja2Loader.get_with_context",
            "ansible.plugins.loader:filter_loader._cached_non_collection_wrappers",
            "ansible.plugins.loader:test_loader._cached_non_collection_wrappers",
        ),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "jinjamisses:install",
        _P + "jinjamisses:check",
    ),
    Patch(
        "template-cache",
        "playbook-warmed",
        2,
        "templates compiled once, shared by the jobs (2.19's templating)",
        (
            "jinja2.environment:Environment.compile",
            "ansible._internal._templating._jinja_bits:AnsibleEnvironment.compile_expression",
            "ansible._internal._templating._jinja_bits:_TemplateCompileContext",
            "ansible._internal._templating._jinja_bits:_TEMPLATE_OVERRIDE_FIELD_NAMES",
            "ansible._internal._templating._jinja_bits:_TemplateConfig.allow_embedded_templates",
            "ansible._internal._templating._jinja_plugins:JinjaPluginIntercept",
        ),
        "2.19 2.20 2.21",
        _P + "templatecache:install",
        _P + "templatecache:check",
        absent="2.15 2.16 2.17 2.18",
    ),
    Patch(
        "template-cache-jinja",
        "playbook-warmed",
        3,
        "templates compiled once, shared by the jobs (the templating before 2.19)",
        (
            "jinja2.environment:Environment.compile",
            "ansible.template:AnsibleEnvironment",
            "ansible.template:JinjaPluginIntercept",
        ),
        "2.15 2.16 2.17 2.18",
        _P + "templatecache_jinja:install",
        _P + "templatecache_jinja:check",
        absent="2.19 2.20 2.21",
    ),
    Patch(
        "direct",
        "playbook-warmed",
        4,
        "a pipelined module task handed to the module server without a shell",
        ("ansible.plugins.connection.local:Connection.exec_command",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "direct:install",
        _P + "direct:check",
    ),
    Patch(
        "localtmp",
        "playbook-warmed",
        5,
        "the local connection's temp folder commands run in the job",
        ("ansible.plugins.connection.local:Connection.exec_command",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "localtmp:install",
        _P + "localtmp:check",
    ),
    Patch(
        "collection-loader",
        "playbook-warmed",
        6,
        "the collection loader configured once, kept by the jobs",
        ("ansible.plugins.loader:_configure_collection_loader",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "core:keep_collection_loader",
        _P + "core:check_collection_loader",
        core=True,
    ),
    Patch(
        "ansiballz-cache",
        "playbook-warmed",
        7,
        "the module payloads built by earlier runs reused (DEFAULT_LOCAL_TMP/ansiballz_cache)",
        ("ansible.constants:DEFAULT_LOCAL_TMP",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "core:install_ansiballz_cache",
        _P + "core:check_ansiballz_cache",
    ),
    Patch(
        "profile-workers",
        "playbook-warmed",
        8,
        "each task's worker profiled (with $OPERATOR_RUNNER_PROFILE only)",
        ("ansible.executor.process.worker:WorkerProcess.run",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "profiling:install",
        _P + "profiling:check",
    ),
    # -- sealed ---------------------------------------------------------------------------------
    Patch(
        "immortal",
        "sealed",
        1,
        "the preloaded objects made immortal (PEP 683: CPython 3.12 and 3.13's refcounts)",
        ("sys:getrefcount",),
        "2.15 2.16 2.17 2.18 2.19 2.20 2.21",
        _P + "immortal:install",
        _P + "immortal:check",
    ),
)

BY_NAME = {patch.name: patch for patch in PATCHES}


def in_phase(phase: str) -> list[Patch]:
    """The patches of `phase`, in their order."""
    return sorted((p for p in PATCHES if p.phase == phase), key=lambda p: p.order)


def _core_lines() -> tuple[str, ...]:
    """The lines on which every core patch is verified, or has nothing to do (and at least one
    is verified): the lines a server starts on."""
    core = [patch for patch in PATCHES if patch.core]
    named = {line for patch in core for line in patch.verified_on}
    decided = [
        line
        for line in named
        if all(line in patch.verified_on or line in patch.absent_on for patch in core)
    ]
    return tuple(sorted(decided, key=lambda line: tuple(int(n) for n in line.split("."))))


#: The ansible-core lines the warm executor's core is verified on (its core patches' lines).
CORE_LINES = _core_lines()


def verified(line: str) -> bool:
    """Whether the warm executor's core is verified on `line`."""
    return line in CORE_LINES
