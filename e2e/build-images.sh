#!/usr/bin/env bash
# Build the two images of ./Dockerfile (fio runner, operator) on a machine where no
# container registry is reachable, and save them as archives for
# `ctr -n k8s.io images import`. Everything is cached OUTSIDE the repository.
#
#   e2e/build-images.sh          -> prints one archive path per line (fio, then operator)
#   FORCE=1 e2e/build-images.sh  -> redo every step (debootstrap, import, build, save)
#   VERIFY=0 ...                 -> skip the smoke test of the built images
#
# Steps (each bounded by a timeout, each skipped when its output exists):
#   1. apt-get install debootstrap podman runc (if missing)
#   2. debootstrap --variant=minbase bookworm  -> $CACHE/images/base-bookworm.tar
#   3. podman import                           -> localhost/crimsonbench-base:bookworm
#   4. podman build --target fio|operator      -> localhost/crimsonbench-{fio,operator}:dev
#      (always run: podman's layer cache makes an unchanged rebuild take seconds, and a
#      stale operator image would silently test old code)
#   5. "${PODMAN[@]}" save --format docker-archive     -> $CACHE/images/crimsonbench-*.tar
#      (skipped when the archive already holds the current image ID)
#   6. smoke test: fio/rbd/lscpu in the fio image, kopf + import in the operator image
#
# Why the odd flags (measured on the e2e VM: cgroup v1 hybrid, no CAP_SYS_RESOURCE):
#   --runtime runc   crun 1.8 refuses: "cgroups in hybrid mode not supported, drop all
#                    controllers from cgroupv2"; Debian's runc 1.1.5 works.
#   --ulimit ...     without them runc fails "error setting rlimit type 7: operation not
#                    permitted" (raising RLIMIT_NOFILE above the hard limit of 20000 needs
#                    CAP_SYS_RESOURCE).
#   build CA         PyPI is reached through a TLS-intercepting proxy whose CA the host
#                    trusts (/usr/local/share/ca-certificates) but a fresh rootfs does not.
#                    The host bundle and a pip.conf are bind-mounted (read-only, build time
#                    only) at /etc/xdg/pip, a directory pip reads its site config from. Only
#                    an empty /etc/xdg/pip directory stays behind in the images.
#                    CRIMSONBENCH_BUILD_CA=none disables it; =FILE picks another bundle.
set -euo pipefail

LOG_TAG=build-images
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
IMAGES="$CACHE/images"
VERIFY=${VERIFY:-1}
SUITE=${SUITE:-bookworm}
BASE_IMAGE=${BASE_IMAGE:-localhost/crimsonbench-base:$SUITE}
TAG=${TAG:-dev}
FIO_IMAGE="localhost/crimsonbench-fio:$TAG"
OPERATOR_IMAGE="localhost/crimsonbench-operator:$TAG"
OCI_RUNTIME=${OCI_RUNTIME:-runc}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman)"
one_build_at_a_time "$IMAGES/.build-images.lock"

# ------------------------------------------------------------------ 1. packages
ensure_tools debootstrap podman "$OCI_RUNTIME"
podman_store "${CRIMSONBENCH_PODMAN_ROOT:-$IMAGES/podman-storage}" \
  "${CRIMSONBENCH_PODMAN_RUNROOT:-/run/crimsonbench-podman}" "$OCI_RUNTIME"

# ------------------------------------------------------------------ 2. base rootfs
BASE_TAR="$IMAGES/base-$SUITE.tar"
FORCE_IMPORT=$FORCE
if [ "$FORCE" = 1 ] || [ ! -s "$BASE_TAR" ]; then
  debootstrap_tar "$BASE_TAR" "$SUITE"
  FORCE_IMPORT=1
else
  log "base rootfs cached: $BASE_TAR"
fi

# ------------------------------------------------------------------ 3. import base image
if [ "$FORCE_IMPORT" = 1 ] || ! "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  # a new base invalidates every layer built on the old one: empty our store first
  step "empty our podman store" 300 "${PODMAN[@]}" rmi --all --force
  FORCE_IMPORT=1
fi
podman_base "$BASE_TAR" "$BASE_IMAGE"

# ------------------------------------------------------------------ 4. build
BUILD_CA=${CRIMSONBENCH_BUILD_CA:-}
if [ -z "$BUILD_CA" ] && compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null \
   && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  BUILD_CA=/etc/ssl/certs/ca-certificates.crt
