"""runner.scaffold.conversion: `operator-runner create webhook --convert`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.ansible.collections_path import runs_path
from runner.scaffold.api import ApiRequest, create_api
from runner.scaffold.names import ScaffoldError
from runner.scaffold.project import init
from runner.scaffold.webhook import WebhookRequest, create_webhook
from runner.watches import Convert, load_watches

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
CRD = "config/crd/bases/webapp.example.com_guestbooks.yaml"


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A kind of two versions: v1 (watched, stored) and v2."""
    root = tmp_path / "guestbook"
    root.mkdir()
    init(root, "example.com")
    create_api(root, ApiRequest(group="webapp", version="v1", kind="Guestbook"))
    create_api(root, ApiRequest(group="webapp", version="v2", kind="Guestbook"))
    return root


def test_the_role_the_watch_key_the_crds_conversion_and_rbac(project: Path) -> None:
    before = snapshot(project)
    plan = create_webhook(project, WebhookRequest("Guestbook", convert=True))
    assert sorted(plan.files) == [
        CRD,
        "config/rbac/role.yaml",
        "roles/guestbook_convert/tasks/main.yml",
        "watches.yaml",
    ]
    (watch,) = load_watches(project / "watches.yaml", environ={}).watches
    assert watch.convert == Convert(role=str(project / "roles" / "guestbook_convert"))
    crd = yaml.safe_load((project / CRD).read_text())
    assert "conversion" not in crd["spec"]  # the operator's: kubectl apply leaves it as it is
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1", "v2"]
    old = yaml.safe_load(before[CRD])
    assert crd["spec"]["versions"] == old["spec"]["versions"]
    assert "# spec.conversion is written by the operator" in (project / CRD).read_text()
    rules = yaml.safe_load((project / "config/rbac/role.yaml").read_text())["rules"]
    assert rules[-1] == {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "resourceNames": ["guestbooks.webapp.example.com"],
        "verbs": ["get", "patch"],
    }
    old_text = before["config/rbac/role.yaml"].removesuffix("# +kubebuilder:scaffold:rules\n")
    assert (project / "config/rbac/role.yaml").read_text().startswith(old_text), "added as text"


def test_with_validate_too_and_not_twice(project: Path) -> None:
    create_webhook(project, WebhookRequest("Guestbook", validate=True, convert=True))
    (watch,) = load_watches(project / "watches.yaml", environ={}).watches
    assert watch.validate is not None and watch.convert is not None
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match="has 'convert:' already"):
        create_webhook(project, WebhookRequest("Guestbook", convert=True))
    assert snapshot(project) == before


def test_a_crd_with_another_conversion_is_left_to_the_author(project: Path) -> None:
    crd = project / CRD
    crd.write_text(
        crd.read_text().replace(
            "  versions:\n", "  conversion:\n    strategy: None\n  versions:\n", 1
        )
    )
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match=r"spec\.conversion is \{'strategy': 'None'\}"):
        create_webhook(project, WebhookRequest("Guestbook", convert=True))
    assert snapshot(project) == before


def test_the_role_converts_as_it_is_written(project: Path, tmp_path: Path) -> None:
    """The scaffolded role, run by the real executor: every object answered unchanged, in the
    version asked for (right while the versions' schemas are the same)."""
    from runner.ansible.executor import Executor
    from runner.convert.converter import Conversions

    create_webhook(project, WebhookRequest("Guestbook", convert=True))
    (watch,) = load_watches(project / "watches.yaml", environ={}).watches
    executor = Executor(roles_paths=[project / "roles"], tmp_dir=tmp_path / "tmp", warm=False)
    conversions = Conversions.of([watch], executor)
    objects = [
        {
            "apiVersion": "webapp.example.com/v1",
            "kind": "Guestbook",
            "metadata": {"name": f"g{i}", "namespace": "ns", "uid": f"u{i}"},
            "spec": {"size": i},
        }
        for i in range(3)
    ]
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r", "desiredAPIVersion": "webapp.example.com/v2", "objects": objects},
    }
    try:
        response = asyncio.run(conversions.review(body))["response"]
    finally:
        conversions.close()
        executor.close()
    assert response["result"] == {"status": "Success"}, response
    assert response["convertedObjects"] == [
        {**o, "apiVersion": "webapp.example.com/v2"} for o in objects
    ]


def test_the_role_passes_ansibles_syntax_check(project: Path) -> None:
    create_webhook(project, WebhookRequest("Guestbook", convert=True))
    (project / "check.yml").write_text("- hosts: localhost\n  roles: [guestbook_convert]\n")
    environ = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": runs_path(os.environ),
        "ANSIBLE_ROLES_PATH": str(project / "roles"),
    }
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--syntax-check", "-i", "localhost,", "check.yml"],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
