"""A local cluster with one real node (make cluster NODE=real), for the tests where Pods really run.

The `real_cluster` fixture: hack/cluster.sh up with NODE=real (kwok Nodes tainted NoSchedule
plus one real node, kubelet + containerd + kube-proxy, hack/real-node.sh), always torn down
afterwards; and the host's state as `make cluster-down NODE=real` must leave it. `why_not()`
says why this machine cannot host a real node (None when it can); with
OPERATOR_RUNNER_REQUIRE_REAL_NODE=1 that, a missing binary or image, or another real-node
cluster, is a failure instead of a skip.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from ..conftest import REPO, Cluster, _sigterm_as_interrupt
from .waiting import wait_for

REAL_NODE_SH = REPO / "hack" / "real-node.sh"
CLUSTER_SH = REPO / "hack" / "cluster.sh"
NODE_IMAGES_SH = REPO / "hack" / "node-images.sh"
BUILD_BINARIES_SH = REPO / "hack" / "build-binaries.sh"
NODE_NAME = "real-node"


def _cannot_host() -> str | None:
    """Why this machine cannot host a real node (hack/real-node.sh check), or None."""
    proc = subprocess.run(
        [str(REAL_NODE_SH), "check"], capture_output=True, text=True, check=False, timeout=60
    )
    if proc.returncode == 0:
        return None
    return proc.stderr.strip() or f"hack/real-node.sh check exited {proc.returncode}"


def _other_real_node() -> str | None:
    owner = subprocess.run(
        [str(REAL_NODE_SH), "owner"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not owner:
        return None
    free = subprocess.run(
        [str(REAL_NODE_SH), "free-for", f"ort-real-probe-{uuid.uuid4().hex[:6]}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return free.stderr.strip() if free.returncode != 0 else None


REQUIRED = os.environ.get("OPERATOR_RUNNER_REQUIRE_REAL_NODE") == "1"


@functools.cache
def why_not() -> str | None:
    """Why this machine cannot host a real node, or None (asked once per test process)."""
    why = _cannot_host()
    if why and REQUIRED:
        raise RuntimeError(f"OPERATOR_RUNNER_REQUIRE_REAL_NODE=1, but {why}")
    return why


# -- the host's state, as cluster-down must leave it -----------------------------------------

# sysctls that change on their own (counters, random numbers, the last PID, ...).
VOLATILE_SYSCTL = re.compile(
    r"^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\.)|kernel\.(random\.|ns_last_pid"
    r"|pty\.nr|sched_domain|perf_event_max_sample_rate|tainted)|net\.netfilter\.nf_conntrack_count"
    r"|vm\.(stat_|nr_)|fs\.binfmt_misc)"
)


def _lines(*command: str) -> list[str]:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()


def host_state() -> dict[str, list[str]]:
    """What a real node changes on the host, normalized so that two snapshots of an unchanged
    host are equal."""
    sysctls = [
        line
        for line in _lines("sysctl", "-a")
        if not VOLATILE_SYSCTL.match(line.split(" = ", 1)[0])
    ]

    def iptables(save: str) -> list[str]:
        return [
            re.sub(r"\[\d+:\d+\]", "", line) for line in _lines(save) if not line.startswith("#")
        ]

    # Mounts under /tmp are other users' scratch builds (a debootstrap's /proc comes and goes
    # while this test runs); a real node mounts under its state folder and the host paths.
    mounts = [
        line
        for line in Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
        if not line.split()[1].startswith("/tmp/")
    ]
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods"))
    paths = sorted(
        p
        for p in (
            "/run/containerd",
            "/var/lib/cni",
            "/var/log/pods",
            "/var/log/containers",
            "/run/netns",
            "/opt/containerd",
        )
        if os.path.lexists(p)
    )
    return {
        "sysctl": sorted(sysctls),
        "iptables-save": iptables("iptables-save"),
        "ip6tables-save": iptables("ip6tables-save"),
        "ip -o link": sorted(re.sub(r"^\d+: ", "", line) for line in _lines("ip", "-o", "link")),
        "/proc/mounts": sorted(mounts),
        "kubepods cgroups": cgroups,
        "paths": paths,
    }


def diff_states(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for key in before:
        gone = sorted(set(before[key]) - set(after[key]))
        new = sorted(set(after[key]) - set(before[key]))
        if gone or new:
            changes[key] = {"before only": gone, "after only": new}
    return changes


# -- the cluster -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RealCluster(Cluster):
    """A Cluster with the host's state from before it came up."""

    host_before: dict[str, list[str]] = field(default_factory=dict)


