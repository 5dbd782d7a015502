"""API paths and apiVersions: built here and nowhere else (names quoted).

`/api/<version>` for the core group, `/apis/<group>/<version>` for the others, then
`namespaces/<ns>/` when namespaced, the plural, and the object's name.
"""

from __future__ import annotations

from urllib.parse import quote


def api_version(group: str, version: str) -> str:
    """`group/version`, or just `version` for the core group."""
    return f"{group}/{version}" if group else version


def group_version_path(group: str, version: str) -> str:
    """The discovery document (APIResourceList) of a group version."""
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def resource_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The path of a collection (no `name`) or of one object, optionally of its subresource."""
    parts = ["/api" if not group else "/apis", api_version(group, version)]
    if namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
    return "/".join(parts)
