#!/usr/bin/env bash
# The kind variant of the e2e, by hand: a kind cluster built here (our dockerd, our node
# image, e2e/kind/kind-config.yaml: 1 control plane + 2 workers with the static CPU manager),
# Rook + our operator from this repository's chart in one `helm install`, a crimson
# bluestore BenchmarkRun, its results (for a machine that can pull: the tested crimson-on-Rook
# run here is tests/kind/test_kind_rook_crimson.py, with our own crimson Rook image). Nothing is pulled: our images are loaded into the
# nodes, and so must be the Ceph image (no registry is reachable here).
#
#   CRIMSON_IMAGE=ceph/ceph:crimson CRIMSON_IMAGE_ARCHIVE=/path/ceph.tar e2e/kind/run.sh
#   STOP_AFTER=cluster ...   only bring the cluster up (and down again unless KEEP=1);
#                            kubeconfig: ~/.cache/crimsonbench/kind/kubeconfig-crimsonbench
#   KEEP=1 ...               leave the cluster (and our dockerd) up afterwards
# The tests use e2e/harness/kind.py instead (same scripts, plus the host checks).
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME=${KIND_CLUSTER:-crimsonbench}
NS=crimsonbench
log() { echo "[kind-e2e] $*" >&2; }

if [ "${STOP_AFTER:-}" != cluster ]; then
  : "${CRIMSON_IMAGE:?set CRIMSON_IMAGE to a Ceph image whose ceph-osd is crimson}"
  : "${CRIMSON_IMAGE_ARCHIVE:?set CRIMSON_IMAGE_ARCHIVE to a docker-archive of CRIMSON_IMAGE}"
fi

started_dockerd=0
DOCKER_HOST=$(e2e/kind/dockerd.sh status) || { DOCKER_HOST=$(e2e/kind/dockerd.sh start); started_dockerd=1; }
export DOCKER_HOST PATH="$(e2e/kind/dockerd.sh bin):$PATH"
KIND=$(e2e/kind/build-kind.sh)
NODE_IMAGE=$(e2e/kind/build-node-image.sh)
BIN=$(e2e/build-k8s-binaries.sh)
export PATH="$BIN:$PATH"   # kubectl
etcd_tag=$(docker image inspect --format '{{ index .Config.Labels "crimsonbench.etcd-image-tag" }}' "$NODE_IMAGE")
config=$(mktemp)
sed "s/imageTag: \"[^\"]*\"/imageTag: \"$etcd_tag\"/" e2e/kind/kind-config.yaml > "$config"
export KIND_EXPERIMENTAL_DOCKER_NETWORK=crimsonbench-kind
# a network of our own: fixed bridge name and subnet (as e2e/harness/dockerd.py makes it)
docker network inspect "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null 2>&1 || \
  docker network create --driver bridge --subnet 172.30.77.0/24 \
    -o com.docker.network.bridge.name=cb-kind0 \
    -o com.docker.network.bridge.enable_ip_masquerade=false "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null

kubeconfig="${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}/kind/kubeconfig-$NAME"
mkdir -p "$(dirname "$kubeconfig")"
cleanup() {
  rm -f "$config"
  [ "${KEEP:-0}" = 1 ] && return
  # a loop device is the host's: it outlives the node unless detached
  [ -n "${loop:-}" ] && docker exec "$NAME-worker" losetup -d "/dev/$loop" 2>/dev/null
  "$KIND" delete cluster --name "$NAME" --kubeconfig "$kubeconfig" >/dev/null 2>&1 || true
  rm -f "$kubeconfig"
  docker network rm "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null 2>&1 || true
  [ "$started_dockerd" = 1 ] && e2e/kind/dockerd.sh stop
  return 0
}
trap cleanup EXIT

log "cluster from $NODE_IMAGE"
"$KIND" create cluster --name "$NAME" --image "$NODE_IMAGE" --config "$config" \
  --kubeconfig "$kubeconfig" --wait 600s
export KUBECONFIG=$kubeconfig
# --wait covers the control plane only
kubectl wait --for=condition=Ready node --all --timeout=600s
kubectl -n kube-system rollout status daemonset/kindnet --timeout=300s
kubectl get nodes -o wide
if [ "${STOP_AFTER:-}" = cluster ]; then log "cluster up (STOP_AFTER=cluster)"; exit 0; fi
worker="$NAME-worker"
HELM=${HELM:-$(e2e/build-helm.sh)}

log "images (built here, loaded into the nodes: pullPolicy Never)"
mapfile -t archives < <(e2e/build-images.sh)
for a in "${archives[@]}" "$CRIMSON_IMAGE_ARCHIVE"; do
  "$KIND" load image-archive "$a" --name "$NAME"
done

log "a 4 GiB loop device inside the worker for the OSD"
docker exec "$worker" sh -c 'truncate -s 4G /var/lib/osd.img && losetup -f --show /var/lib/osd.img' > /tmp/kind-loop
loop=$(basename "$(cat /tmp/kind-loop)")

log "helm install: Rook operator + cluster + crimsonbench operator"
values=$(mktemp)
sed -e "s|CRIMSON_IMAGE|$CRIMSON_IMAGE|" -e "s|LOOP_DEVICE|$loop|" \
    -e "s|crimsonbench-worker|$worker|" e2e/kind/values-kind.yaml > "$values"
"$HELM" install crimsonbench . -n "$NS" --create-namespace -f "$values" --wait --timeout 10m
kubectl -n "$NS" wait cephcluster/rook-ceph --for=jsonpath='{.status.phase}'=Ready --timeout=20m

log "BenchmarkRun"
sed "s|crimsonbench-worker|$worker|" e2e/kind/benchmarkrun-crimson.yaml | kubectl apply -f -
kubectl -n "$NS" wait benchmarkrun/kind-crimson \
  --for=jsonpath='{.status.phase}'=Completed --timeout=60m
kubectl -n "$NS" get benchmarkrun kind-crimson -o yaml
kubectl -n "$NS" get configmap -l bench.crimson.ceph.io/run=kind-crimson,bench.crimson.ceph.io/role=results -o yaml
