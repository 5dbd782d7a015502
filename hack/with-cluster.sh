#!/usr/bin/env bash
# Run a command with KUBECONFIG set to a cluster: $OPERATOR_RUNNER_KUBECONFIG when it is set,
# else a throwaway local cluster that is always deleted afterwards (also when the command fails
# or the run is interrupted with Ctrl-C or SIGTERM). The command also gets
# OPERATOR_RUNNER_KUBECONFIG, so that the integration tests it runs use that one cluster.
#
#   hack/with-cluster.sh COMMAND [ARGS...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

if [ -n "${OPERATOR_RUNNER_KUBECONFIG:-}" ]; then
  export KUBECONFIG=$OPERATOR_RUNNER_KUBECONFIG
  exec "$@"
fi

name=ort-$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
kubeconfig=
child=

# Processes the command left behind that still talk to the throwaway cluster (a background
# operator of an interrupted molecule run): found by the cluster's kubeconfig in their
# environment, stopped by PID.
stop_leftovers() {
  [ -n "$kubeconfig" ] && [ -d /proc ] || return 0
  local pids=() environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    [ "$pid" != $$ ] || continue
    # grep reads all of it (no -q): under pipefail an early exit would fail the pipeline
    if { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -xF "KUBECONFIG=$kubeconfig" >/dev/null; then
      pids+=("$pid")
    fi
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  echo "with-cluster: stopping leftover processes of cluster '$name': ${pids[*]}" >&2
  kill -TERM "${pids[@]}" 2>/dev/null || true
}

cleanup() {
  stop_leftovers
  "$here/cluster.sh" down "$name" || true
}
on_signal() {
  trap - INT TERM
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" || true
  fi
  exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

"$here/cluster.sh" up "$name"
kubeconfig=$("$here/cluster.sh" kubeconfig "$name")
export KUBECONFIG=$kubeconfig OPERATOR_RUNNER_KUBECONFIG=$kubeconfig
# In the background so that a signal reaches our trap at once (bash defers traps while it waits
# for a foreground command).
"$@" &
child=$!
wait "$child"
