"""What operator-sdk's own e2e operators (memcached-molecule, advanced-molecule) rely on, run
the way its image and manager run them: `--ansible-args` with the quotes a Deployment's `args`
keeps, `ANSIBLE_INVENTORY`, ConfigMaps as primaries, templates that ansible-core 2.19 renders
as numbers."""

from __future__ import annotations

import re
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import kit
from .conftest import Cluster
from .kit import PROJECT, crd, install_crd, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

GROUP = "conf.operator-runner.dev"
KINDS = ("Report", "Inventoried", "Counter", "Metered")
WATCHES = PROJECT / "watches-conformance.yaml"
PRIMARY_LABEL = "conf.operator-runner.dev/primary"
# As advanced-molecule's manager passes it: one argv element, quotes included, no shell.
ANSIBLE_ARGS = "--ansible-args='--extra-vars from_args=yes'"


def _inventory(tmp: Path) -> Path:
    """An inventory folder as operator-sdk's advanced-molecule ships one (a group of its own
    with a local host, group_vars/ and host_vars/), named by ANSIBLE_INVENTORY."""
    folder = tmp / "inventory"
    folder.mkdir()
    (folder / "hosts").write_text(
        "[conformance_group]\n"
        f"127.0.0.1 ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        "\n[conformance_group:vars]\nfrom_inventory=yes\n",
        encoding="utf-8",
    )
    # Variables of the group and the host in files beside `hosts` (host_group_vars), as
    # advanced-molecule's inventory has them.
    (folder / "group_vars").mkdir()
    (folder / "group_vars" / "conformance_group.yml").write_text("from_group_vars: group\n")
    (folder / "host_vars").mkdir()
    (folder / "host_vars" / "127.0.0.1.yml").write_text("from_host_vars: host\n")
    return folder


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Env(kit.Env):
    metrics_port = 0

    def metrics(self) -> str:
        """The operator's /metrics, once it serves them (it may still be starting)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"

        def scrape() -> str | None:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    text: str = response.read().decode()
                    return text
            except ConnectionRefusedError:
                return None
            except urllib.error.URLError as err:
                if isinstance(err.reason, ConnectionRefusedError):
                    return None
                raise

        return wait_for(scrape, timeout=60, what=f"the operator's metrics at {url}")


@pytest.fixture(scope="module", params=["warm", "plain"])
def env(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("conformance")
    with cluster.api_client() as api, temporary_namespace(cluster, "conf") as namespace:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        environment.metrics_port = _free_port()
        try:
            environment.start(
                args=(
                    f"--executor={request.param}",
                    ANSIBLE_ARGS,
                    f"--metrics-bind-address=127.0.0.1:{environment.metrics_port}",
                ),
                env={"ANSIBLE_INVENTORY": str(_inventory(tmp))},
            )
            yield environment
        finally:
            environment.stop()
            for kind in KINDS:
                cluster.kubectl(
                    "delete", "crd", f"{kind.lower()}s.{GROUP}", "--wait=false", check=False
                )


def test_quoted_ansible_args_reach_ansible_playbook_as_arguments(env: Env) -> None:
    env.create("Report", "args")
    env.wait_condition("Report", "args")
    assert env.config_map_data("args-report") == {"from_args": "yes"}


def test_ansible_inventory_from_the_environment_is_used(env: Env) -> None:
    env.create("Inventoried", "inv")
    env.wait_condition("Inventoried", "inv")
    data = env.config_map_data("inv-inventory")
    assert data == {
        "host": "127.0.0.1",
        "from_inventory": "yes",
        "from_group_vars": "group",
        "from_host_vars": "host",
    }, "the play for the inventory's group ran on its host, with the group's and host's vars"


def test_configmap_as_primary_reconciles_on_every_data_change(env: Env) -> None:
    """ConfigMaps have no metadata.generation: an update of one must still reconcile it."""
    env.core.create_namespaced_config_map(
        env.ns, {"metadata": {"name": "prim", "labels": {PRIMARY_LABEL: "yes"}}, "data": {"v": "1"}}
    )
    wait_for(
        lambda: env.config_map_data("prim-copy") == {"v": "1"},
        timeout=60,
        what="the first copy",
    )
    env.core.patch_namespaced_config_map("prim", env.ns, {"data": {"v": "2"}})
    try:
        wait_for(
            lambda: env.config_map_data("prim-copy") == {"v": "2"},
            timeout=30,
            what="the copy after the update",
        )
    except AssertionError:
        print(env.op.log_text()[-5000:])
        raise


@pytest.mark.lines
def test_numbers_and_booleans_from_templates_reach_configmap_data_as_strings(env: Env) -> None:
    """ansible-core 2.19 renders `{{ (x | int) + 1 }}` as an integer, which the API refuses in
    a ConfigMap's data; the proxy writes the text older Ansible produced."""
    env.create("Counter", "count", {"start": 5})
    env.wait_condition("Counter", "count")
    assert env.config_map_data("count-counted") == {
        "next": "6",
        "half": "2.5",
        "big": "true",
        "text": "5",
    }


def _sample(text: str, name: str) -> float | None:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


@pytest.mark.lines
def test_osdk_metric_and_k8s_event(env: Env) -> None:
    """Roles' metrics of every type are served on the operator's /metrics; k8s_event makes an
    Event and counts it again on the next run."""
    before = _sample(env.metrics(), "conformance_runs_total") or 0.0
    env.create("Metered", "met", {"size": 3})
    env.wait_condition("Metered", "met")
    text = env.metrics()
    assert _sample(text, "conformance_runs_total") == before + 1
    assert _sample(text, "conformance_size") == 3.0
    assert _sample(text, "conformance_histogram_count") is not None
    assert _sample(text, 'conformance_histogram_bucket{le="5.0"}') is not None
    assert _sample(text, "conformance_summary_sum") is not None
    assert "# HELP conformance_size The size asked for" in text
    event = env.core.read_namespaced_event("met-metered", env.ns)
    assert (event.reason, event.message, event.type, event.count) == (
        "Metered",
        "size 3",
        "Normal",
        1,
    )
    cr = env.get("Metered", "met")
    assert cr is not None and event.involved_object.uid == cr["metadata"]["uid"]

    env.patch_spec("Metered", "met", {"size": 4})
    env.wait_condition("Metered", "met")
    assert _sample(env.metrics(), "conformance_size") == 4.0
    event = env.core.read_namespaced_event("met-metered", env.ns)
    assert (event.message, event.count) == ("size 4", 2)
