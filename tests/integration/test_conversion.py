"""Conversion against the real API server: kinds that serve two versions (v1alpha1 `spec.size`,
stored and watched; v1alpha0 `spec.replicas`), whose CRDs the operator points at its `/convert`
(a url on 127.0.0.1, as under `make run`), converted by the seeds' convert role
(roles/echoflask_convert), by a field map, and by a role that refuses some objects
(tests/integration/project/watches-conversion.yaml).

Also, without a cluster: the seeds' role through the real executor (a review of many objects
of both versions, one run).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from .conftest import REPO, Cluster
from .kit import PROJECT, RunningOperator, condition, launch, temporary_namespace, wait_for

GROUP = "conversion.test.operator-runner.dev"
WATCHES = PROJECT / "watches-conversion.yaml"
SEED_ROLES = str(REPO / "roles")
KINDS = ("Flask", "Mapped", "Picky")


def two_versions(kind: str) -> dict[str, Any]:
    """The CRD of `kind`: v1alpha1 (spec.size, stored) and v1alpha0 (spec.replicas), both served,
    converted by a webhook that is not there until the operator writes its own."""

    def version(name: str, field: str, storage: bool) -> dict[str, Any]:
        return {
            "name": name,
            "served": True,
            "storage": storage,
            "subresources": {"status": {}},
            "schema": {
                "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": [field],
                            "properties": {field: {"type": "integer", "minimum": 0}},
                        },
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    },
                }
            },
        }

    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://127.0.0.1:1/convert"},
                },
            },
            "versions": [version("v1alpha1", "size", True), version("v1alpha0", "replicas", False)],
        },
    }


class Kinds:
    """The module's operator, its namespace and the API."""

    def __init__(self, cluster: Cluster, api: client.ApiClient, ns: str, tmp: Path) -> None:
        self.cluster = cluster
        self.api = api
        self.ns = ns
        self.tmp = tmp
        self.custom = client.CustomObjectsApi(api)
        self.ext = client.ApiextensionsV1Api(api)
        self.operator: RunningOperator | None = None
        self.port = 0

    def start(self, *args: str) -> None:
        folder = self.tmp / f"run-{time.monotonic_ns()}"
        folder.mkdir()
        self.operator = launch(
            self.cluster,
            folder,
            watches=WATCHES,
            namespaces=[self.ns],
            args=("--webhook-bind-address=127.0.0.1:0", *args),
            env={"SEED_ROLES": SEED_ROLES},
        )
        port = wait_for(self._served_port, timeout=60, what="the webhooks to be served")
        self.port = port
        for kind in KINDS:
            wait_for(
                lambda k=kind: (
                    self.conversion(k).get("webhook", {}).get("clientConfig", {}).get("url")
                    == f"https://127.0.0.1:{port}/convert"
                ),
                timeout=30,
                what=f"the {kind} CRD's conversion to point at the operator",
            )

    def _served_port(self) -> int | None:
        assert self.operator is not None
        assert self.operator.proc.poll() is None, self.operator.log_text()[-3000:]
        match = re.search(r"serving webhooks on 127\.0\.0\.1:(\d+)", self.operator.log_text())
        return int(match.group(1)) if match else None

    def stop(self) -> None:
        if self.operator is not None:
            assert self.operator.stop() == 0, self.operator.log_text()[-3000:]
            self.operator = None

    def conversion(self, kind: str) -> dict[str, Any]:
        crd = self.ext.read_custom_resource_definition(f"{kind.lower()}s.{GROUP}")
        conversion: dict[str, Any] = self.api.sanitize_for_serialization(crd.spec.conversion)
        return conversion

    def create(self, kind: str, version: str, name: str, spec: dict[str, Any]) -> Any:
        body = {
            "apiVersion": f"{GROUP}/{version}",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }
        return self.custom.create_namespaced_custom_object(
            GROUP, version, self.ns, kind.lower() + "s", body
        )

    def get(self, kind: str, version: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, version, self.ns, kind.lower() + "s", name
        )
        return obj

    def patch(self, kind: str, version: str, name: str, spec: dict[str, Any]) -> Any:
        return self.custom.patch_namespaced_custom_object(
            GROUP, version, self.ns, kind.lower() + "s", name, {"spec": spec}
        )

    def reconciled(self, kind: str, name: str) -> dict[str, Any]:
        """The object (v1alpha1) once its current generation's run succeeded."""

        def done() -> dict[str, Any] | None:
            obj = self.get(kind, "v1alpha1", name)
            ok = condition(obj, "Successful")
            generation = obj["metadata"]["generation"]
            if ok and ok["status"] == "True" and ok.get("observedGeneration") == generation:
                return obj
            return None

        result: dict[str, Any] = wait_for(done, timeout=60, what=f"{kind} {name} reconciled")
        return result


