# The operator image: operator-runner, its pinned Python dependencies, the kubernetes.core
# collection, and this project's operators in operator-sdk's layout (/opt/ansible/watches.yaml,
# roles/, playbooks/).
#
#   docker build -t IMG .                      # or: make docker-build IMG=...
#   docker build --build-arg BASE_IMAGE=... .  # any Python 3.11-3.13 image (Debian-based: tini from apt)
#
# CI builds it without Docker or a registry: `hack/image.sh build` (buildah, on a base made
# with debootstrap). The image runs as uid 1001 with a read-only root filesystem: everything it
# writes (HOME, Ansible's temp files, ansible-runner's artifacts) goes to /tmp, so mount an
# emptyDir there (deploy/ does).
#
# Your own operator on top of it, as on operator-sdk's ansible-operator image:
#   FROM IMG
#   COPY watches.yaml ./
#   COPY roles/ roles/

ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with the pinned dependencies (copied whole into the final stage) ---
# Behind a TLS-intercepting proxy, hand pip your CA bundle as the build secret
# `ca-certificates` (docker build --secret id=ca-certificates,src=/etc/ssl/certs/ca-certificates.crt);
# it is mounted for the RUN steps that reach PyPI only and stays out of the image.
FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN python3 -c 'import sys; assert (3, 11) <= sys.version_info[:2] <= (3, 13), sys.version' \
 && python3 -m venv /opt/venv
WORKDIR /src
# Dependencies first: this layer stays cached while only the runner's code changes.
COPY pyproject.toml constraints.txt ./
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' > requirements.in \
 && /opt/venv/bin/pip install --no-cache-dir -c constraints.txt -r requirements.in
COPY hack/install_collections.py hack/
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && /opt/venv/bin/python hack/install_collections.py
COPY README.md ./
COPY runner/ runner/
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && /opt/venv/bin/pip install --no-cache-dir -c constraints.txt . \
 && /opt/venv/bin/operator-runner --version \
 && rm -rf /opt/venv/lib/python3*/site-packages/ansible_test /opt/venv/bin/ansible-test

# --- the image ---
FROM ${BASE_IMAGE}
# tini as PID 1 (reaps the ansible-playbook processes' orphans, forwards signals). From the
# base's package manager; Debian-based bases (the default, and CI's) have it in apt.
RUN set -eu; \
    if ! command -v tini >/dev/null 2>&1; then \
      if command -v apt-get >/dev/null 2>&1; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini; \
        apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log; \
      elif command -v apk >/dev/null 2>&1; then \
        apk add --no-cache tini; \
      elif command -v microdnf >/dev/null 2>&1; then \
        microdnf install -y tini && microdnf clean all; \
      elif command -v dnf >/dev/null 2>&1; then \
        dnf install -y tini && dnf clean all; \
      else \
        echo "Dockerfile: the base image has no tini and no apt-get, apk or dnf to install it" >&2; \
        exit 1; \
      fi; \
    fi; \
    tini --version; \
    if ! grep -q '^[^:]*:[^:]*:1001:' /etc/passwd; then \
      echo 'ansible:x:1001:0:operator-runner:/tmp:/usr/sbin/nologin' >> /etc/passwd; \
    fi
COPY --from=build /opt/venv /opt/venv
# Everything the process writes goes to /tmp (read-only root filesystem): HOME (Ansible's
# ~/.ansible), Ansible's temp files, ansible-runner's artifacts ($TMPDIR/operator-runner/<hash>).
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    TMPDIR=/tmp \
    ANSIBLE_LOCAL_TEMP=/tmp/.ansible/tmp \
    ANSIBLE_REMOTE_TEMP=/tmp/.ansible/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /opt/ansible
COPY watches.yaml ./
COPY roles/ roles/
COPY playbooks/ playbooks/
USER 1001
ENTRYPOINT ["tini", "--", "operator-runner", "run", "--watches-file=./watches.yaml"]
