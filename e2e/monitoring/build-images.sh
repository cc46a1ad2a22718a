#!/usr/bin/env bash
# The monitoring stack's images for kind, built here (no registry can be reached), saved as
# ONE docker-archive for `kind load image-archive`. Everything is cached OUTSIDE the
# repository.
#
#   e2e/monitoring/build-images.sh   -> prints the archive path; NAME.env beside it names the
#                                       images and the Prometheus version:
#     PROMETHEUS_OPERATOR_IMAGE  localhost/prometheus-operator:$VERSION        (cmd/operator)
#     CONFIG_RELOADER_IMAGE      localhost/prometheus-config-reloader:$VERSION
#     PROMETHEUS_IMAGE           localhost/crimsonbench-prometheus:v<X.Y.Z>    (Debian's package)
#     PROMETHEUS_VERSION         v<X.Y.Z>, what the image's prometheus reports (the
#                                Prometheus CR's spec.version: the operator picks flags by it)
#   FORCE=1 ...                      -> redo every step
#   PROMETHEUS_OPERATOR_VERSION=v0.93.0 SUITE=trixie   (the defaults)
#
# Steps (each bounded by a timeout, each skipped when its output is current):
#   1. e2e/build-prometheus-operator.sh         -> operator, prometheus-config-reloader
#   2. debootstrap --variant=minbase $SUITE      -> $CACHE/prometheus-operator/base-$SUITE.tar
#      (a hard link to Rook's identical base, $CACHE/rook/base-$SUITE.tar, when it exists)
#   3. podman import                             -> localhost/monitoring-base:$SUITE
#   4. podman build e2e/monitoring/Containerfile, three targets
#   5. smoke test: each program's --version, prometheus is Debian's
#   6. podman save --multi-image-archive         -> $CACHE/images/monitoring-$VERSION-$SUITE.tar
#
# Why trixie: its prometheus (2.53, an LTS release) is in prometheus-operator v0.93's
# compatibility matrix, which starts at 2.45; bookworm's is 2.42.
# Why the flags: as in e2e/rook/build-image.sh (measured on the e2e VM, cgroup v1 hybrid, no
# CAP_SYS_RESOURCE): --runtime runc, --ulimit, --network host for the build and none for
# the smoke test, a podman store of our own.
set -euo pipefail

LOG_TAG=build-monitoring-images
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.93.0}
SUITE=${SUITE:-trixie}
IMAGES="$CACHE/images"
WORK="$CACHE/prometheus-operator"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ARCHIVE="$IMAGES/monitoring-$VERSION-$SUITE.tar"
ENV_FILE="${ARCHIVE%.tar}.env"
BASE_TAR="$WORK/base-$SUITE.tar"
BASE_IMAGE="localhost/monitoring-base:$SUITE"
OPERATOR_IMAGE="localhost/prometheus-operator:$VERSION"
RELOADER_IMAGE="localhost/prometheus-config-reloader:$VERSION"

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman)"
mkdir -p "$IMAGES" "$WORK"
one_build_at_a_time "$IMAGES/.build-monitoring-images.lock"
t_all=$SECONDS

# ------------------------------------------------------------------ 1. binaries
BIN=$(PROMETHEUS_OPERATOR_VERSION=$VERSION bash "$HERE/../build-prometheus-operator.sh") \
  || die "e2e/build-prometheus-operator.sh failed"
