"""The images (images/operator-runner/Dockerfile, ./Dockerfile), built and run with no Docker
engine and no registry.

`hack/image.sh` builds them with buildah on a debootstrap image (all cached outside the repo by
content hash: the first build on a machine takes a few minutes, later ones none): the base image,
operator-sdk's ansible-operator image in operator-runner's shape, with no operator of its own;
the seeds' operators FROM it; and tests/integration/sdk-operator and ubi-operator FROM it, whose
Dockerfiles were written for operator-sdk's UBI image (dnf, yum, microdnf as root, pip, an
inventory naming /usr/bin/python3, a profiler ansible.cfg, their requirements.yml installed by
ansible-galaxy as uid 1001 from a tarball and a git repository of the tests' own making: Galaxy
is unreachable here).
`hack/image.sh run` runs an image's own entrypoint (/tini -> /usr/local/bin/ansible-operator)
from the image's root filesystem, mounted read-only, with a tmpfs on /tmp, as the image's user,
in its own PID namespace, on the host's network, against the test cluster. The CRs must
converge, and the process must be uid 1001 without privileges and leave the image's filesystem
untouched.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from .conftest import Cluster
from .kit import condition, temporary_namespace, wait_for
from .kit.images import (
    CACHE,
    ENTRYPOINT,
    IMAGE_SH,
    SDK_OPERATOR,
    base_image,
    image_sh,
    in_image,
    sdk_operator_image,
    seeds_image,
    ubi_operator_image,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "config" / "samples"
ECHO = ("app.my.domain", "v1", "echoes", "echo-sample")
FLASK = ("swallowlab.com", "v1alpha1", "echoflasks", "example-echoflask")
GREETING = ("demo.sdk.example.com", "v1alpha1", "greetings", "greeting-sample")


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("building and running the images needs root (debootstrap, chroot, namespaces)")


@pytest.fixture(scope="module")
def base() -> str:
    _needs_root()
    return base_image()


@pytest.fixture(scope="module")
def image() -> str:
    """The seeds' image."""
    _needs_root()
    return seeds_image()


@pytest.fixture(scope="module")
def sdk_image() -> str:
    _needs_root()
    return sdk_operator_image()


@pytest.fixture(scope="module")
def ubi_image() -> str:
    _needs_root()
    return ubi_operator_image()


def config_of(image: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(image_sh("inspect", env={"IMAGE": image}))["OCIv1"][
        "config"
    ]
    return config


def rootfs_of(image: str) -> Path:
    return Path(image_sh("rootfs", env={"IMAGE": image}))


def resolve_in(rootfs: Path, path: str) -> Path:
    """`path` inside the image, its symbolic links followed as the image sees them."""
    here = rootfs / path.lstrip("/")
    for _ in range(20):
        if not here.is_symlink():
            return here
        target = os.readlink(here)
        here = rootfs / target.lstrip("/") if target.startswith("/") else here.parent / target
    raise AssertionError(f"{path}: too many symbolic links")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the task ended meanwhile
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    todo, seen = children(pid), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children(p)
    return seen


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def mounts(pid: int) -> dict[str, tuple[str, str]]:
    """mount point -> (filesystem type, mount options), as the process sees them."""
    found = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        found[fields[4]] = (fields[sep + 1], fields[5])
    return found


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under root -> (mode, size, mtime): what a write would change."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            state[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return state


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except OSError as err:
        return 0, str(err)


def converged(api: client.ApiClient, what: tuple[str, str, str, str], ns: str) -> Any:
    group, version, plural, name = what
    try:
        obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
            group, version, ns, plural, name
        )
    except client.exceptions.ApiException as err:
        if err.status == 404:
            return None
        raise
    ok = condition(obj, "Successful")
    if (
        ok
        and ok["status"] == "True"
        and ok.get("observedGeneration") == obj["metadata"]["generation"]
    ):
        return obj
    return None


