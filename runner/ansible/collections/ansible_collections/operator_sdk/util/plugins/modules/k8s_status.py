#!/usr/bin/python
"""operator_sdk.util.k8s_status: set status keys and conditions of a custom resource.

Written for operator-runner; parameters are compatible with operator-sdk's module of the same
name. Self-contained: talks to the API server with the `kubernetes` package directly.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ansible.module_utils.basic import AnsibleModule, env_fallback  # type: ignore[import-untyped,unused-ignore]

try:
    from kubernetes import client as k8s_client  # type: ignore[import-untyped,unused-ignore]
    from kubernetes import config as k8s_config  # type: ignore[import-untyped,unused-ignore]
    from kubernetes.client.rest import ApiException  # type: ignore[import-untyped,unused-ignore]
    from urllib3.exceptions import HTTPError

    KUBERNETES_IMPORT_ERROR: str | None = None
except ImportError as _exc:  # pragma: no cover - reported by the module at run time
    KUBERNETES_IMPORT_ERROR = str(_exc)

DOCUMENTATION = r"""
module: k8s_status
short_description: Set status keys and conditions on a Kubernetes custom resource
version_added: "0.1.0"
author: operator-runner authors
description:
  - Updates the C(status) of a custom resource through its C(status) subresource, with a JSON
    merge patch of only the keys that change. Meant for Ansible roles that implement an operator.
  - Compatible with operator-sdk's C(operator_sdk.util.k8s_status).
  - I(api_version), I(kind), I(name) and I(namespace) default to the custom resource being
    reconciled, which operator-runner passes to every run in the environment variables
    C(OPERATOR_RUNNER_CR_API_VERSION), C(OPERATOR_RUNNER_CR_KIND), C(OPERATOR_RUNNER_CR_PLURAL),
    C(OPERATOR_RUNNER_CR_NAME) and C(OPERATOR_RUNNER_CR_NAMESPACE).
  - 'The CRD must declare C(subresources: {status: {}}), and its status schema must keep the keys
    set here (for instance C(x-kubernetes-preserve-unknown-fields: true)), or the API server
    drops them.'
  - Supports check mode.
options:
  api_version:
    description:
      - API version of the resource, C(group/version).
      - Defaults to C(OPERATOR_RUNNER_CR_API_VERSION) when I(kind) is unset or equal to the
        reconciled CR's kind.
    type: str
    aliases: [api, version]
  kind:
    description:
      - Kind of the resource. Defaults to C(OPERATOR_RUNNER_CR_KIND).
    type: str
  name:
    description:
      - Name of the resource. Defaults to C(OPERATOR_RUNNER_CR_NAME) when the resource's group and
        kind are those of the reconciled CR.
    type: str
  namespace:
    description:
      - Namespace of the resource; omit (or leave empty) for cluster-scoped resources.
      - Defaults to C(OPERATOR_RUNNER_CR_NAMESPACE) when the resource's group and kind are those of
        the reconciled CR.
    type: str
  status:
    description:
      - Keys to set in C(status). Merged into the current status; nested mappings are merged
        recursively, lists and other values are replaced, and a key set to C(null) is removed
        (JSON merge patch semantics).
      - C(status.conditions), if given, is handled like I(conditions) (merged by C(type)).
      - One of I(status) or I(conditions) is required.
    type: dict
  conditions:
    description:
      - Conditions to set in C(status.conditions), merged by C(type) into the current ones (unless
        I(force)); an existing condition of the same type is replaced, other types are appended,
        conditions of types not given are kept.
      - Each condition needs C(type) (string) and C(status) (C(True), C(False) or C(Unknown));
        C(reason), if given, must be CamelCase like metav1.Condition's (a letter,
        then letters, digits, C(_), C(,) or C(:), not ending in C(,) or C(:));
        C(message), if given, must be a string; other keys (for instance C(observedGeneration))
        are kept as given.
      - C(lastTransitionTime) is set to now when the condition is new or its C(status) changes,
        and kept otherwise; a C(lastTransitionTime) given here (RFC 3339) is used as is.
      - One of I(status) or I(conditions) is required.
    type: list
    elements: dict
  replace_lists:
    description:
      - Accepted for compatibility only. Lists in I(status) are always replaced, never merged;
        I(conditions) are always merged by type.
    type: bool
    default: false
  force:
    description:
      - Replace the whole status with I(status) and I(conditions) instead of merging into it.
      - C(lastTransitionTime) of conditions still follows the rules of I(conditions).
    type: bool
    default: false
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig as a mapping. Falls back to
        C(K8S_AUTH_KUBECONFIG). Without it (and without I(host) and credentials) the in-cluster
        service account is used, else the C(KUBECONFIG) environment variable or
        C(~/.kube/config), as C(kubernetes.core) does.
    type: raw
  context:
    description: Context of the kubeconfig to use. Falls back to C(K8S_AUTH_CONTEXT).
    type: str
  host:
    description: URL of the API server. Falls back to C(K8S_AUTH_HOST).
    type: str
  api_key:
    description: Bearer token for the API server. Falls back to C(K8S_AUTH_API_KEY).
    type: str
  validate_certs:
    description: Verify the API server's certificate. Falls back to C(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: CA certificate file of the API server. Falls back to C(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description: Client certificate file. Falls back to C(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description: Client key file. Falls back to C(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
