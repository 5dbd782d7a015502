"""runner.watches: parsing, defaults, errors and role lookup of watches.yaml."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from runner.ansible.collections_path import collection_roots
from runner.watches import (
    GVK,
    Admission,
    Finalizer,
    LoadResult,
    Watch,
    WatchesError,
    expand_env,
    load_watches,
    parse_go_duration,
)

ENTRY = """\
- group: example.com
  version: v1
  kind: Thing
  role: thing
"""


def make_role(parent: Path, name: str) -> Path:
    """A minimal role directory ``parent/name``."""
    role = parent / name
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("- ansible.builtin.debug: msg=hi\n")
    return role


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An operator project: roles/thing and playbooks/site.yml next to watches.yaml."""
    make_role(tmp_path / "roles", "thing")
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text("- hosts: localhost\n")
    return tmp_path


def write(directory: Path, text: str, name: str = "watches.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def load(
    path: Path,
    environ: Mapping[str, str] | None = None,
    roles_paths: Sequence[Path] = (),
    python_paths: Sequence[Path] = (),
) -> LoadResult:
    environ = environ or {}
    return load_watches(
        path,
        environ=environ,
        roles_paths=roles_paths,
        collection_roots=collection_roots(environ, python_paths),
    )


def load_one(project: Path, extra: str = "", entry: str = ENTRY) -> Watch:
    result = load(write(project, entry + textwrap.indent(textwrap.dedent(extra), "  ")))
    assert len(result.watches) == 1
    return result.watches[0]


def load_error(
    path: Path, environ: Mapping[str, str] | None = None, roles_paths: Sequence[Path] = ()
) -> str:
    with pytest.raises(WatchesError) as caught:
        load(path, environ=environ, roles_paths=roles_paths)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    return message


# -- GVK ---------------------------------------------------------------------------------


def test_gvk_str_and_api_version() -> None:
    gvk = GVK("app.my.domain", "v1", "Echo")
    assert gvk.api_version == "app.my.domain/v1"
    assert str(gvk) == "app.my.domain/v1, Kind=Echo"
    core = GVK("", "v1", "ConfigMap")
    assert core.api_version == "v1"
    assert str(core) == "v1, Kind=ConfigMap"


def test_watch_and_finalizer_are_hashable_despite_dict_fields() -> None:
    watch = Watch(GVK("g", "v1", "K"), role="/r", vars={"a": 1}, finalizer=Finalizer("f"))
    assert hash(watch) == hash(Watch(GVK("g", "v1", "K"), role="/r", finalizer=Finalizer("f")))


# -- defaults and values -------------------------------------------------------------------


def test_minimal_entry_gets_operator_sdk_defaults_except_mark_unsafe(project: Path) -> None:
    result = load(write(project, ENTRY))
    assert result.warnings == []
    assert result.watches == [
        Watch(
            gvk=GVK("example.com", "v1", "Thing"),
            role=str(project / "roles" / "thing"),
            playbook=None,
            vars={},
            reconcile_period=None,
            manage_status=True,
            watch_dependent_resources=True,
            watch_cluster_scoped_resources=False,
            snake_case_parameters=True,
            watch_annotations_changes=False,
            mark_unsafe=True,
            selector={},
            blacklist=(),
            finalizer=None,
            max_runner_artifacts=20,
        )
    ]
    assert not result.watches[0].is_collection_role


def test_dataclass_defaults_match_the_loader(project: Path) -> None:
    watch = load_one(project)
    assert watch == Watch(GVK("example.com", "v1", "Thing"), role=watch.role)


@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected"),
    [
        ("manageStatus", "false", "manage_status", False),
        ("watchDependentResources", "false", "watch_dependent_resources", False),
        ("watchClusterScopedResources", "true", "watch_cluster_scoped_resources", True),
        ("snakeCaseParameters", "false", "snake_case_parameters", False),
        ("watchAnnotationsChanges", "true", "watch_annotations_changes", True),
        ("markUnsafe", "false", "mark_unsafe", False),
        ("markUnsafe", "no", "mark_unsafe", False),  # YAML 1.1, as operator-sdk
        ("manageStatus", "off", "manage_status", False),
        ("watchAnnotationsChanges", "y", "watch_annotations_changes", True),  # go-yaml v2
        ("maxRunnerArtifacts", "5", "max_runner_artifacts", 5),
        ("maxRunnerArtifacts", "7.0", "max_runner_artifacts", 7),
        ("reconcilePeriod", "30s", "reconcile_period", 30.0),
        ("reconcilePeriod", "1m30s", "reconcile_period", 90.0),
        ("reconcilePeriod", "1h", "reconcile_period", 3600.0),
        ("reconcilePeriod", "500ms", "reconcile_period", 0.5),
        ("reconcilePeriod", "1.5h", "reconcile_period", 5400.0),
        ("reconcilePeriod", "45", "reconcile_period", 45.0),  # plain integer = seconds
        ("manageStatus", "null", "manage_status", True),  # null = not set, as in Go
        ("reconcilePeriod", "~", "reconcile_period", None),
    ],
)
def test_entry_values(
    project: Path, key: str, value: str, attribute: str, expected: object
) -> None:
    watch = load_one(project, f"  {key}: {value}\n")
    assert getattr(watch, attribute) == expected


