"""runner.scaffold.api: `operator-runner create api` adds a kind to an `init` project
(operator-sdk's Ansible layout)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.ansible.collections_path import runs_path
from runner.scaffold.api import ApiRequest, create_api
from runner.scaffold.names import ScaffoldError
from runner.scaffold.project import init
from runner.watches import load_watches

SAMPLE = """\
apiVersion: webapp.example.com/v1
kind: Guestbook
metadata:
  name: guestbook-sample
spec:
  # kept verbatim, comments too
  size: 3
  image: nginx
  ratio: 0.5
  enabled: true
  egressIPs: [10.0.0.1]
  nested:
    innerKey: {deepValue: 1}
"""


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


def load(root: Path, path: str) -> Any:
    return yaml.safe_load((root / path).read_text())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "guestbook"
    root.mkdir()
    init(root, "example.com")
    return root


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "guestbook.yaml"
    path.write_text(SAMPLE)
    return path


def guestbook(sample: Path | None = None, **options: Any) -> ApiRequest:
    return ApiRequest(group="webapp", version="v1", kind="Guestbook", sample=sample, **options)


def test_role_from_a_sample(project: Path, sample: Path) -> None:
    before = snapshot(project)
    plan = create_api(project, guestbook(sample, short_name="gb"))
    after = snapshot(project)
    assert set(after) - set(before) == {
        "config/crd/bases/webapp.example.com_guestbooks.yaml",
        "config/samples/webapp_v1_guestbook.yaml",
        "roles/guestbook/defaults/main.yml",
        "roles/guestbook/tasks/main.yml",
        "roles/guestbook/meta/main.yml",
        "config/rbac/guestbook_admin_role.yaml",
        "config/rbac/guestbook_editor_role.yaml",
        "config/rbac/guestbook_viewer_role.yaml",
        "molecule/default/tasks/guestbook_test.yml",
    }
    changed = {path for path in before if before[path] != after[path]}
    assert changed == {
        "PROJECT",
        "watches.yaml",
        "config/crd/kustomization.yaml",
        "config/samples/kustomization.yaml",
        "config/rbac/role.yaml",
        "config/rbac/kustomization.yaml",
    }
    assert set(plan.files) == (set(after) - set(before)) | changed
    for path in plan.files:
        assert not re.search(r"@[a-z_]+@", after[path]), path
    for path in changed - {"PROJECT"}:  # added as text: every line stays, comments included
        assert set(before[path].splitlines()) <= set(after[path].splitlines()), path
    for path in ("watches.yaml", "config/rbac/role.yaml", "config/samples/kustomization.yaml"):
        # above kubebuilder's scaffold marker, where operator-sdk's create api adds too
        assert after[path].rstrip().splitlines()[-1].startswith("# +kubebuilder:scaffold:"), path

    # PROJECT records the kind as operator-sdk's create api does.
    assert load(project, "PROJECT")["resources"] == [
        {
            "api": {"crdVersion": "v1", "namespaced": True},
            "domain": "example.com",
            "group": "webapp",
            "kind": "Guestbook",
            "version": "v1",
        }
    ]
    assert load(project, "config/crd/kustomization.yaml")["resources"] == [
        "bases/webapp.example.com_guestbooks.yaml"
    ]
    assert load(project, "config/rbac/kustomization.yaml")["resources"][-3:] == [
        "guestbook_admin_role.yaml",
        "guestbook_editor_role.yaml",
        "guestbook_viewer_role.yaml",
    ]
    viewer = load(project, "config/rbac/guestbook_viewer_role.yaml")
    assert viewer["metadata"]["name"] == "guestbook-viewer-role"
    assert viewer["rules"][0]["verbs"] == ["get", "list", "watch"]
    test = load(project, "molecule/default/tasks/guestbook_test.yml")
    assert test[0]["kubernetes.core.k8s_info"]["name"] == "guestbook-sample"

    # The sample is copied verbatim and listed in the kustomization.
    assert after["config/samples/webapp_v1_guestbook.yaml"] == SAMPLE
    assert load(project, "config/samples/kustomization.yaml")["resources"] == [
        "webapp_v1_guestbook.yaml"
    ]

    # The role: the spec's keys in snake_case as the runner passes them, an example k8s task
    # and status reporting.
    assert load(project, "roles/guestbook/defaults/main.yml") == {
        "size": 3,
        "image": "nginx",
        "ratio": 0.5,
        "enabled": True,
        "egress_ips": ["10.0.0.1"],
        "nested": {"inner_key": {"deep_value": 1}},
    }
    tasks = load(project, "roles/guestbook/tasks/main.yml")
    assert tasks[0]["kubernetes.core.k8s"]["definition"]["kind"] == "ConfigMap"
    status = tasks[1]["operator_sdk.util.k8s_status"]
    assert (status["api_version"], status["kind"]) == ("webapp.example.com/v1", "Guestbook")
    assert "_webapp_example_com_guestbook_spec" in after["roles/guestbook/tasks/main.yml"]
    assert load(project, "roles/guestbook/meta/main.yml")["galaxy_info"]["role_name"] == "guestbook"


def test_watches_file_is_read_by_the_runner_and_points_at_the_role(
    project: Path, sample: Path
) -> None:
    create_api(project, guestbook(sample))
    create_api(
        project,
        ApiRequest(
            group="cache", version="v1alpha1", kind="MemcachedPolicy", generate_playbook=True
        ),
    )
    result = load_watches(project / "watches.yaml", environ=dict(os.environ))
    assert result.warnings == []
    first, second = result.watches
    assert (first.gvk.group, first.gvk.version, first.gvk.kind) == (
        "webapp.example.com",
        "v1",
        "Guestbook",
    )
    assert first.role == str(project / "roles" / "guestbook")
    assert second.gvk.group == "cache.example.com"
    assert second.playbook == project / "playbooks" / "memcached_policy.yml"
    text = (project / "watches.yaml").read_text()
    assert text.startswith("---\n# What guestbook watches")  # the comments stay
    assert text.rstrip().endswith("memcached_policy.yml\n# +kubebuilder:scaffold:watch")


def test_crd(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample, short_name="gb"))
    text = (project / "config/crd/bases/webapp.example.com_guestbooks.yaml").read_text()
    assert text.startswith("# Guestbook (webapp.example.com/v1)")
    crd = yaml.safe_load(text)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "guestbooks.webapp.example.com"
    spec = crd["spec"]
    assert spec["group"] == "webapp.example.com"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "Guestbook",
        "listKind": "GuestbookList",
        "plural": "guestbooks",
        "singular": "guestbook",
        "shortNames": ["gb"],
    }
    (version,) = spec["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Size",
        "Image",
        "Ratio",
        "Enabled",
        "Age",
    ]
    schema = version["schema"]["openAPIV3Schema"]
    assert "required" not in schema
    properties = schema["properties"]["spec"]["properties"]
    assert properties["size"] == {"type": "integer"}
    assert properties["egressIPs"] == {"type": "array", "items": {"type": "string"}}
    assert properties["nested"]["properties"]["innerKey"]["properties"]["deepValue"] == {
        "type": "integer"
    }
    status = schema["properties"]["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_require_sample_keys_and_cluster_scope(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample, require_sample_keys=True, namespaced=False))
    crd = load(project, "config/crd/bases/webapp.example.com_guestbooks.yaml")
    assert crd["spec"]["scope"] == "Cluster"
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["required"] == ["spec"]
    assert schema["properties"]["spec"]["required"] == [
        "size",
        "image",
        "ratio",
        "enabled",
        "egressIPs",
        "nested",
    ]
    # A cluster-scoped CR has no namespace: the example ConfigMap goes to a default one.
    assert load(project, "roles/guestbook/defaults/main.yml")["guestbook_namespace"] == "default"
    assert "{{ guestbook_namespace }}" in (project / "roles/guestbook/tasks/main.yml").read_text()


def test_without_a_sample(project: Path) -> None:
    create_api(project, guestbook())
    text = (project / "config/crd/bases/webapp.example.com_guestbooks.yaml").read_text()
    crd = yaml.safe_load(text)
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["type"] == "object" and spec["x-kubernetes-preserve-unknown-fields"] is True
    assert "# No sample was given (create api --from-sample FILE)" in text
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Age"]
    cr = load(project, "config/samples/webapp_v1_guestbook.yaml")
    assert cr == {
        "apiVersion": "webapp.example.com/v1",
        "kind": "Guestbook",
        "metadata": {"name": "guestbook-sample"},
        "spec": {},
    }
    assert load(project, "roles/guestbook/defaults/main.yml") == {}


def test_a_spec_only_sample_gets_apiversion_kind_and_name(project: Path, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("spec:\n  size: 3\n")
    create_api(
        project,
        ApiRequest(group="swallowlab.com", version="v1alpha1", kind="EchoFlask", sample=path),
    )
    assert load(project, "config/samples/swallowlab_v1alpha1_echoflask.yaml") == {
        "apiVersion": "swallowlab.com/v1alpha1",  # a group with a dot is taken as it is
        "kind": "EchoFlask",
        "metadata": {"name": "echoflask-sample"},
        "spec": {"size": 3},
    }
    assert (project / "config/crd/bases/swallowlab.com_echoflasks.yaml").is_file()
    assert (project / "roles/echo_flask/tasks/main.yml").is_file()


def test_playbook(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample, generate_playbook=True))
    assert not (project / "roles/guestbook").exists()
    (play,) = load(project, "playbooks/guestbook.yml")
    assert play["hosts"] == "localhost"
    assert play["vars"]["egress_ips"] == ["10.0.0.1"]
    assert [next(iter(set(task) - {"name"})) for task in play["tasks"]] == [
        "kubernetes.core.k8s",
        "operator_sdk.util.k8s_status",
    ]
    assert load(project, "watches.yaml")[0]["playbook"] == "playbooks/guestbook.yml"


def test_rbac_rules(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample))
    create_api(project, ApiRequest(group="webapp", version="v1", kind="Visitor"))
    text = (project / "config/rbac/role.yaml").read_text()
    assert text.startswith("---\n# What the operator may do")
    rules = load(project, "config/rbac/role.yaml")["rules"]
    allowed = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in rules}
    assert allowed[("webapp.example.com", "guestbooks")] == ["get", "list", "watch", "patch"]
    assert allowed[("webapp.example.com", "guestbooks/status")] == ["get", "patch"]
    assert allowed[("webapp.example.com", "guestbooks/finalizers")] == ["update"]
    assert allowed[("webapp.example.com", "visitors")] == ["get", "list", "watch", "patch"]
    assert allowed[("", "configmaps")] == ["get", "list", "watch", "create", "patch"]
    assert len(rules) == 2 + 3 + 1 + 3  # the runner's, Guestbook's + ConfigMaps, Visitor's
    assert all("*" not in r["verbs"] + r["resources"] + r["apiGroups"] for r in rules)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (ApiRequest(group="Webapp", version="v1", kind="Guestbook"), "--group 'Webapp'"),
        (ApiRequest(group="webapp", version="1", kind="Guestbook"), "--version '1'"),
        (ApiRequest(group="webapp", version="v1", kind="guestbook"), "PascalCase"),
        (ApiRequest(group="webapp", version="v1", kind="Guestbook", short_name="G"), "short"),
    ],
)
def test_bad_names_write_nothing(project: Path, request_: ApiRequest, message: str) -> None:
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match=message) as error:
        create_api(project, request_)
    assert "\n" not in str(error.value)
    assert snapshot(project) == before


def test_the_same_kind_and_version_is_refused(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample))
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match=r"Guestbook webapp\.example\.com/v1 is already in"):
        create_api(project, ApiRequest(group="webapp", version="v1", kind="Guestbook"))
    assert snapshot(project) == before


def test_another_version_of_a_kind_goes_into_its_crd(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample))
    crd_path = "config/crd/bases/webapp.example.com_guestbooks.yaml"
    before = snapshot(project)
    plan = create_api(project, ApiRequest(group="webapp", version="v2", kind="Guestbook"))
    after = snapshot(project)
    changed = {crd_path, "PROJECT"}
    assert set(plan.files) == changed == {p for p in after if after[p] != before.get(p)}
    resources = load(project, "PROJECT")["resources"]
    assert [(r["kind"], r["version"]) for r in resources] == [
        ("Guestbook", "v1"),
        ("Guestbook", "v2"),
    ]
    assert after[crd_path].startswith(before[crd_path]), "appended as text: comments stay"
    v1, v2 = load(project, crd_path)["spec"]["versions"]
    assert (v1["name"], v1["served"], v1["storage"]) == ("v1", True, True)
    assert (v2["name"], v2["served"], v2["storage"]) == ("v2", True, False)
    assert v2["schema"] == v1["schema"]
    assert v2["subresources"] == {"status": {}}
    assert v2["additionalPrinterColumns"] == v1["additionalPrinterColumns"]
    assert plan.added_version is not None
    done, after_text = plan.added_version
    assert "watches.yaml still reconciles Guestbook v1" in done
    assert "create webhook --kind Guestbook --convert" in after_text
    [watch] = load_watches(project / "watches.yaml", environ={}).watches
    assert watch.gvk.version == "v1", "the watch keeps its version"


def test_another_version_from_a_sample_as_the_storage_version(
    project: Path, sample: Path, tmp_path: Path
) -> None:
    create_api(project, guestbook(sample))
    crd_path = "config/crd/bases/webapp.example.com_guestbooks.yaml"
    v2_sample = tmp_path / "v2.yaml"
    v2_sample.write_text(
        SAMPLE.replace("/v1", "/v2").replace("size: 3", "replicas: 3").replace("  ratio: 0.5\n", "")
    )
    kustomization = (project / "config/samples/kustomization.yaml").read_text()
    plan = create_api(
        project,
        ApiRequest(group="webapp", version="v2", kind="Guestbook", sample=v2_sample, storage=True),
    )
    assert set(plan.files) == {crd_path, "config/samples/webapp_v2_guestbook.yaml", "PROJECT"}
    assert (project / "config/samples/kustomization.yaml").read_text() == kustomization
    v1, v2 = load(project, crd_path)["spec"]["versions"]
    assert (v1["storage"], v2["storage"]) == (False, True)
    spec = v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "replicas" in spec and "size" not in spec and "ratio" not in spec
    assert "size" in v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert v2["additionalPrinterColumns"][0]["jsonPath"] == ".spec.replicas"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"short_name": "gb"}, "--short-name only apply to a new kind"),
        ({"version": "v1", "storage": True}, "already in watches.yaml"),
    ],
)
def test_a_version_of_a_kind_that_exists_refuses_new_kind_options(
    project: Path, sample: Path, options: dict[str, Any], message: str
) -> None:
    create_api(project, guestbook(sample))
    before = snapshot(project)
    request = {"group": "webapp", "version": "v2", "kind": "Guestbook", **options}
    if "short_name" in options:
        request["new_kind_options"] = ("--short-name",)
        del request["short_name"]
    with pytest.raises(ScaffoldError, match=message):
        create_api(project, ApiRequest(**request))
    assert snapshot(project) == before


def test_storage_is_for_a_version_added_to_a_kind(project: Path) -> None:
    with pytest.raises(ScaffoldError, match="--storage chooses the storage version"):
        create_api(project, guestbook(storage=True))


def test_a_version_is_added_to_a_crd_only_where_it_can_be_appended(
    project: Path, sample: Path
) -> None:
    create_api(project, guestbook(sample))
    crd = project / "config/crd/bases/webapp.example.com_guestbooks.yaml"
    crd.write_text(crd.read_text() + "  conversion:\n    strategy: None\n")
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match=r"must end with spec\.versions"):
        create_api(project, ApiRequest(group="webapp", version="v2", kind="Guestbook"))
    assert snapshot(project) == before
    create_api(project, ApiRequest(group="webapp", version="v1alpha1", kind="Other"))
    (project / "config/crd/bases/webapp.example.com_others.yaml").unlink()
    with pytest.raises(ScaffoldError, match="no CRD in config/crd/bases/ defines it"):
        create_api(project, ApiRequest(group="webapp", version="v2", kind="Other"))


def test_existing_files_are_not_overwritten(project: Path) -> None:
    (project / "roles/guestbook").mkdir()
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match="roles/guestbook exists already"):
        create_api(project, guestbook())
    assert snapshot(project) == before


def test_outside_a_project(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=r"no PROJECT file.*operator-runner init.*operator-sdk"):
        create_api(tmp_path, guestbook())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: other.example.com/v1\nkind: Guestbook\nspec: {}\n", "apiVersion is"),
        ("kind: Visitor\nspec: {}\n", "kind is 'Visitor'"),
        ("metadata: {name: x}\n", "no 'spec' mapping"),
        ("spec: {a: 1}\n---\nspec: {b: 2}\n", "one custom resource"),
        ("spec: [\n", "not valid YAML"),
    ],
)
def test_bad_samples_write_nothing(project: Path, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    before = snapshot(project)
    with pytest.raises(ScaffoldError, match=message):
        create_api(project, guestbook(path))
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("path", "addition", "message"),
    [
        ("config/rbac/role.yaml", "aggregationRule: {}\n", "add them by hand"),
        ("watches.yaml", "# trailing comment only\n", None),
        ("config/samples/kustomization.yaml", "namespace: x\n", "add it by hand"),
        ("watches.yaml", "- {version: v1, group: x.y, kind: A, role: a}\nfoo: 1\n", "valid YAML"),
    ],
)
def test_files_that_cannot_be_added_to_write_nothing(
    project: Path, path: str, addition: str, message: str | None
) -> None:
    """Without the scaffold marker (removed here), additions go at the end of the file."""
    target = project / path
    text = re.sub(r"^# \+kubebuilder:scaffold:\w+\n", "", target.read_text(), flags=re.M)
    target.write_text(text + addition)
    before = snapshot(project)
    if message is None:  # comments after the list are fine
        create_api(project, guestbook())
        return
    with pytest.raises(ScaffoldError, match=message):
        create_api(project, guestbook())
    assert snapshot(project) == before


def structural_problems(node: dict[str, Any], where: str = "") -> list[str]:
    """What makes a schema non-structural (apiextensions.k8s.io/v1), in short."""
    problems = []
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{where or '/'}: no type")
    if node.get("type") == "array" and "items" not in node:
        problems.append(f"{where}: array without items")
    if node.get("type") not in (None, "object") and "properties" in node:
        problems.append(f"{where}: properties on a {node['type']}")
    for keyword in ("anyOf", "oneOf", "allOf", "not", "additionalItems", "$ref"):
        if keyword in node:
            problems.append(f"{where}: {keyword}")
    for key, child in node.get("properties", {}).items():
        problems += structural_problems(child, f"{where}/{key}")
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], f"{where}[]")
    return problems


def test_generated_schemas_are_structural(project: Path, tmp_path: Path) -> None:
    rich = tmp_path / "rich.yaml"
    rich.write_text(
        "spec: {a: 1, b: [], c: [1, x], d: null, e: {}, f: [{g: 1}, {h: [true]}], i: [[]]}\n"
    )
    create_api(project, guestbook(rich))
    create_api(project, ApiRequest(group="webapp", version="v1", kind="Visitor"))
    repo = Path(__file__).resolve().parents[2]
    crds = [*project.glob("config/crd/bases/*.yaml"), *repo.glob("crds/*.yaml")]
    assert len(crds) >= 4
    for path in crds:
        crd = yaml.safe_load(path.read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert structural_problems(schema) == [], path


def test_spec_keys_that_are_no_variable_names_are_left_out_of_the_defaults(
    project: Path, tmp_path: Path
) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text("spec: {my.key: 1, 2: two, class: x, goodKey: 3}\n")
    create_api(project, guestbook(path))
    assert load(project, "roles/guestbook/defaults/main.yml") == {"good_key": 3}


def test_articles(project: Path) -> None:
    create_api(project, ApiRequest(group="webapp", version="v1", kind="EchoFlask"))
    text = (project / "roles/echo_flask/tasks/main.yml").read_text()
    assert "what an EchoFlask asks for" in text


ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="no ansible-playbook beside Python")
def test_generated_ansible_passes_syntax_check(project: Path, sample: Path) -> None:
    create_api(project, guestbook(sample))
    visitor = ApiRequest(group="webapp", version="v1", kind="Visitor", generate_playbook=True)
    create_api(project, visitor)
    (project / "check.yml").write_text("- hosts: localhost\n  roles: [guestbook]\n")
    environ = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": runs_path(os.environ),  # operator_sdk.util, as in runs
        "ANSIBLE_ROLES_PATH": str(project / "roles"),
        "PATH": f"{ANSIBLE_PLAYBOOK.parent}:{os.environ.get('PATH', '')}",
    }
    playbooks = [
        "check.yml",
        "playbooks/visitor.yml",
        *(
            f"molecule/default/{name}.yml"
            for name in ("create", "converge", "verify", "cleanup", "destroy")
        ),
        *(f"molecule/kind/{name}.yml" for name in ("create", "converge", "destroy")),
    ]
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--syntax-check", "-i", "localhost,", *playbooks],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_second_api_group_makes_the_project_multigroup(project: Path) -> None:
    """As kubebuilder's `edit --multigroup`: operator-sdk's create api refuses a group beside
    another without it, and names a kind's helper roles after its group too."""
    create_api(project, ApiRequest(group="webapp", version="v1", kind="Guestbook"))
    create_api(project, ApiRequest(group="webapp", version="v1", kind="Visitor"))
    assert "multigroup" not in load(project, "PROJECT")
    create_api(project, ApiRequest(group="cache", version="v1alpha1", kind="Memcached"))
    project_file = load(project, "PROJECT")
    assert project_file["multigroup"] is True
    assert list(project_file)[:3] == ["domain", "layout", "multigroup"]
    role = load(project, "config/rbac/cache_memcached_editor_role.yaml")
    assert role["metadata"]["name"] == "cache-memcached-editor-role"
    assert (
        "cache_memcached_viewer_role.yaml"
        in load(project, "config/rbac/kustomization.yaml")["resources"]
    )
