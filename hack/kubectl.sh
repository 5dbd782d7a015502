#!/usr/bin/env bash
# kubectl for the Makefile and scripts: ours (the local cluster's version, built by
# build-binaries.sh) when it is built, else the kubectl on PATH, else ours, built now.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
ours=$CACHE_ROOT/bin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION/kubectl

if [ -x "$ours" ]; then
  exec "$ours" "$@"
elif command -v kubectl >/dev/null 2>&1; then
  exec kubectl "$@"
else
  exec "$("$here/cluster.sh" bin-dir | tail -n 1)/kubectl" "$@"
fi
