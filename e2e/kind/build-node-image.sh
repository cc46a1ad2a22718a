#!/usr/bin/env bash
# The kind NODE image for $K8S_VERSION, assembled here in the layout `kind build node-image`
# produces (which we cannot use: it pulls etcd, coredns, pause and kindnetd from registries):
#   /usr/bin/{kubeadm,kubelet,kubectl}     our binaries (e2e/build-k8s-binaries.sh)
#   /kind/version                          the Kubernetes version kind reads
#   /kind/manifests/default-cni.yaml       our pod network (e2e/kind/images/kindnet) and
#                                          its NetworkPolicy agent (kube-network-policies)
#   /var/lib/containerd                    every image the node runs, preloaded and pinned
#                                          (e2e/kind/build-k8s-images.sh)
# on top of the base image (e2e/kind/build-base-image.sh). Base and component images are
# built at the same time. The result lives in our dockerd (e2e/kind/dockerd.sh).
#
#   e2e/kind/build-node-image.sh   -> prints the image reference (crimsonbench/kind-node:...)
#                                     and, on stderr, where its .env (etcd tag) is
#   FORCE=1 ...                    -> rebuild everything
set -euo pipefail
LOG_TAG=node-image
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_dockerd
t0=$SECONDS

# --- base image and component images, side by side (each logs to stderr with its tag)
tmp=$(mktemp -d)
on_exit "rm -rf '$tmp'"
"$KIND_DIR/build-base-image.sh" > "$tmp/base" & base_pid=$!
"$KIND_DIR/build-k8s-images.sh" > "$tmp/images" & images_pid=$!
rc=0
wait "$base_pid" || rc=$?
[ "$rc" -eq 0 ] || { kill "$images_pid" 2>/dev/null || true; die "build-base-image.sh failed (rc=$rc)"; }
wait "$images_pid" || rc=$?
[ "$rc" -eq 0 ] || die "build-k8s-images.sh failed (rc=$rc)"
base=$(tail -n1 "$tmp/base")
archive=$(tail -n1 "$tmp/images")
[ -n "$base" ] && [ -s "$archive" ] || die "no base image ($base) or image archive ($archive)"
# shellcheck disable=SC1090
source "${archive%.tar}.env"   # ETCD_IMAGE_TAG KINDNET_IMAGE KNP_IMAGE PAUSE_IMAGE TOOLBOX_IMAGE
bin=$(bash "$REPO/e2e/build-k8s-binaries.sh")

key=$( {
  docker image inspect --format '{{.Id}}' "$base"
  echo "$archive $K8S_VERSION"
  sha256sum "$bin"/{kubeadm,kubelet,kubectl} "$KIND_DIR/images/kindnet/default-cni.yaml"
} | sha256sum | cut -c1-12)
ref="crimsonbench/kind-node:$K8S_VERSION"
have=$(docker image inspect --format '{{ index .Config.Labels "crimsonbench.key" }}' "$ref" 2>/dev/null || true)
if [ "$FORCE" != 1 ] && [ "$have" = "$key" ]; then
  log "node image current: $ref (key $key)"
  echo "$ref"
  exit 0
fi

c="crimsonbench-nodebuild-$$"
on_exit "docker rm -f -v '$c' >/dev/null 2>&1"
step "start build container" 120 docker run -d --name "$c" --network none \
  --security-opt seccomp=unconfined --entrypoint sleep "$base" infinity
in_node() { docker exec "$c" "$@"; }

for b in kubeadm kubelet kubectl; do
  step "copy $b" 300 docker cp "$bin/$b" "$c:/usr/bin/$b"
  in_node chown root:root "/usr/bin/$b"
  in_node chmod 755 "/usr/bin/$b"
done
echo -n "$K8S_VERSION" > "$tmp/version"
docker cp "$tmp/version" "$c:/kind/version"
in_node mkdir -p /kind/manifests
sed -e "s|KINDNET_IMAGE|$KINDNET_IMAGE|" -e "s|KNP_IMAGE|$KNP_IMAGE|" \
  "$KIND_DIR/images/kindnet/default-cni.yaml" > "$tmp/default-cni.yaml"
docker cp "$tmp/default-cni.yaml" "$c:/kind/manifests/default-cni.yaml"

# preload the images the way kind's builder does: containerd in the build container,
# `ctr images import` (pinned, not unpacked: each node unpacks what it runs)
in_node bash -c 'nohup containerd > /tmp/containerd.log 2>&1 &'
step "containerd ready" 60 docker exec "$c" bash -c \
  'until [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1; do sleep 0.5; done'
step "ctr images import $(basename "$archive")" 900 docker exec -i "$c" \
  ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
  --all-platforms --no-unpack --digests - < "$archive"
imported=$(in_node ctr --namespace=k8s.io images list -q)
while read -r want; do
  # ctr names docker.io images in full
  grep -qxF "$want" <<<"$imported" || grep -qxF "docker.io/$want" <<<"$imported" \
    || die "image $want missing after import; have: $(echo "$imported" | tr '\n' ' ')"
done < "${archive%.tar}.tags"
in_node pkill -x containerd
# (it stays a zombie: `sleep` is PID 1 and reaps nothing)
step "containerd stopped" 60 docker exec "$c" bash -c \
  'while ps -C containerd -o stat= | grep -qv "^Z"; do sleep 0.5; done'
in_node bash -c 'rm -rf /tmp/* /run/containerd'

step "docker commit $ref" 600 docker commit \
  --change 'ENTRYPOINT ["/usr/local/bin/crimsonbench-entrypoint", "/sbin/init"]' \
  --change 'CMD []' \
  --change "LABEL crimsonbench.key=$key" \
  --change "LABEL crimsonbench.k8s-version=$K8S_VERSION" \
  --change "LABEL crimsonbench.etcd-image-tag=$ETCD_IMAGE_TAG" \
  --change "LABEL crimsonbench.toolbox-image=$TOOLBOX_IMAGE" \
  --change "LABEL crimsonbench.images=\"$(tr '\n' ' ' < "${archive%.tar}.tags" | sed 's/ $//')\"" \
  "$c" "$ref"
# the images this one replaced (older node, base and component images): untagged now
docker image prune -f >/dev/null
log "$(docker image inspect --format '{{.Size}}' "$ref" | awk '{printf "%d MB", $1 / 1e6}')  $ref in $((SECONDS - t0))s"
echo "$ref"