BIN=${BIN##*$'\n'}

inputs_digest() {
  {
    echo "$VERSION $SUITE"
    sha256sum "$HERE/Containerfile" "$BIN/operator" "$BIN/prometheus-config-reloader" | awk '{print $1}'
    stat -c '%s %Y' "$BASE_TAR" 2>/dev/null || echo "no base"
  } | sha256sum | cut -d' ' -f1
}
if [ "$FORCE" != 1 ] && [ -s "$ARCHIVE" ] && [ -s "$ENV_FILE" ] \
   && [ "$(cat "$ARCHIVE.inputs" 2>/dev/null)" = "$(inputs_digest)" ]; then
  log "archive current: $ARCHIVE"
  echo "$ARCHIVE"
  exit 0
fi

# ------------------------------------------------------------------ packages
ensure_tools debootstrap podman runc
podman_store "$WORK/podman-storage" /run/crimsonbench-monitoring-podman

# ------------------------------------------------------------------ 2. base rootfs
FORCE_IMPORT=0
if [ "$FORCE" = 1 ] || [ ! -s "$BASE_TAR" ]; then
  rm -f "$BASE_TAR"
  rook_base="$CACHE/rook/base-$SUITE.tar"
  if [ "$FORCE" != 1 ] && [ -s "$rook_base" ] && ln "$rook_base" "$BASE_TAR" 2>/dev/null; then
    log "base rootfs: a link to $rook_base (the same debootstrap minbase $SUITE)"
  else
    debootstrap_tar "$BASE_TAR" "$SUITE"
  fi
  FORCE_IMPORT=1
else
  log "base rootfs cached: $BASE_TAR"
fi
podman_base "$BASE_TAR" "$BASE_IMAGE"  # 3.

# ------------------------------------------------------------------ 4. build
build_context "$WORK"
cp "$HERE/Containerfile" "$BIN/operator" "$BIN/prometheus-config-reloader" "$CTX/"
[ "$FORCE" = 1 ] && extra=(--no-cache) || extra=()
build() { # TARGET TAG
  step "podman build --target $1" 1800 \
    "${PODMAN[@]}" build "${ULIMITS[@]}" "${extra[@]}" --network host --force-rm --layers \
      --build-arg "BASE=$BASE_IMAGE" --target "$1" -t "$2" -f "$CTX/Containerfile" "$CTX"
}
build operator "$OPERATOR_IMAGE"
build reloader "$RELOADER_IMAGE"
build prometheus localhost/crimsonbench-prometheus:build

# ------------------------------------------------------------------ 5. smoke test
RUN=("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network=none)
verify "operator --version" "${RUN[@]}" "$OPERATOR_IMAGE" --version
grep -qF "${VERSION#v}" <<<"$VERIFY_OUT" || die "the operator image does not report ${VERSION#v}"
verify "prometheus-config-reloader --version" "${RUN[@]}" "$RELOADER_IMAGE" --version
grep -qF "${VERSION#v}" <<<"$VERIFY_OUT" || die "the reloader image does not report ${VERSION#v}"
verify "prometheus --version" "${RUN[@]}" localhost/crimsonbench-prometheus:build --version
prom_out=$VERIFY_OUT
# "prometheus, version 2.53.3+ds1 (branch: debian/sid, ...)"
prom_version=$(sed -n 's/^prometheus, version \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' <<<"$prom_out" | head -1)
[ -n "$prom_version" ] || die "cannot read prometheus's version from: $prom_out"
grep -q "debian" <<<"$prom_out" || die "the prometheus in the image is not Debian's: $prom_out"
PROMETHEUS_IMAGE="localhost/crimsonbench-prometheus:v$prom_version"
"${PODMAN[@]}" tag localhost/crimsonbench-prometheus:build "$PROMETHEUS_IMAGE"
"${PODMAN[@]}" untag localhost/crimsonbench-prometheus:build localhost/crimsonbench-prometheus:build \
  >/dev/null 2>&1 || true
# superseded builds would pile up in the store otherwise
"${PODMAN[@]}" image prune --force >/dev/null 2>&1 || true

# ------------------------------------------------------------------ 6. save
rm -f "$ENV_FILE"
podman_save "$ARCHIVE" "$OPERATOR_IMAGE" "$RELOADER_IMAGE" "$PROMETHEUS_IMAGE"
cat > "$ENV_FILE" <<EOF
PROMETHEUS_OPERATOR_VERSION=$VERSION
PROMETHEUS_OPERATOR_IMAGE=$OPERATOR_IMAGE
CONFIG_RELOADER_IMAGE=$RELOADER_IMAGE
PROMETHEUS_IMAGE=$PROMETHEUS_IMAGE
PROMETHEUS_VERSION=v$prom_version
EOF
inputs_digest > "$ARCHIVE.inputs"
log "built in $((SECONDS - t_all))s"
echo "$ARCHIVE"
