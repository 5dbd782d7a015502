#!/usr/bin/env bash
# The images without a Docker engine or a registry: built with buildah on a root filesystem made
# with debootstrap, and run from their own root filesystem on this host.
#
#   the base image     images/operator-runner/Dockerfile: the runner, Ansible, kubernetes.core,
#                      no operator (what operator-sdk's ansible-operator image is)
#   the seeds' image   ./Dockerfile: Echo and EchoFlask, FROM the base image (operator-sdk's
#                      scaffolded Dockerfile with only FROM changed)
#   a project's image  any operator project's Dockerfile, its first FROM replaced by the base
#
# Each on the ansible-core line ANSIBLE_CORE (hack/lines.sh; default 2.18, as `make image
# ANSIBLE_CORE=2.21` sets it): the base image's build argument, on that line's Debian (bookworm,
# Python 3.11, up to 2.19; trixie, Python 3.13, for 2.20 and 2.21). Images are named
# REPO:<line>-<content hash>, e.g. localhost/operator-runner-seeds:2.18-0123456789abcdef.
# IMAGE_ARCH=arm64 (a Debian architecture; default this host's) builds them for another
# architecture, under emulation (qemu-user-static and binfmt_misc, set up when missing), named
# REPO:<line>-<arch>-<content hash>; slow (the base image: a quarter of an hour or more).
#
#   hack/image.sh build              build the seeds' image (the base image first); each is
#                                    reused when its content hash is built already; print its name
#   hack/image.sh build-base         build the base image; print its name (also tagged
#                                    localhost/operator-runner:<line> and :latest)
#   hack/image.sh build-project DIR [-v SRC:DST]...
#                                    build the operator project in DIR (DIR/Dockerfile, context
#                                    DIR) FROM the base image; print its name,
#                                    localhost/<DIR's projectName in PROJECT, else its folder
#                                    name>:<hash>. -v mounts SRC for the RUN steps (read-only;
#                                    SRC's files count in the hash)
#   hack/image.sh run [-e N=V]... [--entrypoint PROGRAM] [--] [ARG...]
#                                    run an image's entrypoint, or PROGRAM (plus ARGs; IMAGE, default the
#                                    seeds' image) against the cluster of $KUBECONFIG: its root
#                                    filesystem mounted read-only, /tmp a tmpfs, as the image's
#                                    user (1001), tini as PID 1 of a PID namespace, the host's
#                                    network (the API server may be on 127.0.0.1). WATCH_NAMESPACE
#                                    and POD_NAMESPACE pass through; -e sets more variables.
#                                    SIGTERM/SIGINT go to tini.
#   hack/image.sh os                 make the debootstrap image (the line's Debian + python3);
#                                    print it
#   hack/image.sh inspect            print buildah's description of IMAGE (default: the seeds')
#   hack/image.sh rootfs             print the path of IMAGE's root filesystem (never written)
#   hack/image.sh size [IMAGE]       print an image's size (default: the seeds')
#   hack/image.sh prune              bound the cache now (as after every build, see below)
#   hack/image.sh clean              delete the cache (debootstrap tarball, buildah storage)
#   hack/image.sh docker-build IMG   build the base image (tagged $BASE_IMG, default
#                                    operator-runner:latest) and IMG, the seeds' image FROM it,
#                                    with docker when an engine answers, else buildah, else
#                                    podman (make docker-build)
#   hack/image.sh docker-push IMG    push IMG with the same tool (make docker-push)
#   hack/image.sh docker-buildx IMG  the base image for PLATFORMS (default linux/arm64,linux/amd64),
#                                    pushed as $BASE_IMG, then IMG FROM it for the same platforms,
#                                    pushed (make docker-buildx): docker buildx when an engine
#                                    answers, else buildah or podman manifest lists (emulation:
#                                    qemu-user-static)
#
# Needs root (debootstrap, chroot, mount namespaces). buildah and debootstrap are installed with
# apt-get when missing. The cache lives outside the repo, in $OPERATOR_RUNNER_CACHE/image
# (default ~/.cache/operator-runner/image): the debootstrap root filesystem as a tarball keyed by
# the hash of its recipe, and buildah's storage (vfs driver: no overlayfs or fuse needed).
# It stays bounded without deleting what another checkout or test run still uses: after each
# build, of every repository, line and architecture, the KEEP (2) images built or asked for most recently are
# kept, and any other one used in the last IDLE_MINUTES (120, longer than a whole `make test`);
# the rest go (OPERATOR_RUNNER_IMAGE_KEEP, OPERATOR_RUNNER_IMAGE_IDLE_MINUTES change the two). An
# image made and not used since counts as used when it was made.
# Set PYTHON_IMAGE to build the base image on another Python image than the debootstrap one (it
# must be in that storage or pullable).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/progress.sh
. "$here/lib/progress.sh"
CACHE=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}/image
LINE=${ANSIBLE_CORE:-$("$here/lines.sh" default)}
"$here/lines.sh" check "$LINE"
SUITE=$("$here/lines.sh" debian "$LINE")
NATIVE_ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
ARCH=${IMAGE_ARCH:-$NATIVE_ARCH}
# The prefix of the images' tags: the line, and the architecture when it is not this host's.
TAG=$LINE
[ "$ARCH" = "$NATIVE_ARCH" ] || TAG=$LINE-$ARCH
if [ "$ARCH" != "$NATIVE_ARCH" ]; then # (make_rootfs stays as it was: its text is the cache key)
  debootstrap() { command debootstrap --arch="$ARCH" "$@"; }