@pytest.mark.parametrize("value", ["0", "0s", '"0"', "0m0s"])
def test_reconcile_period_zero_turns_resync_off_with_a_warning(project: Path, value: str) -> None:
    result = load(write(project, ENTRY + f"  reconcilePeriod: {value}\n"))
    assert result.watches[0].reconcile_period == 0.0
    [warning] = result.warnings
    assert "entry 1 (example.com/v1 Thing)" in warning
    assert "'reconcilePeriod'" in warning
    assert "off" in warning


def test_max_runner_artifacts_zero_means_default_with_a_warning(project: Path) -> None:
    result = load(write(project, ENTRY + "  maxRunnerArtifacts: 0\n"))
    assert result.watches[0].max_runner_artifacts == 20
    [warning] = result.warnings
    assert "'maxRunnerArtifacts'" in warning and "entry 1" in warning


def test_vars_keep_types_like_go_yaml(project: Path) -> None:
    watch = load_one(
        project,
        """\
          vars:
            name: value
            nested: {list: [1, two, {deep: true}]}
            80: http
            true: yes-key
            time: 12:30
            date: 2024-01-02
            answer: y
            octal: 0o17
            exp: 1e3
        """,
    )
    assert watch.vars == {
        "name": "value",
        "nested": {"list": [1, "two", {"deep": True}]},
        "80": "http",
        "true": "yes-key",
        "time": "12:30",
        "date": "2024-01-02",
        "answer": True,
        "octal": 15,
        "exp": 1000.0,
    }


def test_selector_is_normalised(project: Path) -> None:
    watch = load_one(
        project,
        """\
          selector:
            matchLabels:
              app: web
              tier: "1"
            matchExpressions:
              - {key: example.com/env, operator: In, values: [prod, staging]}
              - {key: canary, operator: DoesNotExist}
        """,
    )
    assert watch.selector == {
        "matchLabels": {"app": "web", "tier": "1"},
        "matchExpressions": [
            {"key": "example.com/env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "canary", "operator": "DoesNotExist", "values": []},
        ],
    }


def test_empty_selector_parts_are_dropped(project: Path) -> None:
    watch = load_one(project, "  selector: {matchLabels: {}, matchExpressions: []}\n")
    assert watch.selector == {}


def test_blacklist(project: Path) -> None:
    watch = load_one(
        project,
        """\
          blacklist:
            - {group: apps, version: v1, kind: Deployment}
            - {Version: v1, KIND: Secret}
        """,
    )
    assert watch.blacklist == (GVK("apps", "v1", "Deployment"), GVK("", "v1", "Secret"))


def test_watch_reads_is_off_by_default_and_a_list_of_kinds(project: Path) -> None:
    assert load_one(project).watch_reads == ()
    watch = load_one(
        project,
        """\
          watchReads:
            - {version: v1, kind: Secret}
            - {group: "", Version: v1, KIND: ConfigMap}
            - {version: v1, kind: Secret}
            - {group: cert-manager.io, version: v1, kind: Certificate}
        """,
    )
    assert watch.watch_reads == (
        GVK("", "v1", "Secret"),
        GVK("", "v1", "ConfigMap"),
        GVK("cert-manager.io", "v1", "Certificate"),
    )


def test_a_watch_reads_entry_without_a_kind_is_refused(project: Path) -> None:
    message = load_error(write(project, ENTRY + "  watchReads: [{version: v1}]\n"))
    assert message.endswith(
        "key 'watchReads[1]': needs 'version' and 'kind' ('group' may be empty for core "
        "resources); a watchReads entry follows one exact group/version/kind"
    ), message


def test_finalizer_with_role(project: Path) -> None:
    make_role(project / "roles", "cleanup")
    watch = load_one(
        project,
        """\
          finalizer:
            name: example.com/finalizer
            role: cleanup
            vars: {state: absent}
        """,
    )
    assert watch.finalizer == Finalizer(
        name="example.com/finalizer",
        role=str(project / "roles" / "cleanup"),
        playbook=None,
        vars={"state": "absent"},
    )


def test_finalizer_with_playbook(project: Path) -> None:
    watch = load_one(
        project, "  finalizer: {name: example.com/finalizer, playbook: playbooks/site.yml}\n"
    )
    assert watch.finalizer == Finalizer(
        "example.com/finalizer", playbook=project / "playbooks" / "site.yml"
    )


def test_finalizer_with_vars_only_reuses_the_watch_content(project: Path) -> None:
    watch = load_one(project, "  finalizer: {name: example.com/finalizer, vars: {state: absent}}\n")
    assert watch.finalizer == Finalizer("example.com/finalizer", vars={"state": "absent"})


def test_validate_and_mutate(project: Path) -> None:
    make_role(project / "roles", "thing_validate")
    watch = load_one(
        project,
        """\
          validate:
            role: thing_validate
            vars: {strict: true}
            failurePolicy: Ignore
            timeoutSeconds: 3
            operations: [CREATE, UPDATE, DELETE]
          Mutate: {playbook: playbooks/site.yml}
        """,
    )
    assert watch.validate == Admission(
        role=str(project / "roles" / "thing_validate"),
        vars={"strict": True},
        failure_policy="Ignore",
        timeout_seconds=3,
        operations=("CREATE", "UPDATE", "DELETE"),
    )
    assert watch.mutate == Admission(playbook=project / "playbooks" / "site.yml")
    assert watch.mutate.failure_policy == "Fail" and watch.mutate.timeout_seconds == 10
    assert watch.mutate.operations == ("CREATE", "UPDATE")
    assert load_one(project).validate is None


@pytest.mark.parametrize(
    ("extra", "wanted"),
    [
        ("  validate: {vars: {a: 1}}\n", "key 'validate': needs a 'role' or a 'playbook'"),
        ("  mutate: {role: nothing}\n", "key 'mutate.role': role 'nothing' not found"),
        ("  validate: {role: thing, playbook: playbooks/site.yml}\n", "keep only one"),
        ("  validate: {role: thing, failurePolicy: fail}\n", "must be Fail or Ignore"),
        ("  validate: {role: thing, timeoutSeconds: 0}\n", "from 1 to 30"),
        ("  validate: {role: thing, timeoutSeconds: 2.5}\n", "from 1 to 30"),
        ("  validate: {role: thing, operations: []}\n", "non-empty list"),
        ("  validate: {role: thing, operations: [create]}\n", "'create' is not an operation"),
        ("  validate: {role: thing, operations: ['*', CREATE]}\n", "write it alone"),
    ],
)
def test_validate_and_mutate_errors(project: Path, extra: str, wanted: str) -> None:
    message = load_error(write(project, ENTRY + extra))
    assert wanted in message, message


def test_every_operation(project: Path) -> None:
    watch = load_one(project, "  validate: {role: thing, operations: ['*']}\n")
    assert watch.validate is not None
    assert watch.validate.operations == ("CREATE", "UPDATE", "DELETE", "CONNECT")


def test_playbook_relative_to_the_watches_file(project: Path) -> None:
    entry = "- {group: example.com, version: v1, kind: Thing, playbook: playbooks/site.yml}\n"
    watch = load_one(project, entry=entry)
    assert watch.playbook == project / "playbooks" / "site.yml"
    assert watch.role is None


def test_playbook_absolute(project: Path) -> None:
    playbook = project / "playbooks" / "site.yml"
    entry = f"- {{group: example.com, version: v1, kind: Thing, playbook: {playbook}}}\n"
    assert load_one(project, entry=entry).playbook == playbook


def test_core_group_may_be_omitted(project: Path) -> None:
    watch = load_one(project, entry="- {version: v1, kind: ConfigMap, role: thing}\n")
    assert watch.gvk == GVK("", "v1", "ConfigMap")


def test_numbers_in_text_fields_are_refused_not_turned_into_text(project: Path) -> None:
    """Go's YAML decoder would read `kind: 42` as "42"; a number where a name belongs is a
    slip, refused with the key's path (and the quoted spelling, if it was meant)."""
    path = write(project, "- {group: example.com, version: v1, kind: 42, role: thing}\n")
    message = load_error(path)
    assert "entry 1 (example.com/v1 42): key 'kind': must be a string, found" in message
    assert "quote it ('42')" in message


def test_several_entries_keep_file_order(project: Path) -> None:
    text = ENTRY + ENTRY.replace("Thing", "Other")
    result = load(write(project, text))
    assert [watch.gvk.kind for watch in result.watches] == ["Thing", "Other"]


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "---\n", "null\n"])
def test_empty_file_has_no_watches_and_warns(project: Path, text: str) -> None:
    path = write(project, text)
    result = load(path)
    assert result.watches == []
    assert result.warnings == [f"{path}: no entries; nothing will be watched"]


