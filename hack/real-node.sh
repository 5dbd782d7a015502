#!/usr/bin/env bash
# One real node (containerd + runc + kubelet + kube-proxy) beside the kwok Nodes of a local
# cluster, so that Pods really run: make cluster NODE=real (hack/cluster.sh calls this).
#
#   hack/real-node.sh check             exit 0 when this machine can host a real node, else say
#                                       why (one message) and exit 3
#   hack/real-node.sh prepare           packages, kubelet/kube-proxy, images (no host change yet)
#   hack/real-node.sh up NAME KUBECONFIG PKI_DIR
#                                       join the real node to cluster NAME (idempotent: reused
#                                       when it is up for NAME)
#   hack/real-node.sh down [NAME]       stop the node and undo every host change it made
#   hack/real-node.sh load-image [IMAGE]
#                                       put IMAGE (default: the seeds' image, built by
#                                       hack/image.sh build when missing) into the running node's
#                                       containerd; print its name (make deploy NODE=real)
#   hack/real-node.sh owner             print the cluster that the real node is up for, if any
#   hack/real-node.sh state-dir         print the node's state folder
#
# Everything lives in one folder, $CACHE_ROOT/real-node:
#   lock      flock'ed by `up`/`down`, and held by the node's daemons while they run: one real
#             node per machine (port 10250, the node name and iptables rules are global)
#   owner     the cluster that the node belongs to
#   host/     the host's state as it was before the first change (sysctls, iptables, paths
#             that did not exist): written once, restored and deleted by `down`
#   run/      containerd, kubelet, kube-proxy, CNI, registry, logs (removed by `down`)
#   images/   the locally built images (cached by content hash; kept)
#
# The recipe (docs/local-cluster.md, "A cluster where Pods really run") works on a machine like
# the project's (root in a VM, cgroup v1 hierarchies, no systemd, no Docker, no registry) with
# seven fixes, each applied where its number is named:
#   1. no CAP_SYS_RESOURCE, so nothing may lower oom_score_adj: containerd's CRI plugin gets
#      restrict_oom_score_adj = true
#   2. crun fails on the hybrid cgroup layout: runc
#   3. no systemd: the cgroupfs driver everywhere (SystemdCgroup = false, cgroupDriver: cgroupfs)
#   4. kubelet on cgroup v1 with containerd 1.6: failCgroupV1: false (containerd 1.6 lacks the
#      RuntimeConfig RPC; kubelet falls back to its own cgroupDriver: the versions are pinned)
#   5. kwok-controller would take the real Node over: it manages only the Nodes annotated
#      kwok.x-k8s.io/node=fake (hack/cluster.sh)
#   6. kubectl logs/exec resolved the Node's hostname: the API server reaches kubelets by
#      InternalIP (hack/cluster.sh)
#   7. kwokctl's serving certificate has no SAN for the Service IP 10.0.0.1, so Pods' in-cluster
#      TLS failed: it is reissued from the cluster's CA with that IP
# The configurations are files in hack/real-node/ (containerd, CNI, registry hosts, kubelet,
# kube-proxy, the node's kubeconfigs), rendered into run/ with their @NAME@s filled in.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib/progress.sh
. "$here/lib/progress.sh"
CACHE_ROOT=${OPERATOR_RUNNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operator-runner}
TEMPLATES=$here/real-node
STATE=$CACHE_ROOT/real-node
RUN=$STATE/run
HOST=$STATE/host
NODE_NAME=real-node
BRIDGE=ortbr0
POD_CIDR=10.244.0.0/24
NODE_IP=10.244.0.1
SERVICE_IP=10.0.0.1
KUBELET_PORT=10250
PACKAGES=(containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins
  buildah:buildah busybox:busybox-static debootstrap:debootstrap iptables:iptables
  nft:nftables conntrack:conntrack openssl:openssl)
# Sysctls that kubelet (vm.*, kernel.*), kube-proxy (route_localnet, conntrack) and the CNI
# bridge plugin (ip_forward) may set: recorded before the first change, restored by `down`.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet
  net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding
  net.ipv6.conf.all.forwarding net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables net.netfilter.nf_conntrack_max
  net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal)
# Host paths that containerd, kubelet or CNI create outside their configured folders.
HOST_PATHS=(/run/containerd /var/lib/cni /var/log/pods /var/log/containers /run/netns
  /var/run/netns /opt/containerd /var/lib/kubelet /etc/kubernetes /run/runc)
