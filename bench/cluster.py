"""The cluster side: CRDs, namespaces, creating and deleting CRs."""

from __future__ import annotations

import concurrent.futures
import random
import string
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from .crs import GROUP, KIND, PLURAL, VERSION, Tracker
from .harness import REPO


def established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    """The CRD `name` is Established (the API server serves its kind)."""
    crd = ext.read_custom_resource_definition(name)
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def crd_version(name: str, schema: dict[str, Any], storage: bool = True) -> dict[str, Any]:
    """One served version of a CRD with a status subresource and this OpenAPI schema."""
    return {
        "name": name,
        "served": True,
        "storage": storage,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": schema},
    }


def crd_body(
    group: str,
    kind: str,
    versions: list[dict[str, Any]],
    conversion: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A namespaced CRD of `kind` in `group` (plural: the kind in lower case, plus s)."""
    plural = kind.lower() + "s"
    spec: dict[str, Any] = {
        "group": group,
        "scope": "Namespaced",
        "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
        "versions": versions,
    }
    if conversion is not None:
        spec["conversion"] = conversion
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": spec,
    }


#: The schema of a version that keeps whatever it is given.
ANY_OBJECT: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.ext = client.ApiextensionsV1Api(self.api)

    def install_crds(self) -> None:
        """The CRDs of crds/, each with its storage version alone and no conversion webhook:
        the scenarios compare reconciles, and the peer serves no conversion (with EchoFlask's
        v1beta1 served, its writes would wait on a webhook that is not there; conversion has
        its own scenario, bench/conversion.py)."""
        for path in sorted((REPO / "crds").glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                spec = doc["spec"]
                spec["versions"] = [v for v in spec["versions"] if v.get("storage")]
                spec.pop("conversion", None)
                name = doc["metadata"]["name"]
                try:
                    cur = self.ext.read_custom_resource_definition(name)
                    doc["metadata"]["resourceVersion"] = cur.metadata.resource_version
                    self.ext.replace_custom_resource_definition(name, doc)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    self.ext.create_custom_resource_definition(doc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if established(self.ext, f"{PLURAL}.{GROUP}"):
                return
            time.sleep(0.2)
        raise SystemExit("bench: the EchoFlask CRD did not become Established")

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{''.join(random.choices(string.ascii_lowercase + string.digits, k=5))}"
        self.core.create_namespace(
            {"metadata": {"name": name, "labels": {"bench": "operator-runner"}}}
        )
        return name

    def delete_namespace(self, name: str, timeout: float = 300) -> bool:
        try:
            self.core.delete_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.core.read_namespace(name)
            except ApiException as exc:
                if exc.status == 404:
                    return True
            time.sleep(1)
        return False

    def create_cr(
        self, ns: str, name: str, size: int, annotations: dict[str, str] | None = None
    ) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"size": size},
        }
        for attempt in range(5):
            try:
                self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
                return
            except ApiException as exc:
                if exc.status == 409:
                    return
                if attempt == 4 or exc.status < 500:
                    raise
                time.sleep(0.5)

    def delete_cr(self, ns: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def wait_crs_gone(self, ns: str, names: list[str], deadline: float) -> bool:
        """True once none of `names` is listed in `ns` (before the deadline)."""
        left = set(names)
        while time.monotonic() < deadline:
            lst = self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
            if not left & {o["metadata"]["name"] for o in lst.get("items") or []}:
                return True
            time.sleep(0.5)
        return False

    def create_many(
        self,
        ns: str,
        names: list[str],
        size: int,
        annotations: dict[str, str] | None,
        tracker: Tracker,
    ) -> None:
        def one(n: str) -> None:
            tracker.state(n).created = time.monotonic()
            self.create_cr(ns, n, size, annotations)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, names))
