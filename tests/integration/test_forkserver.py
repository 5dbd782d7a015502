"""The warm executors' fork servers and their client, as real processes (no cluster needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runner.ansible.warm import client as forkclient
from runner.ansible.warm.patches import direct

from .conftest import Cluster

# every line: the warm executor's patches differ per ansible-core line
pytestmark = pytest.mark.lines

if TYPE_CHECKING:
    from runner.ansible.executor import Executor

SOCKET_ENV = "TEST_FORKSERVER_SOCKET"
SERVER = "runner.ansible.warm.server.forkserver"


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "the fork server exited"
        assert time.monotonic() < deadline, f"no socket at {path} after {timeout} s"
        time.sleep(0.05)


@pytest.fixture
def module_server(tmp_path: Path) -> Iterator[Path]:
    sock = tmp_path / "module.sock"
    proc = subprocess.Popen([sys.executable, "-m", SERVER, "module", str(sock)])
    try:
        _wait_for(sock, proc)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=10)  # within 0.05 s, saturated CPUs included (test_warm_stop.py)


def _client(tmp_path: Path, fallback: list[str]) -> Path:
    return forkclient.write_client(tmp_path / "client", sys.executable, SOCKET_ENV, fallback)


SCRIPT = """
import os, sys
# forked by the server, or exec'd by the client that the test started (the fallback)
in_client = os.getppid() == int(os.environ["CLIENT_PARENT"])
print("job", "in the client" if in_client else "in the server", os.getcwd(), sys.argv[1:],
      os.environ["GREETING"], sys.stdin.readline().strip())
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def _run(
    client: Path, tmp_path: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run(
        [str(client), str(script), *args],
        input="from stdin\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env, "GREETING": "héllo", "CLIENT_PARENT": str(os.getpid())},
        timeout=60,
    )


def test_a_job_runs_in_the_server_with_the_clients_argv_cwd_env_and_streams(
    module_server: Path, tmp_path: Path
) -> None:
    client = _client(tmp_path, [sys.executable, "-c", "print('fallback')"])
    done = _run(client, tmp_path, {SOCKET_ENV: str(module_server)}, "3", "two words")
    assert done.returncode == 3
    assert done.stdout == f"job in the server {tmp_path} ['3', 'two words'] héllo from stdin\n"
    assert done.stderr == "to stderr\n"


def test_a_playbook_job_hands_a_pipelined_module_to_the_module_server_itself(
    module_server: Path, tmp_path: Path
) -> None:
    """direct.run_job: what the local connection gets instead of Popen().communicate()."""
    code = (
        "import os, sys\n"
        "print(os.getcwd(), os.environ['GREETING'], os.getppid() != PARENT)\n"
        "sys.stdout.write('x' * 300000)\n"  # more than a pipe holds: read while writing
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(5)\n"
    ).replace("PARENT", str(os.getpid()))
    padding = "#" * 200000 + "\n"  # the job's code on stdin: more than a pipe holds, too
    env = {**os.environ, "GREETING": "héllo"}
    result = direct.run_job(
        str(module_server), [sys.executable], str(tmp_path), env, (padding + code).encode()
    )
    assert result is not None
    rc, out, err = result
    assert rc == 5
    first, rest = out.split(b"\n", 1)
    assert first.decode() == f"{tmp_path} héllo True"
    assert rest == b"x" * 300000
    assert err == b"to stderr\n"
    assert direct.run_job(str(tmp_path / "nobody.sock"), [sys.executable], "/", env, b"") is None


def test_a_module_job_of_the_server_for_both_kinds_sees_no_controller(tmp_path: Path) -> None:
    """One server preloads both kinds; a module job still imports its collection from its own
    payload and takes ansible.module_utils' module-side paths (runner/ansible/modulehost.py)."""
    payload = tmp_path / "payload.zip"  # as AnsiballZ lays a collection's files out
    package = "ansible_collections/kubernetes/core/plugins/module_utils"
    with zipfile.ZipFile(payload, "w") as zf:
        parts = package.split("/")
        for depth in range(1, len(parts) + 1):
            zf.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        zf.writestr(f"{package}/probe.py", "WHERE = 'zip'\n")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(payload)!r})\n"
        "import ansible.module_utils as utils\n"
        "from ansible.utils.collection_loader import AnsibleCollectionConfig\n"
        "from ansible_collections.kubernetes.core.plugins.module_utils import probe\n"
        "internal = getattr(utils, '_internal', None)  # 2.19 on: is_controller\n"
        "finder = AnsibleCollectionConfig.collection_finder\n"
        "print(getattr(internal, 'is_controller', False), finder, probe.WHERE,\n"
        "      probe.__file__.startswith(sys.path[0]))\n"
    )
    socks = {kind: tmp_path / f"{kind}.sock" for kind in ("playbook", "module")}
    args = [str(a) for kind, sock in socks.items() for a in (kind, sock)]
    proc = subprocess.Popen([sys.executable, "-m", SERVER, *args])
    try:
        for sock in socks.values():
            _wait_for(sock, proc, timeout=120)
        result = direct.run_job(
            str(socks["module"]), [sys.executable], str(tmp_path), dict(os.environ), code.encode()
        )
        assert result is not None
        rc, out, err = result
        assert (rc, out.decode()) == (0, "False None zip True\n"), err.decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_without_a_server_the_client_runs_the_real_program(tmp_path: Path) -> None:
    client = _client(tmp_path, [sys.executable])
    for env in ({}, {SOCKET_ENV: str(tmp_path / "nobody-listens.sock")}):
        done = _run(client, tmp_path, env, "4")
        assert done.returncode == 4
        assert done.stdout == f"job in the client {tmp_path} ['4'] héllo from stdin\n"


