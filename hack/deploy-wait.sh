#!/usr/bin/env bash
# hack/deploy-wait.sh SAMPLES_DIR < MANIFESTS: the last step of `make deploy`, which returns only
# once the operator it deployed answers, so that a user's first `kubectl apply` works:
#
#   1. each Deployment of MANIFESTS rolled out (`kubectl rollout status`: its Pods Ready);
#   2. when MANIFESTS registers admission webhooks, a server-side dry run of SAMPLES_DIR's CRs
#      gets through them (a sample refused by a webhook counts: the webhook answered).
#
# Step 2 is needed because a Ready Pod is not yet a Service that routes to it: the EndpointSlice
# and then kube-proxy follow, and until kube-proxy has synced, the API server's calls to the
# webhooks are refused ("dial tcp <ClusterIP>:443: connect: connection refused") and so is every
# CR they match (failurePolicy Fail). Measured on the local cluster with a real node: Pod Ready
# 10.7 s after `kubectl apply`, the webhooks answering 1.8 s later, longer on a loaded machine.
#
# Bounded by DEPLOY_TIMEOUT seconds (default 300) in all; a line every 10 s while it waits.
# Pods on simulated (kwok) Nodes run nothing: step 2 is skipped, with a note.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/progress.sh
. "$here/lib/progress.sh"
KUBECTL=${KUBECTL:-$here/kubectl.sh}
samples=${1:?usage: hack/deploy-wait.sh SAMPLES_DIR < MANIFESTS}
timeout=${DEPLOY_TIMEOUT:-300}
start=$SECONDS
manifests=$(cat)

say() { echo "make deploy: $*" >&2; }
left() { echo $((timeout - (SECONDS - start))); }

# "namespace name" of each Deployment, as the API server has them now.
deployments=$($KUBECTL get -f - --ignore-not-found \
  -o jsonpath='{range .items[?(@.kind=="Deployment")]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' \
  <<<"$manifests")
namespaces=()
while read -r ns name; do
  [ -n "$name" ] || continue
  namespaces+=("$ns")
  if ! $KUBECTL rollout status -n "$ns" "deployment/$name" --timeout="$(left)s" >&2; then
    say "deployment $ns/$name did not roll out in ${timeout}s; its Pods: kubectl get pods -n $ns"
    exit 1
  fi
done <<<"$deployments"

grep -Eq '^kind: (Validating|Mutating)WebhookConfiguration$' <<<"$manifests" || exit 0
[ -d "$samples" ] || exit 0

simulated=1
for ns in "${namespaces[@]}"; do
  for node in $($KUBECTL get pods -n "$ns" -o jsonpath='{.items[*].spec.nodeName}'); do
    kwok=$($KUBECTL get node "$node" -o jsonpath='{.metadata.annotations.kwok\.x-k8s\.io/node}')
    [ "$kwok" = fake ] || simulated=0
  done
done
if [ "${#namespaces[@]}" -gt 0 ] && [ "$simulated" = 1 ]; then
  say "the operator's Pods are on simulated (kwok) Nodes, where nothing runs: its webhooks cannot answer (NODE=real deploys where Pods run)"
  exit 0
fi

said=$SECONDS
while :; do
  if out=$($KUBECTL apply --dry-run=server -f "$samples" 2>&1); then break; fi
  case $out in
    *"failed calling webhook"*) ;;
    *) break ;; # the webhooks answered (a sample refused for what it is)
  esac
  if [ "$(left)" -le 0 ]; then
    say "the webhooks do not answer after ${timeout}s: ${out##*$'\n'}"
    exit 1
  fi
  if ((SECONDS - said >= 10)); then
    said=$SECONDS
    say "waiting for the webhooks to answer through their Service, $(elapsed $((SECONDS - start))) so far"
  fi
  sleep 0.5
done
say "the operator answers, its webhooks too ($(elapsed $((SECONDS - start))) after the apply)"
