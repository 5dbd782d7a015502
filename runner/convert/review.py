"""ConversionReview (apiextensions.k8s.io/v1), pure: the request read, the answer built, and a
converter's answers checked against what was asked.

The API server sends the objects of one kind (possibly stored in different versions) and the
`desiredAPIVersion`; the answer lists the same objects, in the same order, in that version,
with `result.status` `Success`, or `Failure` and a message that the API server shows to whoever
asked (`kubectl get`: "conversion webhook for ... failed: <message>"). It refuses an answer whose
objects changed their metadata other than labels and annotations, so the runner keeps each
object's metadata as it came and takes only the labels and annotations of the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

REVIEW_VERSIONS: Final = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")


class ReviewError(ValueError):
    """The body is no ConversionReview request (answered 400)."""


class ConversionFailed(Exception):
    """The objects could not be converted: answered as a failed ConversionReview with this
    message."""


@dataclass(frozen=True)
class ConversionRequest:
    """One ConversionReview's request."""

    review_version: str  # apiextensions.k8s.io/v1 (or v1beta1), echoed in the answer
    uid: str
    desired_api_version: str
    objects: list[dict[str, Any]]

    @property
    def group(self) -> str:
        return self.desired_api_version.rpartition("/")[0]

    @property
    def desired_version(self) -> str:
        return self.desired_api_version.rpartition("/")[2]

    @property
    def kind(self) -> str:
        """The objects' kind ("" when there are none)."""
        return str(self.objects[0].get("kind") or "") if self.objects else ""

    def versions(self) -> str:
        """`v1alpha1 -> v1beta1` (sources in request order) for messages."""
        sources = dict.fromkeys(version_of(o) for o in self.objects)
        return f"{', '.join(sources) or '-'} -> {self.desired_version}"


def version_of(obj: Mapping[str, Any]) -> str:
    return str(obj.get("apiVersion") or "").rpartition("/")[2]


def read_review(body: Any) -> ConversionRequest:
    """The request of a ConversionReview; ReviewError when the body is none."""
    if not isinstance(body, Mapping) or body.get("kind") != "ConversionReview":
        raise ReviewError("expected a ConversionReview (apiextensions.k8s.io/v1)")
    version = body.get("apiVersion")
    if version not in REVIEW_VERSIONS:
        raise ReviewError(
            f"ConversionReview {version!r} is not known; send apiextensions.k8s.io/v1"
        )
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise ReviewError("the ConversionReview has no request")
    uid, desired = request.get("uid"), request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("the ConversionReview's request has no uid")
    if not isinstance(desired, str) or not desired:
        raise ReviewError("the ConversionReview's request has no desiredAPIVersion")
    if objects is None:
        objects = []
    if not isinstance(objects, list) or not all(isinstance(o, Mapping) for o in objects):
        raise ReviewError("the ConversionReview's request.objects must be a list of objects")
    kinds = {(o.get("kind"), str(o.get("apiVersion") or "").rpartition("/")[0]) for o in objects}
    if len(kinds) > 1:
        raise ReviewError("the ConversionReview's objects must be of one kind and group")
    return ConversionRequest(str(version), uid, desired, [dict(o) for o in objects])


def answer(
    request: ConversionRequest,
    objects: Sequence[Mapping[str, Any]] | None = None,
    failure: str | None = None,
) -> dict[str, Any]:
    """The ConversionReview that answers `request`: the converted `objects`, or a `failure`."""
    response: dict[str, Any] = {"uid": request.uid}
    if failure is None:
        response["convertedObjects"] = list(objects or [])
        response["result"] = {"status": "Success"}
    else:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": failure}
    return {"apiVersion": request.review_version, "kind": "ConversionReview", "response": response}