# -- warnings ------------------------------------------------------------------------------


def test_unknown_key_warns_with_suggestion(project: Path) -> None:
    path = write(project, ENTRY + "  reconcilePeriode: 5s\n  frobnicate: 1\n")
    result = load(path)
    assert result.watches[0].reconcile_period is None
    first, second = result.warnings
    assert first.startswith(f"{path}: entry 1 (example.com/v1 Thing): ")
    assert "unknown key 'reconcilePeriode'" in first
    assert "did you mean 'reconcilePeriod'?" in first
    assert "unknown key 'frobnicate'" in second and "did you mean" not in second


def test_unknown_finalizer_key_warns(project: Path) -> None:
    path = write(project, ENTRY + "  finalizer: {name: f.io/x, vars: {a: 1}, rol: thing}\n")
    [warning] = load(path).warnings
    assert f"{path}: entry 1 (example.com/v1 Thing)" in warning
    assert "'finalizer.rol'" in warning and "did you mean 'role'?" in warning


def test_keys_match_case_insensitively_with_a_warning(project: Path) -> None:
    path = write(project, ENTRY + "  ManageStatus: false\n  RECONCILEPERIOD: 2s\n")
    result = load(path)
    assert result.watches[0].manage_status is False
    assert result.watches[0].reconcile_period == 2.0
    assert len(result.warnings) == 2
    assert "'ManageStatus' read as 'manageStatus'" in result.warnings[0]
    assert "entry 1" in result.warnings[0] and str(path) in result.warnings[0]


def test_duplicate_yaml_key_warns_and_last_wins(project: Path) -> None:
    path = write(project, ENTRY + "  manageStatus: true\n  manageStatus: false\n")
    result = load(path)
    assert result.watches[0].manage_status is False
    assert result.warnings == [
        f"{path}: line 6: key 'manageStatus' appears twice in the same mapping; "
        "the last one wins (as in operator-sdk); remove one"
    ]