fi
KEEP=${OPERATOR_RUNNER_IMAGE_KEEP:-2}
IDLE_MINUTES=${OPERATOR_RUNNER_IMAGE_IDLE_MINUTES:-120}
OS_PACKAGES=python3,python3-venv,ca-certificates
OS_REPO=localhost/operator-runner-os
BASE_REPO=localhost/operator-runner
BASE_DOCKERFILE=images/operator-runner/Dockerfile
SEEDS_REPO=localhost/operator-runner-seeds
CONTENT_LABEL=io.github.operator-runner.content-hash # on every image made here: its inputs' hash
export BUILDAH_ISOLATION=chroot # RUN steps in a chroot: no runc/crun, works in a VM or container

die() { echo "image: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }

bah() { buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs "$@"; }

# --- tools --------------------------------------------------------------------------------

ensure_tools() { # ensure_tools COMMAND:PACKAGE...
  local missing=() spec
  for spec in "$@"; do
    command -v "${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    die "needs ${missing[*]}: install them (Debian: apt-get install -y ${missing[*]}) or run as root on Debian"
  fi
  say "installing ${missing[*]} (apt-get) ..."
  apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "$1 needs root (debootstrap, chroot and mount namespaces); run it with sudo"
}

lock() { # serialize builds of concurrent runs (once per process: its subshells share the lock)
  [ -n "${image_locked:-}" ] && return 0
  mkdir -p "$CACHE"
  exec 9>"$CACHE/lock"
  flock 9
  image_locked=1
}

# --- the debootstrap image: $SUITE + python3 --------------------------------------------------

apt_repo() { # the URI of RELEASE in this host's apt sources, if it has one
  # shellcheck disable=SC2016 # apt's own $(FIELD) syntax
  apt-get indextargets --format '$(RELEASE) $(REPO_URI)' 2>/dev/null | awk -v r="$1" '$1 == r { print $2; exit }'
}

in_root() { # in_root DIR COMMAND...: run COMMAND chrooted in DIR with /proc (private mounts)
  # shellcheck disable=SC2016 # expanded by the inner sh
  unshare --mount --fork -- sh -c 'mount -t proc proc "$1/proc" && exec chroot "$@"' sh "$@"
}

apt_sources() { # apt_sources MIRROR SECURITY_MIRROR: deb822 sources of $SUITE, its updates and security
  cat <<EOS
Types: deb
URIs: $1
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $2
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
}

dpkg_slim() { # leave docs, man pages and translations out of every install (as debian:*-slim)
  cat <<'EOS'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOS
}

slim_rootfs() { # slim_rootfs DIR: what debootstrap and apt left that an image does not need
  local dir=$1
  find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$dir/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/lintian/* \
    "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/var/cache/debconf/*-old \
    "$dir"/var/log/* "$dir"/tmp/* "$dir"/root/.cache
  find "$dir" -xdev -name __pycache__ -type d -prune -exec rm -rf {} +
  # A container runtime provides these; keep neutral ones instead of this host's.
  : >"$dir/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
  rm -f "$dir/etc/hostname"
}

make_rootfs() { # make_rootfs DIR: a minimal $SUITE with python3, slimmed like debian:*-slim
  local dir=$1 mirror security
  mirror=${DEBIAN_MIRROR:-$(apt_repo "$SUITE")}
  mirror=${mirror:-http://deb.debian.org/debian/}
  security=${DEBIAN_SECURITY_MIRROR:-$(apt_repo "$SUITE-security")}
  security=${security:-http://deb.debian.org/debian-security/}
  debootstrap --variant=minbase --include="$OS_PACKAGES" "$SUITE" "$dir" "$mirror"
  rm -f "$dir/etc/apt/sources.list"
  apt_sources "$mirror" "$security" >"$dir/etc/apt/sources.list.d/debian.sources"
  dpkg_slim >"$dir/etc/dpkg/dpkg.cfg.d/slim"
  # Security and point-release updates.
  in_root "$dir" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive in_root "$dir" apt-get upgrade -y -qq --no-install-recommends
  in_root "$dir" apt-get clean
  slim_rootfs "$dir"
}

os_key() { # changes whenever the recipe of the debootstrap image changes
  { echo "$SUITE $OS_PACKAGES"; [ "$ARCH" = amd64 ] || echo "$ARCH"
    declare -f make_rootfs in_root apt_sources dpkg_slim slim_rootfs; } | sha256sum | cut -c1-16
}

os_tarball() { # os_tarball KEY: the debootstrap root filesystem of recipe KEY, as a tarball (made once)
  local key=$1 tarball rootfs log start
  tarball=$CACHE/os-$SUITE-$key.tar
  rootfs=$CACHE/rootfs-$key
  log=$CACHE/logs/debootstrap-$key.log
  if [ ! -s "$tarball" ]; then
    rm -rf "$rootfs"
    say "debootstrap $SUITE ($OS_PACKAGES) into $rootfs ... (log: $log)"
    mkdir -p "$CACHE/logs"
    start=$SECONDS
    if ! with_progress image debootstrap "$log" make_rootfs "$rootfs"; then
      tail -n 20 "$log" >&2
      rm -rf "$rootfs"
      die "making the debootstrap root filesystem failed; log: $log"
    fi
    tar --numeric-owner --xattrs -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
    say "debootstrap root filesystem made in $((SECONDS - start)) s: $tarball"
  fi
  echo "$tarball"
}

os_image() { # print the name of the debootstrap image, making it when missing
  local key name tarball ctr mnt
  key=$(os_key)
  name=$OS_REPO:$SUITE-$key
  [ "$ARCH" = "$NATIVE_ARCH" ] || name=$OS_REPO:$SUITE-$ARCH-$key
  if bah inspect --type image "$name" >/dev/null 2>&1; then used "$name"; echo "$name"; return; fi
  need_root "making the debootstrap image"
  ensure_tools debootstrap:debootstrap
  tarball=$(os_tarball "$key")
  ctr=$(bah from --quiet scratch)
  mnt=$(bah mount "$ctr")
  tar --numeric-owner --xattrs -C "$mnt" -xpf "$tarball"
  bah config --arch "$ARCH" --os linux --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd '["/bin/bash"]' \
    --label "org.opencontainers.image.description=debootstrap $SUITE ($OS_PACKAGES)" \
    --label "$CONTENT_LABEL=$key" "$ctr"
  bah commit --quiet --rm "$ctr" "$name" >/dev/null
  used "$name"
  say "debootstrap image $name"
  echo "$name"
}

galaxy_hint() { # galaxy_hint LOG: when the build failed reaching Ansible Galaxy, say so plainly
  grep -q "attempting to call Galaxy" "$1" 2>/dev/null || return 0
  say "the build's ansible-galaxy could not reach Ansible Galaxy (galaxy.ansible.com), where"
  say "requirements.yml's collections named like kubernetes.core come from. Where Galaxy is out of"
  say "reach, name each as a tarball, git repository or folder the build reaches (type: file, git"
  say "or dir in requirements.yml; build-project DIR -v SRC:DST mounts one for the build)."
}

emulation() { # foreign architectures: qemu-user-static, its binfmt_misc handler registered
  local qemu
  [ "$ARCH" != "$NATIVE_ARCH" ] || return 0
  need_root "building for $ARCH (emulation)"
  ensure_tools qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support
  case $ARCH in
    arm64) qemu="qemu-aarch64" ;;
    armhf | armel) qemu="qemu-arm" ;;
    *) qemu=qemu-$ARCH ;;
  esac
  if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    say "mounting binfmt_misc (foreign binaries run under qemu)"
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  fi
  if [ ! -e "/proc/sys/fs/binfmt_misc/$qemu" ]; then
    say "registering $qemu with binfmt_misc (update-binfmts --enable $qemu)"
    update-binfmts --enable "$qemu"
  fi
  [ -e "/proc/sys/fs/binfmt_misc/$qemu" ] || die "cannot run $ARCH binaries: $qemu is not registered with binfmt_misc"
}

# --- building images, cached by content hash ------------------------------------------------

context_files() { # context_files CONTEXT DOCKERFILE: what its COPY lines take from CONTEXT
  local ctx=$1 dockerfile=$2 src
  # COPY [--opt]... SRC... DEST (not --from=: those copy from another stage); SRC may be a glob.
  awk 'toupper($1) == "COPY" && $0 !~ /--from/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' \
    "$dockerfile" | while read -r src; do
    src=${src%/}
    (cd "$ctx" && compgen -G "$src" >/dev/null) || die "$dockerfile copies $src, which is not in $ctx"
    # shellcheck disable=SC2086 # $src is expanded as a glob, as COPY does
    (cd "$ctx" && find $src -type f -not -path '*/__pycache__/*' -not -name '*.pyc' -not -path '*/.pytest_cache/*')
  done
  [ -f "$ctx/.dockerignore" ] && echo .dockerignore
  return 0
}

content_hash() { # content_hash CONTEXT DOCKERFILE LINE...: the inputs' hash (LINEs: parent, args, ...)
  local ctx=$1 dockerfile=$2
  shift 2
  {
    printf '%s\n' "$@"
    sha256sum <"$dockerfile"
    context_files "$ctx" "$dockerfile" | LC_ALL=C sort -u | (cd "$ctx" && xargs -r -d '\n' sha256sum)
  } | sha256sum | cut -c1-16
}

files_hash() { # files_hash DIR: the hash of the files below DIR (names and contents)
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -r -0 sha256sum) | sha256sum | cut -c1-16
}

image_id() { bah inspect --type image --format '{{.FromImageID}}' "$1" 2>/dev/null || echo "$1"; }

python_image() { # PYTHON_IMAGE, else the debootstrap image
  if [ -n "${PYTHON_IMAGE:-}" ]; then echo "$PYTHON_IMAGE"; else os_image; fi
}

host_ca() { # the CA bundle this host trusts (a TLS-intercepting proxy's CA included), if any
  local f
  for f in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [ -n "$f" ] && [ -s "$f" ]; then echo "$f"; return; fi
  done
}

ca_secret() { # the CA bundle of this host for pip in the base image's build
  local f
  f=$(host_ca)
  if [ -n "$f" ]; then echo "--secret=id=ca-certificates,src=$f"; fi
}

# build_trusts_host BASE: for a project's build FROM BASE, when this host trusts certificate
# authorities the image does not (a TLS-intercepting proxy's), a read-only volume of this host's
# CA bundle over the image's, so that a RUN step's pip, apt or git reaches PyPI and the rest as
# this host does. For the build's RUN steps only: nothing of it stays in the image, and it is not
# part of the content hash. OPERATOR_RUNNER_BUILD_CA=0 leaves it out.
build_trusts_host() {
  local ca bundle=etc/ssl/certs/ca-certificates.crt root
  [ "${OPERATOR_RUNNER_BUILD_CA:-1}" != 0 ] || return 0
  ca=$(host_ca)
  [ -n "$ca" ] || return 0
  root=$(rootfs "$1")
  if [ -f "$root/$bundle" ] && ! cmp -s "$ca" "$root/$bundle"; then
    echo "--volume=$ca:/$bundle:ro"
  fi
}

ca_hint() { # ca_hint LOG: when a RUN step could not rewrite the CA bundle mounted over the image's
  grep -q "ca-certificates.crt.*\(busy\|Read-only\)" "$1" 2>/dev/null || return 0
  say "this host's CA bundle is mounted over the image's for the build (it trusts a CA the image does not), and a"
  say "RUN step tried to rewrite it (update-ca-certificates, an upgrade of ca-certificates); build"
  say "again with OPERATOR_RUNNER_BUILD_CA=0 where the image's own certificate authorities suffice."
}

# build_image REPO CONTEXT DOCKERFILE WHAT HASH BUD_OPTION...: build REPO:LINE-HASH with
# buildah unless it is built already; print its name.
build_image() {
  local repo_name=$1 ctx=$2 dockerfile=$3 what=$4 hash=$5 name log start
  shift 5
  name=$repo_name:$TAG-$hash
  if bah inspect --type image "$name" >/dev/null 2>&1; then
    say "$what $name is built already (same content hash)"
    used "$name"
    echo "$name"
    return
  fi
  need_root "building $what"
  mkdir -p "$CACHE/logs"
  log=$CACHE/logs/build-${repo_name##*/}-$hash.log
  say "building $what $name ... (log: $log)"
  start=$SECONDS
  # No --layers: with the vfs driver every cached layer is a full copy of the tree (a cold build
  # takes 2.5x as long); the content hash is the cache.
  [ "$ARCH" = "$NATIVE_ARCH" ] || set -- --platform "linux/$ARCH" "$@"
  if ! with_progress image "building $what" "$log" bah bud --pull-never "$@" \
      --label "$CONTENT_LABEL=$hash" \
      -f "$dockerfile" -t "$name" "$ctx"; then
    tail -n 30 "$log" >&2
    galaxy_hint "$log"
    ca_hint "$log"
    die "building $what failed; log: $log"
  fi
  say "built $what $name in $(elapsed $((SECONDS - start))) ($(image_size "$name"))"
  used "$name"
  prune
  echo "$name"
}

