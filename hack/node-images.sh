#!/usr/bin/env bash
# The images that Pods on the local real node run, built here because no registry is reachable:
#
#   docker.io/library/busybox:latest   the Echo's `image: busybox` (Debian's busybox-static)
#   docker.io/takeyan/flask:0.0.3      the EchoFlask app of seed 004 (apps/echoflask)
#   localhost/operator-runner-pause:H  the Pod sandbox (hack/images/pause, a static Go program)
#
#   hack/node-images.sh build          build what is missing or changed, print the OCI layout
#   hack/node-images.sh check          print the OCI layout when all are built from the current
#                                      inputs, else say which are not and fail (no build)
#   hack/node-images.sh add IMAGE      add an image of hack/image.sh's buildah storage (the
#                                      operator image of `make image`) to the layout
#   hack/node-images.sh import SOCKET [IMAGE...]
#                                      import the layout into the containerd of SOCKET (k8s.io);
#                                      check that the three and each IMAGE are there
#   hack/node-images.sh pause-name     print the pause image's name (containerd's sandbox_image)
#   hack/node-images.sh list           print the names
#
# Built with buildah (vfs storage, shared with hack/image.sh, whose debootstrap image the Flask
# image starts from), then pushed into one OCI image layout, $CACHE_ROOT/real-node/images/oci,
# whose index.json names each manifest (io.containerd.image.name). `import` feeds that layout
# to `ctr images import`; hack/lib/oci_registry.py serves it to containerd for Pods whose pull
# policy is Always. Each image is keyed by the hash of its inputs: rebuilt only when they change.
# Heavy (go build, debootstrap, buildah bud) on a cold cache: run under the machine's build lock.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/progress.sh
. "$here/lib/progress.sh"
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
IMAGE_CACHE=$CACHE_ROOT/image
OUT=$CACHE_ROOT/real-node/images
LAYOUT=$OUT/oci
PAUSE_SRC=$here/images/pause
APP_SRC=$repo/apps/echoflask
BUSYBOX_NAME=docker.io/library/busybox:latest
FLASK_NAME=docker.io/takeyan/flask:0.0.3

die() { echo "node-images: $*" >&2; exit 1; }
say() { echo "node-images: $*" >&2; }

bah() { buildah --root "$IMAGE_CACHE/storage" --runroot "$IMAGE_CACHE/run" --storage-driver vfs "$@"; }

files_hash() { # files_hash DIR...: the hash of the files' paths and contents
  find "$@" -type f -not -path '*/__pycache__/*' -not -name '*.pyc' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha256sum | sed "s|$repo/||" | sha256sum | cut -c1-16
}

recipe_hash() { declare -f "$@" | sha256sum | cut -c1-16; } # the build functions themselves

pause_key() { { files_hash "$PAUSE_SRC"; recipe_hash build_pause; go env GOVERSION 2>/dev/null; } | sha256sum | cut -c1-16; }
pause_name() { echo "localhost/operator-runner-pause:$(pause_key)"; }
busybox_key() { { sha256sum </bin/busybox; recipe_hash build_busybox; } | sha256sum | cut -c1-16; }