IPTABLES_TABLES=(filter nat mangle raw security)

die() { echo "real-node: $*" >&2; exit 1; }
say() { echo "real-node: $*" >&2; }

# --- can this machine host a real node? --------------------------------------------------

# cannot_host: print why this machine cannot host a real node (nothing when it can). Changes
# nothing on the host (the probes run in a throwaway network namespace or cgroup).
cannot_host() {
  [ "$(uname -s)" = Linux ] || { echo "it is not Linux"; return; }
  [ "$(id -u)" -eq 0 ] || { echo "it needs root (kubelet, containerd, iptables, network namespaces), and this is $(id -un)"; return; }
  command -v apt-get >/dev/null 2>&1 || command -v containerd >/dev/null 2>&1 \
    || { echo "containerd is not installed and there is no apt-get to install it"; return; }
  local ctrl
  for ctrl in memory cpu pids; do
    if [ ! -d "/sys/fs/cgroup/$ctrl" ] && ! grep -qw "$ctrl" /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
      echo "no usable cgroup controller '$ctrl' (neither /sys/fs/cgroup/$ctrl nor in cgroup2's cgroup.controllers)"; return
    fi
  done
  local probe=/sys/fs/cgroup/memory/ort-probe-$$
  [ -d /sys/fs/cgroup/memory ] || probe=/sys/fs/cgroup/ort-probe-$$
  if ! mkdir "$probe" 2>/dev/null; then echo "cgroups are not writable ($(dirname "$probe"))"; return; fi
  rmdir "$probe"
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || { echo "the kernel has no overlay file system (containerd's snapshotter)"; return; }
  if ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "unshare or ip (util-linux, iproute2) is missing"; return
  fi
  if ! unshare --net -- sh -c 'ip link add ortprobe0 type bridge && ip link add ortprobe1 type veth peer name ortprobe2' 2>/dev/null; then
    echo "the kernel cannot make bridges or veth pairs (modules bridge, veth)"; return
  fi
  local port
  for port in $KUBELET_PORT 10248 10249 10256; do
    if owner_of_port "$port" >/dev/null; then
      [ -n "$(node_pids)" ] && continue # ours
      echo "port $port (kubelet/kube-proxy) is taken by another process: $(owner_of_port "$port")"; return
    fi
  done
}

