"""Conversion as a part of the operator's webhooks (runner/app/serving/webhooks.py): the
`/convert` path, answered by runner/convert's `Conversions`, and the `spec.conversion` of the CRD
of every kind whose watch has `convert:`, which the webhooks' registrar keeps pointing at this
operator with its caBundle:

```yaml
conversion:
  strategy: Webhook
  webhook:
    conversionReviewVersions: [v1]
    clientConfig: {url: https://127.0.0.1:9443/convert, caBundle: ...}   # make run
    # deployed: {service: {namespace: ..., name: ..., path: /convert, port: 443}, caBundle: ...}
```

A CRD is found by its kind's discovery (`<plural>.<group>`); a kind that is not served is told in
the log and left out. At exit (`make run`) the CRD keeps pointing at this process: reading or
writing a version that is not stored then fails with the API server's "conversion webhook ...
failed: ... connection refused", which says what is wrong, where a conversion strategy `None`
would drop the fields that differ without a word (docs/webhooks.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from runner.app.serving.webhookconfigs import Registration
from runner.app.serving.webhooks import ClientConfig
from runner.app.serving.webhookserver import TIMEOUT_KEY, Handler
from runner.convert.converter import Conversions
from runner.convert.review import ReviewError, refused
from runner.kube import client as kube
from runner.kube.client import ApiError, KubeClient
from runner.kube.objects import CUSTOM_RESOURCE_DEFINITIONS
from runner.kube.resources import find_resource
from runner.watches import Watch

log = logging.getLogger("runner.conversion")

CONVERT_PATH: Final = "/convert"  # Kubebuilder's


def conversion_spec(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD's `spec.conversion` that sends its ConversionReviews (v1) to `client_config`."""
    return {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": dict(client_config)},
    }


async def crd_names(client: KubeClient, watches: Sequence[Watch]) -> list[str]:
    """The CRDs (`<plural>.<group>`) of the watches with `convert:` that the API server
    serves; the others are told in the log."""
    names = []
    for watch in watches:
        if watch.convert is None:
            continue
        gvk = watch.gvk
        try:
            listing = await client.send(kube.get_api_resources(gvk.group, gvk.version))
        except ApiError as err:
            if not err.not_found:
                raise
            listing = {}
        found = find_resource(listing or {}, gvk.group, gvk.version, gvk.kind)
        if found is None:
            log.warning(
                "convert: %s %s is not served (its CRD is not installed?): its conversion "
                "webhook is not registered; install the CRD and restart the operator",
                gvk.kind,
                gvk.api_version,
                extra={"kind": gvk.kind},
            )
            continue
        names.append(f"{found[0].plural}.{gvk.group}")
    return names


class ConversionPart:
    """The conversion webhook: `/convert` and the CRDs' `spec.conversion` (module doc)."""

    def __init__(self, conversions: Conversions, crds: Sequence[str]) -> None:
        self.conversions = conversions
        self.crds = list(crds)

    def handlers(self) -> Mapping[str, Handler]:
        return {CONVERT_PATH: self.handle}

    async def handle(self, body: dict[str, Any]) -> dict[str, Any]:
        timeout = body.pop(TIMEOUT_KEY, None)
        try:
            return await self.conversions.review(body, timeout)
        except ReviewError as err:
            log.warning("conversion webhook: %s", err)
            return refused(body, str(err))

    def registrations(self, client_config: ClientConfig) -> Sequence[Registration]:
        value = conversion_spec(client_config(CONVERT_PATH))
        return [
            Registration(CUSTOM_RESOURCE_DEFINITIONS, name, ("spec", "conversion"), value)
            for name in self.crds
        ]

    def close(self) -> None:
        self.conversions.close()