def refused(body: Any, message: str) -> dict[str, Any]:
    """A failed ConversionReview for a body that `read_review` refused (its uid when it has
    one), so that whoever asked reads why."""
    request = body.get("request") if isinstance(body, Mapping) else None
    uid = request.get("uid") if isinstance(request, Mapping) else None
    version = body.get("apiVersion") if isinstance(body, Mapping) else None
    stand_in = ConversionRequest(
        str(version) if version in REVIEW_VERSIONS else REVIEW_VERSIONS[0],
        str(uid or ""),
        "",
        [],
    )
    return answer(stand_in, failure=f"operator-runner: {message}")


# ---------------------------------------------------------------------------------------------
# A converter's answers, checked
# ---------------------------------------------------------------------------------------------


def _identity(obj: Mapping[str, Any]) -> tuple[str, ...] | None:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    if meta.get("uid"):
        return ("uid", str(meta["uid"]))
    if meta.get("name"):
        return ("name", str(meta.get("namespace") or ""), str(meta["name"]))
    return None


def describe_object(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name = str(meta.get("name") or meta.get("generateName") or "(no name)")
    namespace = meta.get("namespace")
    return (
        f"{obj.get('kind') or 'object'} {namespace}/{name}"
        if namespace
        else f"{obj.get('kind')} {name}"
    )


def _matched(
    request: ConversionRequest, answers: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Each requested object's answer: by uid (else namespace and name) when every object has
    one of its own, else by position."""
    wanted = [_identity(o) for o in request.objects]
    by_identity = None not in wanted and len(set(wanted)) == len(wanted)
    if not by_identity:
        if len(answers) != len(request.objects):
            raise ConversionFailed(
                f"answered {len(answers)} objects for {len(request.objects)} "
                f"({request.versions()}); answer each object of conversion.objects once"
            )
        return list(answers)
    found: dict[tuple[str, ...], Mapping[str, Any]] = {}
    for item in answers:
        identity = _identity(item)
        if identity not in wanted:
            raise ConversionFailed(
                f"answered {describe_object(item)}, which was not asked for "
                f"({request.versions()}); answer the objects of conversion.objects, keeping their "
                "metadata.uid"
            )
        assert identity is not None
        if identity in found:
            raise ConversionFailed(f"answered {describe_object(item)} twice ({request.versions()})")
        found[identity] = item
    missing = [
        o for o, identity in zip(request.objects, wanted, strict=True) if identity not in found
    ]
    if missing:
        names = ", ".join(describe_object(o) for o in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ConversionFailed(
            f"no answer for {names}{more} ({request.versions()}); call "
            "operator_sdk.util.conversion for every object of conversion.objects"
        )
    return [found[identity] for identity in wanted if identity is not None]


def _settled(
    original: Mapping[str, Any], converted: Mapping[str, Any], desired: str
) -> dict[str, Any]:
    """`converted` in the desired version, with `original`'s metadata (only labels and
    annotations may change in a conversion), kind and apiVersion."""
    result = dict(converted)
    result["apiVersion"] = desired
    result["kind"] = original.get("kind")
    metadata = dict(original.get("metadata") or {})
    new_meta = converted.get("metadata")
    if isinstance(new_meta, Mapping):
        for key in ("labels", "annotations"):
            if key in new_meta:
                value = new_meta[key]
                if value is None or value == {}:
                    metadata.pop(key, None)
                elif isinstance(value, Mapping):
                    metadata[key] = dict(value)
                else:
                    raise ConversionFailed(
                        f"{describe_object(original)}: metadata.{key} must be a mapping"
                    )
    result["metadata"] = metadata
    return result


def settle(request: ConversionRequest, answers: Sequence[Any]) -> list[dict[str, Any]]:
    """The converted objects for `request` from a converter's `answers` (any order); raises
    ConversionFailed naming what is missing or wrong."""
    for item in answers:
        if not isinstance(item, Mapping):
            raise ConversionFailed(f"answered {type(item).__name__} where an object belongs")
    matched = _matched(request, answers)
    desired = request.desired_api_version
    return [_settled(o, a, desired) for o, a in zip(request.objects, matched, strict=True)]
