"""Redaction: a role that fails while handling Secrets shows none of their values, nor those of
its no_log tasks, in the operator's log, the CR's Failure condition or its Events, on both
executors. The operator logs every job event (--ansible-log-events=Everything) and each run's
whole output (ANSIBLE_DEBUG_LOGS), at verbosity 3 (task results and module arguments)."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator

import pytest

from . import kit
from .conftest import Cluster
from .kit import PROJECT, condition, crd, install_crd, temporary_namespace, wait_for

# `lines`: ansible-core's censoring of no_log results and its output differ per line.
pytestmark = [pytest.mark.integration, pytest.mark.lines]

GROUP = "red.operator-runner.dev"
WATCHES = PROJECT / "watches-redaction.yaml"


@pytest.fixture(scope="module", params=["warm", "plain"])
def env(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[kit.Env]:
    tmp = tmp_path_factory.mktemp("redaction")
    with cluster.api_client() as api, temporary_namespace(cluster, "red") as ns:
        install_crd(api, crd(GROUP, "Leaky"))
        environment = kit.Env(cluster, api, ns, tmp, group=GROUP, watches=WATCHES)
        try:
            environment.start(
                args=(f"--executor={request.param}", "--ansible-log-events=Everything"),
                env={"ANSIBLE_DEBUG_LOGS": "true"},
            )
            yield environment
        finally:
            environment.stop()
            cluster.kubectl("delete", "crd", f"leakys.{GROUP}", "--wait=false", check=False)


def test_secret_values_never_reach_the_log_the_condition_or_events(env: kit.Env) -> None:
    password = "pw-" + secrets.token_hex(8)
    hidden = "hidden" + secrets.token_hex(6)  # the no_log task prints it upper-cased
    env.core.create_namespaced_secret(
        env.ns,
        {
            "metadata": {"name": "leaky-input"},
            "type": "Opaque",
            "stringData": {"password": password},
        },
    )
    env.create(
        "Leaky",
        "leaky",
        {"secretName": "leaky-input", "hiddenWord": hidden},
        annotations={"ansible.sdk.operatorframework.io/verbosity": "3"},
    )
    cr = env.wait_condition("Leaky", "leaky", "Failure", timeout=120)
    made = env.core.read_namespaced_secret("leaky-made", env.ns).data["token"]
    token = base64.b64decode(made).decode()
    leaks = {
        "password": password,
        "password (base64)": base64.b64encode(password.encode()).decode(),
        "written token": token,
        "written token (base64)": made,
        "no_log value": hidden.upper(),
    }

    message = str((condition(cr, "Failure") or {}).get("message"))
    events = wait_for(
        lambda: [e.message for e in env.events("leaky") if e.reason == "ReconcileFailed"],
        timeout=30,
        what="the ReconcileFailed Event",
    )
    # the run's whole output is logged after the run, before its condition is written
    log = env.op.log_text()
    assert "Ansible Debug Result" in log

    for text, where in ((message, "condition"), ("\n".join(events), "Events"), (log, "log")):
        found = [name for name, value in leaks.items() if value in text]
        assert not found, f"{found} in the {where}:\n{text[-3000:]}"

    # still useful: the failing task, what it said, where the value was, the no_log task
    for text in (message, events[0]):
        assert (
            "Use the password (role leaky, tasks/main.yml:42): "
            "bad password ******** for token ********"
        ) in text
        assert (
            "Log in without a trace (role leaky, tasks/main.yml:33): the output has been hidden"
        ) in text
    assert "Use the password" in log and "********" in log

    # the artifacts are kept as they are (the Pod's /tmp), apart from no_log's own censoring of
    # results; Ansible's own display text of a failed no_log task (an event's `stdout`) shows
    # its message from 2.21 on (docs/production.md), so only the events' data is checked here
    events_json = [
        json.loads(p.read_text())
        for p in env.op.artifacts.rglob("job_events/*.json")
        if p.is_file()
    ]
    event_data = "".join(json.dumps(e.get("event_data", {})) for e in events_json)
    assert password in event_data
    assert hidden.upper() not in event_data