def owned_by(obj: Any, owner: dict[str, Any]) -> bool:
    return any(r.uid == owner["metadata"]["uid"] for r in obj.metadata.owner_references or [])


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    with temporary_namespace(cluster, "ort-image") as name:
        yield name


def install_crds(cluster: Cluster, path: Path, names: tuple[str, ...]) -> None:
    kustomized = (path / "kustomization.yaml").is_file()
    cluster.kubectl("apply", "-k" if kustomized else "-f", str(path))
    for crd in names:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")


def test_base_image_is_operator_sdks_shape_with_no_operator(base: str) -> None:
    config = config_of(base)
    assert config["User"] == "1001"
    assert config["Entrypoint"] == ENTRYPOINT
    assert config["WorkingDir"] == "/opt/ansible"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["HOME"] == "/opt/ansible"
    assert (env["USER_NAME"], env["USER_UID"]) == ("ansible", "1001")
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert env["ANSIBLE_LOCAL_TEMP"].startswith("/tmp/")  # a read-only root filesystem works
    rootfs = rootfs_of(base)
    # No operator of its own: HOME holds nothing but ~/.ansible.
    assert sorted(p.name for p in (rootfs / "opt/ansible").iterdir()) == [".ansible"]
    for path in ("opt/ansible", "opt/ansible/.ansible", "opt/ansible/.ansible/tmp"):
        st = (rootfs / path).stat()
        assert (st.st_uid, st.st_gid) == (1001, 0), path
        assert st.st_mode & 0o770 == 0o770, path  # ug+rwx: any uid of group 0 (OpenShift)
    # Ansible's temp files under /tmp, there for any uid (a derived image's RUN leaves its own).
    for path in ("tmp/.ansible", "tmp/.ansible/tmp"):
        assert stat.S_IMODE((rootfs / path).stat().st_mode) == 0o1777, path
    passwd = (rootfs / "etc/passwd").read_text().splitlines()
    assert [line.split(":")[5] for line in passwd if line.split(":")[2] == "1001"] == [
        "/opt/ansible"
    ]
    # /tini and /usr/local/bin/ansible-operator, where operator-sdk's image has them.
    for program in ("/tini", "/usr/local/bin/ansible-operator", "/usr/bin/curl"):
        target = resolve_in(rootfs, program)
        assert target.is_file() and os.access(target, os.X_OK), program
    assert (
        os.readlink(rootfs / "usr/local/bin/ansible-operator") == "/opt/venv/bin/ansible-operator"
    )
    site = next((rootfs / "opt/venv/lib").glob("python3.*/site-packages"))
    assert (site / "ansible_collections/kubernetes/core").is_dir()
    assert (site / "runner/ansible/collections/ansible_collections/operator_sdk/util").is_dir()
    # No build tools, no pip cache, no apt lists left behind.
    assert not list((rootfs / "usr/bin").glob("gcc*"))
    assert not (rootfs / "root/.cache/pip").exists()
    assert not any((rootfs / "var/lib/apt/lists").glob("*Packages*"))


# operator-sdk's /etc/ansible (ansible-operator-plugins' images/ansible-operator/Dockerfile)
SDK_ANSIBLE_CFG = (
    "[defaults]\nroles_path = /opt/ansible/roles\nlibrary = /usr/share/ansible/openshift\n"
)
SDK_HOSTS = "localhost ansible_connection=local\n"


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    )
    return proc.stdout


