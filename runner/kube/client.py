"""The Kubernetes API, at the edge: requests are built as plain values, then sent.

As in lightkube, building a request (`Request`, pure, unit-tested) is separate from sending it
(`KubeClient`, the only code in the runner besides kopf that talks to the API server). The
credentials come from runner/kube/clientconfig.py (in-cluster service account or kubeconfig,
read without the `kubernetes` package, which is imported only for exec plugins and
auth-providers);
requests go through a `Transport`: in the operator an aiohttp session on the event loop (kopf's
HTTP stack: no second one, no thread per call), in tests a fake.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from yarl import URL

from runner import __version__
from runner.kube import requestlog
from runner.kube.credentials import Credentials
from runner.kube.paths import group_version_path, resource_path
from runner.kube.reachability import (
    API,
    Reachability,
    certificate_error,
    is_connection_error,
    summary,
)
from runner.kube.resources import ObjectRef, Resource

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
USER_AGENT = f"operator-runner/{__version__}"
LIST_PAGE = 500


@dataclass(frozen=True)
class Request:
    """One HTTP request to the API server, not yet sent."""

    method: str
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"

    @property
    def url_path(self) -> str:
        return f"{self.path}?{urlencode(dict(self.params))}" if self.params else self.path


class ApiUnreachable(ConnectionError):
    """The API server could not be reached (refused, reset, timed out): an OSError, whatever
    the transport library's own exception was."""


