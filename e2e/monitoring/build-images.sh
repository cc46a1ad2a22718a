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

VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.93.0}
SUITE=${SUITE:-trixie}
CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
IMAGES="$CACHE/images"
WORK="$CACHE/prometheus-operator"
FORCE=${FORCE:-0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ARCHIVE="$IMAGES/monitoring-$VERSION-$SUITE.tar"
ENV_FILE="${ARCHIVE%.tar}.env"
BASE_TAR="$WORK/base-$SUITE.tar"
BASE_IMAGE="localhost/monitoring-base:$SUITE"
OPERATOR_IMAGE="localhost/prometheus-operator:$VERSION"
RELOADER_IMAGE="localhost/prometheus-config-reloader:$VERSION"

log() { echo "[build-monitoring-images] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
step() { # NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc=0
  log "$name ..."
  timeout --kill-after=30 "$limit" "$@" >&2 || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && log "$name timed out after ${limit}s"
    die "$name failed (rc=$rc) after $((SECONDS - t0))s"
  fi
  log "$name done in $((SECONDS - t0))s"
}

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman)"
mkdir -p "$IMAGES" "$WORK"
# one build at a time per machine (make test's background prefetch and a test may both ask)
exec 8>"$IMAGES/.build-monitoring-images.lock"; flock 8
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
need=()
for t in debootstrap podman runc; do command -v "$t" >/dev/null || need+=("$t"); done
if [ "${#need[@]}" -gt 0 ]; then
  step "apt-get install ${need[*]}" 900 \
    env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y "${need[@]}"
fi

STORE="$WORK/podman-storage"
RUNROOT=/run/crimsonbench-monitoring-podman
PODMAN=(podman --root "$STORE" --runroot "$RUNROOT" --runtime runc)
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

# ------------------------------------------------------------------ 2. base rootfs
find_mirror() { # the Debian mirror this machine's apt uses
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk '
      /^[[:space:]]*#/ {next}
      $1 == "URIs:" {for (i = 2; i <= NF; i++) print $i}
      $1 == "deb" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i ~ /:\/\//) {print $i; break}}
    ' "$f"
  done | grep -E '/debian/?$' | grep -v -- '-security' | head -n1
}
MIRROR=${MIRROR:-$(find_mirror)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

FORCE_IMPORT=0
if [ "$FORCE" = 1 ] || [ ! -s "$BASE_TAR" ]; then
  rm -f "$BASE_TAR"
  rook_base="$CACHE/rook/base-$SUITE.tar"
  if [ "$FORCE" != 1 ] && [ -s "$rook_base" ] && ln "$rook_base" "$BASE_TAR" 2>/dev/null; then
    log "base rootfs: a link to $rook_base (the same debootstrap minbase $SUITE)"
  else
    rootfs=$(mktemp -d "$WORK/rootfs-$SUITE.XXXXXX")
    cleanup_rootfs() {
      # debootstrap mounts proc/sys inside the target; never rm through them
      local m
      for m in $(awk -v r="$rootfs" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
      done
      rm -rf --one-file-system "$rootfs" "$BASE_TAR.tmp"
    }
    trap cleanup_rootfs EXIT
    step "debootstrap --variant=minbase $SUITE ($MIRROR)" 1200 \
      debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    mkdir -p "$rootfs/var/lib/apt/lists/partial"
    step "tar rootfs" 300 tar --numeric-owner --xattrs -C "$rootfs" -cf "$BASE_TAR.tmp" .
    mv "$BASE_TAR.tmp" "$BASE_TAR"
    cleanup_rootfs
    trap - EXIT
  fi
  FORCE_IMPORT=1
else
  log "base rootfs cached: $BASE_TAR"
fi

# ------------------------------------------------------------------ 3. import base image
if [ "$FORCE_IMPORT" = 1 ] || ! "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  "${PODMAN[@]}" rmi --force "$BASE_IMAGE" >/dev/null 2>&1 || true
  step "podman import $BASE_IMAGE" 300 \
    "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' "$BASE_TAR" "$BASE_IMAGE"
fi

# ------------------------------------------------------------------ 4. build
ctx=$(mktemp -d "$WORK/context.XXXXXX")
# podman's run root (locks, container state) is recreated on demand: leave none in /run
trap 'rm -rf "$ctx"; "${PODMAN[@]}" ps -aq | grep -q . || rm -rf "$RUNROOT"' EXIT
cp "$HERE/Containerfile" "$BIN/operator" "$BIN/prometheus-config-reloader" "$ctx/"
[ "$FORCE" = 1 ] && extra=(--no-cache) || extra=()
build() { # TARGET TAG
  step "podman build --target $1" 1800 \
    "${PODMAN[@]}" build "${ULIMITS[@]}" "${extra[@]}" --network host --force-rm --layers \
      --build-arg "BASE=$BASE_IMAGE" --target "$1" -t "$2" -f "$ctx/Containerfile" "$ctx"
}
build operator "$OPERATOR_IMAGE"
build reloader "$RELOADER_IMAGE"
build prometheus localhost/crimsonbench-prometheus:build

# ------------------------------------------------------------------ 5. smoke test
RUN=("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network=none)
check() { # DESCRIPTION CMD...
  local what=$1 out; shift
  if ! out=$(timeout --kill-after=10 120 "$@" 2>&1); then
    log "verify FAILED: $what"; echo "$out" >&2; exit 1
  fi
  log "verify ok ($what): ${out%%$'\n'*}"
  printf '%s\n' "$out"
}
check "operator --version" "${RUN[@]}" "$OPERATOR_IMAGE" --version | grep -qF "${VERSION#v}" \
  || die "the operator image does not report ${VERSION#v}"
check "prometheus-config-reloader --version" "${RUN[@]}" "$RELOADER_IMAGE" --version \
  | grep -qF "${VERSION#v}" || die "the reloader image does not report ${VERSION#v}"
prom_out=$(check "prometheus --version" "${RUN[@]}" localhost/crimsonbench-prometheus:build --version)
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
rm -f "$ARCHIVE" "$ARCHIVE.tmp" "$ARCHIVE.inputs" "$ENV_FILE"
# docker-archive keeps the full names (RepoTags): containerd imports them as localhost/...
step "podman save" 900 "${PODMAN[@]}" save --multi-image-archive --format docker-archive \
  -o "$ARCHIVE.tmp" "$OPERATOR_IMAGE" "$RELOADER_IMAGE" "$PROMETHEUS_IMAGE"
mv "$ARCHIVE.tmp" "$ARCHIVE"
cat > "$ENV_FILE" <<EOF
PROMETHEUS_OPERATOR_VERSION=$VERSION
PROMETHEUS_OPERATOR_IMAGE=$OPERATOR_IMAGE
CONFIG_RELOADER_IMAGE=$RELOADER_IMAGE
PROMETHEUS_IMAGE=$PROMETHEUS_IMAGE
PROMETHEUS_VERSION=v$prom_version
EOF
inputs_digest > "$ARCHIVE.inputs"
log "$(du -h "$ARCHIVE" | cut -f1)  $ARCHIVE ($((SECONDS - t_all))s)"
echo "$ARCHIVE"