def test_the_playbook_server_refuses_another_ansible_environment(tmp_path: Path) -> None:
    sock = tmp_path / "playbook.sock"
    env = {**os.environ, "ANSIBLE_FORKS": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", SERVER, "playbook", str(sock)],
        env=env,
    )
    try:
        _wait_for(sock, proc, timeout=120)
        client = _client(
            tmp_path, [sys.executable, "-c", "import sys; print('real', sys.argv[1:])"]
        )
        done = subprocess.run(
            [str(client), "--version"],
            capture_output=True,
            text=True,
            env={**env, SOCKET_ENV: str(sock), "ANSIBLE_FORKS": "4"},
            timeout=60,
        )
        assert done.returncode == 0
        assert done.stdout == "real ['--version']\n"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_signals_to_the_client_reach_the_job(module_server: Path, tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    marker = tmp_path / "started"
    script.write_text(
        "import pathlib, sys, time\n"
        f"pathlib.Path({str(marker)!r}).write_text('x')\n"
        "time.sleep(60)\n"
    )
    client = _client(tmp_path, [sys.executable])
    proc = subprocess.Popen(
        [str(client), str(script)], env={**os.environ, SOCKET_ENV: str(module_server)}
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) != 0
    finally:
        proc.kill()


PING = "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ping:\n"


def _playbook(tmp_path: Path, text: str = PING) -> Path:
    playbook = tmp_path / "project" / "main.yml"
    playbook.parent.mkdir()
    playbook.write_text(text)
    return playbook


def _run_ok(executor: Executor, tmp_path: Path, playbook: Path, ident: str) -> None:
    """One run of `playbook` in `tmp_path`/private through `executor`, which must succeed."""
    from runner.ansible.interface import RunRequest

    request = RunRequest(
        private_dir=tmp_path / "private", ident=ident, playbook=playbook, extravars_text="{}"
    )
    result = executor.run_sync(request)
    assert result.ok, (ident, result.status, result.stdout_tail)


def test_idle_warm_executors_stop_and_start_again_with_the_next_run(tmp_path: Path) -> None:
    from runner.ansible.executor import Executor

    playbook = _playbook(tmp_path)
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm_idle_timeout=1.0)
    try:
        _run_ok(executor, tmp_path, playbook, "first")
        assert executor.warm_running
        deadline = time.monotonic() + 30
        while executor.warm_running:
            assert time.monotonic() < deadline, "the warm executors did not stop when idle"
            time.sleep(0.1)
        _run_ok(executor, tmp_path, playbook, "second")
        assert executor.warm_running
    finally:
        executor.close()
    assert not executor.warm_running


