#!/usr/bin/env bash
# Build the local control plane's binaries from the official Go modules, once per machine.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes)
#   etcd                                                             (go.etcd.io/etcd/server/v3)
#   kwok, kwokctl                                                    (sigs.k8s.io/kwok)
#   with --node also kubelet, kube-proxy (k8s.io/kubernetes, the same module; for NODE=real)
#
#   hack/build-binaries.sh [--node]          build what is missing (with progress on stderr),
#                                            print $BIN_DIR
#   hack/build-binaries.sh --check [--node]  print $BIN_DIR when every binary is there, else fail
#                                            (no build)
#
# They land in $BIN_DIR, keyed by version, outside the repo. A binary that is already there and
# reports the right version is not rebuilt. Builds are atomic: each binary (and each resolved
# build module) is made in a staging folder and renamed into place only when complete, so an
# interrupted build is never taken as done; a lock serializes concurrent runs, so two `make`s
# at once neither corrupt the cache nor build twice. Build logs: $BUILD_DIR/*.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib/progress.sh
. "$here/lib/progress.sh"

CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
BIN_DIR=$CACHE_ROOT/bin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION
BUILD_DIR=$CACHE_ROOT/build
STAGING_ROOT=$CACHE_ROOT/staging
KUBE_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# The real node's binaries (make cluster NODE=real): only with --node, so that the kwok-only
# path never builds them.
NODE_CMDS=(kubelet kube-proxy)
# What a cold build needs (measured: Go module cache 1.3 GB, Go build cache 3.9 GB, binaries
# 0.5 GB), with some room.
NEED_MB=7000

die() { echo "build-binaries: $*" >&2; exit 1; }
say() { echo "build-binaries: $*" >&2; }

has_version() { # has_version BINARY: it is in $BIN_DIR and reports the pinned version
  local bin=$BIN_DIR/$1 out want
  [ -x "$bin" ] || return 1
  case $1 in
    kwok | kwokctl) want=$KWOK_VERSION; out=$("$bin" --version 2>&1) || return 1 ;;
    etcd) want=${ETCD_VERSION#v}; out=$("$bin" --version 2>&1) || return 1 ;;
    kubectl) want=$KUBE_VERSION; out=$("$bin" version --client 2>&1) || return 1 ;;
    *) want=$KUBE_VERSION; out=$("$bin" --version 2>&1) || return 1 ;;
  esac
  [[ $out == *"$want"* ]]
}

missing() { local c; for c in "${ALL_CMDS[@]}"; do has_version "$c" || echo "$c"; done; }

check_built() { # check_built HOW: print $BIN_DIR when every binary is there, else say which
  # are not and HOW to build them
  local todo
  todo=$(missing | tr '\n' ' ')
  todo=${todo% }
  [ -z "$todo" ] || die "not built yet: $todo. Run $1 first."
  echo "$BIN_DIR"
}

# --- set-up checks: one clear message for each way a machine can be unfit ------------------

writable_dir() { # writable_dir DIR WHAT VAR: DIR is ours (or can be made) and writable
  local dir=$1 what=$2 var=$3 probe=$1 owner
  while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
  owner=$(stat -c %U "$probe" 2>/dev/null || echo '?')
  # A cache of another user's is refused even where we could write to it (root): files of ours
  # in it would break that user's next build.
  if [ "$probe" = "$dir" ] && [ "$(stat -c %u "$dir")" != "$(id -u)" ]; then
    die "$what $dir belongs to user $owner, not to $(id -un). Run as $owner, or point $var at a folder of yours (e.g. $var=\$HOME/.cache/...)."
  fi
  [ -w "$probe" ] || die "$what $dir cannot be created: $probe is not writable by $(id -un) (it belongs to $owner). Point $var at a folder of yours."
  mkdir -p "$dir" 2>/dev/null || die "cannot create $what $dir; point $var at a folder of yours."
}