@pytest.fixture(scope="module")
def kinds(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kinds]:
    with cluster.api_client() as api, temporary_namespace(cluster, "conv") as ns:
        ext = client.ApiextensionsV1Api(api)
        for kind in KINDS:
            definition = two_versions(kind)
            name = definition["metadata"]["name"]
            try:
                current = ext.read_custom_resource_definition(name)
                definition["metadata"]["resourceVersion"] = current.metadata.resource_version
                ext.replace_custom_resource_definition(name, definition)
            except client.exceptions.ApiException as err:
                if err.status != 404:
                    raise
                ext.create_custom_resource_definition(definition)
        for kind in KINDS:
            wait_for(
                lambda k=kind: any(
                    c.type == "Established" and c.status == "True"
                    for c in ext.read_custom_resource_definition(
                        f"{k.lower()}s.{GROUP}"
                    ).status.conditions
                    or []
                ),
                timeout=30,
                what=f"CRD {kind} Established",
            )
        env = Kinds(cluster, api, ns, tmp_path_factory.mktemp("conversion"))
        env.start()
        try:
            yield env
        finally:
            env.stop()


def test_the_crd_points_at_the_operator_with_its_ca(kinds: Kinds) -> None:
    conversion = kinds.conversion("Flask")
    assert conversion["strategy"] == "Webhook"
    webhook = conversion["webhook"]
    assert webhook["conversionReviewVersions"] == ["v1"]
    config = webhook["clientConfig"]
    assert config["url"] == f"https://127.0.0.1:{kinds.port}/convert"
    bundle = base64.b64decode(config["caBundle"])
    assert bundle.startswith(b"-----BEGIN CERTIFICATE-----")
    # the serving certificate verifies against the bundle, as the API server checks it
    context = ssl.create_default_context(cadata=bundle.decode())
    with urllib.request.urlopen(
        urllib.request.Request(
            f"https://127.0.0.1:{kinds.port}/convert", data=b"{}", method="POST"
        ),
        context=context,
        timeout=10,
    ) as answer:
        assert answer.status == 200


def test_read_and_write_in_both_versions_with_the_seeds_role(kinds: Kinds) -> None:
    kinds.create("Flask", "v1alpha1", "alpha", {"size": 3})
    alpha = kinds.reconciled("Flask", "alpha")
    assert alpha["status"]["nodes"] == ["alpha-0", "alpha-1", "alpha-2"]
    beta = kinds.get("Flask", "v1alpha0", "alpha")
    assert beta["apiVersion"] == f"{GROUP}/v1alpha0"
    assert beta["spec"] == {"replicas": 3}
    assert beta["status"] == alpha["status"], "status is the same object's in both versions"
    assert beta["metadata"]["uid"] == alpha["metadata"]["uid"]

    # written in v1alpha0, stored (and reconciled) in v1alpha1
    kinds.create("Flask", "v1alpha0", "beta", {"replicas": 2})
    assert kinds.reconciled("Flask", "beta")["spec"] == {"size": 2}
    kinds.patch("Flask", "v1alpha0", "alpha", {"replicas": 5})
    alpha = kinds.reconciled("Flask", "alpha")
    assert alpha["spec"] == {"size": 5}
    assert len(alpha["status"]["nodes"]) == 5
    assert kinds.get("Flask", "v1alpha0", "alpha")["status"]["nodes"] == alpha["status"]["nodes"]


def test_a_field_map_converts_in_the_operator(kinds: Kinds) -> None:
    kinds.create("Mapped", "v1alpha0", "mapped", {"replicas": 4})
    assert kinds.reconciled("Mapped", "mapped")["spec"] == {"size": 4}
    assert kinds.get("Mapped", "v1alpha0", "mapped")["spec"] == {"replicas": 4}