def test_yaml_merge_keys_are_not_duplicates(project: Path) -> None:
    text = """\
        - &base
          group: example.com
          version: v1
          kind: Thing
          role: thing
        - <<: *base
          kind: Other
    """
    result = load(write(project, text))
    assert result.warnings == []
    assert [w.gvk.kind for w in result.watches] == ["Thing", "Other"]


# -- environment expansion -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A}", "va"),
        ("$A", "va"),
        ("x${A}y", "xvay"),
        ("$A_B", "vab"),  # the name runs over letters, digits and _
        ("$A-b", "va-b"),
        ("${A}${A_B}", "vavab"),
        ("${UNSET}", "${UNSET}"),  # unknown references are kept
        ("$UNSET", "$UNSET"),
        ("$", "$"),
        ("$$", "$$"),
        ("cost: 5$", "cost: 5$"),
        ("${", "${"),
        ("${}", "${}"),
        ("$1", "one"),  # Go: a digit is a one-character name
        ("${weird name}", "sp"),
    ],
)
def test_expand_env(text: str, expected: str) -> None:
    environ = {"A": "va", "A_B": "vab", "1": "one", "weird name": "sp"}
    assert expand_env(text, environ) == expected


def test_env_vars_are_expanded_from_environ_only(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Like operator-sdk's testdata/env-vars.yaml.
    monkeypatch.setenv("NOT_PASSED", "from-os-environ")
    path = write(
        project,
        """\
        - version: "${WATCH_VERSION}"
          group: example.com
          kind: Thing
          playbook: ${WATCH_PLAYBOOK}
          selector:
            matchLabels:
              ${WATCH_LABEL_NAME}: "$WATCH_LABEL_VALUE"
          vars:
            undefined: "${WATCH_UNDEFINED}"
            not_passed: $NOT_PASSED
        """,
    )
    environ = {
        "WATCH_VERSION": "v123",
        "WATCH_PLAYBOOK": str(project / "playbooks" / "site.yml"),
        "WATCH_LABEL_NAME": "label123",
        "WATCH_LABEL_VALUE": "value123",
    }
    [watch] = load(path, environ=environ).watches
    assert watch.gvk == GVK("example.com", "v123", "Thing")
    assert watch.playbook == project / "playbooks" / "site.yml"
    assert watch.selector == {"matchLabels": {"label123": "value123"}}
    assert watch.vars == {"undefined": "${WATCH_UNDEFINED}", "not_passed": "$NOT_PASSED"}


# -- Go durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("-0", 0.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("+5s", 5.0),
        ("-2m", -120.0),
        ("1h0m0.5s", 3600.5),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        ("1\u03bcs", 1e-6),
        ("10ns", 1e-8),
        ("2562047h47m16.854775807s", 9223372036.854775807),
    ],
)
def test_parse_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid duration"),
        ("30", "missing unit"),
        ("1d", "unknown unit"),
        (".s", "invalid duration"),
        ("s", "invalid duration"),
        ("1h30", "missing unit"),
        ("2562047h47m16.854775808s", "invalid duration"),
        ("1 h", "unknown unit"),
    ],
)
def test_parse_go_duration_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_go_duration(text)


# -- role lookup ----------------------------------------------------------------------------


def role_entry(role: str) -> str:
    return f"- {{group: example.com, version: v1, kind: Thing, role: '{role}'}}\n"


def test_role_absolute_path(tmp_path: Path) -> None:
    role = make_role(tmp_path / "elsewhere", "abs")
    watch = load_one(tmp_path, entry=role_entry(str(role)))
    assert watch.role == str(role)


def test_role_relative_to_watches_dir(tmp_path: Path) -> None:
    make_role(tmp_path / "myroles", "rel")
    assert load_one(tmp_path, entry=role_entry("myroles/rel")).role == str(
        tmp_path / "myroles" / "rel"
    )


def test_role_in_roles_dir_next_to_watches(tmp_path: Path) -> None:
    make_role(tmp_path / "roles", "named")
    assert load_one(tmp_path, entry=role_entry("named")).role == str(tmp_path / "roles" / "named")


def test_watches_dir_wins_over_its_roles_dir(tmp_path: Path) -> None:
    make_role(tmp_path, "both")
    make_role(tmp_path / "roles", "both")
    assert load_one(tmp_path, entry=role_entry("both")).role == str(tmp_path / "both")


def test_roles_dir_wins_over_roles_paths(tmp_path: Path) -> None:
    project = tmp_path / "project"
    make_role(project / "roles", "shared")
    make_role(tmp_path / "ansible-roles", "shared")
    path = write(project, role_entry("shared"))
    [watch] = load(path, roles_paths=[tmp_path / "ansible-roles"]).watches
    assert watch.role == str(project / "roles" / "shared")


