"""Roles written for ansible-core 2.15-2.18 run unmodified on their line; on the lines that
changed a construct (2.19 and later) the run fails with the message
docs/migrating-from-operator-sdk.md quotes, so that the guide stays true.

The ansible-core line is the one installed beside the test's Python (`make test` runs this file
on every line, in each line's virtualenv). Roles: tests/integration/project/roles/{truthy,
fragment,optional,embedded}, and `fixed`: the same constructs with the guide's fixes.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator

import pytest

from . import kit
from .conftest import Cluster
from .kit import PROJECT, condition, crd, install_crd, temporary_namespace

pytestmark = [pytest.mark.integration, pytest.mark.lines]

GROUP = "lines.operator-runner.dev"
KINDS = ("Truthy", "Fragment", "Optional", "Embedded", "Fixed")
WATCHES = PROJECT / "watches-lines.yaml"
VERSION = importlib.metadata.version("ansible-core")
LINE = tuple(int(n) for n in VERSION.split(".")[:2])
# 2.19 made templates typed and conditionals strict: the constructs below break there.
BROKEN = LINE >= (2, 19)


@pytest.fixture(scope="module", params=["warm", "plain"])
def executor(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def env(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, executor: str
) -> Iterator[kit.Env]:
    tmp = tmp_path_factory.mktemp("lines")
    with cluster.api_client() as api, temporary_namespace(cluster, "lines") as namespace:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = kit.Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        try:
            environment.start(args=(f"--executor={executor}",))
            yield environment
        finally:
            environment.stop()
            for kind in KINDS:
                cluster.kubectl(
                    "delete", "crd", f"{kind.lower()}s.{GROUP}", "--wait=false", check=False
                )


def failure_message(env: kit.Env, kind: str, name: str) -> str:
    """The `Failure` condition's message, once the CR's run has failed."""
    obj = env.wait_condition(kind, name, "Failure")
    message = (condition(obj, "Failure") or {}).get("message", "")
    assert isinstance(message, str)
    return message


def test_a_conditional_that_is_not_a_boolean(env: kit.Env) -> None:
    """`when: entries | length`: an int, truthy or not."""
    env.create("Truthy", "some", {"entries": ["a", "b"]})
    env.create("Truthy", "none", {"entries": []})
    if BROKEN:
        some = failure_message(env, "Truthy", "some")
        assert "Conditional result (True) was derived from value of type 'int'" in some
        none = failure_message(env, "Truthy", "none")
        assert "Conditional result (False) was derived from value of type 'int'" in none
        return
    env.wait_condition("Truthy", "some")
    env.wait_condition("Truthy", "none")
    assert env.config_map_data("some-truthy") == {"entries": "a,b"}
    assert env.config_map("none-truthy") is None


def test_allow_broken_conditionals_gets_past_it_on_every_line(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, executor: str, env: kit.Env
) -> None:
    """The fix the guide gives for 2.19 and later (older lines ignore the setting)."""
    with cluster.api_client() as api, temporary_namespace(cluster, "lines-allow") as namespace:
        other = kit.Env(
            cluster, api, namespace, tmp_path_factory.mktemp("allow"), group=GROUP, watches=WATCHES
        )
        other.start(
            args=(f"--executor={executor}",), env={"ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "True"}
        )
        try:
            other.create("Truthy", "allowed", {"entries": ["x"]})
            other.wait_condition("Truthy", "allowed")
            assert other.config_map_data("allowed-truthy") == {"entries": "x"}
        finally:
            other.stop()


def test_a_template_that_renders_nothing_piped_to_indent(env: kit.Env) -> None:
    env.create("Fragment", "on", {"extraSettings": "x"})
    env.create("Fragment", "off", {"extraSettings": ""})
    env.wait_condition("Fragment", "on")
    on = (env.config_map_data("on-fragment") or {}).get("settings.yaml", "")
    assert on.startswith("main: true\n") and "extra: x" in on
    if BROKEN:
        assert (
            "The filter plugin 'ansible.builtin.indent' failed: unsupported operand type(s) "
            "for +=: 'NoneType' and 'str'" in failure_message(env, "Fragment", "off")
        )
        return
    env.wait_condition("Fragment", "off")
    off = (env.config_map_data("off-fragment") or {}).get("settings.yaml", "")
    assert off.startswith("main: true\n") and "extra" not in off


def test_a_switched_off_template_as_the_definition_of_k8s(env: kit.Env) -> None:
    env.create("Optional", "with", {"optionalEnabled": True})
    env.create("Optional", "without", {"optionalEnabled": False})
    env.wait_condition("Optional", "with")
    assert env.config_map_data("with-optional") == {"enabled": "yes"}
    if BROKEN:
        # with the kubernetes client pinned here (36); 33 said "'NoneType' object is not callable"
        assert (
            "Failed to create object: The `items` field in the body must be populated when "
            "calling methods on a ResourceList" in failure_message(env, "Optional", "without")
        )
        assert env.config_map("without-done") is None
        return
    env.wait_condition("Optional", "without")
    assert env.config_map("without-optional") is None
    assert env.config_map("without-done") is not None


def test_a_template_inside_a_conditional(env: kit.Env) -> None:
    """`when: "{{ replicas }} > 1"`: older lines warn and render it first."""
    env.create("Embedded", "three", {"replicas": 3})
    if BROKEN:
        assert (
            "Syntax error in expression. Template delimiters are not supported in expressions"
            in failure_message(env, "Embedded", "three")
        )
        return
    env.wait_condition("Embedded", "three")
    assert env.config_map("three-embedded") is not None


def test_the_guides_fixes_run_on_every_line(env: kit.Env) -> None:
    env.create(
        "Fixed",
        "fixed",
        {"entries": [], "extraSettings": "", "optionalEnabled": False, "replicas": 3},
    )
    env.wait_condition("Fixed", "fixed")
    assert env.config_map("fixed-truthy") is None
    settings = (env.config_map_data("fixed-fragment") or {}).get("settings.yaml", "")
    assert settings.startswith("main: true\n") and "extra" not in settings
    assert env.config_map("fixed-optional") is None
    assert env.config_map("fixed-embedded") is not None
