"""The playbook kind's core: the CLI entry a job runs and the collection loader the server
configured once; and the module payloads shared by a server's runs (`ansiballz-cache`)."""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import shutil

from runner.ansible.warm.jobenv import ANSIBALLZ_CACHE_ENV

# ansible-core's module_common keeps the payloads it built in this folder of its local temp dir.
_ANSIBALLZ_DIR = "ansiballz_cache"


def install_cli() -> None:
    from ansible.cli.playbook import main  # noqa: F401  (imported by the preload; here: found)


def check_cli() -> None:
    from ansible.cli.playbook import main

    parameters = list(inspect.signature(main).parameters)
    if parameters[:1] != ["args"]:
        raise AssertionError(f"ansible.cli.playbook.main{inspect.signature(main)}")


def run_cli(argv: list[str]) -> int:
    """What `ansible-playbook ARGV[1:]` does, in this process; its exit code."""
    from ansible.cli.playbook import main

    try:
        main(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


def _keep(prefix_collections_path: object = None) -> None:
    """The CLI's `_configure_collection_loader` in a job: the server configured it already."""


def keep_collection_loader() -> bool:
    """The server configured the collection loader already (a job's settings that it depends
    on are the server's: configrefresh.py refuses other jobs); the CLI would configure it
    again and warn."""
    from ansible.plugins import loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        return False
    if not callable(loader._configure_collection_loader):
        raise AssertionError("ansible.plugins.loader._configure_collection_loader")
    loader._configure_collection_loader = _keep
    return True


def check_collection_loader() -> None:
    from ansible.plugins import loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if loader._configure_collection_loader is not _keep:
        raise AssertionError("_configure_collection_loader is not kept")
    if AnsibleCollectionConfig.collection_finder is None:
        raise AssertionError("no collection finder configured")


def install_ansiballz_cache() -> None:
    """Nothing to install in the server: each playbook job links the shared folder
    (`share_ansiballz_cache`)."""
    check_ansiballz_cache()


def check_ansiballz_cache() -> None:
    from ansible.executor import module_common

    source = inspect.getsource(module_common)
    if f"os.path.join(C.DEFAULT_LOCAL_TMP, '{_ANSIBALLZ_DIR}')" not in source:
        raise AssertionError("module_common keeps its payloads elsewhere")


def share_ansiballz_cache() -> None:
    """In a playbook job: reuse the module payloads built by earlier runs. ansible-core keeps
    them in a per-process temp dir and rebuilds them every run (0.1-0.3 s). The shared cache
    lives as long as the server; its entries are keyed by module name, so an operator restart
    picks up edited modules.

    Each job writes only its own folder: ansible-core writes a payload to `<name>-part` and
    renames it, under a lock of its own process, so two jobs that built the same payload at
    once in one shared folder raced on that file (the second rename: "No such file or
    directory", a failed task). The job's folder starts with a link to each payload the
    shared one has, and hands over those it built when it ends (written aside, renamed in:
    the shared folder only ever holds whole payloads)."""
    shared = os.environ.get(ANSIBALLZ_CACHE_ENV)
    if not shared:
        return
    import ansible.constants as C

    own = os.path.join(C.DEFAULT_LOCAL_TMP, _ANSIBALLZ_DIR)
    if os.path.lexists(own):
        return
    os.makedirs(shared, mode=0o700, exist_ok=True)
    os.makedirs(own, mode=0o700)
    for name in os.listdir(shared):
        if _whole(name):
            os.symlink(os.path.join(shared, name), os.path.join(own, name))
    atexit.register(_hand_over, own, shared)  # before the folder goes (atexit: last in first)


def _whole(name: str) -> bool:
    """A finished payload's file name (not ansible-core's `-part`, not our `.tmp`)."""
    return not name.endswith(("-part", ".tmp"))


def _hand_over(own: str, shared: str) -> None:
    """The payloads this job built, into the shared folder."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(own):
            if entry.is_symlink() or not entry.is_file() or not _whole(entry.name):
                continue
            aside = os.path.join(shared, f"{entry.name}.{os.getpid()}.tmp")
            try:
                shutil.copyfile(entry.path, aside)
                os.replace(aside, os.path.join(shared, entry.name))
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(aside)