@pytest.mark.parametrize("slots", [1, 2])
def test_runs_in_flight_stay_within_the_operators_run_slots(tmp_path: Path, slots: int) -> None:
    import asyncio

    from runner.ansible.executor import Executor
    from runner.ansible.interface import RunRequest

    log = tmp_path / "log"
    playbook = _playbook(
        tmp_path,
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        f"    - shell: echo start $(date +%s%N) >> {log}\n"
        "    - command: sleep 3\n"
        f"    - shell: echo end $(date +%s%N) >> {log}\n",
    )
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", max_parallel_runs=slots)

    async def both() -> None:
        requests = [
            RunRequest(
                private_dir=tmp_path / f"private-{i}",
                ident="run",
                playbook=playbook,
                extravars_text="{}",
            )
            for i in range(2)
        ]
        results = await asyncio.gather(*(executor.run(r) for r in requests))
        assert all(r.ok for r in results), [(r.status, r.stdout_tail) for r in results]

    try:
        asyncio.run(both())
    finally:
        executor.close()
    events = sorted(
        (int(t), word) for word, t in (line.split() for line in log.read_text().splitlines())
    )
    words = [word for _, word in events]
    if slots == 1:
        assert words == ["start", "end", "start", "end"]
    else:
        assert words == ["start", "start", "end", "end"]


def test_a_cr_that_ran_warm_runs_on_the_plain_path_too(tmp_path: Path) -> None:
    """ansible-runner keeps a run's command line in env/cmdline and reuses it when the next run
    passes none: after a warm run (the playbook is an argument of the warm client), a plain run
    in the same folder (the warm executors could not start) got the playbook twice."""
    from runner.ansible.executor import Executor

    playbook = _playbook(tmp_path)
    for ident, warm in (("warm", True), ("plain", False)):
        executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm=warm)
        try:
            _run_ok(executor, tmp_path, playbook, ident)
        finally:
            executor.close()


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "plain"])
def test_runs_keep_their_temp_files_in_a_folder_that_goes_with_the_executor(
    tmp_path: Path, cluster: Cluster, warm: bool
) -> None:
    """kubernetes.core writes its discovery cache to TMPDIR, one file per API server URL: the
    runs' URL is the roles' proxy, on a new port at every start, so in the system's temp
    folder a file was left behind per operator start."""
    from runner.ansible.executor import Executor

    playbook = _playbook(
        tmp_path,
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - kubernetes.core.k8s_info:\n"
        f"        kubeconfig: {cluster.kubeconfig}\n"
        "        kind: Namespace\n"
        "        name: default\n",
    )
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm=warm)
    try:
        _run_ok(executor, tmp_path, playbook, "tmp")
        assert list(executor.run_tmp.glob("k8srcp-*.json")), sorted(executor.run_tmp.iterdir())
    finally:
        executor.close()
    assert not executor.run_tmp.exists()


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "plain"])
def test_a_run_leaves_no_ansible_local_temp_folder(tmp_path: Path, warm: bool) -> None:
    """ansible-playbook makes `ansible-local-<pid>...` in ANSIBLE_LOCAL_TEMP and removes it at
    exit (atexit): a warm job, which ends with os._exit, left one per run behind, and the fork
    server (which imports Ansible) one per start."""
    from runner.ansible.executor import Executor

    playbook = _playbook(tmp_path)
    tmp_dir = tmp_path / "tmp"
    executor = Executor(roles_paths=[], tmp_dir=tmp_dir, warm=warm)
    left = []
    try:
        for ident in ("first", "second", "third"):
            _run_ok(executor, tmp_path, playbook, ident)
            left.append(sorted(tmp_dir.glob("ansible-local-*")))
    finally:
        executor.close()
    assert left[0] == left[1] == left[2], left  # at most the server's own, while it runs
    deadline = time.monotonic() + 30
    while list(tmp_dir.glob("ansible-local-*")):  # the server removes its own as it stops
        assert time.monotonic() < deadline, sorted(tmp_dir.iterdir())
        time.sleep(0.05)


