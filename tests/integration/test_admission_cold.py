"""Never refuse what we cannot judge yet: an operator started in a virtualenv with nothing
compiled (every module the operator, its warm executor and their jobs import is compiled from
source first: PYTHONPYCACHEPREFIX on an empty folder) takes CRs applied from its very first
second. Each apply is created before its webhooks are registered, or judged by its roles once
they are (the mutate role's label, the validate role's message); none is refused because the
operator was not ready ("did not finish in", a refused connection, failurePolicy).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from .conftest import Cluster
from .kit import Env, crd, install_crd, temporary_namespace
from .test_admission import GROUP, KINDS, WATCHES, apply, cr, refusal

pytestmark = [pytest.mark.integration, pytest.mark.lines]

#: Applies keep coming this long after the first one judged by the roles.
AFTER_REGISTERED = 3.0


def test_crs_applied_from_the_first_second_are_never_refused_for_want_of_readiness(
    cluster: Cluster, tmp_path: Path
) -> None:
    cache = tmp_path / "pycache"
    cache.mkdir()
    # compiled on first import, and written there, as in a virtualenv pip installed with
    # --no-compile (an empty PYTHONDONTWRITEBYTECODE lets a test machine's setting go)
    cold = {"PYTHONPYCACHEPREFIX": str(cache), "PYTHONDONTWRITEBYTECODE": ""}
    with cluster.api_client() as api, temporary_namespace(cluster, "cold") as namespace:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = Env(cluster, api, namespace, tmp_path, group=GROUP, watches=WATCHES)
        try:
            started = time.monotonic()
            op = environment.start(env=cold)
            outcomes: list[tuple[float, str, str]] = []  # (seconds after start, name, outcome)
            judged_at: float | None = None
            deadline = started + 240
            while time.monotonic() < deadline:
                name = f"c{len(outcomes)}-{uuid.uuid4().hex[:4]}"
                spec = {"message": "forbidden" if len(outcomes) % 2 else "hello"}
                done = apply(cluster, namespace, cr("Admitted", name, spec))
                at = time.monotonic() - started
                if done.returncode != 0:
                    assert refusal("Admitted") in done.stderr, (at, done.stderr, op.log_text())
                    outcomes.append((at, name, "refused by the role"))
                else:
                    labels = (environment.get("Admitted", name) or {}).get("metadata", {})
                    mutated = (labels.get("labels") or {}).get("mutated-by") == "admit-label"
                    outcomes.append((at, name, "mutated" if mutated else "before registration"))
                if judged_at is None and outcomes[-1][2] != "before registration":
                    judged_at = at
                if judged_at is not None and at - judged_at > AFTER_REGISTERED:
                    break
            print("applies after start:", [(round(at, 1), what) for at, _, what in outcomes])
            assert judged_at is not None, f"no apply judged by the roles:\n{op.log_text()[-3000:]}"
            judged = [what for at, _, what in outcomes if at >= judged_at]
            assert "before registration" not in judged, outcomes  # registered for good
            assert {"mutated", "refused by the role"} <= set(judged), outcomes
        finally:
            environment.stop()
