"""Conversion as a part of the operator's webhooks (runner/app/webhooks/assembly.py): the
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

A CRD is named `<plural>.<group>`, the plural from discovery (admission's `plural_of`); one that
is not installed yet is not created: its registration waits for it (/readyz says so). At exit
(`make run`) the CRD keeps pointing at this process: reading or writing a version that is not
stored then fails with the API server's "conversion webhook ... failed: ... connection
refused", which says what is wrong, where a conversion strategy `None` would drop the fields
that differ without a word (docs/webhooks.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from runner.app.manager.admission import plural_of
from runner.app.webhooks.assembly import ClientConfig
from runner.app.webhooks.registrar import Registration
from runner.app.webhooks.server import TIMEOUT_KEY, Handler
from runner.convert.converter import Conversions
from runner.convert.review import ReviewError, refused
from runner.kube.client import KubeClient
from runner.kube.objects import CUSTOM_RESOURCE_DEFINITIONS
from runner.watches import Watch

log = logging.getLogger("runner.conversion")

CONVERT_PATH: Final = "/convert"  # Kubebuilder's


def conversion_spec(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD's `spec.conversion` that sends its ConversionReviews (v1) to `client_config`."""
    return {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": dict(client_config)},
    }


def conversion_watches(watches: Sequence[Watch]) -> list[Watch]:
    return [w for w in watches if w.convert is not None]


class ConversionPart:
    """The conversion webhook: `/convert` and the CRDs' `spec.conversion` (module doc)."""

    def __init__(
        self,
        conversions: Conversions,
        client: KubeClient,
        watches: Sequence[Watch],
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.conversions = conversions
        self.client = client
        self.watches = conversion_watches(watches)
        self._ready = ready  # until convert: roles' runs start at once (the warm executor)

    def handlers(self) -> Mapping[str, Handler]:
        return {CONVERT_PATH: self.handle}

    async def handle(self, body: dict[str, Any]) -> dict[str, Any]:
        timeout = body.pop(TIMEOUT_KEY, None)
        try:
            return await self.conversions.review(body, timeout)
        except ReviewError as err:
            log.warning("conversion webhook: %s", err)
            return refused(body, str(err))

    async def registrations(self, client_config: ClientConfig) -> Sequence[Registration]:
        """The CRDs' `spec.conversion` (a CRD is named `<plural>.<group>`, the plural from
        discovery; a CRD that is not installed yet is written once it is), once a `convert:`
        role's run starts at once (`ready`)."""
        if self._ready is not None:
            await self._ready()
        value = conversion_spec(client_config(CONVERT_PATH))
        registrations = []
        for watch in self.watches:
            name = f"{await plural_of(self.client, watch.gvk)}.{watch.gvk.group}"
            registrations.append(
                Registration(
                    CUSTOM_RESOURCE_DEFINITIONS, name, ("spec", "conversion"), value, create=False
                )
            )
        return registrations

    def close(self) -> None:
        self.conversions.close()