base_args() { # the build arguments of the base image, one per line
  echo "PYTHON_IMAGE=$1"
  echo "ANSIBLE_CORE=$LINE"
}

build_base() { # print the name of the base image, building it when missing
  local python_ref hash name secret arg
  local -a args=() bud=()
  lock
  python_ref=$(python_image)
  mapfile -t args < <(base_args "$python_ref")
  hash=$(content_hash "$repo" "$repo/$BASE_DOCKERFILE" "from $(image_id "$python_ref")" "${args[@]}")
  for arg in "${args[@]}"; do bud+=("--build-arg=$arg"); done
  secret=$(ca_secret)
  [ -n "$secret" ] && bud+=("$secret")
  name=$(build_image "$BASE_REPO" "$repo" "$repo/$BASE_DOCKERFILE" "the base image" "$hash" "${bud[@]}")
  # What a project's `FROM operator-runner:latest` (or :<line>) finds in this storage.
  if [ "$ARCH" = "$NATIVE_ARCH" ]; then
    bah tag "$name" "$BASE_REPO:$LINE" "$BASE_REPO:latest"
  else
    bah tag "$name" "$BASE_REPO:$TAG"
  fi
  echo "$name"
}

project_name() { # project_name DIR: PROJECT's projectName (operator-sdk, init), else the folder's name
  local name
  name=$(awk '$1 == "projectName:" { print $2; exit }' "$1/PROJECT" 2>/dev/null || true)
  name=${name:-$(basename "$1")}
  echo "$name" | tr '[:upper:]_' '[:lower:]-'
}