def test_many_objects(kinds: Kinds) -> None:
    """The API server converts a list item by item (its watch cache of v1alpha0 converts every
    write); a review of many objects, as the API server sends it, is one run of the role."""
    for i in range(30):
        kinds.create("Flask", "v1alpha1", f"many-{i}", {"size": i % 4})

    def listed_in_v1alpha0() -> list[dict[str, Any]] | None:
        """The 30 Flasks in v1alpha0, once the API server's cache of v1alpha0 has converted each
        of the 30 writes (a role run each, one after the other: it may lag, answering 429
        "storage is (re)initializing" meanwhile)."""
        try:
            items = kinds.custom.list_namespaced_custom_object(
                GROUP, "v1alpha0", kinds.ns, "flasks"
            )["items"]
        except client.exceptions.ApiException as err:
            if err.status == 429:
                return None
            raise
        many = [o for o in items if o["metadata"]["name"].startswith("many-")]
        return many if len(many) == 30 else None

    listed = wait_for(listed_in_v1alpha0, timeout=120, what="30 Flasks listed in v1alpha0")
    assert {o["metadata"]["name"]: o["spec"] for o in listed} == {
        f"many-{i}": {"replicas": i % 4} for i in range(30)
    }
    objects = [kinds.get("Flask", "v1alpha1", f"many-{i % 30}") for i in range(100)]
    for i, obj in enumerate(objects):  # 100 distinct objects, as a list of the API server's
        obj["metadata"] = {**obj["metadata"], "uid": f"uid-{i}", "name": f"copy-{i}"}
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "many", "desiredAPIVersion": f"{GROUP}/v1alpha0", "objects": objects},
    }
    bundle = base64.b64decode(kinds.conversion("Flask")["webhook"]["clientConfig"]["caBundle"])
    started = time.monotonic()
    request = urllib.request.Request(
        f"https://127.0.0.1:{kinds.port}/convert?timeout=30s",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    context = ssl.create_default_context(cadata=bundle.decode())
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:
        response = json.load(answer)["response"]
    took = time.monotonic() - started
    print(f"\na ConversionReview of 100 objects by the seeds' role: {took:.2f} s")
    assert response["uid"] == "many" and response["result"] == {"status": "Success"}
    converted = response["convertedObjects"]
    assert [o["metadata"]["name"] for o in converted] == [f"copy-{i}" for i in range(100)]
    assert [o["spec"] for o in converted] == [{"replicas": o["spec"]["size"]} for o in objects]
    assert {o["apiVersion"] for o in converted} == {f"{GROUP}/v1alpha0"}


def test_a_failed_conversion_says_why(kinds: Kinds) -> None:
    kinds.create("Picky", "v1alpha1", "even", {"size": 2})
    kinds.create("Picky", "v1alpha1", "odd", {"size": 3})
    assert kinds.get("Picky", "v1alpha0", "even")["spec"] == {"replicas": 2}
    with pytest.raises(client.exceptions.ApiException) as refused:
        kinds.get("Picky", "v1alpha0", "odd")
    message = json.loads(refused.value.body)["message"]
    assert message.startswith(
        f"conversion webhook for {GROUP}/v1alpha1, Kind=Picky failed: convert role "
        "picky_convert failed: Refuse odd sizes"
    ), message
    assert "odd: an odd size (3) has no v1alpha0 form" in message
    assert kinds.reconciled("Picky", "odd")["spec"] == {"size": 3}, "the watched version works"


def test_with_the_operator_down_other_versions_fail_with_the_reason(kinds: Kinds) -> None:
    """What a user sees while the operator is stopped (make run ended): the stored (and
    watched) version reads and writes as ever; another version says the webhook is not there;
    the operator's next start points the CRD at itself again, with its new CA."""
    kinds.create("Flask", "v1alpha1", "down", {"size": 1})
    kinds.reconciled("Flask", "down")
    before = kinds.conversion("Flask")["webhook"]["clientConfig"]
    kinds.stop()
    assert kinds.get("Flask", "v1alpha1", "down")["spec"] == {"size": 1}
    kinds.patch("Flask", "v1alpha1", "down", {"size": 2})
    with pytest.raises(client.exceptions.ApiException) as refused:
        kinds.get("Flask", "v1alpha0", "down")
    message = json.loads(refused.value.body)["message"]
    assert message.startswith(f"conversion webhook for {GROUP}/v1alpha1, Kind=Flask failed: ")
    assert "connect: connection refused" in message and before["url"] in message
    kinds.start()
    after = kinds.conversion("Flask")["webhook"]["clientConfig"]
    assert after["caBundle"] != before["caBundle"], "make run's CA is new at every start"
    beta = wait_for(
        lambda: (o := kinds.get("Flask", "v1alpha0", "down"))["spec"] == {"replicas": 2} and o,
        timeout=30,
        what="v1alpha0 read again",
    )
    assert beta["spec"] == {"replicas": 2}


def test_a_rotated_ca_is_written_into_the_crd(kinds: Kinds) -> None:
    """A CA of one minute is replaced with a third of it left: the CRD's caBundle gets the new
    CA beside the old one, and conversions go on over the renewed certificate."""
    kinds.stop()
    kinds.start("--webhook-ca-validity=1m", "--webhook-cert-validity=1m")
    kinds.create("Flask", "v1alpha1", "rotated", {"size": 1})
    first = kinds.conversion("Flask")["webhook"]["clientConfig"]["caBundle"]
    assert base64.b64decode(first).count(b"BEGIN CERTIFICATE") == 1

    def rotated() -> str | None:
        bundle = kinds.conversion("Flask")["webhook"]["clientConfig"]["caBundle"]
        return bundle if bundle != first else None

    second = wait_for(rotated, timeout=90, what="the CRD's caBundle with the new CA")
    pems = base64.b64decode(second).decode()
    assert pems.count("BEGIN CERTIFICATE") == 2
    assert base64.b64decode(first).decode() in pems
    new_ca = pems.replace(base64.b64decode(first).decode(), "")

    def signed_by_the_new_ca() -> bool:
        context = ssl.create_default_context(cadata=new_ca)
        try:
            with (
                socket.create_connection(("127.0.0.1", kinds.port), timeout=5) as raw,
                context.wrap_socket(raw, server_hostname="127.0.0.1"),
            ):
                return True
        except ssl.SSLError:
            return False

    wait_for(signed_by_the_new_ca, timeout=60, what="a serving certificate of the new CA")
    kinds.patch("Flask", "v1alpha1", "rotated", {"size": 4})
    assert kinds.get("Flask", "v1alpha0", "rotated")["spec"] == {"replicas": 4}


# -- without a cluster: the seeds' convert role through the real executor ----------------------


def test_the_seeds_convert_role_answers_a_review_of_both_versions_in_one_run(
    tmp_path: Path,
) -> None:
    from runner.ansible.executor import Executor
    from runner.convert.converter import Conversions
    from runner.watches import GVK, Convert, Watch

    executor = Executor(roles_paths=[REPO / "roles"], tmp_dir=tmp_path / "tmp")
    watch = Watch(
        GVK("swallowlab.com", "v1alpha1", "EchoFlask"),
        role="/r",
        convert=Convert(role=str(REPO / "roles" / "echoflask_convert")),
    )
    conversions = Conversions.of([watch], executor)

    def flask(i: int) -> dict[str, Any]:
        version, field = ("v1alpha1", "size") if i % 2 else ("v1alpha0", "replicas")
        return {
            "apiVersion": f"swallowlab.com/{version}",
            "kind": "EchoFlask",
            "metadata": {"name": f"f{i}", "namespace": "ns", "uid": f"u{i}"},
            "spec": {field: i, "image": "{{ lookup('pipe', 'id') }}"},
            "status": {"nodes": [f"f{i}-pod"]},
        }

    def review(desired: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": desired, "desiredAPIVersion": desired, "objects": objects},
        }
        return asyncio.run(conversions.review(body))["response"]

    try:
        objects = [flask(i) for i in range(20)]
        to_beta = review("swallowlab.com/v1alpha0", objects)
        assert to_beta["result"] == {"status": "Success"}, to_beta
        assert [o["spec"] for o in to_beta["convertedObjects"]] == [
            {"replicas": i, "image": "{{ lookup('pipe', 'id') }}"} for i in range(20)
        ], "mixed versions converted, and a CR's Jinja never evaluated"
        assert [o["status"] for o in to_beta["convertedObjects"]] == [o["status"] for o in objects]
        to_alpha = review("swallowlab.com/v1alpha1", to_beta["convertedObjects"])
        assert [o["spec"]["size"] for o in to_alpha["convertedObjects"]] == list(range(20))
        unknown = review("swallowlab.com/v2", objects[:1])
        assert unknown["result"]["status"] == "Failure"
        assert "cannot convert EchoFlask between v1alpha0, v2" in unknown["result"]["message"]
    finally:
        conversions.close()
        executor.close()