fi
BUILD_MOUNTS=()
if [ -n "$BUILD_CA" ] && [ "$BUILD_CA" != none ]; then
  cadir="$IMAGES/build-ca"
  mkdir -p "$cadir"
  cp "$BUILD_CA" "$cadir/ca.crt"
  printf '[global]\ncert = /etc/xdg/pip/ca.crt\n' > "$cadir/pip.conf"
  BUILD_MOUNTS=(-v "$cadir:/etc/xdg/pip:ro")
  log "pip trusts $BUILD_CA during the build (mounted at /etc/xdg/pip)"
fi

# FORCE=1 also bypasses the layer cache. --network host: podman's default build network
# adds NETAVARK iptables chains that outlive the build.
[ "$FORCE" = 1 ] && PODMAN_BUILD_EXTRA=(--no-cache) || PODMAN_BUILD_EXTRA=()
build() { # TARGET IMAGE
  step "podman build --target $1" 1800 \
    "${PODMAN[@]}" build "${ULIMITS[@]}" "${BUILD_MOUNTS[@]}" "${PODMAN_BUILD_EXTRA[@]}" \
      --network host --force-rm --layers --build-arg "BASE=$BASE_IMAGE" --target "$1" -t "$2" \
      -f "$REPO/Dockerfile" "$REPO"
}
build fio "$FIO_IMAGE"
build operator "$OPERATOR_IMAGE"

# ------------------------------------------------------------------ 5. save archives
FIO_TAR="$IMAGES/crimsonbench-fio-$TAG.tar"
OPERATOR_TAR="$IMAGES/crimsonbench-operator-$TAG.tar"
podman_save "$FIO_TAR" "$FIO_IMAGE"
podman_save "$OPERATOR_TAR" "$OPERATOR_IMAGE"

# ------------------------------------------------------------------ 6. smoke test
if [ "$VERIFY" = 1 ]; then
  RUN=("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network=none --entrypoint=)
  verify "fio --version" "${RUN[@]}" "$FIO_IMAGE" fio --version
  verify "fio rbd engine" "${RUN[@]}" "$FIO_IMAGE" sh -c 'fio --enghelp=rbd | grep -E "^(clientname|pool|rbdname)"'
  verify "fio is our build (images/fio/), Debian's diverted" "${RUN[@]}" "$FIO_IMAGE" sh -c \
    'grep -q sk_out_drain_wake /usr/bin/fio && [ -x /usr/bin/fio.debian ] && echo "/usr/bin/fio patched, Debian'"'"'s at /usr/bin/fio.debian"'
  # the patched server still serves a client: 2048 4k reads of an 8 MiB null job
  verify "fio --server answers fio --client" "${RUN[@]}" "$FIO_IMAGE" sh -c '
    printf "[n]\nioengine=null\nsize=8m\nrw=read\nbs=4k\n" > /tmp/n.fio
    fio --server=ip:127.0.0.1,8765 > /dev/null 2>&1 & sleep 1
    fio --client=ip:127.0.0.1,8765 --output-format=json /tmp/n.fio | grep -q "\"total_ios\" : 2048" \
      && echo "client/server null job: 2048 ios"'
  verify "rbd --version" "${RUN[@]}" "$FIO_IMAGE" rbd --version
  verify "lscpu json" "${RUN[@]}" "$FIO_IMAGE" sh -c \
    'echo "lscpu --json lists $(lscpu -e=CPU,NODE,SOCKET,CORE,ONLINE --json | grep -c "\"cpu\":") cpus"'
  verify "uid 167, /etc/ceph writable" "${RUN[@]}" "$FIO_IMAGE" sh -c \
    '[ "$(id -u)" = 167 ] && touch /etc/ceph/.w && rm /etc/ceph/.w && echo "uid $(id -u) can write /etc/ceph"'
  verify "operator import" "${RUN[@]}" "$OPERATOR_IMAGE" python3 -c \
    'import crimsonbench.controller.main; print("crimsonbench.controller.main imports")'
  verify "kopf --version" "${RUN[@]}" "$OPERATOR_IMAGE" kopf --version
fi

echo "$FIO_TAR"
echo "$OPERATOR_TAR"
