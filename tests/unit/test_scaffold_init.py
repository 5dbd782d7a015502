"""runner.scaffold.project: `operator-runner init` writes a whole project, or nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runner.scaffold.names import ScaffoldError
from runner.scaffold.project import init, load_project
from runner.scaffold.render import project_templates, template

EXPECTED = {
    "PROJECT",
    "README.md",
    "watches.yaml",
    "requirements.yml",
    "requirements.txt",
    "Dockerfile",
    "Makefile",
    "config/samples/Kustomization",
    "deploy/kustomization.yaml",
    "deploy/rbac/kustomization.yaml",
    "deploy/rbac/namespace.yaml",
    "deploy/rbac/service_account.yaml",
    "deploy/rbac/role.yaml",
    "deploy/rbac/role_binding.yaml",
    "deploy/rbac/leader_election_role.yaml",
    "deploy/rbac/leader_election_role_binding.yaml",
    "deploy/rbac/metrics_auth_role.yaml",
    "deploy/rbac/metrics_auth_role_binding.yaml",
    "deploy/rbac/metrics_reader_role.yaml",
    "deploy/manager/kustomization.yaml",
    "deploy/manager/manager.yaml",
    "deploy/manager/metrics_service.yaml",
    "deploy/webhook/kustomization.yaml",
    "deploy/webhook/service.yaml",
    "deploy/webhook/manifests.yaml",
    "deploy/webhook/role.yaml",
    "deploy/webhook/role_binding.yaml",
    "molecule/default/molecule.yml",
    "molecule/default/vars.yml",
    "molecule/default/create.yml",
    "molecule/default/converge.yml",
    "molecule/default/verify.yml",
    "molecule/default/cleanup.yml",
    "molecule/default/destroy.yml",
    "roles/.gitkeep",
    "playbooks/.gitkeep",
    "crds/.gitkeep",
}


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


def test_every_placeholder_is_replaced_and_every_yaml_file_parses(project: Path) -> None:
    for path in files(project):
        text = (project / path).read_text()
        assert not re.search(r"@[a-z_]+@", text), path
        if path.endswith((".yaml", ".yml")) or path in ("config/samples/Kustomization", "PROJECT"):
            list(yaml.safe_load_all(text))


def test_the_deployment_passes_operator_sdks_args_and_ships_its_metrics_rbac(
    project: Path,
) -> None:
    """As operator-sdk's scaffold: /metrics over TLS behind RBAC, facts off, and the
    metrics-reader and metrics-auth ClusterRoles (the latter bound to the operator)."""
    [deployment] = yaml.safe_load_all((project / "deploy/manager/manager.yaml").read_text())
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    for arg in (
        "--leader-elect",
        "--health-probe-bind-address=:6789",
        "--metrics-bind-address=:8443",
        "--metrics-secure",
        "--metrics-require-rbac",
    ):
        assert arg in container["args"]
    assert {"name": "ANSIBLE_GATHERING", "value": "explicit"} in container["env"]
    reader = yaml.safe_load((project / "deploy/rbac/metrics_reader_role.yaml").read_text())
    assert reader["metadata"]["name"] == "guestbook-metrics-reader"
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    auth = yaml.safe_load((project / "deploy/rbac/metrics_auth_role.yaml").read_text())
    assert {(r["resources"][0], r["verbs"][0]) for r in auth["rules"]} == {
        ("tokenreviews", "create"),
        ("subjectaccessreviews", "create"),
    }
    binding = yaml.safe_load((project / "deploy/rbac/metrics_auth_role_binding.yaml").read_text())
    assert binding["roleRef"]["name"] == "guestbook-metrics-auth-role"
    assert binding["subjects"][0]["name"] == "guestbook-controller-manager"


def test_watches_file_is_an_empty_list_with_comments(project: Path) -> None:
    text = (project / "watches.yaml").read_text()
    assert text.startswith("#")
    assert yaml.safe_load(text) == []


def test_samples_kustomization_does_not_break_kubectl_apply_f(project: Path) -> None:
    # kubectl apply -f <dir> reads *.yaml, *.yml, *.json only; kustomize also reads a file
    # named Kustomization, so both `apply -k config/samples` and `apply -f config/samples/` work.
    samples = project / "config/samples"
    assert [p.name for p in samples.iterdir()] == ["Kustomization"]
    assert yaml.safe_load((samples / "Kustomization").read_text())["resources"] is None


def test_rbac_is_least_privilege(project: Path) -> None:
    role = yaml.safe_load((project / "deploy/rbac/role.yaml").read_text())
    assert role["kind"] == "ClusterRole"
    assert role["metadata"]["name"] == "guestbook-manager-role"
    rules = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert rules == {
        ("", "events"): ["create", "patch"],
        ("apiextensions.k8s.io", "customresourcedefinitions"): ["list", "watch"],
    }
    lease = yaml.safe_load((project / "deploy/rbac/leader_election_role.yaml").read_text())
    assert lease["kind"] == "Role"
    assert lease["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    for path in files(project):
        if path.startswith("deploy/"):
            assert (
                "'*'" not in (project / path).read_text()
                and '"*"' not in (project / path).read_text()
            )


def test_deploy_names_and_bindings_fit_together(project: Path) -> None:
    deploy = project / "deploy"
    kustomization = yaml.safe_load((deploy / "kustomization.yaml").read_text())
    assert kustomization["namespace"] == "guestbook-system"
    binding = yaml.safe_load((deploy / "rbac/role_binding.yaml").read_text())
    account = yaml.safe_load((deploy / "rbac/service_account.yaml").read_text())
    manager = yaml.safe_load((deploy / "manager/manager.yaml").read_text())
    assert binding["roleRef"]["name"] == "guestbook-manager-role"
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]
    pod = manager["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert pod["containers"][0]["image"] == "controller:latest"  # make deploy IMG=... sets it
    for sub in ("rbac", "manager"):
        listed = yaml.safe_load((deploy / sub / "kustomization.yaml").read_text())["resources"]
        assert {f"{sub}/{name}" for name in listed} == {
            path.removeprefix("deploy/")
            for path in files(project)
            if path.startswith(f"deploy/{sub}/") and not path.endswith("kustomization.yaml")
        }


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
    assert {"help", "install", "uninstall", "run", "deploy", "undeploy", "docker-build"} <= targets
    assert {"molecule", "test"} <= targets
    recipe_lines = [line for line in makefile.splitlines() if line[:1] in (" ", "\t")]
    assert recipe_lines and all(line.startswith("\t") for line in recipe_lines)


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
    assert "name: my-project-system" in (bad / "deploy/rbac/namespace.yaml").read_text()


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
    assert yaml.safe_load((tmp_path / "watches.yaml").read_text()) == []


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
            ["make", *argv], cwd=project, capture_output=True, text=True, check=True, timeout=60
        ).stdout

    listed = make("help")
    for target in ("install", "uninstall", "run", "deploy", "undeploy", "docker-build"):
        assert f"  {target} " in listed
    assert "molecule test -s default" in make("-n", "test")
    assert (
        "build --build-arg OPERATOR_RUNNER_IMAGE=operator-runner:latest "
        "--build-arg ANSIBLE_CORE=2.18 -t reg/gb:v1 ."
    ) in make("-n", "docker-build", "IMG=reg/gb:v1")
    assert "run --watches-file=./watches.yaml" in make("-n", "run")