free_mb() { df -Pm "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }

check_go() { # a Go toolchain >= 1.26; the build's environment; GOCACHE_DIR, GOMODCACHE_DIR
  local go_version go_minor
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH. Install Go >= 1.26 (your distribution's golang package, or https://go.dev/doc/install), then run 'make binaries' again."
  go_version=$(go env GOVERSION 2>/dev/null || true)
  go_minor=${go_version#go1.}; go_minor=${go_minor%%.*}
  if ! [[ $go_minor =~ ^[0-9]+$ ]] || [ "$go_minor" -lt 26 ]; then
    die "Go >= 1.26 is needed to build Kubernetes $KUBE_VERSION; '$(command -v go)' is ${go_version:-of unknown version}. Install a newer Go and put it first on PATH."
  fi
  export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
  GOCACHE_DIR=$(go env GOCACHE)
  GOMODCACHE_DIR=$(go env GOMODCACHE)
}

take_build_lock() { # one build at a time per cache: the second run waits, then finds the binaries built
  exec 9>"$CACHE_ROOT/.build.lock"
  if ! flock -n 9; then
    say "another build is running on this cache ($CACHE_ROOT); waiting for it to finish ..."
    flock 9
  fi
}

check_room() { # the Go caches are ours and writable, and their disks have room for a cold build
  local dir free
  writable_dir "$GOCACHE_DIR" "the Go build cache" GOCACHE
  writable_dir "$GOMODCACHE_DIR" "the Go module cache" GOMODCACHE
  for dir in "$CACHE_ROOT" "$GOCACHE_DIR" "$GOMODCACHE_DIR"; do
    free=$(free_mb "$dir")
    if [ -n "$free" ] && [ "$free" -lt "$NEED_MB" ]; then
      die "only ${free} MB free on the disk of $dir; a first build of the control plane needs about ${NEED_MB} MB (Go module cache, Go build cache, binaries). Free some space (or point OPERATOR_RUNNER_CACHE, GOCACHE, GOMODCACHE elsewhere) and run 'make binaries' again."
    fi
  done
}

# explain_failure LOG WHAT: one clear message for the failures a set-up can cause.
explain_failure() {
  local log=$1 what=$2
  tail -n 15 "$log" >&2
  if grep -qiE 'no space left on device|disk quota exceeded' "$log"; then
    die "$what failed: the disk is full (see df -h $CACHE_ROOT $GOCACHE_DIR $GOMODCACHE_DIR). Free some space and run 'make binaries' again; nothing half-built was kept."
  elif grep -qiE 'dial tcp|no such host|connection refused|i/o timeout|TLS handshake|proxyconnect|network is unreachable|403 Forbidden|unexpected EOF' "$log"; then
    die "$what failed: the Go module proxy ($(go env GOPROXY)) could not be reached or refused a module. Check the network and GOPROXY, then run 'make binaries' again. Full log: $log"
  elif grep -qiE 'permission denied' "$log"; then
    die "$what failed: permission denied (is the Go cache $GOCACHE_DIR or $GOMODCACHE_DIR owned by another user?). Full log: $log"
  fi
  die "$what failed; full log: $log"
}

# run_step NAME CMD...: one build step, its output in $BUILD_DIR/NAME.log, progress on stderr.
run_step() {
  local name=$1 start=$SECONDS; shift
  local log=$BUILD_DIR/$name.log
  say "$name: started (log: $log)"
  with_progress build-binaries "$name" "$log" "$@" || explain_failure "$log" "$name"
  say "$name: done in $(elapsed $((SECONDS - start)))"
}

# install_binary CMD: move a staged binary into $BIN_DIR, atomically (same file system).
install_binary() {
  local cmd=$1
  step=$((step + 1))
  mv -f "$staging/$cmd" "$BIN_DIR/.$cmd.new"
  mv -f "$BIN_DIR/.$cmd.new" "$BIN_DIR/$cmd"
  has_version "$cmd" || die "$cmd was built but does not report version ${KUBE_VERSION}/${ETCD_VERSION}/${KWOK_VERSION}; see $BUILD_DIR/$cmd.log"
  say "[$step/$count] $cmd ready in $BIN_DIR ($(elapsed $((SECONDS - total_start))) elapsed)"
}

# resolve_module DIR NAME SCRIPT: a throwaway module resolved by SCRIPT in a staging copy, renamed
# to DIR only when `go mod tidy` completed. .complete holds the script's hash: a module resolved
# by another recipe (e.g. before the node's packages were imported) is resolved again.
resolve_module() {
  local dir=$1 name=$2 script=$3 key
  key=$(printf '%s' "$script" | sha256sum | cut -c1-16)
  [ -f "$dir/go.sum" ] && [ "$(cat "$dir/.complete" 2>/dev/null)" = "$key" ] && return 0
  local tmp=$staging/$name-module
  mkdir -p "$tmp"
  run_step "$name-modules" bash -c "cd '$tmp' && $script"
  echo "$key" >"$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

build_kwok() {
  local cmd
  for cmd in kwok kwokctl; do
    has_version "$cmd" && continue
    run_step "$cmd" env GOBIN="$staging" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/$cmd@$KWOK_VERSION"
    install_binary "$cmd"
  done
}

build_etcd() {
  has_version etcd && return 0
  local mod=$BUILD_DIR/etcd-$ETCD_VERSION
  resolve_module "$mod" etcd "
    set -e
    go mod init local/etcd-build
    go mod edit -require=go.etcd.io/etcd/server/v3@$ETCD_VERSION
    for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do go mod edit -replace=go.etcd.io/etcd/\$m=go.etcd.io/etcd/\$m@$ETCD_VERSION; done
    printf 'package tools\n\nimport _ \"go.etcd.io/etcd/server/v3/etcdmain\"\n' >tools.go
    go mod tidy"
  run_step etcd bash -c "cd '$mod' && go build -trimpath -ldflags '-s -w' -o '$staging/etcd' go.etcd.io/etcd/server/v3"
  install_binary etcd
}

build_kubernetes() {
  local cmd need=0
  for cmd in "${KUBE_CMDS[@]}"; do has_version "$cmd" || need=1; done
  [ $need = 1 ] || return 0
  local mod=$BUILD_DIR/kubernetes-$KUBE_VERSION
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local staging_version=v0.${KUBE_VERSION#v1.}
  # k8s.io/kubernetes replaces its staging modules with local folders; take each from the proxy
  # at the matching v0.x version instead. Import what the commands import (the node's kubelet
  # and kube-proxy too, so that one module builds both sets), so that `go mod tidy` records all
  # their modules. (The first run downloads ~1.3 GB of modules.)
  resolve_module "$mod" kubernetes "
    set -e
    go mod init local/kube-build
    src=\$(go mod download -json 'k8s.io/kubernetes@$KUBE_VERSION' | sed -n 's/^[[:space:]]*\"Dir\": \"\\(.*\\)\",\$/\\1/p')
    [ -n \"\$src\" ] || { echo 'could not download k8s.io/kubernetes@$KUBE_VERSION from the Go module proxy' >&2; exit 1; }
    go mod edit -require='k8s.io/kubernetes@$KUBE_VERSION'
    sed -n 's#^[[:space:]]*\\(k8s\\.io/[a-z0-9-]*\\) => \\./staging/.*#\\1#p' \"\$src/go.mod\" |
      while read -r m; do go mod edit -replace=\"\$m=\$m@$staging_version\"; done
    printf '//go:build tools\n\npackage tools\n\nimport (\n%s)\n' \"\$(printf '\t_ \"%s\"\n' \
      k8s.io/kubernetes/cmd/kube-apiserver/app k8s.io/kubernetes/cmd/kube-controller-manager/app \
      k8s.io/kubernetes/cmd/kube-scheduler/app k8s.io/kubectl/pkg/cmd k8s.io/component-base/cli \
      k8s.io/kubernetes/cmd/kubelet/app k8s.io/kubernetes/cmd/kube-proxy/app)\" >tools.go
    go mod tidy"
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for cmd in "${KUBE_CMDS[@]}"; do
    has_version "$cmd" && continue
    run_step "$cmd" bash -c "cd '$mod' && go build -trimpath -ldflags '$ldflags' -o '$staging/$cmd' k8s.io/kubernetes/cmd/$cmd"
    install_binary "$cmd"
  done
}

build() { # build what is missing, print $BIN_DIR
  local todo
  check_go
  writable_dir "$CACHE_ROOT" "the cache folder" OPERATOR_RUNNER_CACHE
  take_build_lock
  # Staging folders of a run that was killed: never taken as done, removed here (under the lock).
  rm -rf "$STAGING_ROOT"
  mkdir -p "$BIN_DIR" "$BUILD_DIR" "$STAGING_ROOT"
  staging=$(mktemp -d "$STAGING_ROOT/run-XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  todo=$(missing)
  if [ -n "$todo" ]; then
    check_room
    total_start=$SECONDS
    count=$(echo "$todo" | wc -w)
    step=0
    say "building $count of ${#ALL_CMDS[@]} binaries into $BIN_DIR (a first build takes 6-20 minutes on 2 CPUs; logs in $BUILD_DIR)"
    build_kwok
    build_etcd
    build_kubernetes
    say "all ${#ALL_CMDS[@]} binaries ready in $BIN_DIR ($count built in $(elapsed $((SECONDS - total_start))))"
  fi
  echo "$BIN_DIR"
}

main() {
  local arg check=0 node=0
  for arg in "$@"; do
    case $arg in
      --check) check=1 ;;
      --node) node=1 ;;
      *) echo "build-binaries: unknown option '$arg' (--check, --node)" >&2; exit 2 ;;
    esac
  done
  [ $node = 0 ] || KUBE_CMDS+=("${NODE_CMDS[@]}")
  ALL_CMDS=(kwok kwokctl etcd "${KUBE_CMDS[@]}")
  if [ $check = 1 ]; then
    if [ $node = 1 ]; then check_built "'hack/build-binaries.sh --node'"; else check_built "'make binaries' (hack/build-binaries.sh)"; fi
    return
  fi
  build
}

main "$@"
