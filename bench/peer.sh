#!/usr/bin/env bash
# Installs the peer of `make bench`: operator-sdk's ansible-operator, outside the repo.
#
#   $CACHE/peer/venv                      its Python side (bench/peer-requirements.txt + kubernetes.core)
#   $CACHE/peer/v1.42.3/ansible-operator  the Go binary, built with `go install` (one heavy build
#                                         at a time: waits while another go build runs)
#
# When the binary cannot be built (this machine's Go module proxy refuses the module), the
# reason is kept in $CACHE/peer/v1.42.3.failed for a day and the benchmark uses its stand-in
# (bench/standin.py). $CACHE is $OPERATOR_RUNNER_CACHE or ~/.cache/operator-runner.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
PEER=$CACHE_ROOT/peer
VERSION=${PEER_VERSION:-v1.42.3}
PYTHON=${PYTHON:-python3.11}
mkdir -p "$PEER"

stamp=$PEER/venv/.stamp-$(sha256sum "$repo/bench/peer-requirements.txt" "$repo/hack/install_collections.py" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "peer: installing the Python side into $PEER/venv ..." >&2
  rm -rf "$PEER/venv"
  "$PYTHON" -m venv "$PEER/venv"
  "$PEER/venv/bin/pip" install --quiet -r "$repo/bench/peer-requirements.txt"
  "$PEER/venv/bin/python" "$repo/hack/install_collections.py" >&2
  touch "$stamp"
fi

bin=$PEER/$VERSION/ansible-operator
failed=$PEER/$VERSION.failed
if [ -x "$bin" ]; then
  echo "peer: $("$bin" version 2>/dev/null | head -1 || echo "$bin")" >&2
elif [ -f "$failed" ] && [ -z "$(find "$failed" -mmin +1440)" ]; then
  echo "peer: ansible-operator $VERSION could not be built (see $failed); the benchmark uses its stand-in" >&2
else
  command -v go >/dev/null || { echo "go: not found" >"$failed"; echo "peer: no Go toolchain; stand-in" >&2; exit 0; }
  for _ in $(seq 360); do  # one heavy Go build at a time on this machine
    pgrep -f 'go build|go install|/compile ' >/dev/null || break
    echo "peer: another Go build is running; waiting ..." >&2; sleep 5
  done
  echo "peer: building ansible-operator $VERSION (heavy; several minutes) ..." >&2
  log=$PEER/build-$VERSION.log
  if GOBIN=$PEER/$VERSION GOFLAGS=-mod=mod go install \
      "github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator@$VERSION" >"$log" 2>&1; then
    rm -f "$failed"
    echo "peer: built $bin" >&2
  else
    { echo "command: GOBIN=$PEER/$VERSION go install github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator@$VERSION"; cat "$log"; } >"$failed"
    echo "peer: building ansible-operator $VERSION failed; the benchmark uses its stand-in:" >&2
    tail -n 3 "$log" >&2
  fi
fi
