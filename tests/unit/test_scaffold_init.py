"""runner.scaffold.project: `operator-runner init` writes a whole project, or nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.scaffold.api import ApiRequest, create_api
from runner.scaffold.lines import installed_line
from runner.scaffold.names import ScaffoldError
from runner.scaffold.project import init, load_project
from runner.scaffold.render import project_templates, template

EXPECTED = {
    "PROJECT",
    "README.md",
    ".gitignore",
    "watches.yaml",
    "requirements.yml",
    "requirements.txt",
    "Dockerfile",
    "Makefile",
    "config/crd/kustomization.yaml",
    "config/default/kustomization.yaml",
    "config/default/manager_metrics_patch.yaml",
    "config/default/manager_webhook_patch.yaml",
    "config/default/metrics_service.yaml",
    "config/manager/kustomization.yaml",
    "config/manager/manager.yaml",
    "config/manifests/kustomization.yaml",
    "config/network-policy/kustomization.yaml",
    "config/network-policy/allow-metrics-traffic.yaml",
    "config/network-policy/allow-webhook-traffic.yaml",
    "config/prometheus/kustomization.yaml",
    "config/prometheus/monitor.yaml",
    "config/rbac/kustomization.yaml",
    "config/rbac/service_account.yaml",
    "config/rbac/role.yaml",
    "config/rbac/role_binding.yaml",
    "config/rbac/leader_election_role.yaml",
    "config/rbac/leader_election_role_binding.yaml",
    "config/rbac/metrics_auth_role.yaml",
    "config/rbac/metrics_auth_role_binding.yaml",
    "config/rbac/metrics_reader_role.yaml",
    "config/samples/kustomization.yaml",
    "config/scorecard/kustomization.yaml",
    "config/scorecard/bases/config.yaml",
    "config/scorecard/patches/basic.config.yaml",
    "config/scorecard/patches/olm.config.yaml",
    "config/testing/kustomization.yaml",
    "config/testing/debug_logs_patch.yaml",
    "config/testing/manager_image.yaml",
    "config/testing/pull_policy/Always.yaml",
    "config/testing/pull_policy/IfNotPresent.yaml",
    "config/testing/pull_policy/Never.yaml",
    "config/webhook/kustomization.yaml",
    "config/webhook/service.yaml",
    "config/webhook/manifests.yaml",
    "config/webhook/role.yaml",
    "config/webhook/role_binding.yaml",
    "molecule/default/molecule.yml",
    "molecule/default/vars.yml",
    "molecule/default/create.yml",
    "molecule/default/converge.yml",
    "molecule/default/verify.yml",
    "molecule/default/cleanup.yml",
    "molecule/default/destroy.yml",
    "molecule/kind/molecule.yml",
    "molecule/kind/vars.yml",
    "molecule/kind/create.yml",
    "molecule/kind/converge.yml",
    "molecule/kind/destroy.yml",
    "roles/.placeholder",
    "playbooks/.placeholder",
}
REPO = Path(__file__).resolve().parents[2]


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "guestbook"
    root.mkdir()
    init(root, "example.com")
    return root


def test_init_writes_the_whole_layout(project: Path) -> None:
    assert files(project) == EXPECTED
    loaded = load_project(project)
    assert (loaded.domain, loaded.name) == ("example.com", "guestbook")  # the folder's name


def test_project_is_operator_sdks_ansible_layout(project: Path) -> None:
    """What kubebuilder's strict reading of PROJECT accepts: its keys only, ours under plugins."""
    data = yaml.safe_load((project / "PROJECT").read_text())
    assert data == {
        "domain": "example.com",
        "layout": ["ansible.sdk.operatorframework.io/v1"],
        "plugins": {
            "manifests.sdk.operatorframework.io/v2": {},
            "operator-runner.dev/v1": {"ansibleCore": installed_line()},
            "scorecard.sdk.operatorframework.io/v2": {},
        },
        "projectName": "guestbook",
        "version": "3",
    }


def test_every_placeholder_is_replaced_and_every_yaml_file_parses(project: Path) -> None:
    for path in files(project):
        text = (project / path).read_text()
        assert not re.search(r"@[a-z_]+@", text), path
        if path.endswith((".yaml", ".yml")) or path == "PROJECT":
            list(yaml.safe_load_all(text))


