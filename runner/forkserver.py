"""Warm executors: Python processes with Ansible (or a module's libraries) already imported,
which fork once per job.

Every reconcile of operator-sdk's Ansible operator starts `ansible-playbook` afresh (importing
Ansible: ~0.3 s of CPU), and every module task starts another Python that imports its
libraries again (a `kubernetes.core.k8s` task: ~0.5 s, most of it importing `kubernetes`).
Here two servers are started once per operator:

- `playbook`: imports ansible-playbook's machinery; a job runs `ansible-playbook ARGS` in a
  forked child (running the CLI twice in one process is not supported by ansible-core 2.19,
  so a fork per run is the unit);
- `module`: imports `kubernetes`, Ansible's module_utils and kubernetes.core's module_utils;
  a job runs one module (an AnsiballZ file, or a pipelined one on stdin) in a forked child.

Clients are tiny stdlib-only scripts (`client_script`) used as ansible-runner's `binary` and
as `ansible_python_interpreter`. A client passes its argv, cwd, environment and its stdin,
stdout and stderr (the file descriptors themselves, so output goes straight to ansible-runner's
pty or to Ansible's pipes) over a Unix socket, relays signals to the job and exits with the
job's exit code. When no server answers, or the server refuses the job (the environment that
Ansible reads at import time differs from the server's), the client `exec`s the real program:
the plain path, same semantics, just slower.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import runpy
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

# Environment variables Ansible reads when it is imported; a job must match the server's.
IMPORT_TIME_PREFIXES = ("ANSIBLE_",)
ANSIBALLZ_CACHE_ENV = "OPERATOR_RUNNER_ANSIBALLZ_CACHE"
_HEADER = struct.Struct("!I")

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
    # hide the other collections inside each module's AnsiballZ payload.
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
    ),
}


def import_time_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)}


# Read through the configuration at run time (refreshed in each job), so they may differ.
RUNTIME_ONLY = frozenset({"ANSIBLE_CACHE_PLUGIN_CONNECTION"})


def _comparable(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in RUNTIME_ONLY}


# --- server --------------------------------------------------------------------------------


def _preload(kind: str) -> None:
    import importlib

    for name in PRELOAD[kind]:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional module only costs speed
            print(f"forkserver[{kind}]: could not preload {name}: {err}", file=sys.stderr)
    if kind == "playbook":
        try:
            _warm_plugins()
        except Exception as err:
            print(f"forkserver[{kind}]: could not warm the plugin loaders: {err}", file=sys.stderr)


# Plugins every run loads: found, imported and their documented options registered once here
# (parsing plugin documentation is most of a short run's cost), inherited by every job.
WARM_PLUGINS = {
    "inventory": ("host_list", "script", "auto", "yaml", "ini", "toml"),
    # not awx_display: ansible-runner's callback reads the run's artifact dir when imported
    "callback": ("default", "minimal"),
    "connection": ("local",),
    "shell": ("sh",),
    "become": ("sudo",),
    "strategy": ("linear",),
    "action": ("normal", "debug", "command", "set_fact", "include_role", "fail", "assert"),
    "cache": ("jsonfile", "memory"),
    "lookup": ("env", "file", "template"),
}


def _warm_plugins() -> None:
    from ansible.plugins import loader

    loader.init_plugin_loader([])
    for kind, names in WARM_PLUGINS.items():
        plugin_loader = getattr(loader, f"{kind}_loader")
        for name in names:
            plugin_loader.get(name, class_only=True)
    for plugin_loader in (loader.filter_loader, loader.test_loader):
        list(plugin_loader.all(class_only=True))


def _recv_job(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    fds = array.array("i")
    data = b""
    while len(data) < _HEADER.size:
        msg, ancdata, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
        if not msg:
            raise ConnectionError("client went away")
        data += msg
        for level, kind, cdata in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    (length,) = _HEADER.unpack(data[: _HEADER.size])
    body = data[_HEADER.size :]
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ConnectionError("client went away")
        body += chunk
    return json.loads(body), list(fds)


def _send(conn: socket.socket, message: Mapping[str, object]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _refresh_ansible_config() -> None:
    """Re-read Ansible's settings in the job's cwd and environment.

    ConfigManager reads environment variables when a value is asked for, so the constants are
    recomputed from it. It keeps the configuration definitions of the plugins loaded so far
    (parsing their documentation costs most of a short run), so it is only replaced when the
    job finds another ansible.cfg (ANSIBLE_CONFIG, ./ansible.cfg, ...) than the server did.
    """
    if "ansible.constants" not in sys.modules:
        return
    import ansible.constants as C
    from ansible.config.manager import ConfigManager, find_ini_config_file

    if find_ini_config_file() != C.config._config_file:
        C.config = ConfigManager()
    for setting in C.config.get_configuration_definitions():
        C.set_constant(setting, C.config.get_config_value(setting, variables=vars(C)))


def _keep_collection_loader() -> None:
    """The server configured the collection loader already (same environment, checked);
    the CLI would configure it again and warn."""
    from ansible.plugins import loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is not None:
        loader._configure_collection_loader = lambda prefix_collections_path=None: None


def _share_ansiballz_cache() -> None:
    """Reuse built module payloads across runs: ansible-core keeps them in a per-process temp
    dir and rebuilds them every run (0.1-0.3 s). The shared cache lives as long as the server;
    its entries are keyed by module name, so an operator restart picks up edited modules."""
    shared = os.environ.get(ANSIBALLZ_CACHE_ENV)
    if not shared or "ansible.constants" not in sys.modules:
        return
    import ansible.constants as C

    link = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")
    if not os.path.lexists(link):
        os.makedirs(shared, mode=0o700, exist_ok=True)
        os.symlink(shared, link)


def _profiled(target: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a job under cProfile when $OPERATOR_RUNNER_PROFILE names a file prefix
    (PREFIX.<kind>.<pid> per job; see bench/README.md)."""
    prefix = os.environ.get("OPERATOR_RUNNER_PROFILE")
    if not prefix:
        return target(argv)
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return target(argv)
    finally:
        profiler.disable()
        kind = "playbook" if target is _run_playbook else "module"
        profiler.dump_stats(f"{prefix}.{kind}.{os.getpid()}")


