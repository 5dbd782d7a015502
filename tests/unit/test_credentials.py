"""Credentials without the kubernetes package: kubeconfig and in-cluster, on real files."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fake_api
import pytest
import yaml

from runner.kube.client import KubeClient, Request, get_lease
from runner.kube.clientconfig import in_cluster, load
from runner.kube.credentials import Credentials, CredentialsError
from runner.kube.kubeconfig import parse_kubeconfig


def kubeconfig(
    server: str = "https://k8s.example:6443",
    user: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    namespace: str | None = None,
    current: str | None = "ctx",
) -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "ctx", "context": context}],
    }
    if current:
        document["current-context"] = current
    return document


def write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_token_user_and_namespace(tmp_path: Path) -> None:
    path = write(tmp_path / "config", kubeconfig(user={"token": "abc"}, namespace="team"))
    got = load(str(path), environ={})
    assert got.server == "https://k8s.example:6443"
    assert got.authorization() == "Bearer abc"
    assert got.namespace == "team"
    assert got.context == "ctx"
    assert got.fallback is None and got.plugin is None
    assert "abc" not in repr(got)


def test_token_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first\n")
    path = write(tmp_path / "config", kubeconfig(user={"tokenFile": "token"}))  # relative
    got = load(str(path), environ={})
    assert got.token_file == str(tmp_path / "token")
    assert got.authorization() == "Bearer first"
    # The kubelet's rotation: a new file swapped in.
    (tmp_path / "token.new").write_text("second-token\n")
    os.replace(tmp_path / "token.new", tmp_path / "token")
    assert got.authorization() == "Bearer second-token"
    # Rewritten in place, same size: the mtime tells.
    (tmp_path / "token").write_text("third-token\n")
    os.utime(tmp_path / "token", ns=(0, 1_000_000_000))
    assert got.authorization() == "Bearer third-token"
    # Gone for a moment: the last token read is kept.
    (tmp_path / "token").unlink()
    assert got.authorization() == "Bearer third-token"


def test_token_wins_over_token_file_and_basic(tmp_path: Path) -> None:
    user = {"token": "t", "tokenFile": "/nonexistent", "username": "a", "password": "b"}
    got = load(str(write(tmp_path / "config", kubeconfig(user=user))), environ={})
    assert got.authorization() == "Bearer t"


def test_basic_auth(tmp_path: Path) -> None:
    user = {"username": "admin", "password": "s3cret"}
    got = load(str(write(tmp_path / "config", kubeconfig(user=user))), environ={})
    assert got.authorization() == "Basic " + b64(b"admin:s3cret")
    assert "s3cret" not in repr(got)


def test_no_user_is_anonymous(tmp_path: Path) -> None:
    document = kubeconfig()
    document["contexts"][0]["context"].pop("user")
    got = load(str(write(tmp_path / "config", document)), environ={})
    assert got.authorization() is None


def test_data_fields_become_private_files(tmp_path: Path, pki: fake_api.Pki) -> None:
    user = {"client-certificate-data": b64(pki.cert), "client-key-data": b64(pki.key)}
    cluster = {"certificate-authority-data": b64(pki.ca)}
    path = write(tmp_path / "config", kubeconfig(user=user, cluster=cluster))
    got = load(str(path), environ={})
    assert got.ca_file and got.cert_file and got.key_file
    for file, content in (
        (got.ca_file, pki.ca),
        (got.cert_file, pki.cert),
        (got.key_file, pki.key),
    ):
        assert Path(file).read_bytes() == content
        assert stat.S_IMODE(os.stat(file).st_mode) == 0o600
    assert Path(got.ca_file).parent == Path(got.cert_file).parent  # one directory
    assert stat.S_IMODE(os.stat(Path(got.ca_file).parent).st_mode) == 0o700
    context = got.ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert any(c["subject"] == ((("commonName", "test-ca"),),) for c in context.get_ca_certs())


def test_data_wins_over_path(tmp_path: Path, pki: fake_api.Pki) -> None:
    cluster = {"certificate-authority-data": b64(pki.ca), "certificate-authority": "/nope"}
    got = load(str(write(tmp_path / "config", kubeconfig(cluster=cluster))), environ={})
    assert got.ca_file and Path(got.ca_file).read_bytes() == pki.ca


def test_bad_base64_names_the_field(tmp_path: Path) -> None:
    cluster = {"certificate-authority-data": "not base64!"}
    path = write(tmp_path / "config", kubeconfig(cluster=cluster))
    with pytest.raises(CredentialsError, match="cluster 'c': certificate-authority-data"):
        load(str(path), environ={})


def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    cluster = {"insecure-skip-tls-verify": True}
    got = load(str(write(tmp_path / "config", kubeconfig(cluster=cluster))), environ={})
    assert got.insecure
    context = got.ssl_context()
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_relative_paths_resolve_against_the_file_that_names_them(tmp_path: Path) -> None:
    clusters = write(
        tmp_path / "a" / "clusters.yaml",
        {
            "clusters": [
                {
                    "name": "c",
                    "cluster": {"server": "https://x:1", "certificate-authority": "pki/ca.crt"},
                }
            ],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "ctx",
        },
    )
    users = write(
        tmp_path / "b" / "users.yaml",
        {
            "users": [
                {
                    "name": "u",
                    "user": {"client-certificate": "me.crt", "client-key": "/abs/me.key"},
                }
            ]
        },
    )
    environ = {"KUBECONFIG": f"{clusters}{os.pathsep}{users}"}
    got = load(None, environ=environ)
    assert got.ca_file == str(tmp_path / "a" / "pki" / "ca.crt")
    assert got.cert_file == str(tmp_path / "b" / "me.crt")
    assert got.key_file == "/abs/me.key"


def test_kubeconfig_merge_first_file_wins(tmp_path: Path) -> None:
    first = kubeconfig(server="https://first:1", user={"token": "first"}, current=None)
    second = kubeconfig(server="https://second:2", user={"token": "second"}, current="other")
    second["contexts"].append({"name": "other", "context": {"cluster": "c2", "user": "u"}})
    second["clusters"].append({"name": "c2", "cluster": {"server": "https://c2:3"}})
    third = kubeconfig(current="ctx")
    a = write(tmp_path / "a", first)
    b = write(tmp_path / "b", second)
    c = write(tmp_path / "c", third)
    missing = tmp_path / "missing"
    environ = {"KUBECONFIG": os.pathsep.join(["", str(missing), str(a), str(b), str(c)])}
    got = load(None, environ=environ)
    # current-context: the first file that sets one (b); its cluster c2 only b names;
    # its user u: from a, the first file naming it.
    assert got.context == "other"
    assert got.server == "https://c2:3"
    assert got.authorization() == "Bearer first"
    # An explicit context: cluster c is a's.
    assert load(None, environ=environ, context="ctx").server == "https://first:1"


def test_explicit_kubeconfig_wins_over_the_environment(tmp_path: Path) -> None:
    mine = write(tmp_path / "mine", kubeconfig(server="https://mine:1"))
    env = write(tmp_path / "env", kubeconfig(server="https://env:1"))
    got = load(str(mine), environ={"KUBECONFIG": str(env), "KUBERNETES_SERVICE_HOST": "x"})
    assert got.server == "https://mine:1"


def test_home_kubeconfig(tmp_path: Path) -> None:
    write(tmp_path / ".kube" / "config", kubeconfig(server="https://home:1"))
    assert load(None, environ={"HOME": str(tmp_path)}).server == "https://home:1"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (kubeconfig(current=None), r"no current-context is set"),
        (kubeconfig(current="nope"), r"context 'nope' not found \(contexts: ctx\)"),
        (kubeconfig(server=""), r"cluster 'c' of context 'ctx' has no server"),
    ],
)
def test_errors_name_file_and_what_is_missing(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    path = write(tmp_path / "config", document)
    with pytest.raises(CredentialsError, match=message) as err:
        load(str(path), environ={})
    assert str(path) in str(err.value)


def test_unknown_user_and_cluster(tmp_path: Path) -> None:
    document = kubeconfig()
    document["users"] = []
    with pytest.raises(CredentialsError, match=r"user 'u' of context 'ctx' not found"):
        load(str(write(tmp_path / "u", document)), environ={})
    document = kubeconfig()
    document["clusters"] = []
    with pytest.raises(CredentialsError, match=r"cluster 'c' of context 'ctx' not found"):
        load(str(write(tmp_path / "c", document)), environ={})


def test_no_kubeconfig_at_all(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="no such file"):
        load(str(tmp_path / "nope"), environ={})
    with pytest.raises(CredentialsError, match="none of these files exists"):
        load(None, environ={"KUBECONFIG": str(tmp_path / "nope")})
    with pytest.raises(CredentialsError, match="no credentials"):
        load(None, environ={"HOME": str(tmp_path)})
    (tmp_path / "list").write_text("- a\n")
    with pytest.raises(CredentialsError, match="not a kubeconfig"):
        load(str(tmp_path / "list"), environ={})


def service_account(tmp_path: Path, token: str = "sa-token") -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_text("ca")
    (sa / "namespace").write_text("operators\n")
    return sa


def test_in_cluster(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    got = load(None, environ=environ, service_account_dir=sa)
    assert got.server == "https://10.0.0.1:443"
    assert got.ca_file == str(sa / "ca.crt")
    assert got.namespace == "operators"
    assert got.authorization() == "Bearer sa-token"
    (sa / "token.new").write_text("rotated-token")
    os.replace(sa / "token.new", sa / "token")
    assert got.authorization() == "Bearer rotated-token"


def test_in_cluster_ipv6_and_errors(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    assert in_cluster(environ, sa).server == "https://[fd00::1]:6443"
    with pytest.raises(CredentialsError, match="KUBERNETES_SERVICE_PORT must be set"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, sa)
    (sa / "token").unlink()
    with pytest.raises(CredentialsError, match="no service-account token"):
        in_cluster(environ, sa)


def test_exec_user_falls_back_to_the_kubernetes_package(tmp_path: Path) -> None:
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec"},
    }
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "/bin/echo",
            "args": [json.dumps(credential)],
        }
    }
    path = write(tmp_path / "config", kubeconfig(user=user, namespace="ns"))
    got = load(str(path), environ={})
    assert got.plugin == "exec"
    assert got.fallback is not None
    assert got.server == "https://k8s.example:6443"
    assert got.namespace == "ns"
    assert got.authorization() == "Bearer from-exec"


def test_parse_is_pure_with_a_data_writer(tmp_path: Path) -> None:
    written: dict[str, bytes] = {}

    def writer(name: str, content: bytes) -> str:
        written[name] = content
        return f"/virtual/{name}"

    document = kubeconfig(cluster={"certificate-authority-data": b64(b"CA")})
    got = parse_kubeconfig([(tmp_path / "k", document)], write_data=writer)
    assert got.ca_file == "/virtual/c-certificate-authority"
    assert written == {"c-certificate-authority": b"CA"}
    plain = kubeconfig(server="http://localhost:8080", cluster={"certificate-authority": "x"})
    assert parse_kubeconfig([(tmp_path / "k", plain)]).ca_file is None


# --- the client sends them ------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[str]:
    with fake_api.serving() as url:
        yield url


def test_kube_client_sends_the_current_token(tmp_path: Path, server: str) -> None:
    (tmp_path / "token").write_text("one")

    async def go() -> None:
        client = KubeClient(Credentials(server=server + "/", token_file=str(tmp_path / "token")))
        try:
            request: Request = get_lease("ns", "name")
            assert await client.send(request) == {"kind": "Lease"}
            (tmp_path / "token.new").write_text("two-two")
            os.replace(tmp_path / "token.new", tmp_path / "token")
            await client.send(request)
        finally:
            await client.close()

    asyncio.run(go())
    assert [h["Authorization"] for h in fake_api.LeaseHandler.seen] == [
        "Bearer one",
        "Bearer two-two",
    ]
    assert fake_api.LeaseHandler.seen[0]["User-Agent"].startswith("operator-runner/")


def test_kopf_connection_info(tmp_path: Path) -> None:
    from runner.app.source.login import connection_info

    bearer = Credentials(server="https://x:1", token="t", ca_file="/ca", namespace="ns")
    info = connection_info(bearer)
    assert (info.server, info.scheme, info.token, info.ca_path) == (
        "https://x:1",
        "Bearer",
        "t",
        "/ca",
    )
    assert info.default_namespace == "ns" and info.username is None
    basic = connection_info(Credentials(server="https://x:1", username="u", password="p"))
    assert (basic.username, basic.password, basic.scheme, basic.token) == ("u", "p", None, None)
    cert = connection_info(
        Credentials(server="https://x:1", cert_file="/c", key_file="/k", insecure=True)
    )
    assert (cert.certificate_path, cert.private_key_path, cert.insecure) == ("/c", "/k", True)
    assert cert.token is None and cert.scheme is None


# --- a throwaway PKI ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki() -> fake_api.Pki:
    return fake_api.Pki()
