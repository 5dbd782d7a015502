"""deploy/webhook/: the configurations are what the operator computes for watches.yaml, and the
manager is started with the names its RBAC grants."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from runner.admit import configurations
from runner.ansible.collections_path import collection_roots
from runner.watches import load_watches

REPO = Path(__file__).resolve().parents[2]
WEBHOOK = REPO / "deploy" / "webhook"
SERVICE_ACCOUNT = "system:serviceaccount:operator-runner-system:operator-runner-controller-manager"


def test_the_manifests_are_what_the_operator_writes() -> None:
    watches = load_watches(
        REPO / "watches.yaml", environ={}, collection_roots=collection_roots(os.environ)
    ).watches
    plurals = {w.gvk: {"Echo": "echoes", "EchoFlask": "echoflasks"}[w.gvk.kind] for w in watches}
    service = yaml.safe_load((WEBHOOK / "service.yaml").read_text())

    def client_config(path: str) -> dict[str, object]:
        ref = {"namespace": "operator-runner-system", "name": service["metadata"]["name"]}
        return {"service": {**ref, "path": path, "port": 443}}

    documents = list(yaml.safe_load_all((WEBHOOK / "manifests.yaml").read_text()))
    by_kind = {d["kind"]: d for d in documents}
    for hook_kind, kind in (
        ("validate", "ValidatingWebhookConfiguration"),
        ("mutate", "MutatingWebhookConfiguration"),
    ):
        wanted = configurations.webhooks(
            watches, hook_kind, plurals, client_config, username=SERVICE_ACCOUNT
        )
        assert by_kind[kind]["webhooks"] == wanted, kind
        assert by_kind[kind]["metadata"]["name"] == "operator-runner-webhooks"


def test_the_manager_uses_the_names_the_rbac_grants() -> None:
    manager = yaml.safe_load((REPO / "deploy" / "manager" / "manager.yaml").read_text())
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    assert "--webhook-service=operator-runner-webhook-service" in container["args"]
    assert "--webhook-configuration-name=operator-runner-webhooks" in container["args"]
    assert {"name": "webhook-server", "containerPort": 9443, "protocol": "TCP"} in container[
        "ports"
    ]
    roles = list(yaml.safe_load_all((WEBHOOK / "role.yaml").read_text()))
    (configs_rule,) = roles[0]["rules"]
    assert configs_rule["resourceNames"] == ["operator-runner-webhooks"]
    assert sorted(configs_rule["verbs"]) == ["get", "patch"]
    secret_rules = roles[1]["rules"]
    assert secret_rules[0]["resourceNames"] == ["operator-runner-webhooks-cert"]  # <name>-cert
