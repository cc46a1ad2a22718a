# Shared helpers of the e2e build scripts (sourced, not run): logging, bounded steps, exit
# hooks, one build at a time, Debian tools and mirror, a debootstrap base as a tarball,
# podman's store, import, checks and save, a chroot's mounts, Go's offline builds. Set
# LOG_TAG before sourcing. tests/scripts/test_e2e_lib.py runs them.

CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
FORCE=${FORCE:-0}

log() { printf '[%s %s] %s\n' "${LOG_TAG:-e2e}" "$(date +%H:%M:%S)" "$*" >&2; }
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

# on_exit CMD: run CMD when the script exits, last registered first (one EXIT trap for all).
# Functions called in $(...) or in the background run in a subshell: what they register
# runs when it ends, and only that. A subshell inherits the array of its parent's hooks;
# running those at its end killed the parent's other background builds and removed
# their files (seen on the first cold build: coredns killed when a $(rootfs_image)
# ended), so a subshell's first on_exit starts a list of its own.
_ON_EXIT=()
_ON_EXIT_OWNER=$BASHPID
on_exit() {
  if [ "$_ON_EXIT_OWNER" != "$BASHPID" ]; then _ON_EXIT=(); _ON_EXIT_OWNER=$BASHPID; fi
  _ON_EXIT+=("$1")
  trap _run_on_exit EXIT
}
_run_on_exit() {
  local i
  for ((i = ${#_ON_EXIT[@]} - 1; i >= 0; i--)); do eval "${_ON_EXIT[i]}" || true; done
}

# one_build_at_a_time LOCKFILE: hold LOCKFILE (fd 8) until the script exits, so make test's
# background prefetch and a test asking for the same build wait for each other.
one_build_at_a_time() {
  mkdir -p "$(dirname "$1")"
  exec 8>"$1"
  flock 8
}

# ensure_tools TOOL...: apt-get install the TOOLs (each a package of that name) not on PATH.
ensure_tools() {
  local need=() t cand
  for t in "$@"; do command -v "$t" >/dev/null || need+=("$t"); done
  [ "${#need[@]}" -gt 0 ] || return 0
  for t in "${need[@]}"; do
    cand=$(apt-cache policy "$t" | awk '/Candidate:/ {print $2}')
    [ -n "$cand" ] && [ "$cand" != "(none)" ] || die "no apt candidate for $t"
  done
  step "apt-get install ${need[*]}" 900 \
    env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y "${need[@]}"
}

# debian_mirror: $MIRROR, else the Debian mirror this machine's apt uses (deb822 "URIs:" or
# one-line "deb URL suite"), else deb.debian.org.
debian_mirror() {
  local f found=${MIRROR:-}
  if [ -z "$found" ]; then
    found=$(for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
                     /etc/apt/sources.list.d/*.list; do
      [ -r "$f" ] || continue
      awk '
        /^[[:space:]]*#/ {next}
        $1 == "URIs:" {for (i = 2; i <= NF; i++) print $i}
        $1 == "deb" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i ~ /:\/\//) {print $i; break}}
      ' "$f"
    done | grep -E '/debian/?$' | grep -v -- '-security' | head -n1 || true)
  fi
  echo "${found:-http://deb.debian.org/debian}"
}

umount_under() { # DIR: every mount at or below DIR, deepest first
  local m
  for m in $(awk -v r="$1" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

# debootstrap_tar TAR SUITE [DEBOOTSTRAP_ARGS...]: a `debootstrap --variant=minbase` SUITE
# rootfs from debian_mirror, without apt's downloaded .debs and lists (the builds on it run
# apt-get update), written as TAR. The function named by $ROOTFS_HOOK, if any, gets the
# rootfs's path before it is tarred.
debootstrap_tar() {
  local tar=$1 suite=$2; shift 2
  local mirror rootfs
  mirror=$(debian_mirror)
  mkdir -p "$(dirname "$tar")"
  rootfs=$(mktemp -d "$(dirname "$tar")/rootfs-$suite.XXXXXX")
  # debootstrap mounts proc/sys inside the target: never rm through them
  on_exit "umount_under '$rootfs'; rm -rf --one-file-system '$rootfs' '$tar.tmp'"
  step "debootstrap --variant=minbase $* $suite ($mirror)" 1200 \
    debootstrap --variant=minbase "$@" "$suite" "$rootfs" "$mirror"
  umount_under "$rootfs"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  mkdir -p "$rootfs/var/lib/apt/lists/partial"
  [ -z "${ROOTFS_HOOK:-}" ] || "$ROOTFS_HOOK" "$rootfs"
  step "tar rootfs $suite" 600 tar --numeric-owner --xattrs -C "$rootfs" -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
  rm -rf --one-file-system "$rootfs"
}

# chroot_mounts ROOT: proc, sys and the host's /dev in ROOT, each added to the caller's
# `mounted` array (one a killed run left is adopted); the host's resolv.conf copied in.
# chroot_unmount undoes them, last first: call it from the caller's exit trap.
chroot_mounts() {
  local root=$1 m
  for m in proc sys dev; do
    if mountpoint -q "$root/$m"; then mounted+=("$root/$m"); continue; fi
    mkdir -p "$root/$m"
    case $m in
      proc) mount -t proc proc "$root/proc" ;;
      sys) mount -t sysfs sysfs "$root/sys" ;;
      dev) mount --bind /dev "$root/dev" ;;
    esac
    mounted+=("$root/$m")
  done
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}
chroot_unmount() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" 2>/dev/null || true
  done
}

# resumable_exit: the EXIT trap of a build in stages: the chroot's mounts undone and, after
# a failure, where its log ($LOG) is and that a re-run resumes.
resumable_exit() {
  local rc=$?
  chroot_unmount
  [ "$rc" -eq 0 ] || log "failed (rc=$rc); log: $LOG; re-run to resume"
  exit "$rc"
}

# `chroot ROOT "${CHROOT_ENV[@]}" CMD...`: CMD in a clean environment
CHROOT_ENV=(/usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive)
# apt-get in a chroot of a frozen suite (sid's Release may be past its Valid-Until date)
CHROOT_APT=(apt-get -o DPkg::Lock::Timeout=900 -o Acquire::Check-Valid-Until=false
  -o Acquire::Retries=5 -y --no-install-recommends)

# go_build_start DIR WHAT: a build from the Go module proxy into DIR begins (call it under
# one_build_at_a_time, once the cached result is known to be missing): Go's offline
# settings, Go required, a fresh DIR/build.log ($BUILD_LOG) and a scratch directory ($WORK,
# the current directory) removed at exit. WHAT names the build in messages.
go_build_start() {
  local dir=$1 what=$2
  export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
  command -v go >/dev/null || die "Go is not installed; $what is built from the module proxy"
  mkdir -p "$dir"
  BUILD_LOG="$dir/build.log"
  : >"$BUILD_LOG"
  WORK=$(mktemp -d)
  on_exit "rm -rf '$WORK'"
  cd "$WORK"
  log "building $what into $dir (cold: minutes; log: $BUILD_LOG)"
}

# podman_store STORE RUNROOT [RUNTIME]: PODMAN, a podman on a store of our own (FORCE can
# wipe it; nothing piles up in the machine's default store; inspect it with the same
# --root/--runroot), and ULIMITS for its containers. runc, not crun: crun 1.8 refuses
# cgroup v1 hybrid. The ulimits: runc cannot raise RLIMIT_NOFILE past the hard limit of
# 20000 without CAP_SYS_RESOURCE. The run root (locks, container state; recreated on
# demand) is removed at exit unless a container is left in it.
podman_store() {
  PODMAN=(podman --root "$1" --runroot "$2" --runtime "${3:-runc}")
  ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
  on_exit "\"\${PODMAN[@]}\" ps -aq 2>/dev/null | grep -q . || rm -rf '$2'"
}

# build_context DIR: CTX, a fresh build context directory under DIR, removed at exit.
build_context() {
  CTX=$(mktemp -d "$1/context.XXXXXX")
  on_exit "rm -rf '$CTX'"
}

# podman_base TAR IMAGE: IMAGE imported from the rootfs TAR when $FORCE_IMPORT is 1 or
# IMAGE is missing.
podman_base() {
  if [ "${FORCE_IMPORT:-0}" = 1 ] || ! "${PODMAN[@]}" image exists "$2"; then
    "${PODMAN[@]}" rmi --force "$2" >/dev/null 2>&1 || true
    step "podman import $2" 300 "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' "$1" "$2"
  else
    log "base image present: $2"
  fi
}

# verify DESCRIPTION CMD...: CMD (bounded) must succeed, or the build fails showing its
# output; the output is left in $VERIFY_OUT.
verify() {
  local what=$1; shift
  if ! VERIFY_OUT=$(timeout --kill-after=10 120 "$@" 2>&1); then
    log "verify FAILED: $what"; echo "$VERIFY_OUT" >&2; exit 1
  fi
  log "verify ok ($what): ${VERIFY_OUT%%$'\n'*}"
}

# podman_save ARCHIVE IMAGE...: the IMAGEs in one docker-archive (it keeps their full
# names, so containerd imports them as localhost/...:tag); skipped while ARCHIVE.id says
# it holds these very images.
podman_save() {
  local archive=$1 id multi=(); shift
  id=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$@" | paste -sd, -)
  if [ "$FORCE" != 1 ] && [ -s "$archive" ] && [ "$(cat "$archive.id" 2>/dev/null)" = "$id" ]; then
    log "archive current: $archive"
    return
  fi
  rm -f "$archive" "$archive.tmp" "$archive.id" "$archive.inputs"
  [ $# -gt 1 ] && multi=(--multi-image-archive)
  step "podman save $*" 900 \
    "${PODMAN[@]}" save "${multi[@]}" --format docker-archive -o "$archive.tmp" "$@"
  mv "$archive.tmp" "$archive"
  echo "$id" >"$archive.id"
  log "$(du -h "$archive" | cut -f1)  $archive"
}

# go_build_once DIR BIN WHAT: print BIN and exit while it is built (FORCE=1 builds again),
# else go_build_start; one build at a time.
go_build_once() {
  one_build_at_a_time "$1/.script.lock"
  if [ "$FORCE" != 1 ] && [ -x "$2" ]; then echo "$2"; exit 0; fi
  go_build_start "$1" "$3"
}

# go_module FIELD MODULE@VERSION: the module fetched from the proxy; prints FIELD of
# `go mod download -json` (Dir: its source tree, GoMod: its go.mod).
go_module() {
  local out
  out=$(timeout 600 go mod download -json "$2" 2>>"${BUILD_LOG:-/dev/null}" \
        | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get(sys.argv[1]) or d.get("Error"))' \
          "$1") || true
  [ -e "$out" ] || die "go mod download $2 failed: $out"
  echo "$out"
}
