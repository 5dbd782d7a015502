"""Warm executors: Python processes with Ansible (or a module's libraries) already imported,
which fork once per job.

Every reconcile of operator-sdk's Ansible operator starts `ansible-playbook` afresh (importing
Ansible: ~0.3 s of CPU), and every module task starts another Python that imports its
libraries again (a `kubernetes.core.k8s` task: ~0.5 s, most of it importing `kubernetes`).
Here one server is started per operator, with a socket for each of two kinds of job:

- `playbook`: imports ansible-playbook's machinery; a job runs `ansible-playbook ARGS` in a
  forked child (running the CLI twice in one process is not supported by ansible-core 2.19,
  so a fork per run is the unit);
- `module`: imports `kubernetes`, Ansible's module_utils and kubernetes.core's module_utils;
  a job runs one module (an AnsiballZ file, or a pipelined one on stdin) in a forked child,
  with the controller's traces undone first (`modulehost`).

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
import atexit
import contextlib
import marshal
import os
import runpy
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping

from runner.ansible.warm.jobenv import ANSIBALLZ_CACHE_ENV
from runner.ansible.warm.patches import collectionutils, direct, modulehost, templatecache
from runner.ansible.warm.server import codecache, immortal
from runner.ansible.warm.server import process as serverprocess
from runner.ansible.warm.server.preload import preload_for

# Environment variables Ansible reads when it is imported; a job must match the server's.
IMPORT_TIME_PREFIXES = ("ANSIBLE_",)
_HEADER = struct.Struct("!I")


def import_time_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)}


# Read through the configuration at run time (refreshed in each job), so they may differ.
RUNTIME_ONLY = frozenset({"ANSIBLE_CACHE_PLUGIN_CONNECTION"})


def _comparable(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in RUNTIME_ONLY}


# --- server --------------------------------------------------------------------------------


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
    job = marshal.loads(body)  # only the operator's own user can reach the socket (0600)
    if not isinstance(job, dict):
        raise ValueError("a job is a dict")
    return job, list(fds)


def _send(conn: socket.socket, word: str, value: object) -> None:
    """One line to the client: `pid N`, `exit N` or `refused WHY`."""
    conn.sendall(f"{word} {value}\n".encode())


# The server's import-time environment and working directory (set by serve()).
_SERVER_ENV: dict[str, str] = {}
# Settings whose value depends on the working directory or is made per process.
_PATH_TYPES = frozenset({"path", "pathspec", "pathlist", "tmppath", "temppath", "tmp"})


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


def _refresh_ansible_config() -> None:
    """Re-read the Ansible settings that the job's cwd and environment can change.

    ConfigManager reads environment variables when a value is asked for, so the constants are
    recomputed from it. It keeps the configuration definitions of the plugins loaded so far
    (parsing their documentation costs most of a short run), so it is only replaced when the
    job finds another ansible.cfg (ANSIBLE_CONFIG, ./ansible.cfg, ...) than the server did;
    otherwise only the settings `settings_to_refresh` names are recomputed.
    """
    if "ansible.constants" not in sys.modules:
        return
    import ansible.constants as C
    from ansible.config.manager import ConfigManager, find_ini_config_file

    definitions = C.config.get_configuration_definitions()
    if find_ini_config_file() != C.config._config_file or not _SERVER_ENV:
        C.config = ConfigManager()
        names = list(definitions)
    else:
        names = settings_to_refresh(definitions, _SERVER_ENV, os.environ)
    for setting in names:
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
    (PREFIX.<kind>.<pid> per job, and PREFIX.worker.<pid> per task of a playbook job;
    see bench/README.md)."""
    prefix = os.environ.get("OPERATOR_RUNNER_PROFILE")
    if not prefix:
        return target(argv)
    import cProfile

    if target is _run_playbook:
        _profile_workers(prefix)
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    try:
        return target(argv)
    finally:
        profiler.disable()
        kind = "playbook" if target is _run_playbook else "module"
        profiler.dump_stats(f"{prefix}.{kind}.{os.getpid()}")


def _profile_workers(prefix: str) -> None:
    """Each task runs in a worker process forked from the playbook job: profile those too."""
    import cProfile

    from ansible.executor.process.worker import WorkerProcess

    run = WorkerProcess.run

    def profiled_run(self: WorkerProcess) -> None:
        monitoring = getattr(sys, "monitoring", None)  # 3.12+: the job's profiler came along
        if monitoring is not None and monitoring.get_tool(monitoring.PROFILER_ID):
            monitoring.set_events(monitoring.PROFILER_ID, 0)
            monitoring.free_tool_id(monitoring.PROFILER_ID)
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        try:
            run(self)
        finally:
            profiler.disable()
            profiler.dump_stats(f"{prefix}.worker.{os.getpid()}")

    WorkerProcess.run = profiled_run