# build_derived REPO DIR WHAT [-v SRC:DST]...: the image of DIR/Dockerfile (context DIR), its
# first FROM replaced by the base image.
build_derived() {
  local repo_name=$1 dir=$2 what=$3 base hash spec
  shift 3
  local -a volumes=() lines=()
  while [ $# -gt 0 ]; do
    case $1 in
      -v) [ $# -ge 2 ] || die "build-project: -v needs SRC:DST"; spec=$2; shift 2 ;;
      *) die "build-project: unknown option $1 (usage: build-project DIR [-v SRC:DST]...)" ;;
    esac
    [ -d "${spec%%:*}" ] || die "build-project: -v $spec: ${spec%%:*} is not a folder"
    volumes+=("--volume=$spec:ro")
    lines+=("volume ${spec#*:} $(files_hash "${spec%%:*}")")
  done
  [ -f "$dir/Dockerfile" ] || die "$dir has no Dockerfile"
  lock
  base=$(build_base)
  hash=$(content_hash "$dir" "$dir/Dockerfile" "from $(image_id "$base")" "${lines[@]}")
  if ! bah inspect --type image "$repo_name:$TAG-$hash" >/dev/null 2>&1; then
    mapfile -t -O "${#volumes[@]}" volumes < <(build_trusts_host "$base")
  fi
  build_image "$repo_name" "$dir" "$dir/Dockerfile" "$what" "$hash" --from "$base" "${volumes[@]}"
}