def test_base_image_has_operator_sdks_etc_ansible_and_every_python_name(base: str) -> None:
    """What a Dockerfile or an inventory written for operator-sdk's image names: the Python that
    runs Ansible, with its packages, as python3, pip and pip3 on PATH and as /usr/bin/python3 and
    /usr/local/bin/python3; `pip install` as uid 1001 goes to ~/.local, which every run sees;
    /etc/ansible/ansible.cfg (read by Ansible) and /etc/ansible/hosts; dnf, yum and microdnf."""
    rootfs = rootfs_of(base)
    assert (rootfs / "etc/ansible/ansible.cfg").read_text() == SDK_ANSIBLE_CFG
    assert (rootfs / "etc/ansible/hosts").read_text() == SDK_HOSTS
    probe = "import sys, ansible, ansible_runner, kubernetes, yaml; print(sys.version_info[:2])"
    versions = {ok(in_image(base, python, "-c", probe)) for python in
                ("python3", "/usr/bin/python3", "/usr/local/bin/python3")}  # fmt: skip
    assert len(versions) == 1, versions
    for pip in ("pip", "pip3"):
        assert "/opt/venv/lib/python3" in ok(in_image(base, pip, "--version")), pip
    user_site = ok(
        in_image(
            base,
            "python3",
            "-c",
            "import site; print(site.ENABLE_USER_SITE, site.getusersitepackages())",
        )
    )
    assert user_site.split()[0] == "True", user_site
    assert user_site.split()[1].startswith("/opt/ansible/.local/lib/python3"), user_site
    config = ok(in_image(base, "ansible-config", "dump", "--only-changed"))
    assert "DEFAULT_ROLES_PATH(/etc/ansible/ansible.cfg) = ['/opt/ansible/roles']" in config
    for tool in ("dnf", "yum", "microdnf"):
        link = rootfs / "usr/local/bin" / tool
        assert os.readlink(link) == "/usr/local/lib/operator-runner/dnf/dnf.py", tool
        assert ok(in_image(base, tool, "--version")).startswith(f"{tool}: "), tool
    refused = in_image(base, "yum", "install", "-y", "git")  # as uid 1001, as on UBI
    assert refused.returncode == 1 and "superuser privileges" in refused.stderr


def test_dnf_and_yum_in_the_base_do_nothing_for_what_is_missing_and_name_the_apt_package(
    base: str,
) -> None:
    """As root (a Dockerfile's USER root), with apt's real package lists: removing what is not
    installed succeeds doing nothing; a RHEL name Debian lacks stops with the apt package to use
    instead; a RHEL name that differs is installed under Debian's."""
    removed = in_image(base, "yum", "remove", "-y", "subscription-manager",
                       "python3-subscription-manager-rhsm", user="0:0")  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert "No match for argument: subscription-manager (not installed)" in removed.stderr
    script = (
        "dnf install -y java-11-openjdk-headless; echo java=$?; "
        "microdnf install -y --nodocs procps-ng && ps --version"
    )
    proc = in_image(base, "sh", "-c", script, user="0:0", network=True)
    assert "java=1" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert (
        "dnf: error: java-11-openjdk-headless: Debian has no Java 11 in bookworm or trixie; "
        in proc.stderr
    )
    assert "RUN apt-get install -y openjdk-17-jre-headless" in proc.stderr
    assert (
        "microdnf: apt-get -q -y" in proc.stderr
        and " install --no-install-recommends procps" in proc.stderr
    )
    assert proc.returncode == 0 and "procps-ng" in proc.stdout, proc.stderr[-3000:]