def test_roles_paths_in_order_with_and_without_roles_subdir(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    first, second = tmp_path / "first", tmp_path / "second"
    make_role(first / "roles", "r")  # <first>/roles/r
    make_role(second, "r")  # <second>/r
    path = write(project, role_entry("r"))
    [watch] = load(path, roles_paths=[first, second]).watches
    assert watch.role == str(first / "roles" / "r")
    make_role(first, "r")  # <first>/r beats <first>/roles/r
    [watch] = load(path, roles_paths=[first, second]).watches
    assert watch.role == str(first / "r")


def test_relative_roles_path_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    make_role(tmp_path / "cwd" / "lib", "r")
    monkeypatch.chdir(tmp_path / "cwd")
    [watch] = load(write(project, role_entry("r")), roles_paths=[Path("lib")]).watches
    assert watch.role == str(tmp_path / "cwd" / "lib" / "r")


def test_current_directory_is_not_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    make_role(tmp_path / "cwd" / "roles", "r")
    monkeypatch.chdir(tmp_path / "cwd")
    message = load_error(write(project, role_entry("r")))
    assert "role 'r' not found" in message


def test_role_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "file").write_text("not a role")
    assert "role 'file' not found" in load_error(write(tmp_path, role_entry("file")))


def make_collection_role(root: Path, fqcn: str) -> Path:
    namespace, collection, role = fqcn.split(".")
    return make_role(root / "ansible_collections" / namespace / collection / "roles", role)


def test_fqcn_role_in_collections_path(tmp_path: Path) -> None:
    make_collection_role(tmp_path / "collections", "my_ns.my_coll.web")
    path = write(tmp_path, role_entry("my_ns.my_coll.web"))
    environ = {"ANSIBLE_COLLECTIONS_PATH": f"/nonexistent:{tmp_path / 'collections'}"}
    [watch] = load(path, environ=environ).watches
    assert watch.role == "my_ns.my_coll.web"
    assert watch.is_collection_role


def test_fqcn_role_in_legacy_collections_paths_variable(tmp_path: Path) -> None:
    make_collection_role(tmp_path / "c", "a.b.c")
    environ = {"ANSIBLE_COLLECTIONS_PATHS": str(tmp_path / "c")}
    [watch] = load(write(tmp_path, role_entry("a.b.c")), environ=environ).watches
    assert watch.role == "a.b.c"


def test_fqcn_role_given_an_ansible_collections_directory(tmp_path: Path) -> None:
    make_collection_role(tmp_path / "c", "a.b.c")
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "c" / "ansible_collections")}
    [watch] = load(write(tmp_path, role_entry("a.b.c")), environ=environ).watches
    assert watch.role == "a.b.c"


def test_fqcn_role_in_home_collections_when_unset(tmp_path: Path) -> None:
    make_collection_role(tmp_path / "home" / ".ansible" / "collections", "a.b.c")
    environ = {"HOME": str(tmp_path / "home")}
    [watch] = load(write(tmp_path, role_entry("a.b.c")), environ=environ).watches
    assert watch.role == "a.b.c"


def test_fqcn_role_in_python_path(tmp_path: Path) -> None:
    make_collection_role(tmp_path / "site-packages", "a.b.c")
    path = write(tmp_path, role_entry("a.b.c"))
    [watch] = load(path, python_paths=[tmp_path / "site-packages"]).watches
    assert watch.role == "a.b.c"


def test_fqcn_role_in_sys_path_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_collection_role(tmp_path / "site-packages", "a.b.c")
    monkeypatch.setattr("sys.path", [*sys.path, str(tmp_path / "site-packages")])
    path = write(tmp_path, role_entry("a.b.c"))
    [watch] = load_watches(path, environ={}, collection_roots=collection_roots({})).watches
    assert watch.role == "a.b.c"


def test_fqcn_falls_back_to_a_directory_of_that_name(tmp_path: Path) -> None:
    make_role(tmp_path / "roles", "a.b.c")
    [watch] = load(write(tmp_path, role_entry("a.b.c"))).watches
    assert watch.role == str(tmp_path / "roles" / "a.b.c")
    assert not watch.is_collection_role


def test_fqcn_not_found_lists_collection_paths(tmp_path: Path) -> None:
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "c")}
    message = load_error(write(tmp_path, role_entry("a.b.c")), environ=environ)
    assert "key 'role': role 'a.b.c' not found" in message
    assert str(tmp_path / "c" / "ansible_collections" / "a" / "b" / "roles" / "c") in message
    assert "ANSIBLE_COLLECTIONS_PATH" in message


def test_role_not_found_message_like_the_brief(tmp_path: Path) -> None:
    make_role(tmp_path / "roles", "echoflask")
    make_role(tmp_path / "roles", "memcached")
    path = write(
        tmp_path,
        """\
        - {group: cache.example.com, version: v1, kind: Memcached, role: memcached}
        - {group: swallowlab.com, version: v1alpha1, kind: EchoFlask, role: echoflsk}
        """,
    )
    message = load_error(path, roles_paths=[tmp_path / "extra"])
    assert message.startswith(
        f"{path}: entry 2 (swallowlab.com/v1alpha1 EchoFlask): key 'role': "
        "role 'echoflsk' not found (did you mean 'echoflask'?); looked in "
        f"{tmp_path / 'echoflsk'}, {tmp_path / 'roles' / 'echoflsk'}, "
        f"{tmp_path / 'extra' / 'echoflsk'}, {tmp_path / 'extra' / 'roles' / 'echoflsk'}; "
    )
    assert "ANSIBLE_ROLES_PATH" in message


# -- errors ----------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    message = load_error(tmp_path / "watches.yaml")
    assert "file not found" in message


