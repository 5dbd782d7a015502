"""operator-sdk's own CLI on what `operator-runner init` writes, and operator-runner's `create
api` / `create webhook` on what `operator-sdk init --plugins=ansible` writes.

operator-sdk v1.31.0 and kustomize v5.6.0, built from the Go module proxy by hack/sdk-cli.sh
(once per machine, minutes of CPU: under the shared lock). Without them in the cache the tests
are skipped, saying how to build them; `make test` runs them when they are there (marker
`sdk_cli`, `-m "not sdk_cli"` leaves them out). No cluster: everything here is files, as
operator-sdk's `create api`, `generate kustomize manifests`, `generate bundle` and `bundle
validate` are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.sdk_cli


def sdk_bin_dir() -> Path | None:
    found = subprocess.run(
        [str(REPO / "hack/sdk-cli.sh"), "bin-dir"], capture_output=True, text=True, timeout=60
    )
    return Path(found.stdout.strip()) if found.returncode == 0 else None


BIN = sdk_bin_dir()
if BIN is None:
    pytest.skip(
        "operator-sdk's CLI is not built: make sdk-cli (or SDK_CLI=1 make test)",
        allow_module_level=True,
    )
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))},
    # operator-sdk and kustomize first, then operator-runner of this virtualenv
    "PATH": os.pathsep.join([str(BIN), str(Path(sys.executable).parent), os.environ["PATH"]]),
}


def run(cwd: Path, *argv: str, stdin: str | None = None) -> str:
    """``argv`` in ``cwd``; its output, or a failure that shows it."""
    result = subprocess.run(
        list(argv), cwd=cwd, env=ENV, input=stdin, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def bundle(project: Path) -> dict[str, Any]:
    """operator-sdk's OLM steps (what `make bundle` runs): the CSV's base, the bundle, its
    validation; returns the bundle's ClusterServiceVersion."""
    # the first run asks for the CSV's display name etc. (in a terminal): its defaults here
    run(project, "operator-sdk", "generate", "kustomize", "manifests", "-q", "--interactive=false")
    manifests = run(project, "kustomize", "build", "config/manifests")
    run(project, "operator-sdk", "generate", "bundle", "-q", "--overwrite", "--version", "0.0.1",
        stdin=manifests)  # fmt: skip
    validated = run(project, "operator-sdk", "bundle", "validate", "./bundle")
    assert "All validation tests have completed successfully" in validated
    [csv] = (project / "bundle/manifests").glob("*.clusterserviceversion.yaml")
    return dict(load(csv))


def owned(csv: dict[str, Any]) -> set[str]:
    return {crd["name"] for crd in csv["spec"]["customresourcedefinitions"]["owned"]}


@pytest.fixture
def ours(tmp_path: Path) -> Path:
    project = tmp_path / "guestbook-operator"
    project.mkdir()
    run(project, "operator-runner", "init", "--domain", "example.com")
    return project


def test_operator_sdk_works_on_what_init_writes(ours: Path, tmp_path: Path) -> None:
    sample = tmp_path / "guestbook.yaml"
    sample.write_text("spec:\n  size: 2\n  message: hello\n")
    run(ours, "operator-runner", "create", "api", "--group", "webapp", "--version", "v1",
        "--kind", "Guestbook", "--from-sample", str(sample))  # fmt: skip
    # operator-sdk's create api, on the project as init and create api left it
    run(ours, "operator-sdk", "create", "api", "--group", "webapp", "--version", "v1",
        "--kind", "Memcached", "--generate-role")  # fmt: skip
    assert (ours / "roles/memcached/tasks/main.yml").is_file()
    assert (ours / "config/crd/bases/webapp.example.com_memcacheds.yaml").is_file()
    watches = load(ours / "watches.yaml")
    assert [(w["kind"], w["role"]) for w in watches] == [
        ("Guestbook", "guestbook"),
        ("Memcached", "memcached"),
    ]
    assert "# +kubebuilder:scaffold:watch" in (ours / "watches.yaml").read_text()
    project = load(ours / "PROJECT")
    assert [r["kind"] for r in project["resources"]] == ["Guestbook", "Memcached"]
    assert project["plugins"]["operator-runner.dev/v1"]["ansibleCore"]  # kept by operator-sdk
    assert project["layout"] == ["ansible.sdk.operatorframework.io/v1"]
    crds = load(ours / "config/crd/kustomization.yaml")["resources"]
    assert crds == [
        "bases/webapp.example.com_guestbooks.yaml",
        "bases/webapp.example.com_memcacheds.yaml",
    ]
    rules = load(ours / "config/rbac/role.yaml")["rules"]
    assert any("memcacheds" in rule.get("resources", []) for rule in rules)
    # operator-runner's create api (another group: the project becomes multigroup) and create
    # webhook after operator-sdk's, then operator-sdk's in that other group
    run(ours, "operator-runner", "create", "api", "--group", "cache", "--version", "v1",
        "--kind", "Visitor")  # fmt: skip
    run(ours, "operator-runner", "create", "webhook", "--kind", "Memcached", "--validate")
    assert load(ours / "watches.yaml")[1]["validate"] == {"role": "memcached_validate"}
    run(ours, "operator-sdk", "create", "api", "--group", "cache", "--version", "v1alpha1",
        "--kind", "Tracker", "--generate-playbook")  # fmt: skip
    assert load(ours / "watches.yaml")[-1]["playbook"] == "playbooks/tracker.yml"

    csv = bundle(ours)
    assert owned(csv) == {
        "guestbooks.webapp.example.com",
        "memcacheds.webapp.example.com",
        "visitors.cache.example.com",
        "trackers.cache.example.com",
    }
    install = csv["spec"]["install"]["spec"]
    [deployment] = install["deployments"]
    assert deployment["name"] == "guestbook-operator-controller-manager"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--webhook-service=guestbook-operator-webhook-service" in args
    granted = {
        resource
        for permission in install["clusterPermissions"]
        for rule in permission["rules"]
        for resource in rule.get("resources", [])
    }
    assert {"guestbooks", "memcacheds", "visitors", "trackers", "events"} <= granted
    # make bundle: the same steps from the project's Makefile, with this kustomize and CLI
    out = run(ours, "make", "bundle", "IMG=example.com/guestbook-operator:v0.0.1")
    assert "All validation tests have completed successfully" in out
    assert (ours / "bundle.Dockerfile").is_file()