def test_the_deployment_passes_operator_sdks_args_and_ships_its_metrics_rbac(
    project: Path,
) -> None:
    """As operator-sdk's scaffold: /metrics over TLS behind RBAC (config/default's patch),
    facts off, the project's leader election id, and the metrics-reader and metrics-auth
    ClusterRoles (the latter bound to the operator)."""
    namespace, deployment = yaml.safe_load_all(
        (project / "config/manager/manager.yaml").read_text()
    )
    assert (namespace["kind"], namespace["metadata"]["name"]) == ("Namespace", "system")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--leader-elect",
        "--leader-election-id=guestbook",
        "--health-probe-bind-address=:6789",
    ]
    assert container["image"] == "controller:latest"  # make deploy IMG=... sets it
    assert {"name": "ANSIBLE_GATHERING", "value": "explicit"} in container["env"]
    patch = yaml.safe_load((project / "config/default/manager_metrics_patch.yaml").read_text())
    assert [op["value"] for op in patch] == [
        "--metrics-bind-address=:8443",
        "--metrics-secure",
        "--metrics-require-rbac",
    ]
    rbac = project / "config/rbac"
    reader = yaml.safe_load((rbac / "metrics_reader_role.yaml").read_text())
    assert reader["metadata"]["name"] == "metrics-reader"
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    auth = yaml.safe_load((rbac / "metrics_auth_role.yaml").read_text())
    assert {(r["resources"][0], r["verbs"][0]) for r in auth["rules"]} == {
        ("tokenreviews", "create"),
        ("subjectaccessreviews", "create"),
    }
    binding = yaml.safe_load((rbac / "metrics_auth_role_binding.yaml").read_text())
    assert binding["roleRef"]["name"] == "metrics-auth-role"
    assert binding["subjects"][0]["name"] == "controller-manager"


def test_watches_file_has_no_entry_and_the_scaffold_marker(project: Path) -> None:
    text = (project / "watches.yaml").read_text()
    assert text.startswith("---\n#")
    assert yaml.safe_load(text) is None
    assert text.splitlines()[-1] == "# +kubebuilder:scaffold:watch"


def test_kustomizations_have_the_markers_operator_sdks_create_api_adds_at(project: Path) -> None:
    for path, marker in (
        ("config/crd/kustomization.yaml", "crdkustomizeresource"),
        ("config/samples/kustomization.yaml", "manifestskustomizesamples"),
        ("config/rbac/role.yaml", "rules"),
    ):
        assert f"# +kubebuilder:scaffold:{marker}\n" in (project / path).read_text(), path
    assert yaml.safe_load((project / "config/samples/kustomization.yaml").read_text()) == {
        "resources": None
    }


