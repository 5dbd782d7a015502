"""Run the real operator (the `operator-runner` console script) against the test cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from ..conftest import Cluster
from .waiting import wait_for

PROJECT = Path(__file__).resolve().parents[1] / "project"


class RunningOperator:
    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, artifacts: Path) -> None:
        self.proc = proc
        self.log_path = log_path
        self.artifacts = artifacts

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for raw in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append({"msg": raw})
        return lines

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def exit_code(self, timeout: float = 60) -> int:
        """For an operator expected to stop by itself: its exit status. If it is still running
        after `timeout` s, it is stopped and the test fails with its log."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(
                f"the operator did not exit within {timeout:g} s:\n{self.log_text()[-3000:]}"
            ) from None

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


def logged(op: RunningOperator, text: str) -> bool:
    return any(text in str(line.get("msg", "")) for line in op.log_lines())


def wait_logged(op: RunningOperator, text: str, timeout: float) -> None:
    try:
        wait_for(lambda: logged(op, text), timeout=timeout, what=f"log line {text!r}")
    except AssertionError:
        print(op.log_text()[-4000:])
        raise


def line_at(line: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(line["ts"]))


def logged_at(op: RunningOperator, text: str) -> datetime | None:
    """When `text` was first logged."""
    for line in op.log_lines():
        if text in str(line.get("msg", "")) and "ts" in line:
            return line_at(line)
    return None


def launch(
    cluster: Cluster,
    tmp: Path,
    *,
    watches: Path = PROJECT / "watches.yaml",
    namespaces: list[str] | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    max_concurrent: int = 4,
    exe: Path | None = None,
) -> RunningOperator:
    """Start `operator-runner run` (log and artifacts under `tmp`); the caller stops it.
    `exe`: another operator-runner than the test's own (another line's virtualenv)."""
    log_path = tmp / "operator.log"
    artifacts = tmp / "artifacts"
    exe = exe or Path(sys.executable).parent / "operator-runner"
    environ = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), **(env or {})}
    # As operator-sdk's scaffold sets it (config/manager/manager.yaml): role runs gather no
    # facts. A test that wants them passes ANSIBLE_GATHERING=implicit.
    environ.setdefault("ANSIBLE_GATHERING", "explicit")
    environ["WATCH_NAMESPACE"] = ",".join(namespaces or [])
    command = [
        str(exe),
        "run",
        f"--watches-file={watches}",
        "--log-format=json",
        "--zap-log-level=debug",  # every task and run: tests look for ok tasks and quiet runs
        f"--artifacts-dir={artifacts}",
        f"--max-concurrent-reconciles={max_concurrent}",
        # no fixed ports in tests (operators may run side by side); `args` may override these
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--role-metrics-bind-address=127.0.0.1:0",  # osdk_metric's listener, on a free port
        # validate:/mutate: webhooks on a free port, under configurations of their own (they are
        # cluster-wide objects; WATCH_NAMESPACE limits them to the test's namespaces)
        "--webhook-bind-address=127.0.0.1:0",
        f"--webhook-configuration-name=test-{uuid.uuid4().hex[:10]}",
        *args,
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environ, cwd=watches.parent
        )
    return RunningOperator(proc, log_path, artifacts)


@contextmanager
def operator(
    cluster: Cluster,
    tmp: Path,
    *,
    watches: Path = PROJECT / "watches.yaml",
    namespaces: list[str] | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    exe: Path | None = None,
) -> Iterator[RunningOperator]:
    """Start `operator-runner run`; stop it with SIGTERM afterwards and expect exit 0."""
    running = launch(
        cluster, tmp, watches=watches, namespaces=namespaces, args=args, env=env, exe=exe
    )
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, f"operator exited {code}:\n{running.log_text()[-3000:]}"


def crd(group: str, kind: str, *, status_subresource: bool = True) -> dict[str, Any]:
    plural = kind.lower() + "s"
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }
        },
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [version],
        },
    }


def install_crd(api: client.ApiClient, definition: dict[str, Any]) -> None:
    ext = client.ApiextensionsV1Api(api)
    name = definition["metadata"]["name"]

    def there() -> bool | None:
        """True: the CRD is there and stays; False: being deleted; None: gone."""
        try:
            found = ext.read_custom_resource_definition(name)
        except client.exceptions.ApiException as err:
            if err.status == 404:
                return None
            raise
        return found.metadata.deletion_timestamp is None

    def created() -> bool:
        """Created now, or there already and staying (the same CRD of another test). While the
        same CRD of a test that ended is being deleted, the create is refused (409), and the CRD
        can be gone by the time it is read again: try again until one of the two holds."""
        try:
            ext.create_custom_resource_definition(definition)
        except client.exceptions.ApiException as err:
            if err.status != 409:
                raise
            return there() is True
        return True

    wait_for(created, timeout=60, what=f"CRD {name} created (an old one deleted first)")

    def established() -> bool:
        crd_now = ext.read_custom_resource_definition(name)
        return any(
            c.type == "Established" and c.status == "True" for c in crd_now.status.conditions or []
        )

    wait_for(established, timeout=30, what=f"CRD {name} Established")


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None
