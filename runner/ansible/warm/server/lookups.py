"""Lookup plugins a playbook job loads before its CLI runs ($OPERATOR_RUNNER_WARM_LOOKUPS), so
that its task workers inherit them: a quick run started ahead (runner/ansible/quickrun.py) pays
for them before its request comes. Only in the job: the server, which module jobs fork from
too, imports no collection's code. Public names only (the plugin loader, kubernetes.core's
client); a failure only costs speed: the task loads the plugin as usual."""

from __future__ import annotations

import os

from runner.ansible.warm.jobenv import WARM_LOOKUPS_ENV


def warm_lookups() -> None:
    """Load the lookup plugins $OPERATOR_RUNNER_WARM_LOOKUPS names (comma-separated FQCNs);
    for kubernetes.core.k8s also its API client (the lookup's cache, in the workers too)."""
    names = [n.strip() for n in os.environ.get(WARM_LOOKUPS_ENV, "").split(",") if n.strip()]
    if not names:
        return
    try:
        from ansible.plugins.loader import lookup_loader

        for name in names:
            lookup_loader.get(name, class_only=True)
        if "kubernetes.core.k8s" in names and os.environ.get("K8S_AUTH_KUBECONFIG"):
            from ansible_collections.kubernetes.core.plugins.module_utils.k8s import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
                client,
            )

            api = client.get_api_client()  # its client cache: the lookup's, in the workers too
            rest = getattr(getattr(api.client, "client", None), "rest_client", None)
            pool = getattr(rest, "pool_manager", None)
            if pool is not None:  # no connection of the warm-up shared with the workers
                pool.clear()
    except Exception:  # only costs speed: the task loads it as usual
        pass
