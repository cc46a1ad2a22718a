#!/usr/bin/env bash
# Every container image a kind node runs by itself, built here (no registry), saved as ONE
# docker-archive for the node image's containerd:
#   registry.k8s.io/kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy:$K8S_VERSION
#   registry.k8s.io/etcd:<our etcd's version>-0   (kubeadm would name 3.6.8-0: see below)
#   registry.k8s.io/coredns/coredns:<kubeadm's CoreDNSVersion>  (github.com/coredns/coredns)
#   registry.k8s.io/pause:<kubeadm's PauseVersion>  (e2e/harness/images.py pause_archive)
#   crimsonbench/kindnet:<hash>                      (e2e/kind/images/kindnet)
#   crimsonbench/kube-network-policies:<hash>        (e2e/build-kube-network-policies.sh:
#                                                     NetworkPolicy, beside kindnet)
#   crimsonbench/kind-toolbox:<hash>                 (the same rootfs: busybox, curl, jq,
#                                                     iproute2, for tests' pods)
#
#   e2e/kind/build-k8s-images.sh   -> prints the archive path; NAME.tags beside it lists the
#                                     image names, NAME.env the etcd tag and the kindnet and
#                                     kube-network-policies images
#
# The Kubernetes binaries come from e2e/build-k8s-binaries.sh (cached; built if missing).
# The etcd binary there is v3.6.5 while kubeadm v1.36 asks for 3.6.8-0: the image is tagged
# with its real version and the kind config sets ClusterConfiguration etcd.local.imageTag.
# No local-path-provisioner: kind falls back to a host-path StorageClass when the node
# image has no storage manifest, and nothing here needs dynamic volumes.
set -euo pipefail
LOG_TAG=k8s-images
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COREDNS_MODULE_VERSION=${COREDNS_MODULE_VERSION:-}
PY=${PYTHON:-$REPO/.venv/bin/python}
SLIM_PACKAGES=iptables,nftables,conntrack,iproute2,curl,jq,ca-certificates,busybox

ensure_dockerd

bin=$(K8S_VERSION=$K8S_VERSION \
      K8S_COMPONENTS="kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl kubeadm" \
      bash "$REPO/e2e/build-k8s-binaries.sh")
etcd_version=$("$bin/etcd" --version | awk '/^etcd Version:/ {print $3}')
[ -n "$etcd_version" ] || die "cannot read the version of $bin/etcd"
pause_image="registry.k8s.io/pause:$(kubeadm_const PauseVersion)"
coredns_version=$(kubeadm_const CoreDNSVersion)
# CoreDNS's Go build (cold ~7 min here) overlaps the slim rootfs's debootstrap
in_background coredns go_tool coredns github.com/coredns/coredns \
  "${COREDNS_MODULE_VERSION:-$coredns_version}" github.com/coredns/coredns
# and kube-network-policies' (cold ~4 min of CPU here; cached by version and our patch)
in_background knp bash "$REPO/e2e/build-kube-network-policies.sh"
[ -x "$PY" ] || die "no $PY (scripts/setup.sh makes the venv): the pause image comes from e2e/harness/images.py"
pause_tar=$(PYTHONPATH="$REPO/e2e" "$PY" -c 'from harness.images import pause_archive; print(pause_archive())')
slim=$(rootfs_image slim "$SLIM_PACKAGES")
collect coredns
collect knp

key=$( {
  echo "$K8S_VERSION $slim $pause_image $coredns_version"
  sha256sum "$bin"/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd} \
    "$coredns" "$knp" "$pause_tar" "$KIND_DIR"/images/*.Dockerfile "$KIND_DIR"/images/kindnet/*
} | sha256sum | cut -c1-12)
out_dir="$CACHE/kind/images/$K8S_VERSION"
out="$out_dir/images-$key.tar"
if [ "$FORCE" != 1 ] && [ -s "$out" ] && [ -s "${out%.tar}.tags" ] && [ -s "${out%.tar}.env" ]; then
  log "images archive current: $out"
  echo "$out"
  exit 0
fi
mkdir -p "$out_dir"

kindnet_image="crimsonbench/kindnet:$(sha256sum "$KIND_DIR"/images/kindnet/* | sha256sum | cut -c1-12)"
tags=()
ctx=$(mktemp -d "$CACHE/kind/images/ctx.XXXXXX")   # same filesystem as the cache: hard links
on_exit "rm -rf '$ctx'"
build() { # TAG DOCKERFILE CONTEXT [BUILD-ARG...]
  local tag=$1 file=$2 dir=$3; shift 3
  local args=()
  for a in "$@"; do args+=(--build-arg "$a"); done
  step "docker build $tag" 900 docker build --network none --force-rm "${args[@]}" \
    --label "crimsonbench.k8s-version=$K8S_VERSION" -t "$tag" -f "$file" "$dir"
  tags+=("$tag")
}

for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do
  mkdir "$ctx/$c"
  ln "$bin/$c" "$ctx/$c/$c" 2>/dev/null || cp "$bin/$c" "$ctx/$c/$c"
  tag="registry.k8s.io/$c:$K8S_VERSION"
  [ "$c" = etcd ] && tag="registry.k8s.io/etcd:$etcd_version-0"
  build "$tag" "$KIND_DIR/images/binary.Dockerfile" "$ctx/$c" "BASE=$slim" "NAME=$c"
done

mkdir "$ctx/coredns"
cp "$coredns" "$ctx/coredns/coredns"
build "registry.k8s.io/coredns/coredns:$coredns_version" "$KIND_DIR/images/coredns.Dockerfile" "$ctx/coredns"

build "$kindnet_image" "$KIND_DIR/images/kindnet/Dockerfile" "$KIND_DIR/images/kindnet" "BASE=$slim"
knp_image="crimsonbench/kube-network-policies:$(sha256sum "$knp" | cut -c1-12)"
mkdir "$ctx/knp"
cp "$knp" "$ctx/knp/kube-network-policies"
build "$knp_image" "$KIND_DIR/images/binary.Dockerfile" "$ctx/knp" "BASE=$slim" \
  "NAME=kube-network-policies"
toolbox_image="crimsonbench/kind-toolbox:${slim##*:}"
mkdir "$ctx/toolbox"
build "$toolbox_image" "$KIND_DIR/images/toolbox.Dockerfile" "$ctx/toolbox" "BASE=$slim"

step "docker load $pause_tar" 300 docker load -i "$pause_tar"
loaded=$(tar -xOf "$pause_tar" manifest.json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["RepoTags"][0])')
docker tag "$loaded" "$pause_image"
tags+=("$pause_image")

step "docker save (${#tags[@]} images)" 900 docker save -o "$out.tmp" "${tags[@]}"
mv "$out.tmp" "$out"
printf '%s\n' "${tags[@]}" > "${out%.tar}.tags"
printf 'ETCD_IMAGE_TAG=%s\nKINDNET_IMAGE=%s\nKNP_IMAGE=%s\nPAUSE_IMAGE=%s\nTOOLBOX_IMAGE=%s\n' \
  "$etcd_version-0" "$kindnet_image" "$knp_image" "$pause_image" "$toolbox_image" \
  > "${out%.tar}.env"
# archives of older inputs are never used again (~560 MB each)
find "$out_dir" -maxdepth 1 -name 'images-*' ! -name "images-$key.*" -delete
log "$(du -h "$out" | cut -f1)  $out"
echo "$out"
