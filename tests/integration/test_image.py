"""The operator image (Dockerfile), built and run with no Docker engine and no registry.

`hack/image.sh build` builds it with buildah on a base made with debootstrap (both cached
outside the repo by content hash: the first build on a machine takes a few minutes, later ones
none). `hack/image.sh run` runs the image's own entrypoint (tini -> operator-runner) from the
image's root filesystem, mounted read-only, with a tmpfs on /tmp, as the image's user, in its own
PID namespace, on the host's network, against the test cluster. The sample CRs must converge, and
the process must be uid 1001 without privileges and leave the image's filesystem untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from .conftest import Cluster
from .kit import condition, temporary_namespace, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
IMAGE_SH = REPO / "hack" / "image.sh"
SAMPLES = REPO / "config" / "samples"
ECHO = ("app.my.domain", "v1", "echoes", "echo-sample")
FLASK = ("swallowlab.com", "v1alpha1", "echoflasks", "example-echoflask")
ENTRYPOINT = ["tini", "--", "operator-runner", "run", "--watches-file=./watches.yaml"]


def image_sh(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(
        [str(IMAGE_SH), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, f"hack/image.sh {' '.join(args)}: {proc.stderr[-4000:]}"
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def image() -> str:
    if os.geteuid() != 0:
        pytest.skip("building and running the image needs root (debootstrap, chroot, namespaces)")
    return image_sh("build", timeout=1500)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the task ended meanwhile
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    todo, seen = children(pid), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children(p)
    return seen


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def mounts(pid: int) -> dict[str, tuple[str, str]]:
    """mount point -> (filesystem type, mount options), as the process sees them."""
    found = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        found[fields[4]] = (fields[sep + 1], fields[5])
    return found


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under root -> (mode, size, mtime): what a write would change."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            state[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return state


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except OSError as err:
        return 0, str(err)


def converged(api: client.ApiClient, what: tuple[str, str, str, str], ns: str) -> Any:
    group, version, plural, name = what
    obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
        group, version, ns, plural, name
    )
    ok = condition(obj, "Successful")
    if (
        ok
        and ok["status"] == "True"
        and ok.get("observedGeneration") == obj["metadata"]["generation"]
    ):
        return obj
    return None


def owned_by(obj: Any, owner: dict[str, Any]) -> bool:
    return any(r.uid == owner["metadata"]["uid"] for r in obj.metadata.owner_references or [])


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    for crd in ("echoes.app.my.domain", "echoflasks.swallowlab.com"):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")
    with temporary_namespace(cluster, "ort-image") as name:
        yield name


def test_image_config(image: str) -> None:
    config = json.loads(image_sh("inspect", env={"IMAGE": image}))["OCIv1"]["config"]
    assert config["User"] == "1001"
    assert config["Entrypoint"] == ENTRYPOINT
    assert config["WorkingDir"] == "/opt/ansible"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["HOME"] == "/tmp"
    assert env["ANSIBLE_LOCAL_TEMP"].startswith("/tmp/")
    rootfs = Path(image_sh("rootfs", env={"IMAGE": image}))
    for path in ("opt/ansible/watches.yaml", "opt/ansible/roles/echo", "opt/ansible/playbooks"):
        assert (rootfs / path).exists(), path
    site = next((rootfs / "opt/venv/lib").glob("python3.11/site-packages"))
    assert (site / "ansible_collections/kubernetes/core").is_dir()
    assert (site / "runner/ansible/collections/ansible_collections/operator_sdk/util").is_dir()
    # No build tools, no pip cache, no apt lists left behind.
    assert not list((rootfs / "usr/bin").glob("gcc*"))
    assert not (rootfs / "root/.cache/pip").exists()
    assert not any((rootfs / "var/lib/apt/lists").glob("*Packages*"))


def test_image_converges_the_samples_as_uid_1001_on_a_read_only_root(
    cluster: Cluster, image: str, namespace: str, tmp_path: Path
) -> None:
    rootfs = Path(image_sh("rootfs", env={"IMAGE": image}))
    before = tree(rootfs)
    health, metrics = free_port(), free_port()
    log_path = tmp_path / "image.log"
    env = {
        **os.environ,
        "IMAGE": image,
        "KUBECONFIG": str(cluster.kubeconfig),
        "WATCH_NAMESPACE": namespace,
    }
    args = [
        f"--health-probe-bind-address=127.0.0.1:{health}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        "--role-metrics-bind-address=127.0.0.1:0",  # not 5050: operators run side by side
        "--log-format=json",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(IMAGE_SH), "run", "--", *args], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    api = cluster.api_client()
    try:

        def operator_pid() -> int | None:
            for pid in descendants(proc.pid):
                try:
                    argv = cmdline(pid)
                except OSError:
                    continue
                if len(argv) > 2 and argv[1].endswith("/operator-runner") and argv[2] == "run":
                    return pid
            return None

        pid = wait_for(operator_pid, timeout=120, what="the operator process in the image")
        cluster.kubectl("apply", "-n", namespace, "-k", str(SAMPLES))
        echo = wait_for(
            lambda: converged(api, ECHO, namespace), timeout=180, what="Echo Successful"
        )
        flask = wait_for(
            lambda: converged(api, FLASK, namespace), timeout=180, what="EchoFlask Successful"
        )
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        assert owned_by(core.read_namespaced_pod("echo-sample", namespace), echo)
        deployment = apps.read_namespaced_deployment("example-echoflask-deployment", namespace)
        assert owned_by(deployment, flask)
        assert owned_by(core.read_namespaced_service("example-echoflask-svc", namespace), flask)

        # The image's Python and the image's operator-runner, as uid 1001, no privileges.
        argv = cmdline(pid)
        assert argv[:3] == ["/opt/venv/bin/python3", "/opt/venv/bin/operator-runner", "run"]
        assert "--watches-file=./watches.yaml" in argv
        assert os.readlink(f"/proc/{pid}/cwd").endswith("/opt/ansible")
        status = proc_status(pid)
        assert status["Uid"].split() == ["1001"] * 4
        assert status["Gid"].split() == ["0"] * 4
        assert status["Groups"] == ""
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        assert status["NoNewPrivs"] == "1"
        # tini is PID 1 of the container's PID namespace, and the operator's parent.
        tini = int(status["PPid"])
        assert cmdline(tini)[:2] == ["tini", "--"]
        assert proc_status(tini)["NSpid"].split()[-1] == "1"
        assert proc_status(tini)["Uid"].split() == ["1001"] * 4
        # Read-only root; /tmp is the only writable place, and the runner writes there.
        seen = mounts(pid)
        assert "ro" in seen["/"][1].split(","), seen["/"]
        assert seen["/tmp"][0] == "tmpfs" and "rw" in seen["/tmp"][1].split(",")
        assert (Path(f"/proc/{pid}/root/tmp/operator-runner")).is_dir()
        # Health probes and metrics from outside the container.
        assert http_get(health, "/healthz")[0] == 200
        assert http_get(health, "/readyz")[0] == 200
        code, text = http_get(metrics, "/metrics")
        assert code == 200 and "# TYPE" in text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=90)
    log_text = log_path.read_text(errors="replace")
    assert rc == 0, log_text[-4000:]
    assert "Read-only file system" not in log_text
    assert tree(rootfs) == before, "the operator wrote to the image's filesystem"