def test_rbac_is_least_privilege(project: Path) -> None:
    role = yaml.safe_load((project / "config/rbac/role.yaml").read_text())
    assert role["kind"] == "ClusterRole"
    assert role["metadata"]["name"] == "manager-role"
    rules = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert rules == {
        ("", "events"): ["create", "patch"],
        ("apiextensions.k8s.io", "customresourcedefinitions"): ["list", "watch"],
    }
    lease = yaml.safe_load((project / "config/rbac/leader_election_role.yaml").read_text())
    assert lease["kind"] == "Role"
    assert lease["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    for path in files(project):
        if path.startswith(("config/rbac/", "config/webhook/")):
            text = (project / path).read_text()
            assert "'*'" not in text and '"*"' not in text, path


def test_deploy_names_and_bindings_fit_together(project: Path) -> None:
    config = project / "config"
    default = yaml.safe_load((config / "default/kustomization.yaml").read_text())
    assert default["namespace"] == "guestbook-system"
    assert default["namePrefix"] == "guestbook-"
    assert default["resources"] == [
        "../crd",
        "../rbac",
        "../manager",
        "../webhook",
        "metrics_service.yaml",
    ]
    binding = yaml.safe_load((config / "rbac/role_binding.yaml").read_text())
    account = yaml.safe_load((config / "rbac/service_account.yaml").read_text())
    _, manager = yaml.safe_load_all((config / "manager/manager.yaml").read_text())
    assert binding["roleRef"]["name"] == "manager-role"
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]
    pod = manager["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    for sub in ("rbac", "manager", "webhook", "network-policy", "prometheus"):
        listed = yaml.safe_load((config / sub / "kustomization.yaml").read_text())["resources"]
        assert {f"{sub}/{name}" for name in listed} == {
            path.removeprefix("config/")
            for path in files(project)
            if path.startswith(f"config/{sub}/") and not path.endswith("kustomization.yaml")
        }
    # The webhooks' names as the operator is told them: config/default's prefix applied.
    patch = yaml.safe_load((config / "default/manager_webhook_patch.yaml").read_text())
    assert [op["value"] for op in patch] == [
        "--webhook-service=guestbook-webhook-service",
        "--webhook-configuration-name=guestbook-webhooks",
    ]
    webhook_role = next(yaml.safe_load_all((config / "webhook/role.yaml").read_text()))
    assert webhook_role["rules"][0]["resourceNames"] == ["guestbook-webhooks"]


def kustomize_build() -> list[str] | None:
    """kustomize (hack/sdk-cli.sh's) or kubectl's built-in one (the local cluster's), when
    built on this machine (nothing is built here)."""
    found = subprocess.run(
        [str(REPO / "hack/sdk-cli.sh"), "bin-dir"], capture_output=True, text=True, timeout=60
    )
    if found.returncode == 0:
        return [str(Path(found.stdout.strip()) / "kustomize"), "build"]
    found = subprocess.run(
        [str(REPO / "hack/build-binaries.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if found.returncode == 0:
        return [str(Path(found.stdout.strip()) / "kubectl"), "kustomize"]
    return None


@pytest.mark.skipif(kustomize_build() is None, reason="no kustomize built on this machine")
def test_every_kustomization_builds(project: Path) -> None:
    """config/default and config/testing as kustomize makes them: the names as the flags and
    RBAC give them."""
    build = kustomize_build()
    assert build is not None
    create_api(project, ApiRequest(group="webapp", version="v1", kind="Guestbook"))
    objects = {}
    for overlay in ("default", "testing", "samples", "crd", "prometheus", "network-policy"):
        result = subprocess.run(
            [*build, "--load-restrictor", "LoadRestrictionsNone", f"config/{overlay}"],
            cwd=project, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, f"{overlay}: {result.stderr}"
        objects[overlay] = {
            (d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(result.stdout) if d
        }
    deployed = objects["default"]
    deployment = deployed[("Deployment", "guestbook-controller-manager")]
    assert deployment["metadata"]["namespace"] == "guestbook-system"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "--metrics-bind-address=:8443"
    assert "--webhook-service=guestbook-webhook-service" in args
    assert ("Service", "guestbook-webhook-service") in deployed
    assert ("ValidatingWebhookConfiguration", "guestbook-webhooks") in deployed
    assert ("CustomResourceDefinition", "guestbooks.webapp.example.com") in deployed
    assert ("ClusterRole", "guestbook-manager-role") in deployed
    assert ("Namespace", "guestbook-system") in deployed
    testing = objects["testing"][("Deployment", "osdk-controller-manager")]
    [container] = testing["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "testing-operator"
    assert {"name": "ANSIBLE_DEBUG_LOGS", "value": "TRUE"} in container["env"]
    assert ("Guestbook", "guestbook-sample") in objects["samples"]


def test_dockerfile_and_makefile(project: Path) -> None:
    dockerfile = (project / "Dockerfile").read_text()
    assert "FROM ${OPERATOR_RUNNER_IMAGE}" in dockerfile
    assert "ARG OPERATOR_RUNNER_IMAGE=operator-runner:latest" in dockerfile
    for copy in (
        "COPY watches.yaml ${HOME}/watches.yaml",
        "COPY roles/ ${HOME}/roles/",
        "COPY playbooks/ ${HOME}/playbooks/",
        "RUN ansible-galaxy collection install -r ${HOME}/requirements.yml",
    ):
        assert copy in dockerfile
    makefile = (project / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z-]+):", makefile, flags=re.MULTILINE))
    operator_sdks = {
        "all", "help", "run", "docker-build", "docker-push", "docker-buildx", "install",
        "uninstall", "deploy", "undeploy", "kustomize", "ansible-operator", "operator-sdk",
        "bundle", "bundle-build", "bundle-push", "opm", "catalog-build", "catalog-push",
    }  # fmt: skip
    assert operator_sdks | {"molecule", "test"} == targets
    recipe_lines = [line for line in makefile.splitlines() if line[:1] in (" ", "\t")]
    assert recipe_lines and all(
        line.startswith("\t") or line.startswith("  ignore-not-found") for line in recipe_lines
    )


def test_molecule_names_no_kind(project: Path) -> None:
    for path in files(project):
        if path.startswith("molecule/"):
            text = (project / path).read_text()
            assert "Guestbook" not in text and "Echo" not in text, path


def test_project_name_option_and_bad_folder_name(tmp_path: Path) -> None:
    bad = tmp_path / "My_Project"
    bad.mkdir()
    with pytest.raises(ScaffoldError, match="--project-name"):
        init(bad, "example.com")
    assert list(bad.iterdir()) == []
    init(bad, "example.com", project_name="my-project")
    assert load_project(bad).name == "my-project"
    assert "namespace: my-project-system" in (bad / "config/default/kustomization.yaml").read_text()


def test_bad_domain_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match="--domain 'Example_com'") as error:
        init(tmp_path, "Example_com")
    assert "\n" not in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_git_folder_is_fine(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    init(tmp_path, "example.com", project_name="x")
    assert (tmp_path / "watches.yaml").is_file()


def test_non_empty_folder_is_refused_and_names_the_files_it_would_overwrite(
    tmp_path: Path,
) -> None:
    (tmp_path / "Makefile").write_text("mine\n")
    (tmp_path / "watches.yaml").write_text("- mine\n")
    (tmp_path / "notes.txt").write_text("keep\n")
    with pytest.raises(ScaffoldError) as error:
        init(tmp_path, "example.com", project_name="x")
    message = str(error.value)
    assert "not empty" in message and "--force" in message
    assert "would overwrite: Makefile, watches.yaml" in message
    assert "notes.txt" not in message.split("would overwrite")[1]
    assert files(tmp_path) == {"Makefile", "watches.yaml", "notes.txt"}
    assert (tmp_path / "Makefile").read_text() == "mine\n"

    init(tmp_path, "example.com", project_name="x", force=True)
    assert files(tmp_path) == EXPECTED | {"notes.txt"}
    assert (tmp_path / "notes.txt").read_text() == "keep\n"
    assert yaml.safe_load((tmp_path / "watches.yaml").read_text()) is None


def test_non_empty_folder_without_conflicts_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep\n")
    with pytest.raises(ScaffoldError, match="overwrite none of its files"):
        init(tmp_path, "example.com", project_name="x")


def test_something_in_the_way_is_refused_even_with_force(tmp_path: Path) -> None:
    (tmp_path / "roles").write_text("a file where a folder goes\n")
    with pytest.raises(ScaffoldError, match="in the way"):
        init(tmp_path, "example.com", project_name="x", force=True)
    assert files(tmp_path) == {"roles"}


def test_templates_are_package_data() -> None:
    assert "Makefile" in project_templates()
    assert "FROM ${OPERATOR_RUNNER_IMAGE}" in template("project/Dockerfile")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_makefile_runs(project: Path) -> None:
    def make(*argv: str) -> str:
        return subprocess.run(
            ["make", *argv], cwd=project, capture_output=True, text=True, check=True, timeout=60,
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
        ).stdout  # fmt: skip

    listed = re.sub(r"\x1b\[[0-9;]*m", "", make("help"))
    for target in ("install", "uninstall", "run", "deploy", "undeploy", "docker-build", "bundle"):
        assert f"  {target} " in listed
    assert "molecule test -s default" in make("-n", "test")
    assert (
        "build --build-arg OPERATOR_RUNNER_IMAGE=operator-runner:latest "
        "--build-arg ANSIBLE_CORE=2.18 -t reg/gb:v1 ."
    ) in make("-n", "docker-build", "IMG=reg/gb:v1", "ANSIBLE_CORE=2.18")
    # make run: operator-runner of this virtualenv (on PATH), as bin/ansible-operator would be
    run = make("-n", "run")
    assert f"{Path(sys.executable).parent}/operator-runner run --watches-file=./watches.yaml" in run
    bundle = make("-n", "bundle", "IMG=reg/gb:v1", "OPERATOR_SDK=operator-sdk")
    assert "operator-sdk generate kustomize manifests -q" in bundle
    assert "edit set image controller=reg/gb:v1" in bundle
    assert "generate bundle -q --overwrite --version 0.0.1" in bundle
    assert "operator-sdk bundle validate ./bundle" in bundle
