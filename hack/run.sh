#!/usr/bin/env bash
# `make run`: the operator in the foreground with ./watches.yaml, against the cluster of the
# current kubeconfig ($KUBECONFIG, else ~/.kube/config), as Kubebuilder's `make run`.
# When no cluster answers there, the local cluster ($CLUSTER_NAME) is brought up first, the CRDs
# are installed and the seeds' samples applied to the default namespace; then the operator runs
# against it. Arguments go to `operator-runner run`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
kubectl=$here/kubectl.sh
where=${KUBECONFIG:-~/.kube/config}

# A kubectl first: ours when built, else one on PATH, else ours, built now (with its progress
# shown: the first build of the local control plane takes minutes).
"$kubectl" version --client >/dev/null

if "$kubectl" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
  echo "run: using the cluster of $where (context $("$kubectl" config current-context 2>/dev/null || echo none))" >&2
else
  echo "run: no cluster answers at $where; bringing up the local cluster '${CLUSTER_NAME:-operator-runner}' (hack/cluster.sh up) ..." >&2
  "$here/cluster.sh" up
  KUBECONFIG=$("$here/cluster.sh" kubeconfig)
  export KUBECONFIG
  "$kubectl" apply -f "$repo/crds/"
  "$kubectl" wait --for=condition=Established --timeout=60s -f "$repo/crds/"
  "$kubectl" apply -n default -k "$repo/config/samples/"
  cat >&2 <<MSG
run: the local cluster is up, the CRDs are installed and the samples applied (namespace default).
  export KUBECONFIG=$KUBECONFIG   # to use it from another shell
  $kubectl get echo,echoflask,pods
MSG
fi
cd "$repo"
# As operator-sdk's scaffolded manager.yaml (and deploy/) set it: role watches gather no facts
# unless you ask for them (ANSIBLE_GATHERING=implicit make run); the seeds' roles read none.
export ANSIBLE_GATHERING=${ANSIBLE_GATHERING:-explicit}
exec "$repo/${VENV:-.venv}/bin/operator-runner" run --watches-file ./watches.yaml --watch-roles "$@"