class CertificateRejected(ApiUnreachable):
    """The server's certificate did not verify: for this name, against these CAs. An outage to
    the code that waits one out, and a message that says what to fix."""

    def __init__(self, credentials: Credentials, err: ssl.SSLCertVerificationError) -> None:
        name = credentials.tls_server_name or URL(credentials.server).host
        cas = "the system's CAs" if credentials.ca_file is None else "its certificate-authority"
        reason = getattr(err, "verify_message", "") or str(err)
        hint = (
            "fix tls-server-name or certificate-authority"
            if credentials.tls_server_name
            else "if the certificate names another host, set tls-server-name in the cluster "
            "entry; else fix certificate-authority"
        )
        super().__init__(
            f"the API server {credentials.server} presented a certificate that does not verify "
            f"for the name {name!r} against {cas}: {reason.rstrip('.')}. "
            f"Credentials: {credentials.source or 'given'}; {hint}"
        )


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        try:
            self.message = str(json.loads(body).get("message", body))
        except ValueError:
            self.message = body
        super().__init__(f"{status} {reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


# --- building requests (pure) -------------------------------------------------------------


def object_path(
    resource: Resource,
    namespace: str | None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    scope = namespace if resource.namespaced else None
    return resource_path(
        resource.group, resource.version, resource.plural, scope, name, subresource
    )


def get_api_resources(group: str, version: str) -> Request:
    """Discovery: the APIResourceList of a group version (resources.find_resource reads it)."""
    return Request("GET", group_version_path(group, version))


def get_object(ref: ObjectRef) -> Request:
    return Request("GET", object_path(ref.resource, ref.namespace, ref.name))


def list_objects(
    resource: Resource, namespace: str | None, label_selector: str = "", cont: str = ""
) -> Request:
    """One page (LIST_PAGE objects) of a collection, in `namespace` or all of them (None)."""
    params = {"limit": str(LIST_PAGE)}
    if label_selector:
        params["labelSelector"] = label_selector
    if cont:
        params["continue"] = cont
    return Request("GET", object_path(resource, namespace), params=params)


def patch_status(ref: ObjectRef, status: JSON, field_manager: str | None = None) -> Request:
    """Merge-patch `status` through the status subresource: keys not named stay as they are.
    `field_manager`: who the write says it is, in the object's managedFields."""
    return Request(
        "PATCH",
        object_path(ref.resource, ref.namespace, ref.name, "status"),
        params={"fieldManager": field_manager} if field_manager else {},
        body={"status": status},
        content_type=MERGE_PATCH,
    )


def set_finalizers(ref: ObjectRef, finalizers: list[str], resource_version: str) -> Request:
    """Replace metadata.finalizers, guarded by resourceVersion (409 when the object moved on)."""
    return Request(
        "PATCH",
        object_path(ref.resource, ref.namespace, ref.name),
        body={"metadata": {"finalizers": finalizers, "resourceVersion": resource_version}},
        content_type=MERGE_PATCH,
    )


def set_label(ref: ObjectRef, key: str, value: str, resource_version: str) -> Request:
    """Set one label, guarded by resourceVersion (409 when the object moved on)."""
    return Request(
        "PATCH",
        object_path(ref.resource, ref.namespace, ref.name),
        body={"metadata": {"labels": {key: value}, "resourceVersion": resource_version}},
        content_type=MERGE_PATCH,
    )


def list_namespaces(limit: int | None = None) -> Request:
    params = {"limit": str(limit)} if limit is not None else {}
    return Request("GET", resource_path("", "v1", "namespaces"), params)


def create_event(namespace: str, event: JSON) -> Request:
    return Request("POST", resource_path("", "v1", "events", namespace), body=event)


def patch_event(namespace: str, name: str, patch: JSON) -> Request:
    return Request(
        "PATCH",
        resource_path("", "v1", "events", namespace, name),
        body=patch,
        content_type=MERGE_PATCH,
    )


# Reviews, for the metrics endpoint's authentication and authorization
# (runner/app/serving/metricsauth.py).


def create_token_review(token: str) -> Request:
    """Who a bearer token is (TokenReview, authentication.k8s.io/v1)."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    return Request("POST", resource_path("authentication.k8s.io", "v1", "tokenreviews"), body=body)


def create_subject_access_review(spec: JSON) -> Request:
    """May this user do that (SubjectAccessReview, authorization.k8s.io/v1)."""
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    return Request(
        "POST", resource_path("authorization.k8s.io", "v1", "subjectaccessreviews"), body=body
    )


# Leases (coordination.k8s.io/v1), for leader election (runner/app/leases/leader.py) and the
# shards' membership (runner/app/leases/sharding.py).


def lease_path(namespace: str, name: str | None = None) -> str:
    return resource_path("coordination.k8s.io", "v1", "leases", namespace, name)


def get_lease(namespace: str, name: str) -> Request:
    return Request("GET", lease_path(namespace, name))


def create_lease(namespace: str, lease: JSON) -> Request:
    """Create a Lease (409 when one of that name exists already)."""
    return Request("POST", lease_path(namespace), body=lease)


def replace_lease(namespace: str, name: str, lease: JSON) -> Request:
    """Replace a Lease; its metadata.resourceVersion makes it fail with 409 if it moved on."""
    return Request("PUT", lease_path(namespace, name), body=lease)


def list_leases(namespace: str, label_selector: str) -> Request:
    return Request("GET", lease_path(namespace), {"labelSelector": label_selector})


def delete_lease(namespace: str, name: str) -> Request:
    return Request("DELETE", lease_path(namespace, name))


# --- sending requests ---------------------------------------------------------------------


#: (method, url, body, headers, timeout) -> (status, reason, body text); raises an OSError or
#: the transport library's own exception when the server cannot be reached.
Transport = Callable[
    [str, str, str | None, Mapping[str, str], float], Awaitable[tuple[int, str, str]]
]


class AiohttpTransport:
    """Sends over one aiohttp session, made on first use (in the running event loop)."""

    def __init__(self, credentials: Credentials) -> None:
        self.ssl = credentials.ssl_context() if credentials.server.startswith("https") else False
        self._session: aiohttp.ClientSession | None = None

    async def __call__(
        self, method: str, url: str, body: str | None, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str, str]:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.ssl, limit=16),
                trace_configs=requestlog.trace_configs(),
            )
        async with self._session.request(
            method,
            URL(url, encoded=True),  # the path and query are encoded already
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            allow_redirects=False,
        ) as response:
            text = await response.text(encoding="utf-8", errors="replace")
            return response.status, response.reason or "", text

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class KubeClient:
    """Sends `Request`s with the operator's credentials."""

    def __init__(
        self,
        credentials: Credentials,
        reachability: Reachability = API,
        transport: Transport | None = None,
    ) -> None:
        self.credentials = credentials
        self.host = credentials.server.rstrip("/")
        self.reachability = reachability
        reachability.server = self.host
        self._aiohttp: AiohttpTransport | None = None
        if transport is None:
            transport = self._aiohttp = AiohttpTransport(credentials)
        self._transport = transport

    async def close(self) -> None:
        if self._aiohttp is not None:
            await self._aiohttp.close()

    async def send(self, request: Request, timeout: float = 30.0) -> Any:
        headers = {
            "Content-Type": request.content_type,
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        authorization = await self.credentials.authorization_header()
        if authorization:
            headers["Authorization"] = authorization
        url = self.host + request.url_path
        body = None if request.body is None else json.dumps(request.body)
        try:
            status, reason, text = await self._transport(
                request.method, url, body, headers, timeout
            )
        except (aiohttp.ClientError, OSError) as err:
            if not is_connection_error(err):
                raise
            rejected = certificate_error(err)
            if rejected is not None:
                raise CertificateRejected(self.credentials, rejected) from err
            self.reachability.failed(err, f"{request.method} {request.path}")
            raise ApiUnreachable(
                f"{request.method} {request.path}: the API server {self.host} cannot be "
                f"reached: {summary(err)}"
            ) from err
        self.reachability.succeeded()  # any answer: the server is up
        if not 200 <= status < 300:
            raise ApiError(status, reason, text)
        return json.loads(text) if text else None

    async def send_or_none(self, request: Request, timeout: float = 30.0) -> Any:
        """`send`, with None when the object is gone (404): the one place that means so."""
        try:
            return await self.send(request, timeout)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def get_or_none(self, ref: ObjectRef) -> dict[str, Any] | None:
        """The object as the API server has it now, or None when it is gone."""
        obj: dict[str, Any] | None = await self.send_or_none(get_object(ref))
        return obj


class AsyncUpstream:
    """An aiohttp session to the API server with the operator's credentials.

    For what must stream or stay on the event loop: the roles' proxy and dependent watches.
    The Authorization header is taken from the credentials on every request, so in-cluster token
    rotation (and exec plugins' refresh) keeps working.
    """

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.host: str = credentials.server.rstrip("/")
        self.ssl = credentials.ssl_context() if self.host.startswith("https") else False
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Bodies stay as the API server sent them (the roles' proxy relays them), so ask
            # for them uncompressed: aiohttp would otherwise accept gzip, and the API server
            # gzips any response over 128 KB (a dependent watch's listing of 1000 Services).
            self._session = aiohttp.ClientSession(
                auto_decompress=False,
                headers={"Accept-Encoding": "identity"},
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                connector=aiohttp.TCPConnector(ssl=self.ssl, limit=64),
                trace_configs=requestlog.trace_configs(),
            )
        return self._session

    async def auth_headers(self) -> dict[str, str]:
        """The Authorization header, as `KubeClient` gets it (never blocking the loop)."""
        authorization = await self.credentials.authorization_header()
        return {"Authorization": authorization} if authorization else {}

    def url(self, path_qs: str) -> str:
        return self.host + path_qs

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