def _not_ready(why: str) -> NoReturn:
    """Skip (fail with OPERATOR_RUNNER_REQUIRE_REAL_NODE=1): this run cannot have a real node."""
    if REQUIRED:
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def _check_built() -> Path:
    proc = subprocess.run(
        [str(BUILD_BINARIES_SH), "--check", "--node"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        _not_ready(
            (proc.stderr.strip() or "binaries missing")
            + " (make binaries NODE=real builds them before pytest)"
        )
    images = subprocess.run(
        [str(NODE_IMAGES_SH), "check"], capture_output=True, text=True, check=False
    )
    if images.returncode != 0:
        _not_ready(images.stderr.strip() or "node images missing (make node-images)")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[RealCluster]:
    other = _other_real_node()
    if other:
        _not_ready(f"one real node per machine: {other}")
    bin_dir = _check_built()
    name = f"ort-real-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    environ = {**os.environ, "NODE": "real"}
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    before = host_state()
    try:
        subprocess.run([str(CLUSTER_SH), "up", name], check=True, env=environ, timeout=600)
        kubeconfig = subprocess.run(
            [str(CLUSTER_SH), "kubeconfig", name],
            check=True,
            capture_output=True,
            text=True,
            env=environ,
        ).stdout.strip()
        yield RealCluster(
            name=name, kubeconfig=Path(kubeconfig), bin_dir=bin_dir, host_before=before
        )
    finally:
        subprocess.run([str(CLUSTER_SH), "down", name], check=False, env=environ, timeout=600)
        signal.signal(signal.SIGTERM, previous)


# -- an operator deployed from its image ------------------------------------------------------


def load_image(image: str) -> None:
    """Put an image of hack/image.sh's storage into the real node's containerd."""
    proc = subprocess.run(
        [str(REAL_NODE_SH), "load-image", image], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"hack/real-node.sh load-image {image}: {proc.stderr[-3000:]}"


def deploy(cluster: Cluster, config: Path, image: str) -> str:
    """`kubectl kustomize CONFIG`, its `controller:latest` image set to IMAGE (what an
    operator-sdk project's `make deploy IMG=...` does with `kustomize edit set image`), applied.
    The manifests are returned."""
    manifests = cluster.kubectl("kustomize", str(config))
    manifests, count = re.subn(
        r"image: controller:latest$", f"image: {image}", manifests, flags=re.M
    )
    assert count == 1, f"{config}: expected one container with image controller:latest"
    cluster.kubectl("apply", "-f", "-", input=manifests)
    return manifests


def ready_pod(
    cluster: Cluster, namespace: str, selector: str, timeout: float = 300
) -> dict[str, Any]:
    """The one Ready Pod of `selector` in `namespace` (after a rollout: the only one left). A
    container that keeps exiting fails at once, with its last log."""

    def ready() -> dict[str, Any] | None:
        pods = json.loads(
            cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
        )
        live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
        if len(live) != 1:
            return None
        for container in live[0].get("status", {}).get("containerStatuses") or []:
            if container.get("restartCount", 0) >= 2:
                name = live[0]["metadata"]["name"]
                logs = cluster.kubectl(
                    "logs",
                    "-n",
                    namespace,
                    name,
                    "-c",
                    container["name"],
                    "--previous",
                    "--tail=30",
                    check=False,
                )
                raise AssertionError(
                    f"{namespace}/{name}: container {container['name']} keeps exiting "
                    f"({container.get('lastState')}); its last log:\n{logs}"
                )
        conditions = live[0].get("status", {}).get("conditions") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return dict(live[0])
        return None

    try:
        return wait_for(ready, timeout=timeout, what=f"a Ready Pod {selector} in {namespace}")
    except AssertionError as err:
        if "keeps exiting" in str(err):
            raise
        describe = cluster.kubectl("describe", "pods", "-n", namespace, "-l", selector, check=False)
        logs = cluster.kubectl("logs", "-n", namespace, "-l", selector, "--tail=40", check=False)
        raise AssertionError(f"{err}\n{describe[-3000:]}\n{logs[-3000:]}") from None
