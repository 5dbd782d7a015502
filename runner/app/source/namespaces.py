"""WATCH_NAMESPACE with exact names, for an operator that may not list Namespaces.

Given namespaces, kopf first lists all Namespaces (to match patterns such as `team-*`). An
operator deployed the usual operator-sdk way, with rights in its namespaces only, is refused
that list, and kopf retries the 403 through its whole error backoff (1+1+2+3+5+8+13+21 s) before
it falls back to taking the names as given: every start-up stalled ~54 s before the first watch.
operator-sdk never lists namespaces.

When every namespace is an exact name and one probe shows that the list is refused, the
namespace observer gets no backoff: it falls back at once, to exactly what it would have fallen
back to a minute later. Patterns, negations, and operators that may list namespaces keep kopf's
behaviour unchanged. The swap is a patch of kopf's internals: it goes through kopf's fence
(kopf_import.py), which leaves kopf's own observer on a kopf release it is not verified on.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from runner.app.source.kopf_import import kopf, patch_namespace_observer
from runner.kube.client import ApiError, KubeClient, list_namespaces

log = logging.getLogger("runner.manager")

_PATTERN_CHARS = frozenset("*?[]!")


def exact_names(namespaces: Sequence[str]) -> bool:
    """True when every entry names one namespace (no glob, no negation)."""
    return bool(namespaces) and not any(_PATTERN_CHARS & set(ns) for ns in namespaces)


async def may_list_namespaces(client: KubeClient) -> bool:
    """One request: False only when the API server refuses the list (403)."""
    try:
        await client.send(list_namespaces(limit=1), timeout=10.0)
    except ApiError as err:
        return err.status != 403
    except OSError:
        return True  # unreachable: let kopf find out, with its usual retries
    return True


def _without_backoff(
    observer: Callable[..., Awaitable[None]],
) -> Callable[..., Awaitable[None]]:
    @functools.wraps(observer)
    async def observe(*, settings: kopf.OperatorSettings, **kwargs: Any) -> None:
        quick = copy.copy(settings)
        quick.networking = copy.copy(settings.networking)
        quick.networking.error_backoffs = ()
        await observer(settings=quick, **kwargs)

    return observe


async def skip_refused_namespace_scan(client: KubeClient, namespaces: Sequence[str]) -> None:
    """Before kopf starts: no ~54 s stall when the namespaces are names we cannot list."""
    if not exact_names(namespaces) or await may_list_namespaces(client):
        return
    if not patch_namespace_observer(_without_backoff):
        return  # kopf's own backoff: the start-up warning said so
    log.info(
        "namespaces %s: listing Namespaces is not allowed (RBAC), so they are watched as named",
        ", ".join(namespaces),
    )
