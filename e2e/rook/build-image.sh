#!/usr/bin/env bash
# Build one Rook + Ceph image (Rook's operator binary and Ceph reef from Debian trixie) on a
# machine where no container registry is reachable, and save it as a docker-archive for
# `ctr -n k8s.io images import`. Everything is cached OUTSIDE the repository.
#
#   e2e/rook/build-image.sh          -> prints the archive path
#   FORCE=1 ...                      -> redo every step (debootstrap, import, build, save)
#   VERIFY=0 ...                     -> skip the smoke test
#   ROOK_VERSION=v1.17.8 CEPH_VERSION=18.2.7 SUITE=trixie   (the defaults)
#   BASE_ROOTFS=DIR OSD_FLAVOR=crimson ...  a Ceph root as the base instead of debootstrap, and
#                                    crimson-osd as the OSD daemon (e2e/rook/build-crimson-image.sh)
#   ROOK_VERSION=v1.20.6 CEPH_VERSION=20.2.4 SUITE=sid ...  another release (the harness
#                                    passes its one setting: e2e/harness/rook.py RELEASES)
# With Ceph 20 or newer (or the crimson flavour) it also builds our fio runner on the same
# Ceph client (images/crimsonbench-fio-dev-ceph<V>.tar): tentacle's aes256k cephx keys
# cannot be parsed by older clients, such as our default fio image's pacific.
#
# Steps (each bounded by a timeout, each skipped when its output is current):
#   1. e2e/build-rook.sh                          -> the rook binary (cached)
#   2. debootstrap --variant=minbase $SUITE       -> $CACHE/rook/base-$SUITE.tar
#      (or BASE_ROOTFS, tarred as it is)          -> $CACHE/rook/base-<its name>.tar
#   3. podman import                              -> localhost/rook-base:$SUITE
#   4. podman build e2e/rook/image/Containerfile  -> localhost/rook-ceph:$ROOK-$CEPH
#   5. podman save --format docker-archive        -> $CACHE/images/rook-ceph-$ROOK-$CEPH.tar
#   6. smoke test: rook version, ceph --version (= CEPH_VERSION), ceph-volume, lsblk, ...
# An unchanged rebuild (same Containerfile, scripts, rook binary, base) prints the archive
# at once: the inputs' digest is kept next to it.
#
# Why the flags (as in e2e/build-images.sh; measured on the e2e VM, cgroup v1 hybrid, no
# CAP_SYS_RESOURCE): --runtime runc (crun refuses hybrid cgroups), --ulimit (raising nofile
# above the hard limit needs CAP_SYS_RESOURCE), --network host for the build and none for the
# smoke test (podman's default network adds NETAVARK iptables chains that outlive it).
# A podman store of our own, so the product images' store can be wiped independently.
set -euo pipefail

LOG_TAG=build-rook-image
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
ROOK_VERSION=${ROOK_VERSION:-v1.17.8}
CEPH_VERSION=${CEPH_VERSION:-18.2.7}
SUITE=${SUITE:-trixie}
BASE_ROOTFS=${BASE_ROOTFS:-}
OSD_FLAVOR=${OSD_FLAVOR:-classic}
# classic on a Ceph root (the crimson build's daemons, classic ceph-osd): -classic, so it
# never passes for the release image of that Ceph
case $OSD_FLAVOR in classic) FLAVOR_TAG=${BASE_ROOTFS:+-classic} ;; crimson) FLAVOR_TAG=-crimson ;;
  *) echo "OSD_FLAVOR must be classic or crimson, not $OSD_FLAVOR" >&2; exit 2 ;; esac
# our fio runner on this Ceph's client too (see above); WITH_FIO=0 where another build of
# the same root makes it already (e2e/rook/build-crimson-image.sh)
if [ -z "${WITH_FIO:-}" ]; then
  WITH_FIO=0
  if [ "$OSD_FLAVOR" = crimson ] || [ "${CEPH_VERSION%%.*}" -ge 20 ]; then WITH_FIO=1; fi
fi
IMAGES="$CACHE/images"
WORK="$CACHE/rook"
VERIFY=${VERIFY:-1}
if [ -n "$BASE_ROOTFS" ]; then
  # .../ceph-root/20.2.4/rootfs -> ceph-root-20.2.4
  BASE_NAME=$(basename "$(dirname "$(dirname "$BASE_ROOTFS")")")-$(basename "$(dirname "$BASE_ROOTFS")")
else
  BASE_NAME=$SUITE
fi
BASE_IMAGE="localhost/rook-base:$BASE_NAME"
IMAGE="localhost/rook-ceph:$ROOK_VERSION-$CEPH_VERSION$FLAVOR_TAG"
ARCHIVE="$IMAGES/rook-ceph-$ROOK_VERSION-$CEPH_VERSION$FLAVOR_TAG.tar"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONTEXT_SRC="$HERE/image"

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman)"
mkdir -p "$IMAGES" "$WORK"
one_build_at_a_time "$IMAGES/.build-rook-image.lock"

