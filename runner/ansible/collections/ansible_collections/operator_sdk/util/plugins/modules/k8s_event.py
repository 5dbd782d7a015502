#!/usr/bin/python
"""operator_sdk.util.k8s_event: create (or count again) a Kubernetes Event about an object.

Written for operator-runner; takes operator-sdk's arguments and behaves as its module: an Event
of the same name and reason is counted again (`count`, `lastTimestamp`), another reason starts
it over, `appendTimestamp` makes a new Event every time.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from ansible.module_utils.basic import AnsibleModule, env_fallback  # type: ignore[import-untyped,unused-ignore]

try:
    from kubernetes import client as k8s_client  # type: ignore[import-untyped,unused-ignore]
    from kubernetes import config as k8s_config  # type: ignore[import-untyped,unused-ignore]
    from kubernetes.client.rest import ApiException  # type: ignore[import-untyped,unused-ignore]
    from kubernetes.dynamic import DynamicClient  # type: ignore[import-untyped,unused-ignore]

    KUBERNETES_IMPORT_ERROR: str | None = None
except ImportError as _exc:  # pragma: no cover - reported by the module at run time
    KUBERNETES_IMPORT_ERROR = str(_exc)

DOCUMENTATION = r"""
module: k8s_event
short_description: Create Kubernetes Events
version_added: "0.5.0"
author: operator-runner authors
description:
  - Creates an Event (core C(v1)) about an object, or counts an existing one of the same name
    and reason again. Compatible with operator-sdk's C(operator_sdk.util.k8s_event).
  - Connection settings as C(kubernetes.core.k8s) (I(kubeconfig), I(context), I(host),
    I(api_key), ...); under operator-runner none are needed.
