#!/usr/bin/env bash
# The local cluster: a real control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler built from the official Go modules) run by kwokctl, with kwok simulating Nodes
# and Pod lifecycles.
#
#   hack/cluster.sh up [NAME]          create NAME (or reuse it when it is up), print how to use it
#   hack/cluster.sh down [NAME]        delete NAME
#   hack/cluster.sh kubeconfig [NAME]  print the path of NAME's kubeconfig
#   hack/cluster.sh bin-dir            print the folder with kubectl & co (building what is missing)
#
# NAME defaults to $CLUSTER_NAME, else "operator-runner". NODES (default 2) kwok Nodes are made.
# SERVICE_CIDR (e.g. 10.96.0.0/16) gives a new cluster's kube-apiserver that
# --service-cluster-ip-range; kwokctl's default is a /24 (about 250 Services), too few for the
# full bench (bench/bench.sh sets a /16). It applies when the cluster is created, not when reused.
#
# Every cluster keeps an audit log of the API server's requests (hack/audit-policy.yaml: who, verb,
# URI, no bodies) in $KWOK_WORKDIR/clusters/NAME/logs/audit.log.
#
# NODE=real adds one real node (kubelet + containerd + kube-proxy, hack/real-node.sh) on which
# Pods really run; the kwok Nodes then carry the taint kwok.x-k8s.io/node=fake:NoSchedule, so
# ordinary Pods land on the real node, and kwok-controller manages only the Nodes annotated
# kwok.x-k8s.io/node=fake (its own). One real node per machine. `down` removes the real node of
# NAME (whatever NODE says) and restores the host.
#
# Ports: kwokctl's binary runtime picks each component's port as the first one below 32768 that
# nothing listens on at that moment, and records no host ports that another kwokctl could see.
# Two clusters started at once (parallel tests) can so pick the same port for components that have
# not bound it yet, and one of them fails (its kwok Nodes never turn Ready). Every start here holds
# the lock $KWOK_WORKDIR/ports.lock until its components listen; anything that stops a cluster and
# starts it again (tests/integration/test_resilience.py) holds it in between.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
export KWOK_WORKDIR=$CACHE_ROOT/kwok
NODES=${NODES:-2}
NODE=${NODE:-kwok}
case $NODE in kwok | real) ;; *) echo "cluster: NODE=$NODE: use NODE=kwok (simulated Nodes only) or NODE=real (plus one real node)" >&2; exit 2 ;; esac

die() { echo "cluster: $*" >&2; exit 1; }

cmd=${1:-up}
name=${2:-${CLUSTER_NAME:-operator-runner}}
cluster_dir=$KWOK_WORKDIR/clusters/$name
kubeconfig=$cluster_dir/kubeconfig.yaml
mode_file=$cluster_dir/operator-runner-node # "real" in a cluster made with NODE=real

bin_dir() { "$here/build-binaries.sh"; }

answers() { # answers KUBECTL: the API server of $name is up and ready
  [ -f "$kubeconfig" ] && "$1" --kubeconfig "$kubeconfig" --request-timeout=5s get --raw /readyz >/dev/null 2>&1
}

