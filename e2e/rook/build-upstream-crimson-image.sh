#!/usr/bin/env bash
# The crimson Rook image on top of an upstream Ceph CI image that carries a crimson OSD,
# for machines that can pull images (e2e/rook/build-crimson-image.sh with CEPH_IMAGE=...,
# which says why). No 2-hour build: the image is pulled, Rook's binary (e2e/build-rook.sh)
# and our wrappers go on top (e2e/rook/Containerfile.upstream), and the result is saved as
# a docker-archive for `ctr images import` / `kind load image-archive`.
#
#   e2e/rook/build-upstream-crimson-image.sh IMAGE   -> prints the archive path
#
# Exit 3, with podman's reason, when IMAGE cannot be pulled (no registry answers here).
set -euo pipefail

CEPH_IMAGE=${1:?usage: $0 IMAGE (an upstream Ceph image with ceph-osd-crimson or crimson-osd)}
ROOK_VERSION=${ROOK_VERSION:-v1.17.8}
CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
IMAGES="$CACHE/images"
WORK="$CACHE/rook"
IMAGE="localhost/rook-ceph:$ROOK_VERSION-upstream-crimson"
ARCHIVE="$IMAGES/rook-ceph-$ROOK_VERSION-upstream-crimson.tar"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { echo "[build-upstream-crimson-image] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (rootful podman, as e2e/rook/build-image.sh)"
command -v podman >/dev/null || die "podman is not installed (apt-get install podman runc)"
mkdir -p "$IMAGES" "$WORK"
exec 8>"$IMAGES/.build-rook-image.lock"; flock 8

# the same store and runtime flags as e2e/rook/build-image.sh (which says why)
STORE="$WORK/podman-storage"
RUNROOT=/run/crimsonbench-rook-podman
PODMAN=(podman --root "$STORE" --runroot "$RUNROOT" --runtime runc)
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
ctx=$(mktemp -d "$WORK/context.XXXXXX")
trap 'rm -rf "$ctx"; "${PODMAN[@]}" ps -aq 2>/dev/null | grep -q . || rm -rf "$RUNROOT"' EXIT

log "pulling $CEPH_IMAGE"
if ! out=$(timeout --kill-after=30 1800 "${PODMAN[@]}" pull --quiet "$CEPH_IMAGE" 2>&1); then
  log "cannot pull $CEPH_IMAGE: $(echo "$out" | tail -3)"
  log "skipped: build crimson from Debian's source instead (e2e/build-crimson.sh && e2e/crimson/build-ceph-root.sh, then e2e/rook/build-crimson-image.sh without CEPH_IMAGE)"
  exit 3
fi

ROOK_BIN=$(ROOK_VERSION=$ROOK_VERSION bash "$HERE/../build-rook.sh") || die "e2e/build-rook.sh failed"
ROOK_BIN=${ROOK_BIN##*$'\n'}
cp "$HERE"/image/* "$ctx/"
cp "$HERE/Containerfile.upstream" "$ctx/"
cp "$ROOK_BIN" "$ctx/rook"
log "building $IMAGE on $CEPH_IMAGE"
timeout --kill-after=30 2400 "${PODMAN[@]}" build "${ULIMITS[@]}" --network host --force-rm --layers \
  --build-arg "BASE=$CEPH_IMAGE" -t "$IMAGE" -f "$ctx/Containerfile.upstream" "$ctx" >&2 \
  || die "podman build of $IMAGE failed"

RUN=("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network=none --entrypoint=)
"${RUN[@]}" "$IMAGE" sh -c "rook version 2>&1 | grep -F 'rook: $ROOK_VERSION'" >&2 || die "no rook $ROOK_VERSION in $IMAGE"
"${RUN[@]}" "$IMAGE" sh -c 'crimson-osd --version && ceph --version && [ "$(command -v ceph-osd)" = /usr/local/bin/ceph-osd ]' >&2 \
  || die "$IMAGE has no crimson-osd or no ceph-osd wrapper"

rm -f "$ARCHIVE.tmp"
timeout --kill-after=30 900 "${PODMAN[@]}" save --format docker-archive -o "$ARCHIVE.tmp" "$IMAGE" >&2
mv "$ARCHIVE.tmp" "$ARCHIVE"
log "$(du -h "$ARCHIVE" | cut -f1)  $ARCHIVE"
echo "$ARCHIVE"
