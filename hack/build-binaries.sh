#!/usr/bin/env bash
# Build the local control plane's binaries from the official Go modules, once per machine.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes)
#   etcd                                                             (go.etcd.io/etcd/server/v3)
#   kwok, kwokctl                                                    (sigs.k8s.io/kwok)
#
# They land in $BIN_DIR (printed on success), keyed by version, outside the repo. A binary that
# is already there and reports the right version is not rebuilt. Build logs: $BUILD_DIR/*.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
BIN_DIR=$CACHE_ROOT/bin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION
BUILD_DIR=$CACHE_ROOT/build
mkdir -p "$BIN_DIR" "$BUILD_DIR"

die() { echo "build-binaries: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install, or your distribution's golang package), then run 'make cluster' again."

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

# run_logged NAME CMD...: run a build step with its output in $BUILD_DIR/NAME.log.
run_logged() {
  local name=$1; shift
  local log=$BUILD_DIR/$name.log
  local start=$SECONDS
  echo "building $name ..." >&2
  if ! "$@" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "building $name failed; full log: $log"
  fi
  echo "built $name in $((SECONDS - start)) s" >&2
}

has_version() { # has_version BINARY EXPECTED VERSION-ARGS...
  local bin=$BIN_DIR/$1 want=$2 out; shift 2
  [ -x "$bin" ] || return 1
  out=$("$bin" "$@" 2>&1) || return 1
  [[ $out == *"$want"* ]]
}

build_kubernetes() {
  local mod=$BUILD_DIR/kubernetes-$KUBE_VERSION
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local staging_version=v0.${KUBE_VERSION#v1.}
  mkdir -p "$mod"
  if [ ! -f "$mod/go.sum" ]; then
    (
      cd "$mod"
      rm -f go.mod go.sum
      go mod init local/kube-build >/dev/null 2>&1
      src=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      [ -n "$src" ] || die "could not download k8s.io/kubernetes@$KUBE_VERSION from the Go module proxy"
      go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
      # k8s.io/kubernetes replaces its staging modules with local folders; take each from the
      # proxy at the matching v0.x version instead.
      sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$src/go.mod" |
        while read -r m; do go mod edit -replace="$m=$m@$staging_version"; done
      # Import what the four commands import, so that `go mod tidy` records all their modules.
      printf '//go:build tools\n\npackage tools\n\nimport (\n%s)\n' "$(printf '\t_ "%s"\n' \
        k8s.io/kubernetes/cmd/kube-apiserver/app k8s.io/kubernetes/cmd/kube-controller-manager/app \
        k8s.io/kubernetes/cmd/kube-scheduler/app k8s.io/kubectl/pkg/cmd k8s.io/component-base/cli)" >tools.go
      go mod tidy
    ) >"$BUILD_DIR/kubernetes-mod.log" 2>&1 || { tail -n 20 "$BUILD_DIR/kubernetes-mod.log" >&2; rm -f "$mod/go.sum"; die "resolving k8s.io/kubernetes@$KUBE_VERSION failed; full log: $BUILD_DIR/kubernetes-mod.log"; }
  fi
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    if has_version "$cmd" "$KUBE_VERSION" --version || has_version "$cmd" "$KUBE_VERSION" version --client; then
      continue
    fi
    run_logged "$cmd" bash -c "cd '$mod' && go build -trimpath -ldflags '$ldflags' -o '$BIN_DIR/$cmd.tmp' k8s.io/kubernetes/cmd/$cmd && mv '$BIN_DIR/$cmd.tmp' '$BIN_DIR/$cmd'"
  done
}

build_etcd() {
  has_version etcd "${ETCD_VERSION#v}" --version && return 0
  local mod=$BUILD_DIR/etcd-$ETCD_VERSION
  mkdir -p "$mod"
  run_logged etcd bash -c "
    set -e; cd '$mod'
    if [ ! -f go.sum ]; then
      rm -f go.mod; go mod init local/etcd-build
      go mod edit -require=go.etcd.io/etcd/server/v3@$ETCD_VERSION
      for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do go mod edit -replace=go.etcd.io/etcd/\$m=go.etcd.io/etcd/\$m@$ETCD_VERSION; done
      printf 'package tools\n\nimport _ \"go.etcd.io/etcd/server/v3/etcdmain\"\n' >tools.go
      go mod tidy
    fi
    go build -trimpath -ldflags '-s -w' -o '$BIN_DIR/etcd.tmp' go.etcd.io/etcd/server/v3
    mv '$BIN_DIR/etcd.tmp' '$BIN_DIR/etcd'"
}

build_kwok() {
  for cmd in kwok kwokctl; do
    has_version "$cmd" "$KWOK_VERSION" --version && continue
    run_logged "$cmd" bash -c "GOBIN='$BUILD_DIR/gobin' go install -trimpath -ldflags '-s -w' sigs.k8s.io/kwok/cmd/$cmd@$KWOK_VERSION && mv '$BUILD_DIR/gobin/$cmd' '$BIN_DIR/$cmd'"
  done
}

build_kwok
build_etcd
build_kubernetes
echo "$BIN_DIR"