def test_directory_instead_of_file(tmp_path: Path) -> None:
    (tmp_path / "watches.yaml").mkdir()
    assert "is a directory" in load_error(tmp_path / "watches.yaml")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path, ENTRY)
    path.chmod(0)
    assert "cannot be read" in load_error(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "watches.yaml"
    path.write_bytes(b"- kind: \xff\n")
    assert "not UTF-8" in load_error(path)


def test_not_yaml(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, "- {group: a, version: [v1\n"))
    assert "not valid YAML" in message and "line" in message


def test_several_documents(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, ENTRY + "---\n" + ENTRY))
    assert "several YAML documents" in message


@pytest.mark.parametrize(
    ("text", "found"),
    [("group: a\nversion: v1\n", "a mapping"), ("just text\n", "a string ('just text')")],
)
def test_top_level_not_a_list(tmp_path: Path, text: str, found: str) -> None:
    message = load_error(write(tmp_path, text))
    assert "the top level must be a list of entries" in message and found in message


@pytest.mark.parametrize(
    ("entry", "found"),
    [("- just a string\n", "a string"), ("- [a, b]\n", "a list"), ("-\n", "empty (null)")],
)
def test_entry_not_a_mapping(project: Path, entry: str, found: str) -> None:
    message = load_error(write(project, ENTRY + entry))
    assert message.startswith(f"{project / 'watches.yaml'}: entry 2: must be a mapping")
    assert found in message


# (extra lines appended to ENTRY, key named in the message, words expected in the message)
ENTRY_ERRORS = [
    ("  manageStatus: 'yes'\n", "manageStatus", "must be true or false"),
    ("  watchDependentResources: 1\n", "watchDependentResources", "must be true or false"),
    ("  markUnsafe: [true]\n", "markUnsafe", "must be true or false"),
    ("  reconcilePeriod: 1d\n", "reconcilePeriod", "unknown unit"),
    ("  reconcilePeriod: '30'\n", "reconcilePeriod", "missing unit"),
    ("  reconcilePeriod: forever\n", "reconcilePeriod", "Go duration"),
    ("  reconcilePeriod: -5s\n", "reconcilePeriod", "must not be negative"),
    ("  reconcilePeriod: -5\n", "reconcilePeriod", "must not be negative"),
    ("  reconcilePeriod: 1.5\n", "reconcilePeriod", "must be a duration"),
    ("  reconcilePeriod: [1s]\n", "reconcilePeriod", "must be a duration"),
    ("  maxRunnerArtifacts: -1\n", "maxRunnerArtifacts", "must not be negative"),
    ("  maxRunnerArtifacts: '3'\n", "maxRunnerArtifacts", "must be a whole number"),
    ("  maxRunnerArtifacts: 2.5\n", "maxRunnerArtifacts", "must be a whole number"),
    ("  maxRunnerArtifacts: true\n", "maxRunnerArtifacts", "must be a whole number"),
    ("  vars: [a, b]\n", "vars", "must be a mapping"),
    ("  vars: a string\n", "vars", "must be a mapping"),
    ("  vars: {~: x}\n", "vars", "is not text; quote it"),
    ("  vars: {nested: {1.5: x}}\n", "vars", "is not text; quote it"),
    ("  blacklist: {group: apps}\n", "blacklist", "must be a list"),
    ("  blacklist: [apps/v1/Deployment]\n", "blacklist[1]", "must be a mapping"),
    ("  blacklist: [{group: apps, version: v1}]\n", "blacklist[1]", "needs 'version' and 'kind'"),
    ("  blacklist: [{version: v1, kind: [a]}]\n", "blacklist[1].kind", "must be a string"),
    ("  watchReads: {kind: Secret}\n", "watchReads", "must be a list"),
    ("  watchReads: [v1/Secret]\n", "watchReads[1]", "must be a mapping"),
    ("  watchReads: [{group: apps, kind: X}]\n", "watchReads[1]", "needs 'version' and 'kind'"),
    ("  selector: [app]\n", "selector", "must be a mapping"),
    ("  selector: {matchLabels: [a]}\n", "selector.matchLabels", "must be a mapping"),
    ("  selector: {matchLabels: {app: 'a b'}}\n", "selector.matchLabels", "not valid"),
    ("  selector: {matchLabels: {'-bad': x}}\n", "selector.matchLabels", "label key"),
    ("  selector: {matchLabels: {'Bad_/x': x}}\n", "selector.matchLabels", "DNS subdomain"),
    ("  selector: {matchExpressions: {key: a}}\n", "selector.matchExpressions", "must be a list"),
    (
        "  selector: {matchExpressions: [{key: a, operator: Foo}]}\n",
        "selector.matchExpressions[1]",
        "'Foo' is not one of In, NotIn, Exists, DoesNotExist",
    ),
    (
        "  selector: {matchExpressions: [{key: a, operator: In}]}\n",
        "selector.matchExpressions[1]",
        "needs a non-empty 'values'",
    ),
    (
        "  selector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}\n",
        "selector.matchExpressions[1]",
        "takes no 'values'",
    ),
    (
        "  selector: {matchExpressions: [{key: a, operator: In, values: x}]}\n",
        "selector.matchExpressions[1].values",
        "must be a list",
    ),
    ("  finalizer: example.com/finalizer\n", "finalizer", "must be a mapping"),
    ("  finalizer: {role: thing}\n", "finalizer.name", "a finalizer needs a name"),
    ("  finalizer: {name: f.io/x}\n", "finalizer", "needs a 'role', a 'playbook' or non-empty"),
    ("  finalizer: {name: f.io/x, vars: {}}\n", "finalizer", "non-empty 'vars'"),
    ("  finalizer: {name: f.io/x, role: gone}\n", "finalizer.role", "role 'gone' not found"),
    (
        "  finalizer: {name: f.io/x, role: thing, playbook: playbooks/site.yml}\n",
        "finalizer.role",
        "both 'finalizer.role' and 'finalizer.playbook' are set",
    ),
    (
        "  finalizer: {name: f.io/x, playbook: gone.yml, vars: {a: 1}}\n",
        "finalizer.playbook",
        "playbook 'gone.yml' not found",
    ),
    ("  playbook: playbooks/site.yml\n", "role", "both 'role' and 'playbook' are set"),
    ("  Role: thing\n", "role", "given twice, as 'role' and 'Role'"),
]