requirements:
  - kubernetes (Python package)
"""

EXAMPLES = r"""
- name: Set status keys on the CR being reconciled (target from the OPERATOR_RUNNER_CR_* env)
  operator_sdk.util.k8s_status:
    status:
      phase: Running
      endpoints:
        web: http://example

- name: Set a condition on an explicitly named resource
  operator_sdk.util.k8s_status:
    api_version: apps.example.com/v1alpha1
    kind: TestCR
    name: my-test
    namespace: testing
    conditions:
      - type: Running
        status: "True"
        reason: MigrationStarted
        message: Migration from v2 to v3 has begun
"""

RETURN = r"""
result:
  description:
    - The object after the update; the current object when nothing changed; in check mode, the
      object as it would be after the update.
  returned: success
  type: dict
  contains:
    apiVersion:
      description: API version of the object.
      type: str
    kind:
      description: Kind of the object.
      type: str
    metadata:
      description: Metadata of the object.
      type: dict
    status:
      description: Status of the object.
      type: dict
"""

ENV = "OPERATOR_RUNNER_CR_"
CONDITION_STATUSES = ("True", "False", "Unknown")
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
TIME_KEYS = ("lastTransitionTime", "lastHeartbeatTime")
REQUEST_TIMEOUT = 30
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
NO_STATUS_SUBRESOURCE_HINT = (
    "add `subresources: {status: {}}` to the CRD's version(s) (and a status schema that keeps the "
    "keys, e.g. `x-kubernetes-preserve-unknown-fields: true`)"
)


class ModuleError(Exception):
    """A failure to report to the playbook with fail_json."""


@dataclass(frozen=True)
class Target:
    api_version: str
    kind: str
    name: str
    namespace: str | None
    plural: str | None  # None: resolve through discovery


def argument_spec() -> dict[str, Any]:
    def env(name: str) -> dict[str, Any]:
        return {"fallback": (env_fallback, [name])}

    return {
        "api_version": {"type": "str", "aliases": ["api", "version"]},
        "kind": {"type": "str"},
        "name": {"type": "str"},
        "namespace": {"type": "str"},
        "status": {"type": "dict"},
        "conditions": {"type": "list", "elements": "dict"},
        "replace_lists": {"type": "bool", "default": False},
        "force": {"type": "bool", "default": False},
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


# --- which object ------------------------------------------------------------------------------


def api_group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def api_prefix(api_version: str) -> str:
    """/apis/<group>/<version>, or /api/v1 for the core group."""
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


def resolve_target(params: dict[str, Any], env: dict[str, str]) -> Target:
    """The object to update: the parameters, with the reconciled CR (env) as the default."""
    env_kind = env.get(ENV + "KIND") or None
    env_api_version = env.get(ENV + "API_VERSION") or None
    kind = params.get("kind") or env_kind
    if not kind:
        raise ModuleError(
            "no target: `kind` is not set and OPERATOR_RUNNER_CR_KIND is not in the environment; "
            "pass api_version, kind, name (and namespace) or run the role under operator-runner"
        )
    api_version = params.get("api_version") or (env_api_version if kind == env_kind else None)
    if not api_version:
        raise ModuleError(
            f"`api_version` is required for kind {kind!r}: it is not the kind of the reconciled CR "
            f"(OPERATOR_RUNNER_CR_KIND={env_kind or ''!r})"
        )
    is_cr = (
        kind == env_kind
        and env_api_version is not None
        and api_group(api_version) == api_group(env_api_version)
    )
    name = params.get("name") or (env.get(ENV + "NAME") if is_cr else None)
    if not name:
        raise ModuleError(
            f"`name` is required for {kind}.{api_version}: neither the parameter nor "
            "OPERATOR_RUNNER_CR_NAME (for the reconciled CR's kind) gives one"
        )
    namespace = params.get("namespace")
    if namespace is None and is_cr:
        namespace = env.get(ENV + "NAMESPACE")
    plural = (env.get(ENV + "PLURAL") or None) if is_cr else None
    return Target(api_version, kind, name, namespace or None, plural)


# --- talking to the API server -----------------------------------------------------------------


class ApiError(ModuleError):
    def __init__(self, what: str, exc: Any) -> None:
        self.status = int(getattr(exc, "status", 0) or 0)
        body = getattr(exc, "body", None) or ""
        try:
            message = json.loads(body).get("message") or body
        except (ValueError, AttributeError):
            message = body or getattr(exc, "reason", "") or str(exc)
        super().__init__(f"{what}: HTTP {self.status}: {message}")


def _has_explicit_credentials(params: dict[str, Any]) -> bool:
    return bool(params.get("host")) and bool(
        params.get("api_key") or (params.get("client_cert") and params.get("client_key"))
    )


def _load_kubeconfig(params: dict[str, Any], cfg: Any) -> None:
    kubeconfig = params.get("kubeconfig")
    context = params.get("context")
    if isinstance(kubeconfig, dict):
        k8s_config.load_kube_config_from_dict(kubeconfig, context=context, client_configuration=cfg)
    else:
        path = os.path.expanduser(str(kubeconfig)) if kubeconfig else None
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)


def api_configuration(params: dict[str, Any]) -> Any:
    """Like kubernetes.core: explicit credentials, else kubeconfig, else in-cluster."""
    cfg = k8s_client.Configuration()
    try:
        if _has_explicit_credentials(params):
            pass
        elif params.get("kubeconfig") or params.get("context"):
            _load_kubeconfig(params, cfg)
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=cfg)
            except k8s_config.ConfigException:
                _load_kubeconfig(params, cfg)
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise ModuleError(f"cannot load the Kubernetes client configuration: {exc}") from exc
    overrides = {
        "validate_certs": "verify_ssl",
        "ca_cert": "ssl_ca_cert",
        "client_cert": "cert_file",
        "client_key": "key_file",
    }
    for param, attribute in overrides.items():
        if params.get(param) is not None:
            setattr(cfg, attribute, params[param])
    if params.get("host"):
        cfg.host = str(params["host"]).rstrip("/")
    if params.get("api_key"):
        cfg.api_key = {"authorization": f"Bearer {params['api_key']}"}
        cfg.api_key_prefix = {}
    return cfg


def call(
    api: Any, what: str, method: str, path: str, body: Any = None, content_type: str | None = None
) -> dict[str, Any]:
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    try:
        raw = send(api, method, path, headers, body)
    except ApiException as exc:
        raise ApiError(what, exc) from exc
    except (HTTPError, OSError) as exc:
        host = api.configuration.host
        raise ModuleError(f"{what}: cannot reach the API server at {host}: {exc}") from exc
    data: dict[str, Any] = json.loads(raw)
    return data


def send(api: Any, method: str, path: str, headers: dict[str, str], body: Any) -> bytes:
    """One request with the `kubernetes` client of either generation; the response's body.

    Up to 36, `call_api(path, method, ...)` sends it and raises ApiException on an error
    status; from 37 (openapi-generator 7), `param_serialize` prepares it, `call_api` sends it
    and an error status is the caller's to raise."""
    if hasattr(api, "param_serialize"):
        prepared = api.param_serialize(
            method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = api.call_api(*prepared, _request_timeout=REQUEST_TIMEOUT)
        response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
        return bytes(response.data)
    response = api.call_api(
        path,
        method,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=REQUEST_TIMEOUT,
    )
    return bytes(response.data)


def discover(api: Any, api_version: str, kind: str) -> tuple[str, bool]:
    """(plural, namespaced) of `kind` from the group version's APIResourceList."""
    try:
        resources = call(api, f"discovery of {api_version}", "GET", api_prefix(api_version))
    except ApiError as exc:
        if exc.status == 404:
            raise ModuleError(f"the API server does not serve {api_version!r}") from exc
        raise
    for resource in resources.get("resources") or []:
        if resource.get("kind") == kind and "/" not in resource.get("name", "/"):
            return str(resource["name"]), bool(resource.get("namespaced"))
    served = sorted({r.get("kind") for r in resources.get("resources") or [] if r.get("kind")})
    raise ModuleError(f"kind {kind!r} is not served in {api_version} (served: {served})")


def object_path(api: Any, target: Target) -> str:
    if target.plural:
        plural, namespaced = target.plural, target.namespace is not None
    else:
        plural, namespaced = discover(api, target.api_version, target.kind)
    if namespaced and not target.namespace:
        raise ModuleError(f"`namespace` is required: {target.kind} is namespaced")
    path = api_prefix(target.api_version)
    if namespaced:
        path += f"/namespaces/{quote(str(target.namespace), safe='')}"
    return f"{path}/{plural}/{quote(target.name, safe='')}"


def describe(target: Target) -> str:
    where = f" in namespace {target.namespace}" if target.namespace else ""
    return f"{target.kind} {target.name!r} ({target.api_version}){where}"


def read_object(api: Any, path: str, target: Target) -> dict[str, Any]:
    """GET through /status, so a CRD without the status subresource is caught every time."""
    try:
        return call(api, f"get {describe(target)}", "GET", f"{path}/status")
    except ApiError as exc:
        if exc.status != 404:
            raise
    try:
        call(api, f"get {describe(target)}", "GET", path)
    except ApiError as exc:
        if exc.status == 404:
            raise ModuleError(f"{describe(target)} not found") from exc
        raise
    raise ModuleError(f"{describe(target)} has no status subresource: {NO_STATUS_SUBRESOURCE_HINT}")


# --- what the status becomes -------------------------------------------------------------------


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_condition(index: int, given: Any) -> dict[str, Any]:
    """A checked copy of one condition; boolean `status` becomes "True"/"False"."""
    if not isinstance(given, dict):
        raise ModuleError(f"conditions[{index}] must be a mapping, got {given!r}")
    condition: dict[str, Any] = copy.deepcopy(given)
    ctype = condition.get("type")
    if not isinstance(ctype, str) or not ctype:
        raise ModuleError(f"conditions[{index}]: `type` is required and must be a non-empty string")
    where = f"condition {ctype!r}"
    status = condition.get("status")
    if isinstance(status, bool):
        status = condition["status"] = "True" if status else "False"
    if status not in CONDITION_STATUSES:
        raise ModuleError(f"{where}: `status` must be one of True, False, Unknown; got {status!r}")
    reason = condition.get("reason")
    if reason is not None and not (isinstance(reason, str) and re.match(REASON_PATTERN, reason)):
        raise ModuleError(
            f"{where}: `reason` must be a CamelCase word (a letter, then letters, digits, '_', ',' "
            f"or ':'; pattern {REASON_PATTERN}); got {reason!r}"
        )
    message = condition.get("message")
    if message is not None and not isinstance(message, str):
        raise ModuleError(f"{where}: `message` must be a string; got {message!r}")
    for key in TIME_KEYS:
        value = condition.get(key)
        if value is not None and not (isinstance(value, str) and RFC3339.match(value)):
            raise ModuleError(
                f"{where}: `{key}` must be an RFC 3339 time like 2024-01-31T12:00:00Z; "
                f"got {value!r}"
            )
    return condition


def find_condition(conditions: list[Any], ctype: str) -> int | None:
    for i, condition in enumerate(conditions):
        if isinstance(condition, dict) and condition.get("type") == ctype:
            return i
    return None


def with_transition_time(
    condition: dict[str, Any], previous: dict[str, Any] | None, now: str
) -> dict[str, Any]:
    if condition.get("lastTransitionTime"):
        return condition
    unchanged = previous is not None and previous.get("status") == condition["status"]
    kept = previous.get("lastTransitionTime") if unchanged and previous else None
    return {**condition, "lastTransitionTime": kept or now}


def merge_conditions(
    current: list[Any], given: list[dict[str, Any]], now: str, keep_others: bool
) -> list[Any]:
    """`given` merged by type into `current` (or replacing it when not `keep_others`)."""
    merged: list[Any] = copy.deepcopy(current) if keep_others else []
    for condition in given:
        before = find_condition(current, condition["type"])
        previous = current[before] if before is not None else None
        new = with_transition_time(condition, previous, now)
        index = find_condition(merged, condition["type"])
        if index is None:
            merged.append(new)
        else:
            merged[index] = new
    return merged


def merge_dicts(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """JSON merge patch (RFC 7386) of `overlay` onto a copy of `base`."""
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict):
            old = merged.get(key)
            merged[key] = merge_dicts(old if isinstance(old, dict) else {}, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def merge_patch_diff(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The smallest merge patch that turns `current` into `desired` (lists whole)."""
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        if key in current and current[key] == value:
            continue
        old = current.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            patch[key] = merge_patch_diff(old, value)
        else:
            patch[key] = value
    return patch


def given_status_and_conditions(
    params: dict[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    status = copy.deepcopy(params.get("status") or {})
    conditions = params.get("conditions")
    if status.get("conditions") is not None:
        if conditions is not None:
            raise ModuleError(
                "conditions are given twice, in `status.conditions` and in `conditions`: use one"
            )
        conditions = status.pop("conditions")
        if not isinstance(conditions, list):
            raise ModuleError(f"`status.conditions` must be a list; got {conditions!r}")
    if conditions is None:
        return status, None
    return status, [validate_condition(i, c) for i, c in enumerate(conditions)]


def desired_status(current: dict[str, Any], params: dict[str, Any], now: str) -> dict[str, Any]:
    force = bool(params.get("force"))
    status, conditions = given_status_and_conditions(params)
    desired = merge_dicts({} if force else current, status)
    if conditions is not None:
        old = current.get("conditions")
        old = old if isinstance(old, list) else []
        desired["conditions"] = merge_conditions(old, conditions, now, keep_others=not force)
    return desired


# --- the module ----------------------------------------------------------------------------------


def unsaved_cr(target: Target, env: dict[str, str]) -> bool:
    """The target is the reconciled CR, given from a file in check mode (it may not exist)."""
    return (
        env.get(ENV + "UNSAVED") == "1"
        and target.name == env.get(ENV + "NAME")
        and target.kind == env.get(ENV + "KIND")
    )


def update_status(module: AnsibleModule, api: Any) -> dict[str, Any]:
    target = resolve_target(module.params, dict(os.environ))
    path = object_path(api, target)
    try:
        obj = read_object(api, path, target)
    except ModuleError:
        if not (module.check_mode and unsaved_cr(target, dict(os.environ))):
            raise
        obj = {}  # `operator-runner reconcile --check -f` of a CR not in the cluster yet
    status = obj.get("status")
    current: dict[str, Any] = status if isinstance(status, dict) else {}
    desired = desired_status(current, module.params, now_rfc3339())
    if desired == current:
        return {"changed": False, "result": obj}
    # with --diff (`operator-runner reconcile --diff`, `preview`): the status before and after
    diff = {"diff": {"before": {"status": current}, "after": {"status": desired}}}
    shown = diff if module._diff else {}
    if module.check_mode:
        return {"changed": True, "result": {**obj, "status": desired}, **shown}
    what = f"update the status of {describe(target)}"
    if module.params.get("force"):
        patch: Any = [{"op": "add", "path": "/status", "value": desired}]
        result = call(api, what, "PATCH", f"{path}/status", patch, JSON_PATCH)
    else:
        patch = {"status": merge_patch_diff(current, desired)}
        result = call(api, what, "PATCH", f"{path}/status", patch, MERGE_PATCH)
    return {"changed": True, "result": result, **shown}


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_one_of=[("status", "conditions")],
        supports_check_mode=True,
    )
    if KUBERNETES_IMPORT_ERROR is not None:
        module.fail_json(
            msg=f"the `kubernetes` Python package is required: {KUBERNETES_IMPORT_ERROR}"
        )
    try:
        with k8s_client.ApiClient(api_configuration(module.params)) as api:
            outcome = update_status(module, api)
    except ModuleError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()
