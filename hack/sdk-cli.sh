#!/usr/bin/env bash
# operator-sdk's own CLI and kustomize, built from the Go module proxy, for the proof that
# operator-sdk works on what `operator-runner init` writes (tests/integration/test_sdk_cli.py).
#
#   hack/sdk-cli.sh [build]   build both once per machine (heavy: run it under the shared lock,
#                             `flock /tmp/operator-runner-heavy.lock hack/sdk-cli.sh`); prints
#                             the folder that holds them
#   hack/sdk-cli.sh bin-dir   that folder when both are built, else exit 1 (no build)
#
#   $CACHE/sdk-cli/operator-sdk-<version>-kustomize-<version>/{operator-sdk,kustomize}
#
# Which operator-sdk: v1.31.0, the newest release whose Ansible plugin (`init --plugins=ansible`,
# `create api --generate-role`) is in its own module. From v1.32 the plugin lives in
# github.com/operator-framework/ansible-operator-plugins, which this machine's Go module proxy
# refuses (403 for any version), and later releases are refused too. The module has replace
# directives, which `go install m@v` refuses: it is downloaded (`go mod download`), its h1:
# checksum compared with the one pinned below (sum.golang.org has no record of it here:
# GONOSUMDB for that one module, our pin instead), and built in a copy of its source with its
# own go.mod and go.sum, with the version flags of its Makefile, by Go 1.21 (the toolchain its
# release was built with, itself a module of the proxy: GOTOOLCHAIN): its golang.org/x/tools
# v0.9.1 does not compile with Go 1.22 and later ("invalid array length -delta * delta").
# kustomize: a plain `go install`.
# $CACHE is $OPERATOR_RUNNER_CACHE or ~/.cache/operator-runner.
set -euo pipefail
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
SDK_MODULE=github.com/operator-framework/operator-sdk
SDK_VERSION=v1.31.0
SDK_SUM=h1:jnTK3lQ8JkRE0sRV3AdTmNKBZmYZaCiEkPcm3LWGKxE=
SDK_K8S_VERSION=v1.26.0  # its Makefile's K8S_VERSION
SDK_GO=go1.21.13
KUSTOMIZE_MODULE=sigs.k8s.io/kustomize/kustomize/v5
KUSTOMIZE_VERSION=v5.6.0
BIN=$CACHE_ROOT/sdk-cli/operator-sdk-$SDK_VERSION-kustomize-$KUSTOMIZE_VERSION

built() { [ -x "$BIN/operator-sdk" ] && [ -x "$BIN/kustomize" ]; }

build_sdk() {  # $1 = log
  local info dir sum src python rc=0
  python=$(command -v python3)
  info=$(GONOSUMDB=$SDK_MODULE GOFLAGS=-mod=mod go mod download -json "$SDK_MODULE@$SDK_VERSION" 2>>"$1") || return 1
  dir=$(printf '%s' "$info" | "$python" -c 'import json,sys; print(json.load(sys.stdin).get("Dir", ""))')
  sum=$(printf '%s' "$info" | "$python" -c 'import json,sys; print(json.load(sys.stdin).get("Sum", ""))')
  if [ "$sum" != "$SDK_SUM" ]; then
    echo "checksum mismatch for $SDK_MODULE@$SDK_VERSION: got '$sum', pinned $SDK_SUM" >>"$1"
    return 1
  fi
  src=$(mktemp -d "$CACHE_ROOT/sdk-cli/src-XXXXXX")
  cp -r "$dir/." "$src" && chmod -R u+w "$src"
  (cd "$src" && GOTOOLCHAIN=$SDK_GO CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$BIN/operator-sdk" -ldflags "\
      -X '$SDK_MODULE/internal/version.Version=$SDK_VERSION' \
      -X '$SDK_MODULE/internal/version.GitVersion=$SDK_VERSION' \
      -X '$SDK_MODULE/internal/version.GitCommit=(from the Go module proxy)' \
      -X '$SDK_MODULE/internal/version.KubernetesVersion=$SDK_K8S_VERSION' \
      -X '$SDK_MODULE/internal/version.ImageVersion=$SDK_VERSION'" \
      ./cmd/operator-sdk) >>"$1" 2>&1 || rc=$?
  rm -rf "$src"
  return $rc
}

build_kustomize() {  # $1 = log
  GOBIN=$BIN CGO_ENABLED=0 GOFLAGS=-mod=mod go install "$KUSTOMIZE_MODULE@$KUSTOMIZE_VERSION" >>"$1" 2>&1
}

build() {
  local log=$CACHE_ROOT/sdk-cli/build.log start=$SECONDS
  if built; then echo "$BIN"; return 0; fi
  command -v go >/dev/null || { echo "sdk-cli: no Go toolchain (go) on PATH" >&2; return 1; }
  mkdir -p "$BIN"
  : >"$log"
  if [ ! -x "$BIN/operator-sdk" ]; then
    echo "sdk-cli: building operator-sdk $SDK_VERSION (heavy: minutes; log $log) ..." >&2
    build_sdk "$log" || { echo "sdk-cli: building operator-sdk $SDK_VERSION failed:" >&2; tail -n 5 "$log" >&2; return 1; }
  fi
  if [ ! -x "$BIN/kustomize" ]; then
    echo "sdk-cli: building kustomize $KUSTOMIZE_VERSION ..." >&2
    build_kustomize "$log" || { echo "sdk-cli: building kustomize $KUSTOMIZE_VERSION failed:" >&2; tail -n 5 "$log" >&2; return 1; }
  fi
  echo "sdk-cli: built in $((SECONDS - start)) s: $("$BIN/operator-sdk" version | cut -c1-60)..." >&2
  echo "$BIN"
}

case ${1:-build} in
  build) build ;;
  bin-dir) built && echo "$BIN" ;;
  *) echo "usage: hack/sdk-cli.sh [build|bin-dir]" >&2; exit 2 ;;
esac