def test_create_api_and_webhook_work_on_what_operator_sdk_init_writes(tmp_path: Path) -> None:
    theirs = tmp_path / "memcached-operator"
    theirs.mkdir()
    run(theirs, "operator-sdk", "init", "--plugins=ansible", "--domain", "example.com")
    assert not (theirs / "config/crd").exists()  # operator-sdk's first create api makes it
    sample = tmp_path / "guestbook.yaml"
    sample.write_text("spec:\n  size: 2\n")
    run(theirs, "operator-runner", "create", "api", "--group", "webapp", "--version", "v1",
        "--kind", "Guestbook", "--from-sample", str(sample))  # fmt: skip
    assert load(theirs / "watches.yaml") == [
        {"version": "v1", "group": "webapp.example.com", "kind": "Guestbook", "role": "guestbook"}
    ]
    assert load(theirs / "config/crd/kustomization.yaml")["resources"] == [
        "bases/webapp.example.com_guestbooks.yaml"
    ]
    assert load(theirs / "config/samples/kustomization.yaml")["resources"] == [
        "webapp_v1_guestbook.yaml"
    ]
    assert [r["kind"] for r in load(theirs / "PROJECT")["resources"]] == ["Guestbook"]
    # operator-sdk's create api after ours, then ours again (another group too)
    run(theirs, "operator-sdk", "create", "api", "--group", "webapp", "--version", "v1alpha1",
        "--kind", "Memcached", "--generate-role")  # fmt: skip
    run(theirs, "operator-runner", "create", "api", "--group", "cache", "--version", "v1",
        "--kind", "Visitor", "--generate-playbook")  # fmt: skip
    run(theirs, "operator-runner", "create", "webhook", "--kind", "Guestbook", "--validate",
        "--mutate")  # fmt: skip
    run(theirs, "operator-runner", "create", "webhook", "--kind", "Memcached", "--validate")
    watches = load(theirs / "watches.yaml")
    assert [w["kind"] for w in watches] == ["Guestbook", "Memcached", "Visitor"]
    assert watches[0]["mutate"] == {"role": "guestbook_mutate"}
    deployed = {
        (d["kind"], d["metadata"]["name"]): d
        for d in yaml.safe_load_all(run(theirs, "kustomize", "build", "config/default"))
        if d
    }
    assert ("Service", "memcached-operator-webhook-service") in deployed
    validating = deployed[("ValidatingWebhookConfiguration", "memcached-operator-webhooks")]
    assert [w["name"] for w in validating["webhooks"]] == [
        "validate.guestbook.webapp.example.com",
        "validate.memcached.webapp.example.com",
    ]
    manager = deployed[("Deployment", "memcached-operator-controller-manager")]
    args = manager["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--webhook-configuration-name=memcached-operator-webhooks" in args
    csv = bundle(theirs)
    assert owned(csv) == {
        "guestbooks.webapp.example.com",
        "memcacheds.webapp.example.com",
        "visitors.cache.example.com",
    }