wait_nodes_ready() {
  local kubectl=$1 deadline=$((SECONDS + 90))
  until [ "$("$kubectl" --kubeconfig "$kubeconfig" get nodes --no-headers 2>/dev/null | awk '$2 == "Ready" && $1 != "real-node"' | wc -l)" -ge "$NODES" ]; do
    if [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$cluster_dir/logs/kwok-controller.log" >&2 2>/dev/null || true
      die "the $NODES kwok Nodes of cluster '$name' did not turn Ready within 90 s (kwok-controller's log ends above); logs: $cluster_dir/logs/"
    fi
    sleep 0.5
  done
}

ports_lock() { # until this shell exits: no other cluster.sh starts a cluster (see Ports above)
  exec 9>"$KWOK_WORKDIR/ports.lock"
  if ! flock -n 9; then
    echo "waiting for another cluster's start-up to finish (clusters pick their ports one at a time) ..." >&2
    flock -w 300 9 || die "another cluster's start-up held $KWOK_WORKDIR/ports.lock for 5 min; is a 'hack/cluster.sh up' stuck?"
  fi
}

# The kwokctl options of a cluster with a real node (the recipe's fixes 5 and 6): kwok-controller
# leaves Nodes without its annotation alone, and the API server reaches kubelets by InternalIP.
# shellcheck disable=SC2054 # the commas are kwokctl's
REAL_NODE_ARGS=(
  --extra-args kwok-controller=manage-all-nodes=false
  --extra-args kwok-controller=manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
  --extra-args kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname
)

real_node_ready() { # before anything is made or built: can this machine host it, is no other real
  # node up; then its packages, binaries and images (the slow part of a first run)
  "$here/real-node.sh" check || exit 3
  "$here/real-node.sh" free-for "$name"
  "$here/real-node.sh" prepare >/dev/null
}

reuse() { # reuse: the cluster is up; say so (a kwok-only one cannot take a real node)
  local mode
  mode=$(cat "$mode_file" 2>/dev/null || echo kwok)
  if [ "$mode" != "$NODE" ]; then
    [ "$NODE" = real ] && die "cluster '$name' is up but was made without NODE=real (kwok would take a real node over). Delete it first ('hack/cluster.sh down $name'), or use another CLUSTER_NAME."
    echo "cluster '$name' is up with a real node (made with NODE=real); reused as it is" >&2
  fi
  echo "cluster '$name' is already up (reused)" >&2
}

restart() { # restart KUBECTL: a cluster folder whose API server does not answer: started again, else deleted
  [ -d "$cluster_dir" ] || return 0
  echo "cluster '$name' exists but does not answer; starting it again ..." >&2
  if ! kwokctl --name "$name" start cluster >"$cache_log" 2>&1 9>&- || ! answers "$1"; then
    kwokctl --name "$name" delete cluster >/dev/null 2>&1 || rm -rf "$cluster_dir"
  fi
}

create() { # create BIN_DIR KWOKCTL_ARG...: a new cluster of the binaries in BIN_DIR
  local bin=$1
  shift
  echo "creating cluster '$name' (Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION) ..." >&2
  if ! kwokctl --name "$name" create cluster \
      --runtime binary \
      --kube-authorization=true \
      --kubeconfig "$cluster_dir.user-kubeconfig" \
      --etcd-binary "$bin/etcd" \
      --kube-apiserver-binary "$bin/kube-apiserver" \
      --kube-controller-manager-binary "$bin/kube-controller-manager" \
      --kube-scheduler-binary "$bin/kube-scheduler" \
      --kwok-controller-binary "$bin/kwok" \
      --kube-audit-policy "$here/audit-policy.yaml" \
      "$@" \
      --wait 120s >"$cache_log" 2>&1 9>&-; then # (its daemons must not hold the lock)
    tail -n 15 "$cache_log" >&2
    if grep -qiE 'address already in use|bind:' "$cache_log" "$cluster_dir"/logs/*.log 2>/dev/null; then
      die "a port the control plane needs is busy. Free it (see 'ss -ltnp') or remove an old cluster with 'make cluster-down', then run 'make cluster' again. Log: $cache_log, component logs: $cluster_dir/logs/"
    fi
    die "creating cluster '$name' failed. Log: $cache_log, component logs: $cluster_dir/logs/"
  fi
  echo "$NODE" >"$mode_file"
}

add_nodes() { # add_nodes KUBECTL: $NODES kwok Nodes, Ready
  local have
  have=$("$1" --kubeconfig "$kubeconfig" get nodes --no-headers 2>/dev/null | wc -l)
  if [ "$have" -lt "$NODES" ]; then
    kwokctl --name "$name" scale node --replicas "$NODES" >>"$cache_log" 2>&1 || die "adding $NODES kwok Nodes failed; log: $cache_log"
  fi
  wait_nodes_ready "$1"
}

join_real_node() { # join_real_node KUBECTL: the fake Nodes tainted (ordinary Pods, the seeds'
  # unchanged, must land on the real node), then the real node joined
  local fake
  for fake in $("$1" --kubeconfig "$kubeconfig" get nodes -o jsonpath='{range .items[?(@.metadata.annotations.kwok\.x-k8s\.io/node=="fake")]}{.metadata.name}{"\n"}{end}'); do
    "$1" --kubeconfig "$kubeconfig" taint node "$fake" kwok.x-k8s.io/node=fake:NoSchedule --overwrite >/dev/null
  done
  if ! "$here/real-node.sh" up "$name" "$kubeconfig" "$cluster_dir/pki"; then
    echo "cluster: the real node did not come up; undoing its host changes (the cluster stays: 'hack/cluster.sh down $name' removes it)" >&2
    "$here/real-node.sh" down "$name" "$kubeconfig" || true
    exit 1
  fi
}

wait_discovery() { # wait_discovery KUBECTL: a fresh API server may still answer 404 for a group it
  # has not registered: wait until discovery is complete, so that clients which walk it
  # (kubernetes.core, kopf) start clean
  local deadline=$((SECONDS + 60))
  until "$1" --kubeconfig "$kubeconfig" api-resources >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "the API server of cluster '$name' did not complete discovery within 60 s; logs: $cluster_dir/logs/"
    sleep 0.5
  done
}

usage_message() { # usage_message BIN_DIR
  local what="$NODES Nodes"
  [ "$NODE" = real ] && what="$NODES kwok Nodes (tainted NoSchedule) and the real node 'real-node'"
  cat >&2 <<MSG
cluster '$name' is up: $what Ready, Kubernetes $KUBE_VERSION.
  export KUBECONFIG=$kubeconfig
  export PATH=$1:\$PATH     # kubectl $KUBE_VERSION
  hack/cluster.sh down $name   # removes it (make cluster-down for the default one)
MSG
}

up() {
  local bin extra=()
  if [ "$NODE" = real ]; then
    real_node_ready
    extra=("${REAL_NODE_ARGS[@]}")
  fi
  if [ -n "${SERVICE_CIDR:-}" ]; then
    extra+=(--extra-args "kube-apiserver=service-cluster-ip-range=$SERVICE_CIDR")
  fi
  bin=$(bin_dir)
  export PATH=$bin:$PATH
  if answers "$bin/kubectl"; then
    reuse
  else
    ports_lock
    restart "$bin/kubectl"
    answers "$bin/kubectl" || create "$bin" "${extra[@]}"
  fi
  add_nodes "$bin/kubectl"
  exec 9>&- # Ready kwok Nodes: every component listens on its port; others may start now
  [ "$NODE" != real ] || join_real_node "$bin/kubectl"
  wait_discovery "$bin/kubectl"
  usage_message "$bin"
}

down() {
  local bin; bin=$(bin_dir)
  # The real node of this cluster (if it has one) first, while the API server still answers.
  if [ "$("$here/real-node.sh" owner)" = "$name" ]; then
    "$here/real-node.sh" down "$name" "$kubeconfig"
  fi
  if [ -d "$cluster_dir" ]; then
    "$bin/kwokctl" --name "$name" delete cluster >/dev/null 2>&1 || true
    rm -rf "$cluster_dir" "$cluster_dir.user-kubeconfig"
    echo "cluster '$name' removed" >&2
  else
    echo "cluster '$name' does not exist" >&2
  fi
}

mkdir -p "$KWOK_WORKDIR"
cache_log=$KWOK_WORKDIR/$name.log
case $cmd in
  up) up ;;
  down) down ;;
  kubeconfig) echo "$kubeconfig" ;;
  bin-dir) bin_dir ;;
  *) die "unknown command '$cmd' (up, down, kubeconfig, bin-dir)" ;;
esac
