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

CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
IMAGES="$CACHE/images"
FORCE=${FORCE:-0}
VERIFY=${VERIFY:-1}
SUITE=${SUITE:-bookworm}
BASE_IMAGE=${BASE_IMAGE:-localhost/crimsonbench-base:$SUITE}
TAG=${TAG:-dev}
FIO_IMAGE="localhost/crimsonbench-fio:$TAG"
OPERATOR_IMAGE="localhost/crimsonbench-operator:$TAG"
OCI_RUNTIME=${OCI_RUNTIME:-runc}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { echo "[build-images] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# step NAME TIMEOUT CMD...: run CMD bounded by TIMEOUT seconds, log its duration.
step() {
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
mkdir -p "$IMAGES"
# one build at a time per machine (make test's background prefetch and a test may both ask)
exec 8>"$IMAGES/.build-images.lock"; flock 8

# ------------------------------------------------------------------ 1. packages
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v podman >/dev/null || need+=(podman)
[ "$OCI_RUNTIME" = runc ] && ! command -v runc >/dev/null && need+=(runc)
if [ "${#need[@]}" -gt 0 ]; then
  for p in "${need[@]}"; do
    cand=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
    [ -n "$cand" ] && [ "$cand" != "(none)" ] || die "no apt candidate for $p"
    log "will install $p $cand"
  done
  step "apt-get install ${need[*]}" 900 \
    env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y "${need[@]}"
fi

# A podman store of our own (overlay, under the cache dir): FORCE can wipe it and old images
# never pile up in the machine's default store. Inspect it with the same --root/--runroot.
STORE=${CRIMSONBENCH_PODMAN_ROOT:-$IMAGES/podman-storage}
RUNROOT=${CRIMSONBENCH_PODMAN_RUNROOT:-/run/crimsonbench-podman}
PODMAN=(podman --root "$STORE" --runroot "$RUNROOT" --runtime "$OCI_RUNTIME")
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

# ------------------------------------------------------------------ 2. base rootfs
# The Debian mirror this machine's apt uses (deb822 "URIs:" or one-line "deb URL suite").
find_mirror() {
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

BASE_TAR="$IMAGES/base-$SUITE.tar"
if [ "$FORCE" = 1 ] || [ ! -s "$BASE_TAR" ]; then
  rootfs=$(mktemp -d "$IMAGES/rootfs-$SUITE.XXXXXX")
  cleanup_rootfs() {
    # debootstrap mounts proc/sys (and maybe dev) inside the target; never rm through them
    local m
    for m in $(awk -v r="$rootfs" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
      umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$rootfs" "$BASE_TAR.tmp"
  }
  trap cleanup_rootfs EXIT
  step "debootstrap --variant=minbase $SUITE ($MIRROR)" 900 \
    debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR"
  # drop the downloaded .debs and package lists (~80 MB); the build runs apt-get update
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  mkdir -p "$rootfs/var/lib/apt/lists/partial"
  step "tar rootfs" 300 tar --numeric-owner --xattrs -C "$rootfs" -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  cleanup_rootfs
  trap - EXIT
  FORCE_IMPORT=1
else
  log "base rootfs cached: $BASE_TAR"
fi

# ------------------------------------------------------------------ 3. import base image
if [ "$FORCE" = 1 ] || [ "${FORCE_IMPORT:-0}" = 1 ] || ! "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  # a new base invalidates every layer built on the old one: empty our store first
  step "empty $STORE" 300 "${PODMAN[@]}" rmi --all --force
  step "podman import $BASE_IMAGE" 300 \
    "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' "$BASE_TAR" "$BASE_IMAGE"
else
  log "base image present: $BASE_IMAGE"
fi

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
save() { # IMAGE ARCHIVE
  local id
  id=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$1")
  if [ "$FORCE" != 1 ] && [ -s "$2" ] && [ "$(cat "$2.id" 2>/dev/null)" = "$id" ]; then
    log "archive current: $2"
    return
  fi
  rm -f "$2" "$2.tmp" "$2.id"
  # docker-archive keeps the full name (RepoTags) so ctr imports it as localhost/...:tag
  step "podman save $1" 600 "${PODMAN[@]}" save --format docker-archive -o "$2.tmp" "$1"
  mv "$2.tmp" "$2"
  echo "$id" > "$2.id"
}
FIO_TAR="$IMAGES/crimsonbench-fio-$TAG.tar"
OPERATOR_TAR="$IMAGES/crimsonbench-operator-$TAG.tar"
save "$FIO_IMAGE" "$FIO_TAR"
save "$OPERATOR_IMAGE" "$OPERATOR_TAR"

# ------------------------------------------------------------------ 6. smoke test
if [ "$VERIFY" = 1 ]; then
  RUN=("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network=none --entrypoint=)
  check() { # DESCRIPTION CMD...
    local what=$1 out; shift
    if ! out=$(timeout --kill-after=10 120 "$@" 2>&1); then
      log "verify FAILED: $what"; echo "$out" >&2; exit 1
    fi
    log "verify ok: ${out%%$'\n'*}"
  }
  check "fio --version" "${RUN[@]}" "$FIO_IMAGE" fio --version
  check "fio rbd engine" "${RUN[@]}" "$FIO_IMAGE" sh -c 'fio --enghelp=rbd | grep -E "^(clientname|pool|rbdname)"'
  check "fio is our build (images/fio/), Debian's diverted" "${RUN[@]}" "$FIO_IMAGE" sh -c \
    'grep -q sk_out_drain_wake /usr/bin/fio && [ -x /usr/bin/fio.debian ] && echo "/usr/bin/fio patched, Debian'"'"'s at /usr/bin/fio.debian"'
  # the patched server still serves a client: 2048 4k reads of an 8 MiB null job
  check "fio --server answers fio --client" "${RUN[@]}" "$FIO_IMAGE" sh -c '
    printf "[n]\nioengine=null\nsize=8m\nrw=read\nbs=4k\n" > /tmp/n.fio
    fio --server=ip:127.0.0.1,8765 > /dev/null 2>&1 & sleep 1
    fio --client=ip:127.0.0.1,8765 --output-format=json /tmp/n.fio | grep -q "\"total_ios\" : 2048" \
      && echo "client/server null job: 2048 ios"'
  check "rbd --version" "${RUN[@]}" "$FIO_IMAGE" rbd --version
  check "lscpu json" "${RUN[@]}" "$FIO_IMAGE" sh -c \
    'echo "lscpu --json lists $(lscpu -e=CPU,NODE,SOCKET,CORE,ONLINE --json | grep -c "\"cpu\":") cpus"'
  check "uid 167, /etc/ceph writable" "${RUN[@]}" "$FIO_IMAGE" sh -c \
    '[ "$(id -u)" = 167 ] && touch /etc/ceph/.w && rm /etc/ceph/.w && echo "uid $(id -u) can write /etc/ceph"'
  check "operator import" "${RUN[@]}" "$OPERATOR_IMAGE" python3 -c \
    'import crimsonbench.controller.main; print("crimsonbench.controller.main imports")'
  check "kopf --version" "${RUN[@]}" "$OPERATOR_IMAGE" kopf --version
fi

for f in "$FIO_TAR" "$OPERATOR_TAR"; do
  log "$(du -h "$f" | cut -f1)  $f"
  echo "$f"
done