built() { # built NAME KEY: the layout has NAME built from inputs KEY
  [ "$(cat "$OUT/keys/${1//[\/:]/_}" 2>/dev/null)" = "$2" ] && grep -qF "\"$1\"" "$LAYOUT/index.json" 2>/dev/null
}

publish() { # publish NAME KEY: push the buildah image NAME into the layout, named NAME
  local name=$1 key=$2 tag
  tag=$(echo "$name" | tr '/:' '__')
  bah push --quiet "$name" "oci:$LAYOUT:$tag" >/dev/null
  python3 - "$LAYOUT/index.json" "$tag" "$name" <<'EOF'
import json, os, sys
path, tag, name = sys.argv[1:4]
with open(path, encoding="utf-8") as f:
    index = json.load(f)
kept = []
for desc in index["manifests"]:
    notes = desc.setdefault("annotations", {})
    if notes.get("org.opencontainers.image.ref.name") == tag:
        notes["io.containerd.image.name"] = name
    elif notes.get("io.containerd.image.name") == name or not notes:
        continue  # the previous build of NAME (the push took its ref.name away): dropped
    kept.append(desc)
index["manifests"] = kept
with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(index, f)
os.replace(path + ".tmp", path)
EOF
  mkdir -p "$OUT/keys"
  echo "$key" >"$OUT/keys/${name//[\/:]/_}"
}

build_busybox() {
  local ctr mnt
  ctr=$(bah from --quiet scratch)
  mnt=$(bah mount "$ctr")
  mkdir -p "$mnt/bin" "$mnt/tmp" "$mnt/etc" "$mnt/root"
  chmod 1777 "$mnt/tmp"
  cp /bin/busybox "$mnt/bin/busybox"
  chroot "$mnt" /bin/busybox --install -s /bin
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$mnt/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$mnt/etc/group"
  bah umount "$ctr" >/dev/null
  bah config --env PATH=/bin --cmd '["sh"]' \
    --label "org.opencontainers.image.description=busybox from Debian's busybox-static" "$ctr"
  bah commit --quiet --rm "$ctr" "$BUSYBOX_NAME" >/dev/null
}

build_pause() {
  local name=$1 ctr mnt tmp
  tmp=$(mktemp -d)
  (cd "$PAUSE_SRC" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local go build -trimpath -ldflags '-s -w' -o "$tmp/pause" .)
  ctr=$(bah from --quiet scratch)
  mnt=$(bah mount "$ctr")
  cp "$tmp/pause" "$mnt/pause"
  rm -rf "$tmp"
  bah umount "$ctr" >/dev/null
  bah config --entrypoint '["/pause"]' --cmd '[]' --user 65535:65535 \
    --label "org.opencontainers.image.description=operator-runner's pause (hack/images/pause)" "$ctr"
  bah commit --quiet --rm "$ctr" "$name" >/dev/null
}

build_flask() {
  local base=$1 key=$2
  bah bud --quiet --pull-never --build-arg "BASE_IMAGE=$base" \
    --label "io.github.operator-runner.content-hash=$key" -t "$FLASK_NAME" "$APP_SRC"
}

step() { # step NAME KEY FUNCTION ARGS...: build and publish NAME unless built from KEY
  local name=$1 key=$2 fn=$3 start=$SECONDS log
  shift 3
  built "$name" "$key" && return 0
  log=$OUT/logs/${name//[\/:]/_}.log
  say "building $name (log: $log) ..."
  if ! with_progress node-images "$name" "$log" "$fn" "$@"; then
    tail -n 20 "$log" >&2
    die "building $name failed; log: $log"
  fi
  publish "$name" "$key"
  say "$name built in $(elapsed $((SECONDS - start)))"
}

build() {
  command -v buildah >/dev/null 2>&1 || die "buildah is missing (apt-get install -y buildah)"
  [ "$(id -u)" -eq 0 ] || die "building the node's images needs root (chroot, buildah)"
  mkdir -p "$OUT/logs" "$IMAGE_CACHE"
  local base flask_key
  # The Flask image starts from hack/image.sh's debootstrap image (made once, cached there): the
  # default ansible-core line's Debian, whatever line the operator has.
  base=$(env -u ANSIBLE_CORE "$here/image.sh" os | tail -n 1) || die "making the debootstrap image failed (hack/image.sh os)"
  exec 8>"$IMAGE_CACHE/lock" # the buildah storage is hack/image.sh's: one writer at a time
  flock 8
  flask_key=$(flask_key "$base")
  echo "$base" >"$OUT/flask-base"
  step "$BUSYBOX_NAME" "$(busybox_key)" build_busybox
  step "$(pause_name)" "$(pause_key)" build_pause "$(pause_name)"
  step "$FLASK_NAME" "$flask_key" build_flask "$base" "$flask_key"
  echo "$LAYOUT"
}

add() { # add IMAGE: an image of the buildah storage into the layout (re-pushed when it changed)
  local name=${1:?usage: add IMAGE} id
  id=$(bah inspect --type image --format '{{.FromImageID}}' "$name" 2>/dev/null) \
    || die "image $name is not in hack/image.sh's buildah storage ($IMAGE_CACHE/storage); build it with 'make image' (hack/image.sh build)"
  mkdir -p "$OUT/logs"
  exec 8>"$IMAGE_CACHE/lock"
  flock 8
  built "$name" "$id" || publish "$name" "$id"
}

import() {
  local socket=${1:?usage: import SOCKET [IMAGE...]} start=$SECONDS
  shift
  [ -f "$LAYOUT/index.json" ] || die "no images built yet: run hack/node-images.sh build"
  tar -C "$LAYOUT" -cf - . | ctr --address "$socket" -n k8s.io images import --all-platforms - >"$OUT/logs/import.log" 2>&1 \
    || { cat "$OUT/logs/import.log" >&2; die "ctr images import failed"; }
  local name have
  have=$(ctr --address "$socket" -n k8s.io images ls -q) # (not piped into grep -q: pipefail)
  for name in $(list) "$@"; do
    grep -qxF "$name" <<<"$have" || die "$name is not in containerd after the import; log: $OUT/logs/import.log"
  done
  say "images imported into containerd in $(elapsed $((SECONDS - start))): $(list | tr '\n' ' ')$*"
}

flask_key() { { echo "$1"; files_hash "$APP_SRC"; recipe_hash build_flask; } | sha256sum | cut -c1-16; }

check() { # no build: are all three there, from the current inputs?
  local todo=()
  built "$BUSYBOX_NAME" "$(busybox_key)" || todo+=("$BUSYBOX_NAME")
  built "$(pause_name)" "$(pause_key)" || todo+=("$(pause_name)")
  built "$FLASK_NAME" "$(flask_key "$(cat "$OUT/flask-base" 2>/dev/null)")" || todo+=("$FLASK_NAME")
  [ ${#todo[@]} -eq 0 ] || die "not built (or built from older inputs): ${todo[*]}. Run 'make node-images' (hack/node-images.sh build) first."
  echo "$LAYOUT"
}

list() { printf '%s\n' "$BUSYBOX_NAME" "$FLASK_NAME" "$(pause_name)"; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  build) build ;;
  check) check ;;
  add) add "$@" ;;
  import) import "$@" ;;
  pause-name) pause_name ;;
  list) list ;;
  *) die "usage: $0 build | check | add IMAGE | import SOCKET [IMAGE...] | pause-name | list" ;;
esac