def _run_playbook(argv: list[str]) -> int:
    _refresh_ansible_config()
    _share_ansiballz_cache()
    _keep_collection_loader()
    from ansible.cli.playbook import main

    try:
        main(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


def _run_module(argv: list[str]) -> int:
    try:
        if len(argv) > 1:
            sys.argv = argv[1:]
            runpy.run_path(argv[1], run_name="__main__")
        else:  # pipelining: the module comes on stdin
            code = sys.stdin.read()
            exec(compile(code, "<stdin>", "exec"), {"__name__": "__main__"})
    except SystemExit as exit_:
        if exit_.code is None:
            return 0
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


TARGETS: dict[str, Callable[[list[str]], int]] = {
    "playbook": _run_playbook,
    "module": _run_module,
}


def _job(kind: str, conn: socket.socket, job: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become the job, run it, report the exit code, exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setpgid(0, 0)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    env = job["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    os.chdir(str(job["cwd"]))
    argv = [str(a) for a in job["argv"]]  # type: ignore[attr-defined]
    sys.argv = argv
    _send(conn, {"pid": os.getpid()})

    def orphaned() -> None:  # the client died (cancelled run): stop the job
        with contextlib.suppress(OSError):
            conn.recv(1)
        os.killpg(0, signal.SIGTERM)

    threading.Thread(target=orphaned, daemon=True).start()
    code = 1
    try:
        code = _profiled(TARGETS[kind], argv)
    except BaseException as err:  # report, as the real program would, then exit non-zero
        import traceback

        traceback.print_exception(err)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(OSError):
            _send(conn, {"exit": code})
        os._exit(code)


def _reap(signum: int, frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _die_with_parent() -> None:
    """Linux: SIGTERM this server when the operator that started it dies, even by SIGKILL."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the operator's stop() is the only way
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(0)


def serve(kind: str, socket_path: str) -> None:
    """Preload, listen on `socket_path`, fork a child per job; runs until killed."""
    _die_with_parent()
    _preload(kind)
    baseline = _comparable(import_time_env(os.environ))
    # Reap finished jobs (not SIG_IGN: their CPU time must add up in this process's rusage,
    # so that the operator's whole process tree can be accounted for).
    signal.signal(signal.SIGCHLD, _reap)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = socket_path + ".tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    listener.bind(tmp)
    os.chmod(tmp, 0o600)
    listener.listen(64)
    os.replace(tmp, socket_path)  # the socket appears only once the server is ready
    while True:
        conn, _ = listener.accept()
        fds: list[int] = []
        try:
            job, fds = _recv_job(conn)
            env = job.get("env")
            if not isinstance(env, dict) or (
                kind == "playbook" and _comparable(import_time_env(env)) != baseline
            ):
                _send(conn, {"refused": "the environment Ansible reads at import differs"})
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                _job(kind, conn, job, fds)
        except Exception as err:
            print(f"forkserver[{kind}]: bad job: {err}", file=sys.stderr)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()


# --- client --------------------------------------------------------------------------------

CLIENT = r"""
import array, json, os, signal, socket, struct, sys

def fallback():
    os.execv(FALLBACK[0], FALLBACK + sys.argv[1:])

def main():
    path = os.environ.get(SOCKET_ENV)
    if not path:
        fallback()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        fallback()
    argv = [FALLBACK[-1]] + sys.argv[1:]
    body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    data = struct.pack("!I", len(body)) + body
    conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    reader = conn.makefile("rb")
    first = reader.readline()
    if not first:
        fallback()
    message = json.loads(first)
    if "refused" in message:
        fallback()
    pid = message["pid"]
    def relay(signum, frame):
        try:
            os.killpg(pid, signum)
        except OSError:
            pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, relay)
    line = reader.readline()
    code = json.loads(line)["exit"] if line else 1
    os._exit(code)

main()
"""


def client_script(python: str, socket_env: str, fallback: list[str]) -> str:
    """A client executable: `fallback` is what to exec when no server takes the job (its last
    item is argv[0] for the job)."""
    return f"#!{python} -IS\nSOCKET_ENV = {socket_env!r}\nFALLBACK = {fallback!r}\n" + CLIENT


def write_client(path: Path, python: str, socket_env: str, fallback: list[str]) -> Path:
    path.write_text(client_script(python, socket_env, fallback), encoding="utf-8")
    path.chmod(0o700)
    return path


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