def test_ubi_operator_image_is_what_its_ubi_dockerfile_asks(ubi_image: str) -> None:
    """tests/integration/ubi-operator/Dockerfile, written for operator-sdk's UBI image, built FROM
    the base with only FROM changed: yum update and clean, git and jq installed, jmespath in the
    Python that runs Ansible (and in /usr/local/bin/python3, which its inventory names),
    ansible.posix installed by ansible-galaxy from a git repository, the profiler's ansible.cfg,
    its own ENTRYPOINT."""
    config = config_of(ubi_image)
    assert config["Entrypoint"] == [*ENTRYPOINT, "--reconcile-period=0s"]
    assert config["User"] == "1001"
    rootfs = rootfs_of(ubi_image)
    for program in ("usr/bin/git", "usr/bin/jq"):
        assert (rootfs / program).is_file(), program
    assert not any((rootfs / "var/lib/apt/lists").glob("*Packages*"))  # yum clean all
    profiler = (rootfs / "opt/ansible/ansible-profiler.cfg").read_text()
    assert profiler == SDK_ANSIBLE_CFG + "callbacks_enabled = profile_tasks\n"
    posix = rootfs / "opt/ansible/.ansible/collections/ansible_collections/ansible/posix"
    manifest = json.loads((posix / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == "1.6.2"
    assert posix.stat().st_uid == 1001
    for python in ("python3", "/usr/local/bin/python3"):
        ok(in_image(ubi_image, python, "-c", "import jmespath, kubernetes"))
    for watches in ("watches-k8s.yaml", "watches-os.yaml"):
        assert (rootfs / "opt/ansible" / watches).is_file()
    assert not (rootfs / "opt/ansible/watches.yaml").exists()  # picked with --watches-file


def image_line() -> str:
    """The ansible-core line the images are built for: ANSIBLE_CORE (make exports it), else the
    default line, as hack/image.sh picks it."""
    return (
        os.environ.get("ANSIBLE_CORE")
        or subprocess.run(
            [str(REPO / "hack" / "lines.sh"), "default"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )


def test_base_image_has_the_ansible_core_line_it_is_built_for(base: str, image: str) -> None:
    """ANSIBLE_CORE, the build argument: the line's ansible-core and kubernetes.core (from its
    `ansible` release), on a Python the line runs on; the line in the images' names and label."""
    line = image_line()
    lines_sh = REPO / "hack" / "lines.sh"
    assert base.rsplit(":", 1)[1].startswith(f"{line}-"), base
    assert image.rsplit(":", 1)[1].startswith(f"{line}-"), image
    assert config_of(base)["Labels"]["io.github.operator-runner.ansible-core"] == line
    rootfs = rootfs_of(base)
    site = next((rootfs / "opt/venv/lib").glob("python3.*/site-packages"))
    python = site.parent.name.removeprefix("python")
    pythons = subprocess.run(
        [str(lines_sh), "pythons", line], capture_output=True, text=True, check=True
    ).stdout.split()
    assert python in pythons, f"Python {python} in the image; ansible-core {line} runs on {pythons}"
    (dist,) = site.glob("ansible_core-*.dist-info")
    assert dist.name.removeprefix("ansible_core-").startswith(f"{line}."), dist.name
    manifest = json.loads((site / "ansible_collections/kubernetes/core/MANIFEST.json").read_text())
    spec = importlib.util.spec_from_file_location(
        "install_collections", REPO / "hack" / "install_collections.py"
    )
    assert spec and spec.loader
    installer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installer)
    assert manifest["collection_info"]["version"] == installer.ANSIBLE[line][2]


def test_seeds_image_is_built_from_the_base_as_a_users_would_be(base: str, image: str) -> None:
    config = config_of(image)
    assert config["Entrypoint"] == ENTRYPOINT and config["User"] == "1001"
    rootfs = rootfs_of(image)
    for path in ("watches.yaml", "requirements.yml", "roles/echo", "roles/echoflask", "playbooks"):
        assert (rootfs / "opt/ansible" / path).exists(), path
    # FROM the base: the base's layers are the seeds' image's first ones.
    layers = json.loads(image_sh("inspect", env={"IMAGE": image}))["OCIv1"]["rootfs"]["diff_ids"]
    base_layers = json.loads(image_sh("inspect", env={"IMAGE": base}))["OCIv1"]["rootfs"][
        "diff_ids"
    ]
    assert layers[: len(base_layers)] == base_layers and len(layers) > len(base_layers)


@contextlib.contextmanager
def running(
    cluster: Cluster, image: str, namespace: str, log_path: Path, *args: str
) -> Iterator[tuple[subprocess.Popen[bytes], Callable[[], int]]]:
    """`hack/image.sh run IMAGE ARGS` (the image's entrypoint, read-only root, uid 1001) watching
    `namespace`; yields the process and a function that finds the operator's PID in it. Stopped
    with SIGTERM afterwards: it must exit 0 and not say "Read-only file system"."""
    health, metrics = free_port(), free_port()
    env = {
        **os.environ,
        "IMAGE": image,
        "KUBECONFIG": str(cluster.kubeconfig),
        "WATCH_NAMESPACE": namespace,
    }
    argv = [
        f"--health-probe-bind-address=127.0.0.1:{health}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        "--role-metrics-bind-address=127.0.0.1:0",  # not 5050: operators run side by side
        # the seeds' webhooks: on a free port, under configurations of their own
        "--webhook-bind-address=127.0.0.1:0",
        f"--webhook-configuration-name=image-{uuid.uuid4().hex[:8]}",
        "--log-format=json",
        *args,
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(IMAGE_SH), "run", "--", *argv], stdout=log, stderr=subprocess.STDOUT, env=env
        )

    def operator_pid() -> int:
        def find() -> int | None:
            for pid in descendants(proc.pid):
                try:
                    argv = cmdline(pid)
                except OSError:
                    continue
                if (
                    len(argv) > 2
                    and argv[1] == "/usr/local/bin/ansible-operator"
                    and argv[2] == "run"
                ):
                    return pid
            return None

        return wait_for(find, timeout=120, what="the operator process in the image")

    try:
        yield proc, operator_pid
        assert http_get(health, "/healthz")[0] == 200
        assert http_get(health, "/readyz")[0] == 200
        code, text = http_get(metrics, "/metrics")
        assert code == 200 and "# TYPE" in text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=90)
    log_text = log_path.read_text(errors="replace")
    assert rc == 0, log_text[-4000:]
    assert "Read-only file system" not in log_text


def test_seeds_image_converges_the_samples_as_uid_1001_on_a_read_only_root(
    cluster: Cluster, image: str, namespace: str, tmp_path: Path
) -> None:
    install_crds(cluster, REPO / "crds", ("echoes.app.my.domain", "echoflasks.swallowlab.com"))
    rootfs = rootfs_of(image)
    before = tree(rootfs)
    api = cluster.api_client()
    with running(cluster, image, namespace, tmp_path / "image.log") as (_, operator_pid):
        pid = operator_pid()
        cluster.kubectl("apply", "-n", namespace, "-k", str(SAMPLES))
        echo = wait_for(
            lambda: converged(api, ECHO, namespace), timeout=180, what="Echo Successful"
        )
        flask = wait_for(
            lambda: converged(api, FLASK, namespace), timeout=180, what="EchoFlask Successful"
        )
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        assert owned_by(core.read_namespaced_pod("echo-sample", namespace), echo)
        deployment = apps.read_namespaced_deployment("example-echoflask-deployment", namespace)
        assert owned_by(deployment, flask)
        assert owned_by(core.read_namespaced_service("example-echoflask-svc", namespace), flask)

        # The image's Python and operator-runner under operator-sdk's program name, as uid
        # 1001, no privileges, in HOME.
        argv = cmdline(pid)
        assert argv[:3] == ["/opt/venv/bin/python3", "/usr/local/bin/ansible-operator", "run"]
        assert "--watches-file=./watches.yaml" in argv
        assert os.readlink(f"/proc/{pid}/cwd").endswith("/opt/ansible")
        status = proc_status(pid)
        assert status["Uid"].split() == ["1001"] * 4
        assert status["Gid"].split() == ["0"] * 4
        assert status["Groups"] == ""
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        assert status["NoNewPrivs"] == "1"
        # /tini is PID 1 of the container's PID namespace, and the operator's parent.
        tini = int(status["PPid"])
        assert cmdline(tini)[:2] == ["/tini", "--"]
        assert proc_status(tini)["NSpid"].split()[-1] == "1"
        assert proc_status(tini)["Uid"].split() == ["1001"] * 4
        # Read-only root; /tmp is the only writable place, and the runner writes there.
        seen = mounts(pid)
        assert "ro" in seen["/"][1].split(","), seen["/"]
        assert seen["/tmp"][0] == "tmpfs" and "rw" in seen["/tmp"][1].split(",")
        assert any(Path(f"/proc/{pid}/root/tmp").iterdir())
    assert tree(rootfs) == before, "the operator wrote to the image's filesystem"


def test_collections_installed_by_ansible_galaxy_in_a_derived_image_are_used(
    cluster: Cluster, sdk_image: str, namespace: str, tmp_path: Path
) -> None:
    """operator-sdk's scaffolded Dockerfile, FROM the base image: `ansible-galaxy collection
    install -r requirements.yml` ran as uid 1001 into ${HOME}/.ansible/collections, and the
    Greeting role's run calls the collection's module (on a read-only root filesystem)."""
    rootfs = rootfs_of(sdk_image)
    installed = rootfs / "opt/ansible/.ansible/collections/ansible_collections/sdktest/tools"
    assert (installed / "MANIFEST.json").is_file()
    assert installed.stat().st_uid == 1001, pwd.getpwuid(installed.stat().st_uid).pw_name
    assert (
        stat.S_IMODE(installed.stat().st_mode) & 0o770 == 0o770
    )  # chmod -R ug+rwx ${HOME}/.ansible
    assert (rootfs / "opt/ansible/watches.yaml").is_file()
    assert (rootfs / "opt/ansible/playbooks/podexec.yml").is_file()
    # USER root; dnf update --security --bugfix -y && dnf install -y openssl; USER 1001
    assert (rootfs / "usr/bin/openssl").is_file()
    assert config_of(sdk_image)["User"] == "1001"
    assert "ANSIBLE_INVENTORY=/opt/ansible/inventory" in config_of(sdk_image)["Env"]
    # ansible-galaxy's RUN left /tmp/.ansible/tmp usable by any uid, and no trace of the mount.
    assert stat.S_IMODE((rootfs / "tmp/.ansible/tmp").stat().st_mode) == 0o1777
    assert not any((rootfs / "mnt").iterdir())
    install_crds(
        cluster,
        SDK_OPERATOR / "config" / "crd",
        ("greetings.demo.sdk.example.com", "podexecs.demo.sdk.example.com"),
    )
    before = tree(rootfs)
    api = cluster.api_client()
    with running(cluster, sdk_image, namespace, tmp_path / "sdk.log") as (_, operator_pid):
        operator_pid()
        cluster.kubectl(
            "apply",
            "-n",
            namespace,
            "-f",
            str(SDK_OPERATOR / "config/samples/demo_v1alpha1_greeting.yaml"),
        )
        greeting = wait_for(
            lambda: converged(api, GREETING, namespace), timeout=180, what="Greeting Successful"
        )
        assert greeting["status"]["message"] == "Hello, operator-sdk!"
        assert greeting["status"]["collectionVersion"] == "1.0.0"
        # the modules ran with the Python its inventory names; openssl made the key
        assert greeting["status"]["moduleInterpreter"] == "/usr/bin/python3"
        key = client.CoreV1Api(api).read_namespaced_secret("greeting-sample-key", namespace)
        assert len(base64.b64decode(base64.b64decode(key.data["key"]))) == 32
        config_map = client.CoreV1Api(api).read_namespaced_config_map(
            "greeting-sample-greeting", namespace
        )
        assert config_map.data == {"message": "Hello, operator-sdk!"}
        assert owned_by(config_map, greeting)
    assert tree(rootfs) == before, "the operator wrote to the image's filesystem"


def galaxy_resolves() -> bool:
    try:
        socket.getaddrinfo("galaxy.ansible.com", 443)
    except OSError:
        return False
    return True


def test_a_requirements_yml_naming_galaxy_fails_saying_galaxy_is_out_of_reach(
    base: str, tmp_path: Path
) -> None:
    """operator-sdk's scaffolded requirements.yml names its collections on Galaxy. Where Galaxy
    cannot be reached the build fails at ansible-galaxy, as it would on operator-sdk's image,
    and hack/image.sh says plainly why and what to do instead."""
    if galaxy_resolves():
        pytest.skip("galaxy.ansible.com resolves here: the build would install from it")
    project = tmp_path / "galaxy-operator"
    project.mkdir()
    (project / "Dockerfile").write_text(
        "FROM operator-runner:latest\n"
        "COPY requirements.yml ${HOME}/requirements.yml\n"
        "RUN ansible-galaxy collection install -r ${HOME}/requirements.yml \\\n"
        " && chmod -R ug+rwx ${HOME}/.ansible\n"
    )
    (project / "requirements.yml").write_text(
        '---\ncollections:\n  - name: community.general\n    version: "9.0.0"\n'
    )
    proc = subprocess.run(
        [str(IMAGE_SH), "build-project", str(project)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "ERROR! Unknown error when attempting to call Galaxy" in proc.stderr, proc.stderr
    # hack/image.sh's own lines ("image: ..."), read as one text: the hint is wrapped.
    said = " ".join(
        line.removeprefix("image: ")
        for line in proc.stderr.splitlines()
        if line.startswith("image: ")
    )
    assert "could not reach Ansible Galaxy (galaxy.ansible.com)" in said, proc.stderr
    assert "(type: file, git or dir in requirements.yml" in said, proc.stderr


def buildah(*args: str) -> str:
    """buildah on hack/image.sh's storage (the cache every checkout of this machine shares)."""
    image_cache = CACHE / "image"
    return subprocess.run(
        [
            "buildah",
            "--root",
            str(image_cache / "storage"),
            "--runroot",
            str(image_cache / "run"),
            "--storage-driver",
            "vfs",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_prune_keeps_what_was_used_lately(base: str) -> None:
    """Two checkouts (or a test run beside a build) share the images' cache: after a build,
    `hack/image.sh prune` keeps, of each repository and line, the 2 images used most recently
    and any other used in the last 120 minutes (an image made and not used since: when it was
    made), so that it never takes one another run may still use; older ones go, and names
    without a line (from before the lines) once idle."""
    repo = f"localhost/ort-prune-{os.getpid()}"
    label = "io.github.operator-runner.content-hash=test"
    old, new = f"{repo}:old", f"{repo}:new"
    for name, made in ((old, time.time() - 400 * 60), (new, time.time())):
        ctr = buildah("from", "--quiet", "scratch")
        buildah("config", "--label", label, ctr)
        buildah("commit", "--quiet", "--rm", "--timestamp", str(int(made)), ctr, name)
    # tag -> (image, minutes since its last recorded use, or None: no record)
    tags = {
        "2.18-a": (old, 1),
        "2.18-b": (old, 30),
        "2.18-c": (old, 90),
        "2.18-d": (old, 180),
        "2.18-e": (old, 300),
        "2.18-0": (new, None),  # another checkout's fresh build, with no record of use
        "2.21-f": (old, 300),
        "1": (old, 300),  # named before the lines
        "2": (new, None),
    }
    names = {tag: f"{repo}:{tag[:-1]}{tag[-1] * 16}" for tag in tags}  # REPO:[LINE-]HASH
    used = CACHE / "image" / "used"
    used.mkdir(parents=True, exist_ok=True)

    def record(name: str) -> Path:
        return used / name.removeprefix("localhost/").replace("/", "_").replace(":", "_")

    try:
        for tag, (image, minutes) in tags.items():
            buildah("tag", image, names[tag])
            if minutes is not None:
                record(names[tag]).touch()
                when = time.time() - minutes * 60
                os.utime(record(names[tag]), (when, when))
        image_sh("prune")
        left = set(buildah("images", "--format", "{{.Name}}:{{.Tag}}").split())
        kept = {"2.18-a", "2.18-b", "2.18-c", "2.18-0", "2.21-f", "2"}
        assert left & set(names.values()) == {names[tag] for tag in kept}
        assert not record(names["2.18-d"]).exists()
        assert record(names["2.18-a"]).exists()
    finally:
        for name in [*names.values(), old, new]:
            with contextlib.suppress(subprocess.CalledProcessError):
                buildah("rmi", name)