@pytest.mark.parametrize(("extra", "key", "words"), ENTRY_ERRORS)
def test_entry_errors_name_file_entry_and_key(
    project: Path, extra: str, key: str, words: str
) -> None:
    path = write(project, ENTRY.replace("Thing", "First") + ENTRY + extra)
    message = load_error(path)
    assert message.startswith(f"{path}: entry 2 (example.com/v1 Thing): key '{key}': "), message
    assert words in message


# (entry, key, words): entries that cannot start from ENTRY
GVK_AND_CONTENT_ERRORS = [
    ("- {group: example.com, kind: Thing, role: thing}\n", "version", "missing"),
    ("- {group: example.com, version: v1, role: thing}\n", "kind", "missing"),
    ("- {group: example.com, version: '', kind: Thing, role: thing}\n", "version", "missing"),
    ("- {group: example.com, version: 1.0, kind: Thing, role: thing}\n", "version", "quote it"),
    ("- {group: [a], version: v1, kind: Thing, role: thing}\n", "group", "must be a string"),
    ("- {group: example.com, version: v1, kind: Thing}\n", "role", "set 'role'"),
    ("- {group: example.com, version: v1, kind: Thing, role: ''}\n", "role", "set 'role'"),
    ("- {group: example.com, version: v1, kind: Thing, role: nope}\n", "role", "not found"),
    (
        "- {group: example.com, version: v1, kind: Thing, playbook: nope.yml}\n",
        "playbook",
        "playbook 'nope.yml' not found",
    ),
    (
        "- {group: example.com, version: v1, kind: Thing, playbook: playbooks}\n",
        "playbook",
        "is a directory",
    ),
    (
        "- {group: example.com, version: v1, kind: Thing, playbook: playbooks/sit.yml}\n",
        "playbook",
        "did you mean 'site.yml'?",
    ),
]


@pytest.mark.parametrize(("entry", "key", "words"), GVK_AND_CONTENT_ERRORS)
def test_gvk_and_content_errors(project: Path, entry: str, key: str, words: str) -> None:
    path = write(project, entry)
    message = load_error(path)
    assert message.startswith(f"{path}: entry 1 ("), message
    assert f"): key '{key}': " in message
    assert words in message


def test_label_shows_what_is_known_of_the_gvk(project: Path) -> None:
    message = load_error(write(project, "- {version: v1, role: thing}\n"))
    assert "entry 1 (v1 ?): key 'kind': missing" in message


def test_duplicate_gvk(project: Path) -> None:
    path = write(project, ENTRY + ENTRY.replace("Thing", "Other") + ENTRY)
    message = load_error(path)
    assert message.startswith(
        f"{path}: entry 3 (example.com/v1 Thing): same group/version/kind as entry 1"
    )
    assert "merge" in message


def test_error_stops_at_the_first_bad_entry(project: Path) -> None:
    path = write(project, ENTRY + "  manageStatus: maybe\n" + "- {kind: Broken}\n")
    message = load_error(path)
    assert "entry 1" in message and "'manageStatus'" in message