# ------------------------------------------------------------------ 1. rook binary
ROOK_BIN=$(ROOK_VERSION=$ROOK_VERSION bash "$HERE/../build-rook.sh") || die "e2e/build-rook.sh failed"
ROOK_BIN=${ROOK_BIN##*$'\n'}

# ------------------------------------------------------------------ bcrypt wheel
# (why: see the Containerfile) pinned by hash; PyPI through the host's pip, which trusts the
# host's CA bundle (a TLS-intercepting proxy's CA, where there is one)
BCRYPT_WHEEL=bcrypt-3.2.2-cp36-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
BCRYPT_SHA256=2b02d6bfc6336d1094276f3f588aa1225a598e27f8e3388f4db9948cb707b521
WHEELS="$WORK/wheels"
if ! echo "$BCRYPT_SHA256  $WHEELS/$BCRYPT_WHEEL" | sha256sum --check --status 2>/dev/null; then
  pip=()
  for cand in "$HERE/../../.venv/bin/python" python3; do
    if "$cand" -m pip --version >/dev/null 2>&1; then pip=("$cand" -m pip); break; fi
  done
  [ "${#pip[@]}" -gt 0 ] || die "no pip to download $BCRYPT_WHEEL (scripts/setup.sh makes .venv)"
  step "pip download bcrypt 3.2.2" 300 "${pip[@]}" download --no-deps --only-binary :all: \
    --platform manylinux2014_x86_64 --python-version 3.13 --implementation cp --abi abi3 \
    -d "$WHEELS" "bcrypt==3.2.2"
  echo "$BCRYPT_SHA256  $WHEELS/$BCRYPT_WHEEL" | sha256sum --check --status \
    || die "$WHEELS/$BCRYPT_WHEEL does not have sha256 $BCRYPT_SHA256"
fi

BASE_TAR="$WORK/base-$BASE_NAME.tar"
inputs_digest() {
  # the crimson flavour also builds our fio image: ./Dockerfile and its fio patches count
  local fio_inputs=()
  [ "$WITH_FIO" = 1 ] && fio_inputs=("$HERE/../../Dockerfile" "$HERE"/../../images/fio/*.patch)
  {
    echo "$ROOK_VERSION $CEPH_VERSION $SUITE $BASE_NAME $OSD_FLAVOR"
    sha256sum "$CONTEXT_SRC"/* "$ROOK_BIN" "$WHEELS/$BCRYPT_WHEEL" "${fio_inputs[@]}" \
      | awk '{print $1}'
    stat -c '%s %Y' "$BASE_TAR" 2>/dev/null || echo "no base"
  } | sha256sum | cut -d' ' -f1
}
# The crimson flavour also builds our fio runner (./Dockerfile, target fio) on the same Ceph:
# a tentacle cluster's cephx keys are aes256k, which older clients (our bookworm fio image's
# pacific librbd) cannot even parse ("Malformed input").
FIO_ARCHIVE="$IMAGES/crimsonbench-fio-dev-ceph$CEPH_VERSION.tar"
FIO_IMAGE="localhost/crimsonbench-fio:dev-ceph$CEPH_VERSION"
if [ "$FORCE" != 1 ] && [ -s "$ARCHIVE" ] && [ "$(cat "$ARCHIVE.inputs" 2>/dev/null)" = "$(inputs_digest)" ] \
   && { [ "$WITH_FIO" != 1 ] || [ -s "$FIO_ARCHIVE" ]; }; then
  log "archive current: $ARCHIVE"
  echo "$ARCHIVE"
  exit 0
fi

# ------------------------------------------------------------------ packages
ensure_tools debootstrap podman runc
podman_store "$WORK/podman-storage" /run/crimsonbench-rook-podman

# ------------------------------------------------------------------ 2. base rootfs
FORCE_IMPORT=0
if [ -n "$BASE_ROOTFS" ]; then
  [ -x "$BASE_ROOTFS/usr/bin/ceph" ] || die "BASE_ROOTFS $BASE_ROOTFS has no /usr/bin/ceph"
  if awk -v r="$(realpath "$BASE_ROOTFS")/" 'index($2 "/", r) == 1 {found=1} END {exit !found}' /proc/mounts; then
    die "something is mounted under $BASE_ROOTFS (a running cluster from it?): unmount it first"
  fi
  # re-tarred when the root changed since (its build stages touch their markers)
  if [ "$FORCE" = 1 ] || [ ! -s "$BASE_TAR" ] \
     || [ -n "$(find "$(dirname "$BASE_ROOTFS")" -maxdepth 1 -name '.done-*' -newer "$BASE_TAR")" ]; then
    step "tar $BASE_ROOTFS" 600 tar --numeric-owner --xattrs -C "$BASE_ROOTFS" \
      --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* -cf "$BASE_TAR.tmp" .
    mv "$BASE_TAR.tmp" "$BASE_TAR"
    FORCE_IMPORT=1
  fi
elif [ "$FORCE" = 1 ] || [ ! -s "$BASE_TAR" ]; then
  # sid's Release file on a frozen mirror has expired: every apt in images on this base
  # (ours and ./Dockerfile's fio runner) must not refuse it (harmless for trixie)
  no_valid_until() { echo 'Acquire::Check-Valid-Until "false";' >"$1/etc/apt/apt.conf.d/99no-valid-until"; }
  ROOTFS_HOOK=no_valid_until debootstrap_tar "$BASE_TAR" "$SUITE"
  FORCE_IMPORT=1
else
  log "base rootfs cached: $BASE_TAR"
fi
podman_base "$BASE_TAR" "$BASE_IMAGE"  # 3.

# ------------------------------------------------------------------ 4. build
build_context "$WORK"
cp "$CONTEXT_SRC"/* "$CTX/"
cp "$ROOK_BIN" "$CTX/rook"
cp "$WHEELS/$BCRYPT_WHEEL" "$CTX/"
[ "$FORCE" = 1 ] && extra=(--no-cache) || extra=()
step "podman build $IMAGE" 2400 \
  "${PODMAN[@]}" build "${ULIMITS[@]}" "${extra[@]}" --network host --force-rm --layers \
    --build-arg "BASE=$BASE_IMAGE" --build-arg "CEPH_VERSION=$CEPH_VERSION" --build-arg "OSD_FLAVOR=$OSD_FLAVOR" \
    -t "$IMAGE" -f "$CTX/Containerfile" "$CTX"

if [ "$WITH_FIO" = 1 ]; then
  step "podman build $FIO_IMAGE" 1200 \
    "${PODMAN[@]}" build "${ULIMITS[@]}" --network host --force-rm --layers \
      --build-arg "BASE=$BASE_IMAGE" --target fio -t "$FIO_IMAGE" -f "$HERE/../../Dockerfile" "$HERE/../.."
fi

# superseded builds would pile up in the store otherwise
"${PODMAN[@]}" image prune --force >/dev/null 2>&1 || true

# ------------------------------------------------------------------ 5. smoke test
if [ "$VERIFY" = 1 ]; then
  RUN=("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network=none --entrypoint=)
  verify "rook version" "${RUN[@]}" "$IMAGE" sh -c "rook version 2>&1 | grep -F 'rook: $ROOK_VERSION'"
  verify "ceph --version" "${RUN[@]}" "$IMAGE" sh -c "ceph --version | grep -F 'ceph version $CEPH_VERSION'"
  verify "ceph-volume --help" "${RUN[@]}" "$IMAGE" sh -c 'ceph-volume --help | head -3'
  verify "lsblk" "${RUN[@]}" "$IMAGE" lsblk --version
  verify "tools on PATH" "${RUN[@]}" "$IMAGE" sh -c '
    for t in ceph rbd rados crushtool ceph-authtool monmaptool ceph-mon ceph-mgr ceph-osd \
             ceph-volume ceph-bluestore-tool lsblk udevadm sgdisk lvs blkid python3 bash \
             toolbox.sh set-ceph-debug-level dmsetup; do
      command -v "$t" >/dev/null || { echo "missing: $t"; exit 1; }
    done; echo "all tools present"'
  verify "ceph-osd finds the object classes" "${RUN[@]}" "$IMAGE" sh -c '
    [ "$(command -v ceph-osd)" = /usr/local/bin/ceph-osd ] && d=$(ls -d /usr/lib/*/rados-classes) \
    && ls "$d/libcls_rbd.so" "$d/libcls_lock.so" >/dev/null && echo "ceph-osd --osd-class-dir $d"'
  if [ "$OSD_FLAVOR" = crimson ]; then
    verify "crimson-osd is the OSD" "${RUN[@]}" "$IMAGE" sh -c '
      [ "$(cat /etc/crimsonbench/osd-flavor)" = crimson ] && crimson-osd --version | grep -F "(crimson)" \
      && ceph-osd --version | grep -vF "(crimson)"'
  fi
  if [ "$WITH_FIO" = 1 ]; then
    verify "fio image: our fio (images/fio/), rbd engine, Ceph $CEPH_VERSION client, uid 167" "${RUN[@]}" "$FIO_IMAGE" sh -c "
      grep -q sk_out_drain_wake /usr/bin/fio \
      && fio --enghelp=rbd | grep -q '^rbdname' && rbd --version | grep -F 'ceph version $CEPH_VERSION' \
      && [ \$(id -u) = 167 ] && touch /etc/ceph/.w && rm /etc/ceph/.w"
  fi
  verify "users" "${RUN[@]}" "$IMAGE" sh -c \
    '[ "$(id -u ceph):$(id -g ceph)" = 167:167 ] && [ "$(id -u rook)" = 2016 ] && [ "$(id -u)" = 0 ] \
     && echo "ceph 167:167, rook 2016, runs as root"'
fi

# ------------------------------------------------------------------ 6. save
podman_save "$ARCHIVE" "$IMAGE"
[ "$WITH_FIO" = 1 ] && podman_save "$FIO_ARCHIVE" "$FIO_IMAGE"  # the fio runner on this Ceph
inputs_digest > "$ARCHIVE.inputs"
echo "$ARCHIVE"
