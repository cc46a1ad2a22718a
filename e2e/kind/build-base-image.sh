#!/usr/bin/env bash
# The kind node BASE image (what kindest/base is upstream), built here from Debian packages
# and kind's own node files, into our dockerd (e2e/kind/dockerd.sh). No registry.
#
#   e2e/kind/build-base-image.sh   -> prints the image reference (crimsonbench/kind-base:...)
#   FORCE=1 ...                    -> redo debootstrap and the build
#
# Steps (each bounded, each skipped when its output exists):
#   1. debootstrap minbase bookworm + systemd, containerd, runc, CNI plugins, iptables, ...
#      -> docker import crimsonbench/kind-rootfs-node:KEY
#   2. crictl from the Go module proxy (sigs.k8s.io/cri-tools; not in Debian)
#   3. docker build e2e/kind/base/Dockerfile with kind's images/base/files (from the kind Go
#      module) -> crimsonbench/kind-base:KIND_VERSION-KEY (KEY: hash of every input)
set -euo pipefail
LOG_TAG=base-image
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CRICTL_VERSION=${CRICTL_VERSION:-v1.36.0}
# Debian's containerd 1.6.20 and runc 1.1.5 run the kubelet v1.36 here (tried on this
# host); kind's base uses containerd 2.x, whose config format (v2) 1.6 also reads.
PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod
PACKAGES+=,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps
PACKAGES+=,containerd,runc,containernetworking-plugins

ensure_dockerd

PAUSE_IMAGE="registry.k8s.io/pause:$(kubeadm_const PauseVersion)"
# crictl's Go build (cold ~2 min) overlaps debootstrap (cold ~2-4 min)
in_background crictl go_tool crictl sigs.k8s.io/cri-tools "$CRICTL_VERSION" \
  sigs.k8s.io/cri-tools/cmd/crictl "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
rootfs=$(rootfs_image node "$PACKAGES")
collect crictl
kind_files="$(kind_module_dir)/images/base/files"

key=$( {
  echo "$rootfs $KIND_VERSION $CRICTL_VERSION $PAUSE_IMAGE"
  sha256sum "$KIND_DIR"/base/* "$crictl"
  (cd "$kind_files" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
} | sha256sum | cut -c1-12)
ref="crimsonbench/kind-base:$KIND_VERSION-$key"

if [ "$FORCE" != 1 ] && docker image inspect "$ref" >/dev/null 2>&1; then
  log "base image present: $ref"
  echo "$ref"
  exit 0
fi

ctx=$(mktemp -d)
on_exit "rm -rf '$ctx'"
cp -r --no-preserve=mode "$kind_files" "$ctx/kind"
cp "$crictl" "$ctx/crictl"
mkdir "$ctx/crimsonbench"
cp "$KIND_DIR"/base/crimsonbench-entrypoint "$KIND_DIR"/base/sysctl-node.conf "$ctx/crimsonbench/"
chmod 755 "$ctx/crictl" "$ctx/crimsonbench/crimsonbench-entrypoint"
extra=()
[ "$FORCE" = 1 ] && extra+=(--no-cache)
step "docker build $ref" 1800 docker build --network none --force-rm "${extra[@]}" \
  --build-arg "ROOTFS=$rootfs" --build-arg "PAUSE_IMAGE=$PAUSE_IMAGE" \
  --label "crimsonbench.kind-version=$KIND_VERSION" --label "crimsonbench.pause-image=$PAUSE_IMAGE" \
  -t "$ref" -f "$KIND_DIR/base/Dockerfile" "$ctx"
# older base images (other inputs) are never used again
for old in $(docker images --format '{{.Repository}}:{{.Tag}}' crimsonbench/kind-base); do
  [ "$old" = "$ref" ] || docker rmi "$old" >/dev/null 2>&1 || true
done
log "$(docker image inspect --format '{{.Size}}' "$ref" | awk '{printf "%d MB", $1 / 1e6}')  $ref"
echo "$ref"