options:
  state:
    description: C(present) creates or counts the Event; C(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the Event.
    type: str
    required: true
  namespace:
    description: Namespace of the Event.
    type: str
    required: true
  merge_type:
    description: Accepted for compatibility; updates are merge patches.
    type: list
    elements: str
  message:
    description: Human-readable description.
    type: str
    required: true
  reason:
    description: Short, CamelCase reason.
    type: str
    required: true
  reportingComponent:
    description: Name of the controller that emitted the Event.
    type: str
  type:
    description: Type of the Event.
    type: str
    choices: [Normal, Warning]
  source:
    description: The Event's C(source) (C(component), C(host)).
    type: dict
  involvedObject:
    description:
      - The object the Event is about (C(apiVersion), C(kind), C(name), C(namespace)); its
        C(uid) and C(resourceVersion) are looked up when it exists.
    type: dict
  appendTimestamp:
    description: Append the current time to I(name), making a new Event every time.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Tell the CR's users what happened
  operator_sdk.util.k8s_event:
    name: "{{ ansible_operator_meta.name }}-scaled"
    namespace: "{{ ansible_operator_meta.namespace }}"
    reason: Scaled
    message: "Scaled to {{ size }}"
    type: Normal
    source:
      component: memcached-operator
    involvedObject:
      apiVersion: cache.example.com/v1alpha1
      kind: Memcached
      name: "{{ ansible_operator_meta.name }}"
      namespace: "{{ ansible_operator_meta.namespace }}"
"""

RETURN = r"""
result:
  description: The Event as the API server returned it (absent after a deletion).
  returned: success
  type: dict
"""


def argument_spec() -> dict[str, Any]:
    def env(name: str) -> dict[str, Any]:
        return {"fallback": (env_fallback, [name])}

    return {
        "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "required": True},
        "merge_type": {"type": "list", "elements": "str"},
        "message": {"type": "str", "required": True},
        "reason": {"type": "str", "required": True},
        "reportingComponent": {"type": "str"},
        "type": {"type": "str", "choices": ["Normal", "Warning"]},
        "source": {"type": "dict"},
        "involvedObject": {"type": "dict"},
        "appendTimestamp": {"type": "bool", "default": False},
        "kubeconfig": {"type": "raw", **env("K8S_AUTH_KUBECONFIG")},
        "context": {"type": "str", **env("K8S_AUTH_CONTEXT")},
        "host": {"type": "str", **env("K8S_AUTH_HOST")},
        "api_key": {"type": "str", "no_log": True, **env("K8S_AUTH_API_KEY")},
        "validate_certs": {"type": "bool", "aliases": ["verify_ssl"], **env("K8S_AUTH_VERIFY_SSL")},
        "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"], **env("K8S_AUTH_SSL_CA_CERT")},
        "client_cert": {"type": "path", "aliases": ["cert_file"], **env("K8S_AUTH_CERT_FILE")},
        "client_key": {
            "type": "path",
            "aliases": ["key_file"],
            "no_log": False,
            **env("K8S_AUTH_KEY_FILE"),
        },
    }


class ModuleError(Exception):
    pass


def api_client(params: dict[str, Any]) -> Any:
    """Like kubernetes.core: explicit host and token, else kubeconfig, else in-cluster."""
    cfg = k8s_client.Configuration()
    kubeconfig, context = params.get("kubeconfig"), params.get("context")
    try:
        if params.get("host") and params.get("api_key"):
            pass
        elif isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(
                kubeconfig, context=context, client_configuration=cfg
            )
        elif kubeconfig or context:
            path = os.path.expanduser(str(kubeconfig)) if kubeconfig else None
            k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=cfg)
            except k8s_config.ConfigException:
                k8s_config.load_kube_config(client_configuration=cfg)
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise ModuleError(f"cannot load the Kubernetes client configuration: {exc}") from exc
    for param, attribute in (
        ("validate_certs", "verify_ssl"),
        ("ca_cert", "ssl_ca_cert"),
        ("client_cert", "cert_file"),
        ("client_key", "key_file"),
    ):
        if params.get(param) is not None:
            setattr(cfg, attribute, params[param])
    if params.get("host"):
        cfg.host = str(params["host"]).rstrip("/")
    if params.get("api_key"):
        cfg.api_key = {"authorization": f"Bearer {params['api_key']}"}
        cfg.api_key_prefix = {}
    return k8s_client.ApiClient(cfg)


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None) or ""
    try:
        return str(json.loads(body).get("message") or body)
    except (ValueError, AttributeError):
        return str(body or exc)


def _read_or_none(read: Any, *args: Any) -> Any:
    try:
        return read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def involved_object(api: Any, given: dict[str, Any] | None) -> dict[str, Any] | None:
    """`involvedObject` with the object's uid and resourceVersion when it can be read."""
    if not given:
        return given
    obj = dict(given)
    if not (obj.get("apiVersion") and obj.get("kind") and obj.get("name")):
        return obj
    try:
        resource = DynamicClient(api).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        found = resource.get(name=obj["name"], namespace=obj.get("namespace") or None)
    except Exception:  # unknown kind, gone, or not readable: the Event names it all the same
        return obj
    meta = found.to_dict().get("metadata") or {}
    obj["uid"] = meta.get("uid")
    obj["resourceVersion"] = meta.get("resourceVersion")
    return obj


def run(params: dict[str, Any]) -> dict[str, Any]:
    api = api_client(params)
    core = k8s_client.CoreV1Api(api)
    namespace = params["namespace"]
    name = params["name"]
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if params.get("appendTimestamp"):
        name = f"{name}.{now.strftime('%Y%m%d%H%M%S%f')}"
    existing = None
    if not params.get("appendTimestamp"):
        existing = _read_or_none(
            lambda: api.sanitize_for_serialization(core.read_namespaced_event(name, namespace))
        )
    if params["state"] == "absent":
        if existing is None:
            return {"changed": False}
        core.delete_namespaced_event(name, namespace)
        return {"changed": True}
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "message": params["message"],
        "reason": params["reason"],
        "type": params.get("type"),
        "reportingComponent": params.get("reportingComponent") or "",
        "source": params.get("source") or {},
        "involvedObject": involved_object(api, params.get("involvedObject")) or {},
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
    }
    if existing is None:
        created = core.create_namespaced_event(namespace, event)
        return {"changed": True, "result": api.sanitize_for_serialization(created)}
    if existing.get("reason") == params["reason"]:
        event["count"] = int(existing.get("count") or 1) + 1
        event["firstTimestamp"] = existing.get("firstTimestamp") or stamp
    patched = core.patch_namespaced_event(name, namespace, event)
    return {"changed": True, "result": api.sanitize_for_serialization(patched)}


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=False)
    if KUBERNETES_IMPORT_ERROR is not None:
        module.fail_json(
            msg=f"the kubernetes Python package is required: {KUBERNETES_IMPORT_ERROR}"
        )
    try:
        module.exit_json(**run(module.params))
    except ModuleError as exc:
        module.fail_json(msg=str(exc))
    except ApiException as exc:
        module.fail_json(msg=f"Event {module.params['name']}: HTTP {exc.status}: {_message(exc)}")


if __name__ == "__main__":
    main()
