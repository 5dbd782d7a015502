"""runner.scaffold.webhook: `operator-runner create webhook` adds admission webhooks to a kind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.admit import configurations
from runner.ansible.collections_path import runs_path
from runner.scaffold.api import ApiRequest, create_api
from runner.scaffold.names import ScaffoldError
from runner.scaffold.project import init
from runner.scaffold.webhook import WebhookRequest, create_webhook
from runner.watches import Admission, load_watches

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "guestbook"
    root.mkdir()
    init(root, "example.com")
    create_api(root, ApiRequest(group="webapp", version="v1", kind="Guestbook"))
    return root


def test_roles_watch_keys_and_the_configurations(project: Path) -> None:
    plan = create_webhook(project, WebhookRequest("Guestbook", validate=True, mutate=True))
    assert sorted(plan.files) == [
        "config/webhook/manifests.yaml",
        "roles/guestbook_mutate/tasks/main.yml",
        "roles/guestbook_validate/tasks/main.yml",
        "watches.yaml",
    ]
    (watch,) = load_watches(project / "watches.yaml", environ={}).watches
    roles = project / "roles"
    assert watch.validate == Admission(role=str(roles / "guestbook_validate"))
    assert watch.mutate == Admission(role=str(roles / "guestbook_mutate"))
    # the manifests hold what the operator computes for the watch, deployed
    manifests = (project / "config/webhook/manifests.yaml").read_text()
    documents = {d["kind"]: d for d in yaml.safe_load_all(manifests)}
    service = {"namespace": "guestbook-system", "name": "guestbook-webhook-service", "port": 443}
    for hook, kind in (
        ("validate", "ValidatingWebhookConfiguration"),
        ("mutate", "MutatingWebhookConfiguration"),
    ):
        wanted = configurations.webhooks(
            [watch],
            hook,
            {watch.gvk: "guestbooks"},
            lambda path: {"service": {**service, "path": path}},
            username="system:serviceaccount:guestbook-system:guestbook-controller-manager",
        )
        assert documents[kind]["webhooks"] == wanted
        # guestbook-webhooks once config/default's namePrefix is applied
        assert documents[kind]["metadata"]["name"] == "webhooks"
    patch = yaml.safe_load((project / "config/default/manager_webhook_patch.yaml").read_text())
    args = [op["value"] for op in patch if op["path"].endswith("/args/-")]
    assert "--webhook-configuration-name=guestbook-webhooks" in args
    assert "--webhook-service=guestbook-webhook-service" in args


def test_a_project_without_config_webhook_gets_it(project: Path) -> None:
    """operator-sdk's init writes no config/webhook: create webhook adds it, the manager's
    webhook flags, and both to config/default (as text: its comments stay)."""
    shutil.rmtree(project / "config/webhook")
    (project / "config/default/manager_webhook_patch.yaml").unlink()
    default = project / "config/default/kustomization.yaml"
    text = default.read_text()
    text = text.replace("- ../webhook\n", "").replace(
        "- path: manager_webhook_patch.yaml\n  target:\n    kind: Deployment\n", ""
    )
    default.write_text(text)
    assert "../webhook" not in (yaml.safe_load(text)["resources"])
    plan = create_webhook(project, WebhookRequest("Guestbook", validate=True))
    assert {
        "config/webhook/kustomization.yaml",
        "config/webhook/service.yaml",
        "config/webhook/manifests.yaml",
        "config/webhook/role.yaml",
        "config/webhook/role_binding.yaml",
        "config/default/manager_webhook_patch.yaml",
        "config/default/kustomization.yaml",
    } <= set(plan.files)
    after = yaml.safe_load(default.read_text())
    assert "../webhook" in after["resources"]
    assert {"path": "manager_webhook_patch.yaml", "target": {"kind": "Deployment"}} in after[
        "patches"
    ]
    assert set(text.splitlines()) <= set(default.read_text().splitlines())
    documents = list(yaml.safe_load_all((project / "config/webhook/manifests.yaml").read_text()))
    assert [len(d["webhooks"]) for d in documents] == [1, 0]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (WebhookRequest("Guestbook"), "say which webhooks"),
        (WebhookRequest("Visitor", validate=True), "Visitor is not in watches.yaml"),
        (WebhookRequest("guestbook", validate=True), "is not PascalCase"),
        (WebhookRequest("Guestbook", mutate=True, version="v9"), "Guestbook is not in"),
    ],
)
def test_refusals_write_nothing(project: Path, request_: WebhookRequest, message: str) -> None:
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match=message):
        create_webhook(project, request_)
    assert snapshot(project) == before


def test_a_hook_the_kind_has_already_is_refused(project: Path) -> None:
    create_webhook(project, WebhookRequest("Guestbook", validate=True))
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match="has 'validate:' already"):
        create_webhook(project, WebhookRequest("Guestbook", validate=True, mutate=True))
    assert snapshot(project) == before
    create_webhook(project, WebhookRequest("Guestbook", mutate=True))
    (watch,) = load_watches(project / "watches.yaml", environ={}).watches
    assert watch.validate is not None and watch.mutate is not None


def test_the_roles_pass_ansibles_syntax_check(project: Path) -> None:
    create_webhook(project, WebhookRequest("Guestbook", validate=True, mutate=True))
    (project / "check.yml").write_text(
        "- hosts: localhost\n  roles: [guestbook_validate, guestbook_mutate]\n"
    )
    environ = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": runs_path(os.environ),  # operator_sdk.util, as in runs
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
