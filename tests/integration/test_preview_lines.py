"""A preview of a line jump, on roles written for ansible-core 2.15-2.18.

The operator runs on the default line (2.18, its own virtualenv: the line in production) and
reconciles CRs of the roles of tests/integration/project/roles/{truthy, fragment, optional,
embedded, fixed}. The candidate is this test's virtualenv (`make test` runs the file on every
line): `operator-runner preview` from it says, per CR, unchanged on the lines up to 2.18, and
from 2.19 on names the failing task, its file and line, and the ansible-core change the
migration guide gives the fix for. The line jumped from is read from the CRs' status (the field
manager of the operator's status writes). The role with the guide's fixes (`fixed`) runs on
every line, and from 2.19 on would change a ConfigMap's text: its switched-off fragment renders
nothing where it rendered a blank line. A role changed in a new checkout (a renamed field) is
"would change", with its diff.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Cluster
from .kit import PROJECT, Env, crd, install_crd, temporary_namespace

pytestmark = [pytest.mark.integration, pytest.mark.lines]

GROUP = "preview-lines.operator-runner.dev"
WATCHES = PROJECT / "watches-preview-lines.yaml"
KINDS = ("Truthy", "Fragment", "Optional", "Embedded", "Fixed")
CANDIDATE = Path(sys.executable).parent / "operator-runner"
VERSION = importlib.metadata.version("ansible-core")
LINE = ".".join(VERSION.split(".")[:2])
BROKEN = tuple(int(n) for n in LINE.split(".")) >= (2, 19)
# CR -> (its spec, the change that breaks it from 2.19 on, or None)
CRS: dict[tuple[str, str], tuple[dict[str, Any], str | None]] = {
    ("Truthy", "some"): ({"entries": ["a", "b"]}, "conditional-not-boolean"),
    ("Truthy", "none"): ({"entries": []}, "conditional-not-boolean"),
    ("Fragment", "on"): ({"extraSettings": "x"}, None),
    ("Fragment", "off"): ({"extraSettings": ""}, "template-renders-none"),
    ("Optional", "with"): ({"optionalEnabled": True}, None),
    ("Optional", "without"): ({"optionalEnabled": False}, "template-renders-none"),
    ("Embedded", "three"): ({"replicas": 3}, "template-in-expression"),
    ("Fixed", "fixed"): (
        {"entries": [], "extraSettings": "", "optionalEnabled": False, "replicas": 3},
        None,
    ),
}


def running_line() -> tuple[str, Path]:
    """The default line, and its virtualenv's operator-runner (the operator in production)."""
    line = subprocess.run(
        [str(REPO / "hack" / "lines.sh"), "default"], capture_output=True, text=True, check=True
    ).stdout.strip()
    venv = subprocess.run(
        [str(REPO / "hack" / "lines.sh"), "venv", line], capture_output=True, text=True, check=True
    ).stdout.strip()
    exe = REPO / venv / "bin" / "operator-runner"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: make venv (the default line's virtualenv)", pytrace=False)
    return line, exe


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("preview-lines")
    _, exe = running_line()
    with cluster.api_client() as api, temporary_namespace(cluster, "pl") as namespace:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        environment.start(exe=exe)
        try:
            for (kind, name), (spec, _) in CRS.items():
                environment.create(kind, name, spec)
            for kind, name in CRS:
                environment.wait_condition(kind, name)
            yield environment
        finally:
            environment.stop()


def preview(env: Env, *args: str, watches: Path = WATCHES) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    environ.update(
        KUBECONFIG=str(env.cluster.kubeconfig),
        WATCH_NAMESPACE=env.ns,
        ANSIBLE_GATHERING="explicit",
    )
    return subprocess.run(
        [str(CANDIDATE), "preview", f"--watches-file={watches}", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )


def test_the_jump_to_this_line_is_previewed_with_the_changes_named(env: Env) -> None:
    from_line, _ = running_line()
    proc = preview(env, "-o", "json")
    assert proc.returncode == (2 if BROKEN else 0), proc.stdout + proc.stderr
    results = {(r["kind"], r["name"]): r for r in json.loads(proc.stdout)}
    assert set(results) == set(CRS)
    for key, (_, breaks) in CRS.items():
        result = results[key]
        assert result["running_line"] == from_line, "read from the CR's managedFields"
        assert result["was"] == "Successful"
        if key == ("Fixed", "fixed") and BROKEN:
            # the guide's fixes run on every line, but not to the same text: the switched-off
            # fragment rendered a blank line before 2.19 and renders nothing from 2.19 on
            assert result["outcome"] == "changed", result
            [change] = result["changes"]
            fixed = PROJECT / "roles" / "fixed" / "tasks" / "main.yml"
            task = change["task"]
            assert task.startswith("A ConfigMap whose settings embed an optional fragment")
            assert change["task_path"] == f"roles/fixed/tasks/main.yml:{_line_of(fixed, task)}"
            assert "ConfigMap " + env.ns + "/fixed-fragment" in change["diff"]
            assert "settings.yaml" in change["diff"]
            continue
        if not (BROKEN and breaks):
            assert result["outcome"] == "unchanged", result
            continue
        assert result["outcome"] == "failed", result
        role = key[0].lower()
        path = PROJECT / "roles" / role / "tasks" / "main.yml"
        first_task = next(
            line.split("- name: ", 1)[1]
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("- name: ")
        )
        assert result["task"] == first_task
        assert result["task_path"] == f"roles/{role}/tasks/main.yml:{_line_of(path, first_task)}"
        assert result["porting"] is not None, result
        assert (result["porting"]["key"], result["porting"]["line"]) == (breaks, "2.19")
        assert result["porting"]["guide"].startswith("docs/migrating-from-operator-sdk.md#")
    assert f"candidate ansible-core {VERSION}" in proc.stderr
    assert f"running line {from_line} (the CRs' status)" in proc.stderr


def _line_of(path: Path, task: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines.index(f"- name: {task}") + 1


def test_a_renamed_field_in_a_new_checkout_of_the_roles_would_change(
    env: Env, tmp_path: Path
) -> None:
    project = tmp_path / "checkout"
    shutil.copytree(PROJECT / "roles", project / "roles")
    shutil.copy(WATCHES, project / "watches.yaml")
    tasks = project / "roles" / "fixed" / "tasks" / "main.yml"
    text = tasks.read_text(encoding="utf-8")
    assert "settings.yaml: |" in text
    tasks.write_text(text.replace("settings.yaml: |", "config.yaml: |"), encoding="utf-8")
    proc = preview(env, "--kind=Fixed", watches=project / "watches.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.splitlines()[0].split() == ["KIND", "NAMESPACE", "NAME", "OUTCOME", "TIME", "DETAIL"]
    row = next(line for line in out.splitlines() if line.startswith("Fixed "))
    assert row.split()[:5] == ["Fixed", env.ns, "fixed", "would", "change"]
    diff = out.split(f"Fixed {env.ns}/fixed: would change", 1)[1]
    assert "task 'A ConfigMap whose settings embed an optional fragment" in diff
    assert "+  config.yaml: " in diff and "-  settings.yaml" not in diff, out
    assert "1 would change" in out and "nothing was written" in out
