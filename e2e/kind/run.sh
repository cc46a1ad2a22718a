#!/usr/bin/env bash
# The kind variant of the e2e: a kind cluster (static CPU manager), Rook + our operator from
# this repository's chart in one `helm install`, a crimson cyanstore BenchmarkRun, results.
# Needs Docker that can pull images (kindest/node, the crimson Ceph image), kind, helm.
#
#   CRIMSON_IMAGE=quay.ceph.io/ceph-ci/ceph:main-crimson e2e/kind/run.sh
#   KEEP=1 ...   leave the cluster up afterwards
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CRIMSON_IMAGE:?set CRIMSON_IMAGE to a Ceph image whose ceph-osd is crimson}"
NAME=${KIND_CLUSTER:-crimsonbench}
NS=crimsonbench
HELM=${HELM:-$(e2e/build-helm.sh)}
log() { echo "[kind-e2e] $*" >&2; }

cleanup() { [ "${KEEP:-0}" = 1 ] || kind delete cluster --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT

log "cluster"
kind create cluster --name "$NAME" --config e2e/kind/kind-config.yaml --wait 120s
worker="$NAME-worker"

log "images (built here, loaded into the nodes: pullPolicy Never)"
docker build --target operator -t crimsonbench-operator:dev .
docker build --target fio -t crimsonbench-fio:dev .
kind load docker-image --name "$NAME" crimsonbench-operator:dev crimsonbench-fio:dev

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
sed "s|crimsonbench-worker|$worker|" e2e/kind/benchmarkrun-cyanstore.yaml | kubectl apply -f -
kubectl -n "$NS" wait benchmarkrun/kind-cyanstore \
  --for=jsonpath='{.status.phase}'=Completed --timeout=60m
kubectl -n "$NS" get benchmarkrun kind-cyanstore -o yaml
kubectl -n "$NS" get configmap -l bench.crimson.ceph.io/run=kind-cyanstore,bench.crimson.ceph.io/role=results -o yaml