# Every key of an entry with a value of the wrong type: (key path, YAML of the entry's extra
# lines, or of a whole entry when it starts with "- "). The error names the path.
WRONG_TYPES = [
    ("group", "- {group: 42, version: v1, kind: Thing, role: thing}\n"),
    ("version", "- {group: example.com, version: 1, kind: Thing, role: thing}\n"),
    ("kind", "- {group: example.com, version: v1, kind: 42, role: thing}\n"),
    ("kind", "- {group: example.com, version: v1, kind: true, role: thing}\n"),
    ("role", "- {group: example.com, version: v1, kind: Thing, role: 7}\n"),
    ("playbook", "- {group: example.com, version: v1, kind: Thing, playbook: [site.yml]}\n"),
    ("vars", "  vars: 3\n"),
    ("reconcilePeriod", "  reconcilePeriod: {s: 1}\n"),
    ("manageStatus", "  manageStatus: 1\n"),
    ("watchDependentResources", "  watchDependentResources: 'true'\n"),
    ("watchClusterScopedResources", "  watchClusterScopedResources: 0\n"),
    ("snakeCaseParameters", "  snakeCaseParameters: no way\n"),
    ("watchAnnotationsChanges", "  watchAnnotationsChanges: []\n"),
    ("markUnsafe", "  markUnsafe: 1.0\n"),
    ("selector", "  selector: app=web\n"),
    ("selector.matchLabels", "  selector: {matchLabels: app}\n"),
    ("selector.matchLabels", "  selector: {matchLabels: {1: web}}\n"),
    ("selector.matchLabels.app", "  selector: {matchLabels: {app: 3}}\n"),
    ("selector.matchExpressions", "  selector: {matchExpressions: 3}\n"),
    ("selector.matchExpressions[1]", "  selector: {matchExpressions: [app]}\n"),
    (
        "selector.matchExpressions[1].key",
        "  selector: {matchExpressions: [{key: 1, operator: Exists}]}\n",
    ),
    (
        "selector.matchExpressions[1].operator",
        "  selector: {matchExpressions: [{key: a, operator: [In], values: [x]}]}\n",
    ),
    (
        "selector.matchExpressions[1].values",
        "  selector: {matchExpressions: [{key: a, operator: In, values: x}]}\n",
    ),
    (
        "selector.matchExpressions[1].values",
        "  selector: {matchExpressions: [{key: a, operator: In, values: [1]}]}\n",
    ),
    ("blacklist", "  blacklist: apps/v1/Deployment\n"),
    ("blacklist[1]", "  blacklist: [apps/v1/Deployment]\n"),
    ("blacklist[1].group", "  blacklist: [{group: 1, version: v1, kind: Deployment}]\n"),
    ("blacklist[1].version", "  blacklist: [{group: apps, version: 1, kind: Deployment}]\n"),
    ("blacklist[1].kind", "  blacklist: [{group: apps, version: v1, kind: 42}]\n"),
    ("watchReads", "  watchReads: v1/Secret\n"),
    ("watchReads[1]", "  watchReads: [v1/Secret]\n"),
    ("watchReads[1].group", "  watchReads: [{group: 1, version: v1, kind: Secret}]\n"),
    ("watchReads[1].version", "  watchReads: [{version: 1, kind: Secret}]\n"),
    ("watchReads[1].kind", "  watchReads: [{version: v1, kind: 42}]\n"),
    ("finalizer", "  finalizer: [f.io/x]\n"),
    ("finalizer.name", "  finalizer: {name: 42, role: thing}\n"),
    ("finalizer.role", "  finalizer: {name: f.io/x, role: 42}\n"),
    ("finalizer.playbook", "  finalizer: {name: f.io/x, playbook: 42}\n"),
    ("finalizer.vars", "  finalizer: {name: f.io/x, vars: [a]}\n"),
    ("maxRunnerArtifacts", "  maxRunnerArtifacts: ten\n"),
    *(
        case
        for hook in ("validate", "mutate")
        for case in (
            (hook, f"  {hook}: thing\n"),
            (f"{hook}.role", f"  {hook}: {{role: 42}}\n"),
            (f"{hook}.playbook", f"  {hook}: {{playbook: 42}}\n"),
            (f"{hook}.vars", f"  {hook}: {{role: thing, vars: [a]}}\n"),
            (f"{hook}.failurePolicy", f"  {hook}: {{role: thing, failurePolicy: Retry}}\n"),
            (f"{hook}.timeoutSeconds", f"  {hook}: {{role: thing, timeoutSeconds: 31}}\n"),
            (f"{hook}.operations", f"  {hook}: {{role: thing, operations: CREATE}}\n"),
        )
    ),
    ("convert", "  convert: [thing]\n"),
    ("convert.role", "  convert: {role: 42}\n"),
    ("convert.playbook", "  convert: {playbook: 42}\n"),
    ("convert.fields", "  convert: {fields: spec.size}\n"),
    ("convert.vars", "  convert: {role: thing, vars: [a]}\n"),
]


@pytest.mark.parametrize(("key", "yaml_text"), WRONG_TYPES)
def test_every_key_has_its_type_checked(project: Path, key: str, yaml_text: str) -> None:
    text = yaml_text if yaml_text.startswith("- ") else ENTRY + yaml_text
    message = load_error(write(project, text))
    assert f": key '{key}': " in message, message
    assert "must be" in message or "must not" in message, message


def test_the_type_checks_cover_every_key() -> None:
    from runner.watches.messages import (
        ADMISSION_KEYS,
        CONVERT_KEYS,
        ENTRY_KEYS,
        EXPRESSION_KEYS,
        FINALIZER_KEYS,
        GVK_KEYS,
        SELECTOR_KEYS,
    )

    covered = {key for key, _ in WRONG_TYPES}
    expected = (
        set(ENTRY_KEYS)
        | {f"{hook}.{k}" for hook in ("validate", "mutate") for k in ADMISSION_KEYS}
        | {f"finalizer.{k}" for k in FINALIZER_KEYS}
        | {f"convert.{k}" for k in CONVERT_KEYS}
        | {f"selector.{k}" for k in SELECTOR_KEYS}
        | {f"selector.matchExpressions[1].{k}" for k in EXPRESSION_KEYS}
        | {f"blacklist[1].{k}" for k in GVK_KEYS}
        | {f"watchReads[1].{k}" for k in GVK_KEYS}
    )
    assert expected <= covered, sorted(expected - covered)
