#!/usr/bin/env bash
# Installs the peer of `make bench`: operator-sdk's ansible-operator, outside the repo.
#
#   $CACHE/peer/venv                        its Python side (bench/peer-requirements.txt + kubernetes.core)
#   $CACHE/peer/<version>/ansible-operator  the Go binary (one heavy build at a time: waits while
#                                           another go build runs)
#
# Which binary: v1.42.3 from github.com/operator-framework/ansible-operator-plugins with
# `go install`, as the issue asks. This machine's Go module proxy refuses that module (403 for
# any version), so the script falls back to the newest release that still carries the same
# program inside github.com/operator-framework/operator-sdk: v1.30.0 (cmd/ansible-operator;
# v1.31.0 moved it out). That module's go.mod has replace directives, which `go install m@v`
# refuses, so it is downloaded (`go mod download`), its h1: checksum compared with the one
# pinned below (sum.golang.org has no record of it here: GONOSUMDB for that one module, our pin
# instead), and built in a copy of its source with its own go.mod and go.sum.
# A failure is kept in $CACHE/peer/<version>.failed for a day; the benchmark then runs
# operator-runner alone. $CACHE is $OPERATOR_RUNNER_CACHE or ~/.cache/operator-runner.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
PEER=$CACHE_ROOT/peer
PYTHON=${PYTHON:-python3.11}
mkdir -p "$PEER"

install_python_side() {  # $PEER/venv, made again when its requirements or the installer change
  local stamp
  stamp=$PEER/venv/.stamp-$(sha256sum "$repo/bench/peer-requirements.txt" "$repo/hack/install_collections.py" "$repo/runner/util/lines.txt" | sha256sum | cut -c1-16)
  [ ! -f "$stamp" ] || return 0
  echo "peer: installing the Python side into $PEER/venv ..." >&2
  rm -rf "$PEER/venv"
  "$PYTHON" -m venv "$PEER/venv"
  "$PEER/venv/bin/pip" install --quiet -r "$repo/bench/peer-requirements.txt"
  "$PEER/venv/bin/python" "$repo/hack/install_collections.py" >&2
  touch "$stamp"
}

wait_for_go_builds() {
  for _ in $(seq 360); do  # one heavy Go build at a time on this machine
    pgrep -f 'go build|go install|/compile ' >/dev/null || return 0
    echo "peer: another Go build is running; waiting ..." >&2; sleep 5
  done
}

# v1.42.3: ansible-operator-plugins, `go install`.
build_plugins() {  # $1 = version, $2 = log
  GOBIN=$PEER/$1 GOFLAGS=-mod=mod go install \
    "github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator@$1" >"$2" 2>&1
}

# v1.30.0: operator-sdk's module, built inside a copy of it (its replace directives apply).
SDK_MODULE=github.com/operator-framework/operator-sdk
SDK_VERSION=v1.30.0
SDK_SUM=h1:0iy7BGhG+umh4z5uwxe7yZJyMgFB1b2nOIMF5WIfQDw=
SDK_BUILD=2  # bump when build_sdk changes: the binary is rebuilt
build_sdk() {  # $1 = version, $2 = log
  local info dir sum src
  info=$(GONOSUMDB=$SDK_MODULE GOFLAGS=-mod=mod go mod download -json "$SDK_MODULE@$1" 2>>"$2") || return 1
  dir=$(printf '%s' "$info" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin).get("Dir", ""))')
  sum=$(printf '%s' "$info" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin).get("Sum", ""))')
  if [ "$sum" != "$SDK_SUM" ]; then
    echo "checksum mismatch for $SDK_MODULE@$1: got '$sum', pinned $SDK_SUM" >>"$2"; return 1
  fi
  src=$PEER/src-$1
  rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
  # One backport: v1.30.0 parses a job event's `created` without a UTC offset, which
  # ansible-runner >= 2.4 writes ("...+00:00"); unpatched, every event is refused (400) and no
  # run ever reports a result. Later releases (with ansible-runner 2.4 in their image) read both.
  "$PYTHON" - "$src/internal/ansible/runner/eventapi/types.go" <<'PATCH' >>"$2" 2>&1 || return 1
import sys
path = sys.argv[1]
text = open(path).read()
old = 'time.Parse("2006-01-02T15:04:05.999999999", '
assert text.count(old) == 1, "types.go is not v1.30.0's"
text = text.replace(old, "parseEventTime(") + """
// parseEventTime: backported by operator-runner's bench/peer.sh (ansible-runner >= 2.4).
func parseEventTime(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02T15:04:05.999999999Z07:00", s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02T15:04:05.999999999", s)
}
"""
open(path, "w").write(text)
PATCH
  (cd "$src" && go build -trimpath -o "$PEER/$1/ansible-operator" -ldflags "\
      -X '$SDK_MODULE/internal/version.Version=$1' \
      -X '$SDK_MODULE/internal/version.GitVersion=$1' \
      -X '$SDK_MODULE/internal/version.KubernetesVersion=(from go.mod)'" \
      ./cmd/ansible-operator) >>"$2" 2>&1
  local rc=$?
  rm -rf "$src"
  return $rc
}

install_peer() {  # $1 = version, $2 = builder; 0 when the binary is there
  local bin=$PEER/$1/ansible-operator failed=$PEER/$1.failed log=$PEER/build-$1.log
  if [ "$2" = build_sdk ] && [ ! -f "$PEER/$1/.build-$SDK_BUILD" ]; then rm -f "$bin"; fi
  if [ -x "$bin" ]; then
    echo "peer: $("$bin" version 2>/dev/null | head -1 || echo "$bin")" >&2; return 0
  fi
  if [ -f "$failed" ] && [ -z "$(find "$failed" -mmin +1440)" ]; then
    echo "peer: ansible-operator $1 could not be built (see $failed)" >&2; return 1
  fi
  command -v go >/dev/null || { echo "go: not found" >"$failed"; echo "peer: no Go toolchain" >&2; return 1; }
  wait_for_go_builds
  echo "peer: building ansible-operator $1 (heavy: a minute or more) ..." >&2
  mkdir -p "$PEER/$1"
  if "$2" "$1" "$log"; then
    rm -f "$failed"; touch "$PEER/$1/.build-$SDK_BUILD"; echo "peer: built $bin" >&2; return 0
  fi
  { echo "building ansible-operator $1 ($2) failed:"; cat "$log"; } >"$failed"
  echo "peer: building ansible-operator $1 failed:" >&2
  tail -n 3 "$log" >&2
  return 1
}

install_python_side
if [ -n "${PEER_VERSION:-}" ]; then  # one version asked for
  case $PEER_VERSION in
    v1.3[0-9]*|v1.2*) install_peer "$PEER_VERSION" build_sdk || true ;;
    *) install_peer "$PEER_VERSION" build_plugins || true ;;
  esac
else
  install_peer v1.42.3 build_plugins || install_peer "$SDK_VERSION" build_sdk \
    || echo "peer: no ansible-operator could be built; the benchmark runs operator-runner alone" >&2
fi
