"""controller-runtime's metrics filter: the reviews it asks for, its answers, its caches."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from fake_api import FakeApi, FakeClock

from runner.app.serving.metricsauth import MetricsAuth, bearer_token
from runner.app.serving.metricstls import cert_files, self_signed
from runner.kube import client as kube


def reviewing(tokens: dict[str, dict[str, Any]], allowed: set[str]) -> FakeApi:
    """The fake API, answering TokenReviews and SubjectAccessReviews as an API server does:
    `tokens` is token -> user info, `allowed` the usernames bound to metrics-reader."""
    api = FakeApi()

    def token_review(review: dict[str, Any]) -> dict[str, Any]:
        user = tokens.get(review["spec"]["token"])
        return {**review, "status": {"authenticated": True, "user": user} if user else {}}

    def access_review(review: dict[str, Any]) -> dict[str, Any]:
        spec = review["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {**review, "status": {"allowed": spec["user"] in allowed}}

    api.answer(kube.create_token_review("").path, token_review)
    api.answer(kube.create_subject_access_review({}).path, access_review)
    return api


def test_bearer_tokens_are_read_as_kubernetes_reads_them() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer abc") == "abc"
    for header in (None, "", "Bearer", "Basic abc", "Bearer a b"):
        assert bearer_token(header) is None


def test_401_403_200_and_the_caches() -> None:
    api = reviewing(
        tokens={"good": {"username": "scraper", "groups": ["g"]}, "other": {"username": "x"}},
        allowed={"scraper"},
    )
    clock = FakeClock(0.0)

    async def go() -> None:
        auth = MetricsAuth(api.client(), clock=clock)
        app = web.Application(middlewares=[auth.middleware])

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text="metrics")

        app.router.add_get("/metrics", metrics)
        async with TestClient(TestServer(app)) as http:

            async def status(token: str | None) -> int:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                return (await http.get("/metrics", headers=headers)).status

            assert await status(None) == 401
            assert api.requests == []  # no token: no review
            assert await status("bad") == 401
            assert await status("other") == 403
            assert await status("good") == 200
            sent = len(api.requests)
            assert await status("good") == 200 and len(api.requests) == sent  # cached
            clock.now += 61  # the token's answer expires after a minute, the decision not
            assert await status("good") == 200 and len(api.requests) == sent + 1
            clock.now += 31  # a denial is kept 30 s
            assert await status("other") == 403
            api.fail(status=403)  # "cannot create tokenreviews"
            clock.now += 400
            response = await http.get("/metrics", headers={"Authorization": "Bearer good"})
            assert response.status == 500

    asyncio.run(go())
    reviews = [r for r in api.requests if r.path.endswith("/subjectaccessreviews")]
    assert reviews[0].path == "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    spec = next(r.body["spec"] for r in reviews if r.body["spec"]["user"] == "scraper")
    assert spec["groups"] == ["g"]


def test_certificate_files_are_used_only_when_both_exist(tmp_path: Path) -> None:
    assert cert_files(str(tmp_path), "tls.crt", "tls.key") is None
    cert, key = self_signed()
    (tmp_path / "tls.crt").write_bytes(cert)
    assert cert_files(str(tmp_path), "tls.crt", "tls.key") is None
    (tmp_path / "tls.key").write_bytes(key)
    files = cert_files(str(tmp_path), "tls.crt", "tls.key")
    assert files is not None and files.cert == tmp_path / "tls.crt"
    assert b"BEGIN CERTIFICATE" in cert and b"PRIVATE KEY" in key