def _run_playbook(argv: list[str]) -> int:
    _refresh_ansible_config()
    _share_ansiballz_cache()
    _keep_collection_loader()
    direct.install()
    templatecache.install()
    from ansible.cli.playbook import main

    try:
        main(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


def _run_module(argv: list[str]) -> int:
    modulehost.become_target()
    collectionutils.install()
    try:
        if len(argv) > 1:
            sys.argv = argv[1:]
            runpy.run_path(argv[1], run_name="__main__")
        else:  # pipelining: the module comes on stdin
            code = sys.stdin.read()
            exec(codecache.compile_wrapper(code, "<stdin>"), {"__name__": "__main__"})
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
    os.setsid()  # a session (and process group) of its own, as ansible-runner's pexpect child
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    serverprocess.take_terminal()
    env = job["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    os.chdir(str(job["cwd"]))
    argv = [str(a) for a in job["argv"]]  # type: ignore[attr-defined]
    sys.argv = argv
    _send(conn, "pid", os.getpid())

    def orphaned() -> None:  # the client died (cancelled run): stop the job
        with contextlib.suppress(OSError):
            conn.recv(1)
        os.killpg(0, signal.SIGTERM)

    threading.Thread(target=orphaned, daemon=True).start()
    # The server's exit handlers are the server's; the job's own (Ansible's local temp folder,
    # a module's tmpdir, kubernetes' temp files) run when it ends, as in the real program.
    atexit._clear()
    import gc

    gc.set_threshold(50_000, 20, 20)  # a short-lived job: collect rarely (the default is 700)
    code = 1
    try:
        code = _profiled(TARGETS[kind], argv)
    except BaseException as err:  # report, as the real program would, then exit non-zero
        import traceback

        traceback.print_exception(err)
    finally:
        serverprocess.end_as_a_program()
        with contextlib.suppress(OSError):
            _send(conn, "exit", code)
        os._exit(code)


def serve(sockets: Mapping[str, str]) -> None:
    """Preload every kind in `sockets` (kind -> socket path), listen on each socket, fork a
    child per job; runs until killed. One process for both kinds holds their common imports
    once (the module kind first: its jobs are told apart from the controller in
    `_as_module_host`)."""
    serverprocess.die_with_parent()
    # Stopped by SIGTERM (by the executor, or at the operator's death): the server's exit
    # handlers run (Ansible's local temp folder of this process), as a program's would.
    signal.signal(signal.SIGTERM, serverprocess.exit_on_term)
    _SERVER_ENV.update(os.environ)
    kinds = sorted(sockets, key=lambda kind: kind != "module")
    for kind in kinds:
        preload_for(kind)
        if kind == "module":
            modulehost.remember()
    modulehost.seal()
    import gc

    gc.collect()
    immortal.immortalize(gc.get_objects())  # jobs' reference counting leaves them alone too
    gc.freeze()  # jobs' garbage collections leave the preloaded objects (their pages) alone
    serverprocess.trim_heap()
    baseline = _comparable(import_time_env(os.environ))
    # Reap finished jobs (not SIG_IGN: their CPU time must add up in this process's rusage,
    # so that the operator's whole process tree can be accounted for).
    signal.signal(signal.SIGCHLD, serverprocess.reap)
    listeners = {_listen(path): kind for kind, path in sockets.items()}
    while True:
        ready, _, _ = select.select(list(listeners), [], [])
        for listener in ready:
            _serve_one(listener, listeners[listener], listeners, baseline)


def _listen(socket_path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = socket_path + ".tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    listener.bind(tmp)
    os.chmod(tmp, 0o600)
    listener.listen(64)
    os.replace(tmp, socket_path)  # the socket appears only once the server is ready
    return listener


def _serve_one(
    listener: socket.socket, kind: str, listeners: Mapping[socket.socket, str], baseline: object
) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        job, fds = _recv_job(conn)
        env = job.get("env")
        if not isinstance(env, dict) or (
            kind == "playbook" and _comparable(import_time_env(env)) != baseline
        ):
            _send(conn, "refused", "the environment Ansible reads at import differs")
            return
        pid = os.fork()
        if pid == 0:
            try:
                for each in listeners:
                    each.close()
                _job(kind, conn, job, fds)
            finally:  # _job exits; a failure before it runs the job must not serve on
                os._exit(1)
    except Exception as err:
        print(f"forkserver[{kind}]: bad job: {err}", file=sys.stderr)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        conn.close()


if __name__ == "__main__":  # KIND SOCKET [KIND SOCKET]
    serve(dict(zip(sys.argv[1::2], sys.argv[2::2], strict=True)))
