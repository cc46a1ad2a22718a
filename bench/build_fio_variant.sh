#!/usr/bin/env bash
# A comparison image of our fio runner: ./Dockerfile's fio target on the base Rook's image
# build uses (e2e/rook/build-image.sh: Debian sid with Ceph 20.2.4's client), with some of
# images/fio/'s patches left out. For bench_kind.py, to measure one patch on a real Rook:
#
#   bench/build_fio_variant.sh 0002     -> prints the archive; its image's tag is
#                                          dev-ceph20.2.4-without-0002
#   .venv/bin/python bench/bench_kind.py --compare-fio-archive ARCHIVE \
#       --compare-fio-tag dev-ceph20.2.4-without-0002
#
# Needs the kind tier's Rook image build first (its base image is in the Rook podman store);
# no product image or file changes: the build context is a copy with only the patches kept.
set -euo pipefail
LOG_TAG=build-fio-variant
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
[ $# -ge 1 ] || die "usage: $0 PATCH_NUMBER... (e.g. 0002: images/fio/0002-*.patch left out)"
CEPH_VERSION=${CEPH_VERSION:-20.2.4}
SUITE=${SUITE:-sid}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE_IMAGE="localhost/rook-base:$SUITE"
TAG="dev-ceph$CEPH_VERSION-without-$(IFS=-; echo "$*")"
IMAGE="localhost/crimsonbench-fio:$TAG"
IMAGES="$CACHE/images"
ARCHIVE="$IMAGES/crimsonbench-fio-$TAG.tar"

[ "$(id -u)" -eq 0 ] || die "needs root (rootful podman, as e2e/rook/build-image.sh)"
mkdir -p "$IMAGES"
one_build_at_a_time "$IMAGES/.build-rook-image.lock"  # the same podman store
podman_store "$CACHE/rook/podman-storage" /run/crimsonbench-rook-podman
"${PODMAN[@]}" image exists "$BASE_IMAGE" \
  || die "no $BASE_IMAGE in the Rook podman store: run the kind tier on Rook v1.20.6 first"

build_context "$IMAGES"
mkdir -p "$CTX/images/fio" "$CTX/operator/crimsonbench/manifests"
cp "$REPO/Dockerfile" "$CTX/"
cp "$REPO/operator/crimsonbench/manifests/fio-driver.sh" "$CTX/operator/crimsonbench/manifests/"
kept=() left=()
for p in "$REPO"/images/fio/*.patch; do
  n=$(basename "$p"); n=${n%%-*}
  if printf '%s\n' "$@" | grep -qx "$n"; then left+=("$(basename "$p")"); else kept+=("$p"); fi
done
[ "${#left[@]}" -eq "$#" ] || die "not every patch named is in images/fio/ (left out: ${left[*]:-none})"
[ "${#kept[@]}" -eq 0 ] || cp "${kept[@]}" "$CTX/images/fio/"
log "building $IMAGE: images/fio/ without ${left[*]}"
step "podman build $IMAGE" 1200 \
  "${PODMAN[@]}" build "${ULIMITS[@]}" --network host --force-rm --layers \
    --build-arg "BASE=$BASE_IMAGE" --target fio -t "$IMAGE" -f "$CTX/Dockerfile" "$CTX"

# the patches it says it has: 0001's mark in, 0002's connector thread name out (as left)
RUN=("${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}")
verify "fio rbd engine, Ceph $CEPH_VERSION client" "${RUN[@]}" "$IMAGE" sh -c \
  "fio --enghelp=rbd | grep -q '^rbdname' && rbd --version | grep -F 'ceph version $CEPH_VERSION'"
for mark in "0001 sk_out_drain_wake" "0002 rbd-connect"; do
  set -- $mark
  if printf '%s\n' "${left[@]}" | grep -q "^$1-"; then want='!'; else want=''; fi
  verify "patch $1 $([ -n "$want" ] && echo left out || echo in)" "${RUN[@]}" "$IMAGE" sh -c \
    "$want grep -q '$2' /usr/bin/fio && echo 'patch $1: ${want:+not }in /usr/bin/fio'"
done
podman_save "$ARCHIVE" "$IMAGE"
echo "$ARCHIVE"