build() { build_derived "$SEEDS_REPO" "$repo" "the seeds' image"; }

build_project() {
  local dir=${1:?usage: build-project DIR [-v SRC:DST]...}
  shift
  [ -d "$dir" ] || die "build-project: $dir is not a folder"
  dir=$(cd "$dir" && pwd)
  build_derived "localhost/$(project_name "$dir")" "$dir" "the image of $(basename "$dir")" "$@"
}

# --- the cache: bounded, never taking an image another run may still use ---------------------

used_file() { local ref=${1#localhost/}; echo "$CACHE/used/${ref//[:\/]/_}"; }

used() { mkdir -p "$CACHE/used"; touch "$(used_file "$1")"; } # used NAME: built or asked for now

# prunable: the images that prune removes, one a line. Those this script made (the label
# CONTENT_LABEL), named by a content hash (REPO:PREFIX-HASH or REPO:HASH; :latest and :<line>
# are other names of kept ones): of each repository and prefix (the line, or the Debian suite of
# the debootstrap images), all but the KEEP used most recently, unless used in the last
# IDLE_MINUTES; those without a prefix (named before the lines) only while used that lately.
# (The prefix takes the architecture in too: 2.18-arm64-.)
# Last used: the later of the image's record of use and its creation (an image that another
# checkout's older hack/image.sh made has no record).
prunable() {
  local ref created last made now
  now=$(date +%s)
  bah images --filter "label=$CONTENT_LABEL" --format '{{.Name}}:{{.Tag}}|{{.CreatedAtRaw}}' |
    while IFS='|' read -r ref created; do
      [[ ${ref##*:} =~ ^([A-Za-z0-9.-]+-)?[0-9a-f]{16}$ ]] || continue
      last=$(stat -c %Y "$(used_file "$ref")" 2>/dev/null || echo 0)
      made=$(date -d "${created% UTC}" +%s 2>/dev/null || echo 0)
      [ "$made" -le "$last" ] || last=$made
      echo "$last ${ref%:*}:${BASH_REMATCH[1]} $ref"
    done | sort -k1,1nr | awk -v keep="$KEEP" -v since=$((now - IDLE_MINUTES * 60)) \
      '{ n[$2]++ } n[$2] > ($2 ~ /:$/ ? 0 : keep) && $1 < since { print $3 }'
}

prune() { # the images of prunable, with their run containers and their record of use
  local ref
  prunable | while read -r ref; do
    bah rm "$(rootfs_container "$ref")" >/dev/null 2>&1 || true
    # (fails while an image built FROM it is kept: it goes with that one)
    if bah rmi "$ref" >/dev/null 2>&1; then rm -f "$(used_file "$ref")"; fi
  done
  bah rmi --prune >/dev/null 2>&1 || true
}

image_size() { bah images --format '{{.Size}}' "$1" 2>/dev/null || echo "?"; }

rootfs_container() { local ref=${1#localhost/}; echo "rootfs-${ref//[:\/]/-}"; }

rootfs() { # rootfs IMAGE: the path of its root filesystem (a container made once, never written)
  local image=$1 ctr
  lock
  ctr=$(rootfs_container "$image")
  used "$image"
  bah inspect --type container "$ctr" >/dev/null 2>&1 ||
    bah from --quiet --pull-never --arch "$ARCH" --name "$ctr" "$image" >/dev/null
  bah mount "$ctr"
}

# --- running the image --------------------------------------------------------------------

# The last step inside the sandbox: chroot, working directory, user, no new privileges, then the
# image's entrypoint with the image's environment. Python from the host (this is the "runtime",
# not the image's Python); -I -S so the image's PYTHON* variables do not apply to it.
LAUNCHER='
import ctypes, os, sys
root, workdir, uid, gid, envfile = sys.argv[1:6]
argv = sys.argv[6:]
env = dict(e.split("=", 1) for e in open(envfile, encoding="utf-8").read().split("\0") if e)
os.setsid()  # its own session: signals reach it only through hack/image.sh, as in a container
os.chroot(root)
os.chdir(workdir)
os.setgroups([])
os.setgid(int(gid))
os.setuid(int(uid))
if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    sys.exit("image: prctl(PR_SET_NO_NEW_PRIVS) failed")
exe = argv[0]
if "/" not in exe:  # PATH lookup by hand: no stdlib of this Python in the new root
    for d in env.get("PATH", "/usr/bin:/bin").split(":"):
        if os.access(os.path.join(d, exe), os.X_OK):
            exe = os.path.join(d, exe)
            break
os.execve(exe, argv, env)
'

sandbox() { # inside `unshare --mount --pid --fork` (PID 1 of the new PID namespace)
  local rootfs=$1 state=$2 uid=$3 gid=$4 workdir=$5
  shift 5
  local r=$state/root d
  mount --bind "$rootfs" "$r"
  mount -o remount,bind,ro,nosuid,nodev "$r"
  mount -t proc -o nosuid,nodev,noexec proc "$r/proc"
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$r/sys"
  mount -t tmpfs -o nosuid,nodev,mode=1777,size=1g tmpfs "$r/tmp"
  mount -t tmpfs -o nosuid,noexec,mode=755,size=64k tmpfs "$r/dev"
  for d in null zero full random urandom tty; do
    : >"$r/dev/$d"
    mount --bind "/dev/$d" "$r/dev/$d"
  done
  mkdir "$r/dev/pts" "$r/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,nosuid,noexec devpts "$r/dev/pts"
  ln -s pts/ptmx "$r/dev/ptmx"
  mount -t tmpfs -o nosuid,nodev,noexec,mode=1777,size=64m tmpfs "$r/dev/shm"
  ln -s /proc/self/fd "$r/dev/fd"
  ln -s /proc/self/fd/0 "$r/dev/stdin"
  ln -s /proc/self/fd/1 "$r/dev/stdout"
  ln -s /proc/self/fd/2 "$r/dev/stderr"
  for d in hosts resolv.conf; do
    if [ -f "$r/etc/$d" ] && [ -f "/etc/$d" ]; then mount --bind -o ro "/etc/$d" "$r/etc/$d"; fi
  done
  install -o "$uid" -g "$gid" -m 0600 "$state/kubeconfig" "$r/tmp/kubeconfig"
  exec "${PYTHON_LAUNCHER:-python3}" -I -S -c "$LAUNCHER" "$r" "$workdir" "$uid" "$gid" "$state/env" "$@"
}

config_list() { # config_list IMAGE FIELD: a list of the image's config (Env, Entrypoint, Cmd), one a line
  bah inspect --type image --format "{{range .OCIv1.Config.$2}}{{println .}}{{end}}" "$1" | sed '/^$/d'
}

config_value() { bah inspect --type image --format "{{.OCIv1.Config.$2}}" "$1"; } # IMAGE FIELD

user_ids() { # user_ids ROOTFS USER: "UID GID" of an image's USER (name or uid[:gid]), by its /etc/passwd
  local rootfs=$1 user=$2 uid gid
  uid=${user%%:*}
  uid=${uid:-0}
  [[ $uid =~ ^[0-9]+$ ]] || uid=$(awk -F: -v u="$uid" '$1 == u { print $3 }' "$rootfs/etc/passwd")
  if [[ $user == *:* ]]; then gid=${user#*:}; else
    gid=$(awk -F: -v u="$uid" '$3 == u { print $4; exit }' "$rootfs/etc/passwd")
  fi
  echo "$uid ${gid:-0}"
}

sandbox_env() { # sandbox_env IMAGE NAME=VALUE...: the entrypoint's environment, NUL-separated
  local image=$1
  shift
  config_list "$image" Env | tr '\n' '\0'
  printf '%s\0' "KUBECONFIG=/tmp/kubeconfig" "HOSTNAME=$(hostname)"
  [ -z "${WATCH_NAMESPACE+x}" ] || printf '%s\0' "WATCH_NAMESPACE=$WATCH_NAMESPACE"
  [ -z "${POD_NAMESPACE+x}" ] || printf '%s\0' "POD_NAMESPACE=$POD_NAMESPACE"
  [ $# -eq 0 ] || printf '%s\0' "$@"
}

forward() { # forward SIGNAL PID: to the child of PID (unshare's child: PID 1 of the sandbox)
  local child
  child=$(cat "/proc/$2/task/$2/children" 2>/dev/null || true)
  if [ -n "$child" ]; then kill -s "$1" "$child" 2>/dev/null || true; fi
}

run_forwarding() { # run_forwarding CMD...: CMD (unshare) in the background; SIGTERM/SIGINT handed
  # to the sandbox's PID 1 (unshare itself ignores them while it waits); CMD's exit status
  local upid rc
  "$@" &
  upid=$!
  trap 'forward TERM "$upid"' TERM
  trap 'forward INT "$upid"' INT
  while :; do
    rc=0
    wait "$upid" || rc=$?
    if [ "$rc" -le 128 ] || ! kill -0 "$upid" 2>/dev/null; then break; fi
  done
  trap - TERM INT
  return "$rc"
}

run() {
  local extra_env=() image=${IMAGE:-} rootfs_dir uid gid workdir state rc=0 given_entrypoint=
  local -a entrypoint cmd
  while [ $# -gt 0 ]; do
    case $1 in
      -e) [ $# -ge 2 ] || die "run: -e needs NAME=VALUE"; extra_env+=("$2"); shift 2 ;;
      --entrypoint) [ $# -ge 2 ] || die "run: --entrypoint needs a program"; given_entrypoint=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  need_root "running the image"
  [ -n "${KUBECONFIG:-}" ] || die "run: set KUBECONFIG to the cluster's kubeconfig"
  [ -n "$image" ] || image=$(build)
  rootfs_dir=$(rootfs "$image")
  mapfile -t entrypoint < <(config_list "$image" Entrypoint)
  mapfile -t cmd < <(config_list "$image" Cmd)
  if [ -n "$given_entrypoint" ]; then # as `docker run --entrypoint`: the image's CMD goes too
    entrypoint=("$given_entrypoint")
    cmd=()
  fi
  [ $# -eq 0 ] || cmd=("$@") # arguments replace the image's CMD, as `docker run IMAGE ARG...` does
  [ ${#entrypoint[@]} -gt 0 ] || [ ${#cmd[@]} -gt 0 ] || die "run: the image has no entrypoint and no command"
  workdir=$(config_value "$image" WorkingDir)
  read -r uid gid < <(user_ids "$rootfs_dir" "$(config_value "$image" User)")
  state=$(mktemp -d "${TMPDIR:-/tmp}/operator-runner-image.XXXXXX")
  mkdir "$state/root"
  # Self-contained (certificates inline): the files it names are not inside the image.
  "$here/kubectl.sh" config view --raw --flatten --minify >"$state/kubeconfig" || die "run: cannot read KUBECONFIG=$KUBECONFIG"
  sandbox_env "$image" "${extra_env[@]}" >"$state/env"
  say "running $image as uid $uid (root filesystem $rootfs_dir read-only)"
  run_forwarding unshare --mount --pid --fork --kill-child -- "$here/image.sh" __sandbox "$rootfs_dir" "$state" \
    "$uid" "$gid" "${workdir:-/}" "${entrypoint[@]}" "${cmd[@]}" || rc=$?
  rm -f "$state/kubeconfig" "$state/env"
  rmdir "$state/root" "$state" 2>/dev/null || true # never rm -r: the root may still be mounted
  return "$rc"
}

# --- make docker-build / docker-push ------------------------------------------------------

engine() { # docker when an engine answers, else buildah, else podman
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo docker
  elif command -v buildah >/dev/null 2>&1; then echo buildah
  elif command -v podman >/dev/null 2>&1; then echo podman
  else die "no container tool: no docker engine answers and neither buildah nor podman is installed (apt-get install -y buildah)"
  fi
}

docker_build() { # the base image ($BASE_IMG, and operator-runner:latest), then IMG FROM it
  local img=${1:?usage: docker-build IMG} base=${BASE_IMG:-operator-runner:latest} tool secret
  local -a tags=(-t "$base")
  local -a args=(--build-arg "ANSIBLE_CORE=$LINE"
    --build-arg "PYTHON_IMAGE=${PYTHON_IMAGE:-$("$here/lines.sh" python-image "$LINE")}")
  secret=$(ca_secret)
  [ -n "$secret" ] && args+=("$secret")
  [ "$base" = operator-runner:latest ] || tags+=(-t operator-runner:latest)
  tool=$(engine)
  say "building the base image $base (ansible-core $LINE) with $tool"
  case $tool in
    docker) DOCKER_BUILDKIT=1 docker build "${args[@]}" -f "$repo/$BASE_DOCKERFILE" "${tags[@]}" "$repo" ;;
    buildah) buildah bud --layers "${args[@]}" -f "$repo/$BASE_DOCKERFILE" "${tags[@]}" "$repo" ;;
    podman) podman build "${args[@]}" -f "$repo/$BASE_DOCKERFILE" "${tags[@]}" "$repo" ;;
  esac
  # ./Dockerfile says FROM operator-runner:latest, as an operator project's would.
  say "building $img FROM $base with $tool"
  case $tool in
    docker) DOCKER_BUILDKIT=1 docker build -t "$img" "$repo" ;;
    buildah) buildah bud --layers --from "$base" -t "$img" "$repo" ;;
    podman) podman build --from "$base" -t "$img" "$repo" ;;
  esac
}

docker_buildx() { # the base image for PLATFORMS, pushed as BASE_IMG; then IMG FROM it, pushed
  local img=${1:?usage: docker-buildx IMG} base=${BASE_IMG:-operator-runner:latest} tool secret
  local platforms=${PLATFORMS:-linux/arm64,linux/amd64} builder=operator-runner-builder
  local -a args=(--build-arg "ANSIBLE_CORE=$LINE"
    --build-arg "PYTHON_IMAGE=${PYTHON_IMAGE:-$("$here/lines.sh" python-image "$LINE")}")
  secret=$(ca_secret)
  [ -n "$secret" ] && args+=("$secret")
  [[ $base == */* ]] || die "docker-buildx pushes: set BASE_IMG to <registry>/operator-runner:<tag> (now $base)"
  tool=$(engine)
  say "building the base image $base for $platforms with $tool, then $img FROM it; both pushed"
  case $tool in
    docker)
      docker buildx create --name "$builder" >/dev/null 2>&1 || true
      docker buildx build --builder "$builder" --push --platform "$platforms" "${args[@]}" \
        -f "$repo/$BASE_DOCKERFILE" -t "$base" "$repo"
      # ./Dockerfile says FROM operator-runner:latest: that name is the image just pushed.
      docker buildx build --builder "$builder" --push --platform "$platforms" \
        --build-context "operator-runner:latest=docker-image://$base" -t "$img" "$repo"
      docker buildx rm "$builder" >/dev/null 2>&1 || true
      ;;
    buildah | podman)
      "$tool" manifest rm "$base" >/dev/null 2>&1 || true
      "$tool" build --platform "$platforms" --manifest "$base" "${args[@]}" -f "$repo/$BASE_DOCKERFILE" "$repo"
      "$tool" manifest push --all "$base" "docker://$base"
      "$tool" manifest rm "$img" >/dev/null 2>&1 || true
      "$tool" build --platform "$platforms" --manifest "$img" --pull=always --from "$base" "$repo"
      "$tool" manifest push --all "$img" "docker://$img"
      ;;
  esac
}

docker_push() {
  local img=${1:?usage: docker-push IMG} tool
  tool=$(engine)
  say "pushing $img with $tool"
  case $tool in
    docker) docker push "$img" ;;
    buildah) buildah push "$img" "docker://$img" ;;
    podman) podman push "$img" ;;
  esac
}

# --- main ---------------------------------------------------------------------------------

action=${1:-}
[ $# -gt 0 ] && shift
case $action in
  build | build-base | build-project | run | os | prune | inspect | rootfs | size) ensure_tools buildah:buildah ;;
esac
case $action in
  build | build-base | build-project | os) emulation ;;
esac
case $action in
  build) lock; build ;;
  build-base) lock; build_base ;;
  build-project) lock; build_project "$@" ;;
  run) run "$@" ;;
  os) lock; os_image ;;
  prune) lock; prune ;;
  rootfs) rootfs "${IMAGE:-$(build)}" ;;
  inspect) bah inspect --type image "${IMAGE:-$(build)}" ;;
  size) image_size "${1:-${IMAGE:-$(build)}}" ;;
  clean)
    if [ -d "$CACHE/storage" ]; then bah rm --all >/dev/null 2>&1 || true; fi
    rm -rf "$CACHE"
    ;;
  docker-build) docker_build "$@" ;;
  docker-push) docker_push "$@" ;;
  docker-buildx) docker_buildx "$@" ;;
  __sandbox) sandbox "$@" ;;
  *) die "usage: hack/image.sh build | build-base | build-project DIR [-v SRC:DST]... | run [-e NAME=VALUE]... [--entrypoint PROGRAM] [ARG...] | os | prune | inspect | rootfs | size [IMAGE] | clean | docker-build IMG | docker-push IMG | docker-buildx IMG" ;;
esac
