#!/usr/bin/env bash
# `make bench`: the peer (bench/peer.sh), a cluster of its own (or $OPERATOR_RUNNER_KUBECONFIG),
# python -m bench.run, and the cluster deleted again.
#   BENCH_SCALE=small|medium|full (default small)   BENCH_ARGS: more arguments for bench.run
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
scale=${BENCH_SCALE:-small}
ts=$(date -u +%Y%m%dT%H%M%SZ)
out=${BENCH_OUT:-bench/results/raw/$scale-$ts.json}
bench/peer.sh
if [ -n "${OPERATOR_RUNNER_KUBECONFIG:-}" ]; then
  kubeconfig=$OPERATOR_RUNNER_KUBECONFIG
else
  name=bench-$$-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
  trap 'hack/cluster.sh down "$name" || true' EXIT
  trap 'exit 130' INT TERM
  # 4 kwok Nodes: room for 440 Pods (the burst makes one per CR); a /16 of Service IPs (the
  # default /24 ran out at full scale: one Service per EchoFlask)
  SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/16} NODES=4 hack/cluster.sh up "$name"
  kubeconfig=$(hack/cluster.sh kubeconfig "$name")
fi
read -r -a bench_args <<<"${BENCH_ARGS:-}" # split on spaces, as the Makefile's BENCH_ARGS=... reads
.venv/bin/python -m bench.run --scale "$scale" --kubeconfig "$kubeconfig" --out "$out" "${bench_args[@]}"