owner_of_port() { ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:.*' | head -n 1 | grep .; }

check() {
  local why
  why=$(cannot_host)
  if [ -n "$why" ]; then
    echo "real-node: this machine cannot host a real node: $why. Nothing was set up. 'make cluster' (kwok Nodes only) still works." >&2
    exit 3
  fi
}

# --- packages, binaries, images (no change to the host's network or kernel settings) --------

ensure_packages() {
  local missing=() spec
  for spec in "${PACKAGES[@]}"; do
    if [[ ${spec%%:*} == /* ]]; then [ -e "${spec%%:*}" ] || missing+=("${spec#*:}")
    else command -v "${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec#*:}"); fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "needs ${missing[*]}; install them (this is not a Debian system with apt-get)"
  say "installing ${missing[*]} (apt-get update, apt-get install) ..."
  apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
  # Debian's containerd package may start a system containerd (where there is an init system);
  # ours has its own socket, root and state, so the two never meet.
}

bin_dir() { "$here/build-binaries.sh" --node | tail -n 1; }

prepare() {
  ensure_packages
  BIN=$(bin_dir)
  IMAGES_LAYOUT=$("$here/node-images.sh" build | tail -n 1)
}

# --- recording and restoring the host ------------------------------------------------------

record_host() { # once: a second `up` after an interruption must not record our own changes
  [ -f "$HOST/complete" ] && return 0
  rm -rf "$HOST"
  mkdir -p "$HOST"
  local key path
  for key in "${SYSCTLS[@]}"; do
    if [ -e "/proc/sys/${key//.//}" ]; then echo "$key=$(sysctl -n "$key" 2>/dev/null | tr '\t' ' ')"; fi
  done >"$HOST/sysctl"
  for path in "${HOST_PATHS[@]}"; do [ -e "$path" ] || [ -L "$path" ] || echo "$path"; done >"$HOST/absent-paths"
  iptables-save >"$HOST/iptables"
  ip6tables-save >"$HOST/ip6tables"
  nft list tables >"$HOST/nft-tables" 2>/dev/null || : >"$HOST/nft-tables"
  find /sys/fs/cgroup -maxdepth 2 -name kubepods -type d >"$HOST/cgroups" 2>/dev/null || true
  touch "$HOST/complete"
}

restore_sysctls() {
  [ -f "$HOST/sysctl" ] || return 0
  local line key value
  while IFS= read -r line; do
    key=${line%%=*} value=${line#*=}
    [ "$(sysctl -n "$key" 2>/dev/null | tr '\t' ' ')" = "$value" ] && continue
    sysctl -q -w "$key=$value" >/dev/null 2>&1 || say "could not restore sysctl $key=$value"
  done <"$HOST/sysctl"
}

restore_iptables() {
  [ -f "$HOST/iptables" ] || return 0
  local family save restore before table
  for family in ip ip6; do
    if [ $family = ip ]; then save=iptables-save restore=iptables-restore before=$HOST/iptables
    else save=ip6tables-save restore=ip6tables-restore before=$HOST/ip6tables; fi
    [ "$(normalize_iptables <($save))" = "$(normalize_iptables "$before")" ] && continue
    # Tables that did not exist before: deleted (iptables-nft keeps empty tables otherwise).
    for table in "${IPTABLES_TABLES[@]}"; do
      if ! grep -q "^\*$table\$" "$before" && $save -t "$table" 2>/dev/null | grep "^\*$table" >/dev/null; then
        nft delete table "$family" "$table" 2>/dev/null \
          || { "${family/ip6/ip6}tables" -t "$table" -F 2>/dev/null; "${family/ip6/ip6}tables" -t "$table" -X 2>/dev/null; } || true
      fi
    done
    # Tables that existed: back to their rules as recorded.
    if grep -q '^\*' "$before"; then $restore <"$before"; fi
  done
  return 0
}

normalize_iptables() { sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//' "$1"; }

remove_created_paths() {
  [ -f "$HOST/absent-paths" ] || return 0
  local path
  while IFS= read -r path; do
    [ -n "$path" ] || continue
    if [ -e "$path" ] || [ -L "$path" ]; then unmount_under "$path"; rm -rf "$path"; fi
  done <"$HOST/absent-paths"
}

unmount_under() { # every mount at or below $1, deepest first
  local prefix=$1 m
  awk '{ print $2 }' /proc/mounts | sed 's/\\040/ /g' | awk -v p="$prefix" '$0 == p || index($0, p "/") == 1' \
    | sort -r | while IFS= read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}

remove_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$dir" ] || continue
    grep -qxF "$dir" "$HOST/cgroups" 2>/dev/null && continue # there before: not ours
    find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ -d "$dir" ] && say "cgroup $dir could not be removed (processes still in it?)"
  done
  return 0
}

# --- the node's processes --------------------------------------------------------------------

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

node_pids() { # the daemons of a node that is up (registry, containerd, kubelet, kube-proxy)
  local f pid
  for f in "$RUN"/pids/*; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    pid_alive "$pid" && echo "$pid"
  done
  return 0
}

start_daemon() { # start_daemon NAME CMD...: in its own session, log in run/logs, pid in run/pids
  local name=$1 pidfile=$RUN/pids/$1
  shift
  if [ -f "$pidfile" ] && pid_alive "$(cat "$pidfile")"; then return 0; fi
  # fd 9 (the lock) is inherited: the lock is held for as long as the node's daemons run.
  setsid "$@" >>"$RUN/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
}

stop_daemon() { # stop_daemon NAME [TIMEOUT]: SIGTERM, then SIGKILL
  local pidfile=$RUN/pids/$1 timeout=${2:-20} pid i
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do pid_alive "$pid" || break; sleep 0.1; done
    pid_alive "$pid" && kill -KILL "$pid" 2>/dev/null
    for ((i = 0; i < 50; i++)); do pid_alive "$pid" || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

wait_until() { # wait_until SECONDS WHAT CMD...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
  [ -n "$what" ] && say "$what"
  return 0
}

ctr_() { ctr --address "$RUN/containerd.sock" -n k8s.io "$@"; }

# --- configurations and certificates ---------------------------------------------------------

# render TEMPLATE OUT NAME=VALUE...: hack/real-node/TEMPLATE into OUT, @NAME@ -> VALUE. OUT is
# left as it is when it has that content already: a daemon may watch its file (kube-proxy exits
# when its configuration file changes, and a second `up` of a running node must not stop it).
render() {
  local template=$1 out=$2 text pair
  shift 2
  text=$(<"$TEMPLATES/$template")
  for pair in "$@"; do
    text=${text//"@${pair%%=*}@"/"${pair#*=}"}
  done
  if [[ $text =~ @[A-Z_]+@ ]]; then die "hack/real-node/$template: ${BASH_REMATCH[0]} has no value"; fi
  [ "$(cat "$out" 2>/dev/null)" != "$text" ] || return 0
  printf '%s\n' "$text" >"$out.new"
  mv -f "$out.new" "$out"
}

random_serial() { echo "0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"; }

issue_cert() { # issue_cert PKI OUT CN O EXT: OUT.crt/OUT.key signed by PKI/ca.{crt,key}
  local pki=$1 out=$2 cn=$3 org=$4 ext=$5
  openssl req -new -newkey rsa:2048 -nodes -keyout "$out.key" -subj "/O=$org/CN=$cn" -out "$out.csr" 2>/dev/null
  openssl x509 -req -in "$out.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -days 365 \
    -set_serial "$(random_serial)" -extfile <(printf '%s\n' "$ext") -out "$out.crt" 2>/dev/null
  rm -f "$out.csr"
}

write_kubeconfig() { # write_kubeconfig FILE SERVER CA CERT_BASE: CERT_BASE.crt and .key
  render node.kubeconfig "$1" SERVER="$2" CA="$3" CERT="$4.crt" KEY="$4.key"
}

node_credentials() { # node_credentials PKI SERVER: the node's and kube-proxy's, from the cluster's CA
  local pki=$1 server=$2
  # The node (Node authorizer) and kube-proxy (system:node-proxier).
  [ -f "$RUN/pki/kubelet.crt" ] || issue_cert "$pki" "$RUN/pki/kubelet" "system:node:$NODE_NAME" system:nodes \
    'extendedKeyUsage=clientAuth'
  [ -f "$RUN/pki/kube-proxy.crt" ] || issue_cert "$pki" "$RUN/pki/kube-proxy" system:kube-proxy system:node-proxier \
    'extendedKeyUsage=clientAuth'
  write_kubeconfig "$RUN/kubelet.kubeconfig" "$server" "$pki/ca.crt" "$RUN/pki/kubelet"
  write_kubeconfig "$RUN/kube-proxy.kubeconfig" "$server" "$pki/ca.crt" "$RUN/pki/kube-proxy"
  serving_cert_with_service_ip "$pki" "$server"
}

sans_of() { # sans_of CERT: its subjectAltNames, as openssl's -extfile takes them (DNS:a,IP:b,...)
  # (grep without -q: under pipefail, grep -q's early exit can fail the pipeline)
  openssl x509 -in "$1" -noout -ext subjectAltName | tail -n +2 | tr -d ' ' | sed 's/IPAddress:/IP:/g'
}

serves_service_ip() { # serves_service_ip HOST:PORT: its serving certificate names the Service IP
  openssl s_client -connect "$1" -servername kubernetes.default.svc </dev/null 2>/dev/null |
    openssl x509 -noout -ext subjectAltName | grep "IP Address:$SERVICE_IP" >/dev/null
}

# Fix 7: the API server's serving certificate (kwokctl's admin.crt) has no SAN for the Service IP
# 10.0.0.1, so a Pod that talks to the API server through the `kubernetes` Service fails TLS.
# Reissue it from the cluster's CA with the same key, subject and names plus the Service IP and
# the node IP; kube-apiserver reloads its serving certificate when the file changes.
serving_cert_with_service_ip() {
  local pki=$1 server=$2 subject
  openssl x509 -in "$pki/admin.crt" -noout -ext subjectAltName 2>/dev/null | grep "IP Address:$SERVICE_IP" >/dev/null && return 0
  subject=$(openssl x509 -in "$pki/admin.crt" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')
  openssl req -new -key "$pki/admin.key" -out "$RUN/admin.csr" 2>/dev/null \
    -subj "/$(echo "$subject" | awk -F, '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? "/" : "") }')"
  openssl x509 -req -in "$RUN/admin.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -days 365 \
    -set_serial "$(random_serial)" -extfile <(printf '%s\n' \
      'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth,clientAuth' 'basicConstraints=critical,CA:FALSE' \
      "subjectAltName=$(sans_of "$pki/admin.crt"),IP:$SERVICE_IP,IP:$NODE_IP") \
    -out "$RUN/admin.crt.new" 2>/dev/null || die "could not issue the API server's serving certificate"
  rm -f "$RUN/admin.csr"
  cp "$pki/admin.crt" "$RUN/admin.crt.kwokctl"
  mv -f "$RUN/admin.crt.new" "$pki/admin.crt"
  wait_until 90 "API server serves a certificate valid for the Service IP $SERVICE_IP" \
    serves_service_ip "${server#https://}" \
    || say "warning: the API server did not pick up the new serving certificate within 90 s; Pods that use the Service IP may fail TLS"
}

# --- up ------------------------------------------------------------------------------------------

lock() {
  mkdir -p "$STATE"
  exec 9>>"$STATE/lock"
  flock -n 9
}

owner() { cat "$STATE/owner" 2>/dev/null || true; }

free_for() { # free_for NAME: fail with one clear message when another cluster's real node is up
  local name=$1 other
  mkdir -p "$STATE"
  other=$(owner)
  if [ -n "$other" ] && [ "$other" != "$name" ] && { [ -n "$(node_pids)" ] || ! (exec 9>>"$STATE/lock"; flock -n 9); }; then
    die "another real-node cluster ('$other') is up on this machine; one real node per machine (port $KUBELET_PORT, the node name and iptables rules are global). Remove it first: make cluster-down NODE=real CLUSTER_NAME=$other (or hack/cluster.sh down $other)."
  fi
}

take_node() { # take_node NAME: the node's lock, or NAME's own node that holds it (up or half up)
  local name=$1 other
  if ! lock; then
    other=$(owner)
    if [ "$other" != "$name" ] || [ -z "$(node_pids)" ]; then
      die "another real-node cluster ('${other:-unknown}') is up on this machine, or being set up; one real node per machine (port $KUBELET_PORT, the node name and iptables rules are global). Remove it first: hack/cluster.sh down ${other:-NAME} with NODE=real (make cluster-down NODE=real CLUSTER_NAME=${other:-NAME})."
    fi
    # Held by this cluster's own daemons: the node is up, or half up after an interruption.
    # Every step of `up` is idempotent: what runs is kept, what is missing is started.
    say "the real node of cluster '$name' is (partly) up: reusing what runs"
  fi
  other=$(owner)
  if [ -n "$other" ] && [ "$other" != "$name" ]; then
    say "cleaning up after the real node of cluster '$other', which is no longer running ..."
    teardown
    lock || die "could not take the real node's lock again"
  fi
  echo "$name" >"$STATE/owner"
}

start_network() { # the bridge with the node IP, before kubelet (the node IP) and the CNI plugin
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr show dev "$BRIDGE" | grep "inet $NODE_IP/" >/dev/null || ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  render cni.conflist "$RUN/cni/net.d/10-operator-runner.conflist" \
    BRIDGE="$BRIDGE" POD_CIDR="$POD_CIDR" NODE_IP="$NODE_IP" RUN="$RUN"
}

start_registry() { # the locally built images' registry (Pods with imagePullPolicy Always pull there)
  local registry
  pid_alive "$(cat "$RUN/pids/registry" 2>/dev/null)" || rm -f "$RUN/registry.port"
  start_daemon registry python3 "$here/lib/oci_registry.py" "$IMAGES_LAYOUT" "$RUN/registry.port"
  wait_until 20 "" test -s "$RUN/registry.port" || die "the local registry did not start; log: $RUN/logs/registry.log"
  for registry in docker.io localhost; do
    mkdir -p "$RUN/certs.d/$registry"
    render registry-hosts.toml "$RUN/certs.d/$registry/hosts.toml" \
      REGISTRY="$registry" REGISTRY_URL="http://127.0.0.1:$(cat "$RUN/registry.port")/$registry"
  done
}

start_containerd() { # its own root, state and socket; fixes 1-3; then the node's images
  local pause_image
  pause_image=$("$here/node-images.sh" pause-name)
  render containerd.toml "$RUN/containerd.toml" RUN="$RUN" PAUSE_IMAGE="$pause_image"
  start_daemon containerd containerd --config "$RUN/containerd.toml"
  wait_until 30 "containerd is up" ctr_ version ||
    { tail -n 20 "$RUN/logs/containerd.log" >&2; die "containerd did not start; log: $RUN/logs/containerd.log"; }
  "$here/node-images.sh" import "$RUN/containerd.sock"
}

start_kubelet() { # fixes 3 and 4 (hack/real-node/kubelet.yaml)
  render kubelet.yaml "$RUN/kubelet.yaml" RUN="$RUN" NODE_IP="$NODE_IP" KUBELET_PORT="$KUBELET_PORT"
  start_daemon kubelet "$BIN/kubelet" --config "$RUN/kubelet.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
    --root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet-pki" --hostname-override "$NODE_NAME" \
    --node-ip "$NODE_IP" --node-labels "operator-runner.io/real-node=true" --v=1
}

start_kube_proxy() { # iptables mode; NodePorts on the node IP and 127.0.0.1; no conntrack sysctls
  render kube-proxy.yaml "$RUN/kube-proxy.yaml" \
    RUN="$RUN" NODE_NAME="$NODE_NAME" POD_CIDR="$POD_CIDR" NODE_IP="$NODE_IP"
  start_daemon kube-proxy "$BIN/kube-proxy" --config "$RUN/kube-proxy.yaml" --v=1
}

node_ready() { # node_ready KUBECONFIG
  [ "$("$BIN/kubectl" --kubeconfig "$1" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

wait_node_ready() { # wait_node_ready KUBECONFIG: the Node Ready, kube-proxy healthy
  wait_until 120 "node '$NODE_NAME' is Ready" node_ready "$1" ||
    { tail -n 20 "$RUN/logs/kubelet.log" >&2; die "node '$NODE_NAME' did not turn Ready within 120 s; logs: $RUN/logs/"; }
  wait_until 60 "" curl -fsS http://127.0.0.1:10256/healthz || say "warning: kube-proxy is not healthy yet; log: $RUN/logs/kube-proxy.log"
}

up() { # up NAME KUBECONFIG PKI_DIR
  local name=$1 kubeconfig=$2 pki=$3 start=$SECONDS server
  check
  take_node "$name"
  prepare
  say "starting the real node '$NODE_NAME' of cluster '$name' (state: $STATE)"
  record_host
  mkdir -p "$RUN"/{pids,logs,cni/net.d,cni/ipam,certs.d,pki,kubelet,kubelet-pki,pod-logs,runc}
  server=$(awk '$1 == "server:" { print $2; exit }' "$kubeconfig")
  [ -n "$server" ] || die "no server in $kubeconfig"
  [ -f "$pki/ca.key" ] || die "the cluster's CA key $pki/ca.key is missing"
  start_network
  start_registry
  start_containerd
  node_credentials "$pki" "$server"
  start_kubelet
  start_kube_proxy
  wait_node_ready "$kubeconfig"
  say "real node '$NODE_NAME' up in $(elapsed $((SECONDS - start))) (kubelet + containerd; Pods on $POD_CIDR, node IP $NODE_IP)"
}

# --- down ----------------------------------------------------------------------------------------

daemon_alive() { [ -f "$RUN/pids/$1" ] && pid_alive "$(cat "$RUN/pids/$1")"; }

no_tasks() { [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ]; }

delete_node_pods() { # delete_node_pods KUBECONFIG: while kubelet runs, so that sandboxes go through CNI DEL
  local kubeconfig=$1 kubectl
  [ -n "$kubeconfig" ] && [ -f "$kubeconfig" ] && daemon_alive kubelet && daemon_alive containerd || return 0
  [ -S "$RUN/containerd.sock" ] || return 0
  kubectl=$(bin_dir_quiet)/kubectl
  [ -x "$kubectl" ] && "$kubectl" --kubeconfig "$kubeconfig" --request-timeout=5s get node "$NODE_NAME" >/dev/null 2>&1 || return 0
  "$kubectl" --kubeconfig "$kubeconfig" cordon "$NODE_NAME" >/dev/null 2>&1 || true
  "$kubectl" --kubeconfig "$kubeconfig" delete pods --all-namespaces --field-selector "spec.nodeName=$NODE_NAME" \
    --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  wait_until 60 "" no_tasks || say "some containers still run after 60 s; killing them"
  "$kubectl" --kubeconfig "$kubeconfig" delete node "$NODE_NAME" --wait=false >/dev/null 2>&1 || true
}

kill_tasks() { # every container of the node's containerd: killed, then removed
  [ -S "$RUN/containerd.sock" ] && ctr_ version >/dev/null 2>&1 || return 0
  local task i
  for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s KILL "$task" >/dev/null 2>&1 || true; done
  for ((i = 0; i < 100; i++)); do
    [ -z "$(ctr_ tasks ls 2>/dev/null | awk 'NR > 1 && $3 != "STOPPED"')" ] && break
    sleep 0.1
  done
  for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks rm -f "$task" >/dev/null 2>&1 || true; done
}

kill_leftovers() { # containerd's shims (one per Pod, they outlive containerd) and runc containers
  local pid id
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $RUN/containerd.sock" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # runc containers whose shim is gone: kill their processes (runc's state names them).
  [ -d "$RUN/runc" ] && command -v runc >/dev/null 2>&1 || return 0
  for id in $(runc --root "$RUN/runc/k8s.io" list -q 2>/dev/null); do
    runc --root "$RUN/runc/k8s.io" kill "$id" KILL >/dev/null 2>&1 || true
    runc --root "$RUN/runc/k8s.io" delete -f "$id" >/dev/null 2>&1 || true
  done
}

remove_network() { # kube-proxy's chains, the iptables as recorded, veths on the bridge, the bridge
  local bin link
  bin=$(bin_dir_quiet)
  if [ -x "$bin/kube-proxy" ]; then "$bin/kube-proxy" --cleanup >>"$STATE/cleanup.log" 2>&1 || true; fi
  restore_iptables
  ip link show "$BRIDGE" >/dev/null 2>&1 || return 0
  for link in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
}

teardown() { # teardown [KUBECONFIG]: stop everything and restore the host; the lock must be held or free
  delete_node_pods "${1:-}"
  stop_daemon kubelet 30
  stop_daemon kube-proxy
  kill_tasks
  stop_daemon containerd 30
  stop_daemon registry
  kill_leftovers
  remove_network
  unmount_under "$RUN"
  remove_cgroups
  restore_sysctls
  remove_created_paths
  if [ -n "$(awk -v p="$RUN" 'index($2, p) == 1' /proc/mounts)" ]; then
    die "mounts under $RUN remain (see /proc/mounts); not removing it. Run 'make cluster-down NODE=real' again."
  fi
  rm -rf "$RUN" "$HOST" "$STATE/owner"
}

load_image() { # load_image [IMAGE]
  local image=${1:-}
  if [ ! -S "$RUN/containerd.sock" ] || [ -z "$(node_pids)" ]; then
    die "no real node is up; make cluster NODE=real first"
  fi
  if [ -z "$image" ]; then
    image=$("$here/image.sh" build | tail -n 1) || die "building the seeds' image failed (hack/image.sh build)"
  fi
  "$here/node-images.sh" add "$image"
  "$here/node-images.sh" import "$RUN/containerd.sock" "$image"
  echo "$image"
}

bin_dir_quiet() { "$here/build-binaries.sh" --check --node 2>/dev/null | tail -n 1 || true; }

down() {
  local name=${1:-} kubeconfig=${2:-}
  mkdir -p "$STATE"
  local other; other=$(owner)
  if [ -n "$name" ] && [ -n "$other" ] && [ "$other" != "$name" ]; then
    say "the real node belongs to cluster '$other', not '$name'; left alone"
    return 0
  fi
  if [ ! -d "$RUN" ] && [ ! -d "$HOST" ] && [ -z "$other" ]; then
    return 0
  fi
  exec 9>>"$STATE/lock"
  # Our own daemons hold the lock while they run; another `up` or `down` holds it without them.
  if ! flock -n 9 && [ -z "$(node_pids)" ]; then
    say "another 'up' or 'down' of the real node is running; waiting for it ..."
    flock 9
  fi
  local of=""
  [ -n "$other" ] && of=" of cluster '$other'"
  say "stopping the real node '$NODE_NAME'$of and restoring the host ..."
  local start=$SECONDS
  teardown "$kubeconfig"
  say "real node removed, host restored ($(elapsed $((SECONDS - start))))"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  check) check ;;
  prepare) check; prepare; echo "$BIN" ;;
  up) [ $# -eq 3 ] || die "usage: $0 up NAME KUBECONFIG PKI_DIR"; up "$@" ;;
  down) down "$@" ;;
  owner) owner ;;
  load-image) load_image "$@" ;;
  free-for) free_for "${1:?usage: free-for NAME}" ;;
  state-dir) echo "$STATE" ;;
  *) die "usage: $0 check | prepare | up NAME KUBECONFIG PKI_DIR | down [NAME [KUBECONFIG]] | load-image [IMAGE] | owner | free-for NAME | state-dir" ;;
esac