def test_a_job_runs_at_its_clients_priority(module_server: Path, tmp_path: Path) -> None:
    """A reconcile's runs are niced (executor.py): a job forked by the server takes its
    client's nice value, as the program it stands in for would."""
    script = tmp_path / "nice.py"
    script.write_text("import os; print(os.getpriority(os.PRIO_PROCESS, 0), os.getppid())")
    client = _client(tmp_path, [sys.executable, "-c", "print('fallback')"])
    base = os.getpriority(os.PRIO_PROCESS, 0)
    done = subprocess.run(
        ["nice", "-n", "5", str(client), str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, SOCKET_ENV: str(module_server)},
        timeout=60,
    )
    nice, parent = done.stdout.split()
    assert int(parent) != os.getpid()  # forked by the server, not the client's fallback
    assert int(nice) == min(base + 5, 19)


NICE = """- hosts: localhost
  gather_facts: false
  tasks:
    - command: cut -d " " -f 19 /proc/self/stat
      register: nice
    - copy:
        content: "{{ nice.stdout }}"
        dest: "{{ playbook_dir }}/nice.txt"
"""


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "plain"])
def test_a_reconciles_run_is_niced_and_the_warm_server_is_not(tmp_path: Path, warm: bool) -> None:
    """A reconcile's run yields the CPU to admissions' runs, which the warm server forks (and
    the plain path starts) from the event loop, at the operator's priority."""
    import asyncio

    from runner.ansible.executor import Executor
    from runner.ansible.interface import RunRequest
    from runner.util.priority import RUN_NICENESS

    playbook = _playbook(tmp_path, NICE)
    request = RunRequest(
        private_dir=tmp_path / "private", ident="nice", playbook=playbook, extravars_text="{}"
    )
    base = os.getpriority(os.PRIO_PROCESS, 0)
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm=warm)
    try:
        result = asyncio.run(executor.run(request))
        assert result.ok, (result.status, result.stdout_tail)
        assert executor.warm_running == warm
        if warm:
            server = executor._warm._pool.server_pid  # type: ignore[union-attr]
            assert os.getpriority(os.PRIO_PROCESS, server) == base
    finally:
        executor.close()
    assert int((playbook.parent / "nice.txt").read_text()) == min(base + RUN_NICENESS, 19)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "plain"])
def test_a_quick_run_takes_the_job_prepared_ahead(tmp_path: Path, warm: bool) -> None:
    """An admission's run is prepared before its first request (the webhooks wait for it):
    a job that reads its extra vars, on the warm executor when it is up, which the run takes."""
    import asyncio
    import dataclasses

    from runner.ansible.executor import Executor
    from runner.ansible.interface import QuickRequest

    playbook = _playbook(tmp_path, "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                         "    - debug: {msg: '{{ say }}'}\n")  # fmt: skip
    request = QuickRequest(playbook=playbook, extravars_text="", envvars={})
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm=warm)

    async def go() -> None:
        assert await executor.prepare_quick(request)
        [(spec, (job, attempt, _))] = executor._quick._ready.items()
        assert spec.warm is attempt.warm is warm and job.alive
        result = await executor.run_quick(dataclasses.replace(request, extravars_text="say: hi"))
        assert result.status == "successful", result.stdout_tail
        assert not job.alive  # the run took the job prepared ahead

    try:
        asyncio.run(go())
    finally:
        executor.close()
