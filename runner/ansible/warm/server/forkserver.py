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
Ansible reads at import time differs from the server's, or the job's configuration does:
`configrefresh`), the client `exec`s the real program: the plain path, same semantics, just
slower.

Before it serves, the server installs and checks the patches the registry verifies on the
running ansible-core line (`patches/apply.py`) and writes its start-up report next to its
sockets (`status.json`, read by the operator's `WarmPool`); any failure there, and it exits
without serving.
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
from collections.abc import Callable, Mapping

from runner.ansible.warm.jobenv import JOB_ENV, STATUS_FILE
from runner.ansible.warm.patches import (
    apply,
    codecache,
    collectionutils,
    configrefresh,
    core,
    guard,
    modulehost,
    profiling,
)
from runner.ansible.warm.server import lookups
from runner.ansible.warm.server import process as serverprocess
from runner.ansible.warm.server.preload import preload_for
from runner.util import priority

_HEADER = struct.Struct("!I")
JOB_RECEIVE_TIMEOUT = 10.0  # seconds a client has to send its job once connected

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


def _run_playbook(argv: list[str]) -> int:
    guard.step("ansiballz-cache", core.share_ansiballz_cache, None)
    lookups.warm_lookups()
    return core.run_cli(argv)


def _run_module(argv: list[str]) -> int:
    guard.required("module-host", modulehost.become_target)
    guard.step("kept-module-utils", collectionutils.activate, None)
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


def _refused(kind: str) -> str | None:
    """Why a job (its environment and working directory in place) must run the real program
    instead; a failure here is recorded and hands the job back as well."""
    if kind != "playbook" or not apply.installed("config-refresh"):
        return None
    try:
        return configrefresh.refresh()
    except Exception as err:
        guard.failed("config-refresh", err, handed_back=True)
        return f"its configuration could not be refreshed: {err}"


def _client_priority(conn: socket.socket) -> None:
    """The job runs at its client's priority, as the program it stands in for would: a
    reconcile's runs are niced below the request path's (util/priority.py). A client's nice
    value above the server's is taken (no privilege needed); one below it is not."""
    with contextlib.suppress(OSError, AttributeError):
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        nice = os.getpriority(os.PRIO_PROCESS, struct.unpack("3i", creds)[0])
        if nice > os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, nice)


def _job(kind: str, conn: socket.socket, job: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become the job, run it, report the exit code, exit."""
    serverprocess.forget_wakeup()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The server's exit handlers are the server's; the job's own (Ansible's local temp folder,
    # made by the configuration refresh below, a module's tmpdir, kubernetes' temp files) run
    # when it ends, as in the real program.
    atexit._clear()
    env = job["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    os.environ[JOB_ENV] = kind
    _client_priority(conn)
    os.chdir(str(job["cwd"]))
    apply.rename_for_test("job")
    why = _refused(kind)
    if why is not None:
        _send(conn, "refused", why)
        serverprocess.end_as_a_program()  # the temp folder its refresh made goes
        os._exit(0)
    os.setsid()  # a session (and process group) of its own, as ansible-runner's pexpect child
    priority.nice_session(os.getpid(), os.getpriority(os.PRIO_PROCESS, 0))
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    serverprocess.take_terminal()
    argv = [str(a) for a in job["argv"]]  # type: ignore[attr-defined]
    sys.argv = argv
    _send(conn, "pid", os.getpid())

    def orphaned() -> None:  # the client died (cancelled run): stop the job
        with contextlib.suppress(OSError):
            conn.recv(1)
        os.killpg(0, signal.SIGTERM)

    threading.Thread(target=orphaned, daemon=True).start()
    import gc

    gc.set_threshold(50_000, 20, 20)  # a short-lived job: collect rarely (the default is 700)
    code = 1
    try:
        code = profiling.profiled(kind, TARGETS[kind], argv)
    except BaseException as err:  # report, as the real program would, then exit non-zero
        import traceback

        traceback.print_exception(err)
    finally:
        serverprocess.end_as_a_program()
        with contextlib.suppress(OSError):
            _send(conn, "exit", code)
        os._exit(code)


def serve(sockets: Mapping[str, str]) -> None:
    """Preload every kind in `sockets` (kind -> socket path) with its patches, check them,
    report, listen on each socket, fork a child per job; runs until killed. One process for
    both kinds holds their common imports once (the module kind first: its jobs are told
    apart from the controller in `modulehost`)."""
    serverprocess.die_with_parent()
    # Stopped by SIGTERM (by the executor, or at the operator's death): the server's exit
    # handlers run (Ansible's local temp folder of this process), as a program's would; the
    # signal pipe wakes the loop below for it whenever it comes (process.wake_on_signals).
    signal.signal(signal.SIGTERM, serverprocess.exit_on_term)
    wakeup = serverprocess.wake_on_signals()
    status = os.path.join(os.path.dirname(next(iter(sockets.values()))), STATUS_FILE)
    try:
        apply.start(sockets)
        for kind in sorted(sockets, key=lambda kind: kind != "module"):
            preload_for(kind)
        if apply.installed("module-host"):
            modulehost.seal()
        apply.check_all()
        import gc

        gc.collect()
        for name in apply.install_phase("sealed"):  # immortal: jobs' refcounts leave them alone
            apply.check(name)
        gc.freeze()  # jobs' garbage collections leave the preloaded objects (their pages) alone
    except apply.PatchFailed as failed:
        apply.report(status, failed)
        print(f"forkserver: {failed}", file=sys.stderr)
        serverprocess.end_as_a_program()
        os._exit(3)
    apply.report(status, None)
    serverprocess.trim_heap()
    baseline = configrefresh.comparable(os.environ)
    # Reap finished jobs (not SIG_IGN: their CPU time must add up in this process's rusage,
    # so that the operator's whole process tree can be accounted for).
    signal.signal(signal.SIGCHLD, serverprocess.reap)
    serve_forever({_listen(path): kind for kind, path in sockets.items()}, baseline, wakeup)


def serve_forever(listeners: Mapping[socket.socket, str], baseline: object, wakeup: int) -> None:
    """Wait for clients and for the signal pipe (process.wake_on_signals); fork a child per
    job. Ends only by a signal's handler (SIGTERM: exit_on_term)."""
    by_fd = {listener.fileno(): listener for listener in listeners}
    while True:
        ready, _, _ = select.select([wakeup, *by_fd], [], [])
        for fd in ready:
            if fd == wakeup:
                serverprocess.drain_wakeup(wakeup)  # its handler runs next (SIGTERM: the end)
            else:
                _serve_one(by_fd[fd], listeners[by_fd[fd]], listeners, baseline)


def _listen(socket_path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.setblocking(False)  # select() said a client is there; accept() never waits
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
    try:
        conn, _ = listener.accept()
    except BlockingIOError:  # the client went away meanwhile
        return
    fds: list[int] = []
    try:
        conn.settimeout(JOB_RECEIVE_TIMEOUT)  # a client that connects and stalls
        job, fds = _recv_job(conn)
        conn.settimeout(None)
        env = job.get("env")
        if not isinstance(env, dict) or (
            kind == "playbook" and configrefresh.comparable(env) != baseline
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
