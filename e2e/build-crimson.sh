#!/usr/bin/env bash
# Build a real crimson OSD (crimson-osd) from Debian sid's Ceph source package, once, in a
# sid debootstrap chroot, cached OUTSIDE the repository. No Debian package ships a crimson
# OSD; sid carries the 20.2.4 (tentacle) source and toolchain that builds it.
#
#   e2e/build-crimson.sh [VERSION]              -> prints .../crimson/<VERSION>/bin/crimson-osd
#   e2e/build-crimson.sh --print-key [VERSION]  -> the key a current binary carries
#
# The binary is trusted only with its key: bin/crimson-osd.key is the sha256 of what it was
# built from (the Ceph version, the suite, the source tarball's sha256 as apt printed it and
# as checked after the download, every patch's name and sha256, the CMake flags);
# bin/crimson-osd.inputs says the same in words. Another key re-runs patch, configure and
# compile on the kept tree (ninja rebuilds what changed), never the chroot; a binary without
# a key (an older script made it) gets one once its tarball, its patches and the build
# dir's CMake flags are checked, without cmake or ninja (not a 2-hour rebuild).
#
# Cache layout (CRIMSONBENCH_CACHE, default ~/.cache/crimsonbench):
#   crimson/<VERSION>/chroot/              sid build chroot (gcc, cmake, ninja, build-deps)
#   crimson/<VERSION>/chroot/build/dl/     the upstream tarball (sha256 checked)
#   crimson/<VERSION>/chroot/build/src/    extracted ceph-<VERSION> source (patched)
#   crimson/<VERSION>/chroot/build/obj/    cmake/ninja build dir (kept: ninja resumes here)
#   crimson/<VERSION>/bin/crimson-osd      the result; .key and .inputs beside it
#   crimson/<VERSION>/source.sha256        the tarball's checked sha256
#   crimson/<VERSION>/.applied-patches     "name sha256" of each patch in the source tree
#   crimson/<VERSION>/.compiled-files      "sha256 path" of each patched file at the last build
#   crimson/<VERSION>/.configured-args     the CMake flags the build dir was configured with
#   crimson/<VERSION>/.done-<stage>        stage markers (an interrupted run resumes)
#   crimson/<VERSION>/build.log            full log of apt/cmake/ninja
#
# Stages: chroot, source, builddeps, patch, configure, compile. Each is bounded by a
# timeout (CRIMSON_TIMEOUT_<STAGE> seconds). Patches: e2e/crimson/patches/<VERSION>/*.patch,
# applied in name order, idempotently (a patch already applied is skipped); a patch removed
# or changed since the tree was patched re-extracts the source from the checked tarball
# (tar restores its mtimes) and applies the set again. Patched files keep their mtimes until
# a build has finished (the patches fix compile errors: what compiled stays valid); after
# one, a patched file whose content differs from what that build compiled is touched, so
# ninja rebuilds what depends on it.
# Memory: ~3.6 GB per compiler at peak; CRIMSON_JOBS (default 2).
set -euo pipefail
# Edit this file only by replacing it (write a copy, then mv): a running build reads it lazily.

PRINT_KEY=0
if [ "${1:-}" = --print-key ]; then PRINT_KEY=1; shift; fi
VERSION=${1:-${CRIMSON_VERSION:-20.2.4}}
CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
TOP="$CACHE/crimson/$VERSION"
BIN="$TOP/bin/crimson-osd"
STAMP="$BIN.key"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=build-crimson
source "$HERE/lib.sh"
PATCHES="$HERE/crimson/patches/$VERSION"
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${CRIMSON_SUITE:-sid}
JOBS=${CRIMSON_JOBS:-2}
ROOT="$TOP/chroot"
SRC=/build/src/ceph-$VERSION  # paths inside the chroot
OBJ=/build/obj
LOG="$TOP/build.log"

CMAKE_ARGS=(
  -G Ninja -DCMAKE_BUILD_TYPE=Release
  -DWITH_CRIMSON=ON -DWITH_SYSTEM_BOOST=ON
  -DWITH_TESTS=OFF -DWITH_MANPAGE=OFF -DWITH_MGR_DASHBOARD_FRONTEND=OFF
  -DWITH_RADOSGW=OFF -DWITH_RBD=OFF -DWITH_KRBD=OFF -DWITH_RBD_MIRROR=OFF -DWITH_RBD_RWL=OFF
  -DWITH_RBD_SSD_CACHE=OFF -DWITH_CEPHFS=OFF -DWITH_CEPHFS_JAVA=OFF -DWITH_LIBCEPHFS=OFF
  -DWITH_CEPHFS_SHELL=OFF -DWITH_FUSE=OFF -DWITH_MGR=OFF -DWITH_SPDK=OFF -DWITH_DPDK=OFF
  -DWITH_JAEGER=OFF -DWITH_LTTNG=OFF -DWITH_BABELTRACE=OFF -DWITH_RDMA=OFF -DWITH_QATLIB=OFF
  -DWITH_QATZIP=OFF -DWITH_RADOSGW_SELECT_PARQUET=OFF
  -DWITH_CCACHE=OFF -DWITH_LIBRADOSSTRIPER=OFF -DWITH_LIBCEPHSQLITE=OFF -DWITH_UADK=OFF
  -DWITH_BLUESTORE_PMEM=OFF -DWITH_SYSTEM_PMDK=OFF -DWITH_RBD_MIGRATION_FORMAT_QCOW_V1=OFF
  # Journald.cc is compiled into crimson-common even without systemd: keep it on.
  -DWITH_SYSTEMD=ON
  # The version string comes from src/.git_version in the tarball (sha + "20.2.4"), so
  # `crimson-osd --version` matches Debian's daemons.
)

# "name sha256" of every patch, in the order they apply
wanted_patches() {
  local p
  for p in "$PATCHES"/*.patch; do
    [ -e "$p" ] || continue
    printf '%s %s\n' "${p##*/}" "$(sha256sum "$p" | cut -d' ' -f1)"
  done
}
# What the binary is built from, in words (bin/crimson-osd.inputs); its sha256 is the key.
inputs() {
  echo "key-format 1"
  echo "ceph $VERSION"
  echo "suite $SUITE"
  echo "source-sha256 $(cat "$TOP/source.sha256" 2>/dev/null || echo unverified)"
  wanted_patches | sed 's/^/patch /'
  echo "cmake ${CMAKE_ARGS[*]}"
}
cache_key() { inputs | sha256sum | cut -d' ' -f1; }
current() { [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$(cache_key)" ]; }

if [ "$PRINT_KEY" = 1 ]; then cache_key; exit 0; fi
if current; then echo "$BIN"; exit 0; fi
mkdir -p "$TOP/bin"

# One build per version at a time.
exec 9>"$TOP/.lock"
if ! flock -n 9; then
  echo "another build of crimson $VERSION holds $TOP/.lock; waiting" >&2
  flock 9
  if current; then echo "$BIN"; exit 0; fi
fi

mounted=()
child=""
on_signal() {
  log "interrupted: stopping the running stage; re-run to resume"
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  exit "$1"
}
trap resumable_exit EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

# Run a command in the chroot with a clean environment.
in_chroot() { chroot "$ROOT" "${CHROOT_ENV[@]}" "$@"; }

# run_stage NAME TIMEOUT: run stage_NAME in a child bash under `timeout`, skip it when done,
# time it, mark it done.
run_stage() {
  local name=$1 limit=$2
  if [ -e "$TOP/.done-$name" ]; then log "stage $name: done before"; return 0; fi
  log "stage $name: start (timeout ${limit}s)"
  local t0=$SECONDS
  echo "=== stage $name $(date -Is)" >>"$LOG"
  # In the background + wait, so a signal to this script runs its trap at once (which stops
  # the stage: timeout passes the signal to its whole process group, compilers included).
  timeout -k 30 "$limit" bash -c "set -euo pipefail; $(stage_env); stage_$name" &
  child=$!
  wait "$child"
  child=""
  log "stage $name: done in $((SECONDS - t0))s"
  touch "$TOP/.done-$name"
}

stage_chroot() {
  if [ -d "$ROOT" ] && [ ! -e "$TOP/.done-chroot" ]; then
    log "removing a half-made chroot"
    umount "$ROOT/proc" "$ROOT/sys" 2>/dev/null || true
    rm -rf --one-file-system "$ROOT"
  fi
  debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >>"$LOG" 2>&1
  cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb-src $MIRROR $SUITE main
EOF
  # sid's Release file may be past its Valid-Until date.
  echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99no-valid-until"
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
  chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    "${CHROOT_APT[@]}" update >>"$LOG" 2>&1
  chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    "${CHROOT_APT[@]}" install dpkg-dev xz-utils ca-certificates >>"$LOG" 2>&1
}

stage_source() {
  mkdir -p "$ROOT/build/dl" "$ROOT/build/src"
  in_chroot "${CHROOT_APT[@]}" update >>"$LOG" 2>&1
  # Only the upstream tarball is needed (the .debian.tar.xz has been seen to 404).
  local uris
  uris=$(in_chroot apt-get -o Acquire::Check-Valid-Until=false source --print-uris ceph 2>>"$LOG")
  echo "$uris" >>"$LOG"
  local orig sha
  read -r orig sha < <(orig_of "$uris") || true
  if [ -z "$orig" ]; then
    log "sid's ceph source is not $VERSION:"
    echo "$uris" | grep -o "ceph_[^ ]*dsc" >&2 || true
    return 1
  fi
  [ -n "$sha" ] || { log "apt printed no SHA256 for $orig"; return 1; }
  local name=${orig##*/}
  local file="$ROOT/build/dl/${name//%2b/+}"
  if ! check_sha256 "$file" "$sha"; then
    rm -f "$file.ok"
    log "downloading $orig"
    curl -fsSL --retry 5 -C - -o "$file" "$orig" 2>>"$LOG" || wget -c -O "$file" "$orig" >>"$LOG" 2>&1
    if ! check_sha256 "$file" "$sha"; then
      log "$file does not have the sha256 apt printed ($sha): removed; re-run to fetch it again"
      rm -f "$file"
      return 1
    fi
    echo ok >"$file.ok"
  fi
  echo "$sha" >"$TOP/source.sha256"
  extract "$file"
}

# orig_of URIS: "URL SHA256" of the upstream tarball in `apt-get source --print-uris`
# output (lines: 'URL' NAME SIZE SHA256:HEX)
orig_of() {
  echo "$1" | awk -v v="ceph_$VERSION" '$2 ~ "^"v"[^-]*\\.orig\\.tar" {
    gsub("\x27", "", $1); sha = ""
    for (i = 3; i <= NF; i++) if ($i ~ /^SHA256:/) sha = substr($i, 8)
    print $1, sha; exit }'
}
check_sha256() { [ -s "$1" ] && echo "$2  $1" | sha256sum --check --status; }

# extract TARBALL: a fresh, unpatched source tree (tar restores the tarball's mtimes)
extract() {
  local file=$1
  log "extracting ${file##*/}"
  rm -f "$TOP/.applied-patches"
  rm -rf "$ROOT/build/src/ceph-$VERSION" "$ROOT/build/src/tmp"
  mkdir -p "$ROOT/build/src/tmp"
  tar -C "$ROOT/build/src/tmp" --no-same-owner -xf "$file"
  local top
  top=$(ls "$ROOT/build/src/tmp")
  mv "$ROOT/build/src/tmp/$top" "$ROOT/build/src/ceph-$VERSION"
  rmdir "$ROOT/build/src/tmp"
}

stage_builddeps() {
  in_chroot "${CHROOT_APT[@]}" update >>"$LOG" 2>&1
  in_chroot "${CHROOT_APT[@]}" build-dep ceph >>"$LOG" 2>&1
  # ninja and cmake are in ceph's build-deps; these make sure.
  in_chroot "${CHROOT_APT[@]}" install ninja-build cmake g++ python3 >>"$LOG" 2>&1
}

stage_patch() {
  local p line wanted
  wanted=$(wanted_patches)
  # A patch removed or changed since the tree was patched: start again from the tarball.
  if [ -s "$TOP/.applied-patches" ]; then
    while read -r line; do
      if ! grep -qxF "$line" <<<"$wanted"; then
        log "  patch ${line%% *} changed or is gone: re-extracting the source"
        extract "$(ls "$ROOT"/build/dl/ceph_"$VERSION"*.orig.tar.* | grep -v '\.ok$' | head -1)"
        break
      fi
    done <"$TOP/.applied-patches"
  fi
  for p in "$PATCHES"/*.patch; do
    [ -e "$p" ] || continue
    if patch -d "$ROOT$SRC" -p1 -R --dry-run -s -f <"$p" >/dev/null 2>&1; then
      log "  patch ${p##*/}: already applied"
    else
      log "  patch ${p##*/}"
      # Keep the patched files' mtimes: these patches only fix compile errors, so objects
      # that already compiled stay valid and a resumed ninja rebuilds only what failed
      # (a touched header would otherwise rebuild everything that includes it). Once a
      # build has finished, touch_changed makes ninja rebuild what a changed patch changed.
      local f files=() ref
      mapfile -t files < <(sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$p")
      ref=$(mktemp -d)
      for f in "${files[@]}"; do
        if [ -e "$ROOT$SRC/$f" ]; then touch -r "$ROOT$SRC/$f" "$ref/${f//\//_}"; fi
      done
      patch -d "$ROOT$SRC" -p1 -N -s -f <"$p" >>"$LOG" 2>&1
      for f in "${files[@]}"; do
        if [ -e "$ref/${f//\//_}" ]; then touch -r "$ref/${f//\//_}" "$ROOT$SRC/$f"; fi
      done
      rm -rf "$ref"
    fi
  done
  if [ -n "$wanted" ]; then echo "$wanted" >"$TOP/.applied-patches"; else : >"$TOP/.applied-patches"; fi
  touch_changed
}

# The files the wanted patches touch, and those the last finished build compiled patched.
patched_files() {
  local p
  {
    for p in "$PATCHES"/*.patch; do
      [ -e "$p" ] || continue
      sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$p"
    done
    if [ -s "$TOP/.compiled-files" ]; then awk '{print $2}' "$TOP/.compiled-files"; fi
  } | sort -u
}
# After a finished build (.compiled-files), touch each patched file whose content is not
# what that build compiled, so ninja rebuilds what depends on it. Before any finished build
# there is nothing to compare with (and the first build compiles everything anyway).
touch_changed() {
  [ -s "$TOP/.compiled-files" ] || return 0
  local f now
  while read -r f; do
    [ -e "$ROOT$SRC/$f" ] || continue
    now=$(sha256sum "$ROOT$SRC/$f" | cut -d' ' -f1)
    if ! grep -qxF "$now $f" "$TOP/.compiled-files"; then
      log "  $f is not what the last build compiled: ninja rebuilds what uses it"
      touch "$ROOT$SRC/$f"
    fi
  done < <(patched_files)
}
# What the finished build compiled: each patched file's sha256 (touch_changed's reference).
record_compiled() {
  local f
  while read -r f; do
    if [ -e "$ROOT$SRC/$f" ]; then
      printf '%s %s\n' "$(sha256sum "$ROOT$SRC/$f" | cut -d' ' -f1)" "$f"
    fi
  done < <(patched_files) >"$TOP/.compiled-files.tmp"
  mv "$TOP/.compiled-files.tmp" "$TOP/.compiled-files"
}

stage_configure() {
  mkdir -p "$ROOT$OBJ"
  in_chroot sh -c "cd $OBJ && cmake ${CMAKE_ARGS[*]@Q} $SRC" >>"$LOG" 2>&1
  echo "${CMAKE_ARGS[*]}" >"$TOP/.configured-args"
}

stage_compile() {
  log "ninja -j$JOBS crimson-osd in $ROOT$OBJ (cold: ~1 h on 2 idle cores)"
  # ninja's [N/M] progress and any compiler error go to stderr and the log.
  # -k 0: on a compile error, keep building everything else, so one run shows every file
  # that needs a patch (then add patches and re-run: ninja resumes).
  in_chroot sh -c "cd $OBJ && ninja -k 0 -j$JOBS crimson-osd" 2>&1 | tee -a "$LOG" \
    | { grep --line-buffered -E '^\[[0-9]+/[0-9]+\]|error|FAILED|ninja:' >&2 || true; }
  local out="$ROOT$OBJ/bin/crimson-osd"
  [ -x "$out" ] || { log "no $out after ninja"; return 1; }
  cp "$out" "$BIN.tmp"
  mv "$BIN.tmp" "$BIN"
  record_compiled
}

t_all=$SECONDS
log "crimson-osd $VERSION -> $BIN (log: $LOG)"
# Each stage runs in a child bash under `timeout`; mounts are made here, in the parent, so
# the EXIT trap sees (and undoes) them whatever happens to the child.
stage_env() {
  declare -p ROOT TOP LOG LOG_TAG SRC OBJ VERSION PATCHES MIRROR SUITE JOBS BIN CHROOT_APT CHROOT_ENV \
    CMAKE_ARGS
  declare -f log in_chroot stage_chroot stage_source orig_of check_sha256 extract \
    stage_builddeps stage_patch wanted_patches patched_files touch_changed record_compiled \
    stage_configure stage_compile
}

# A source an older run of this script fetched has no source.sha256: check its tarball
# against the sha256 apt prints, as stage_source does now (the tree stays); fetch and
# extract again when it is missing or differs.
verify_source() {
  [ -s "$TOP/source.sha256" ] && return 0
  local uris orig sha file
  uris=$(in_chroot apt-get -o Acquire::Check-Valid-Until=false source --print-uris ceph 2>>"$LOG")
  read -r orig sha < <(orig_of "$uris") || true
  file="$ROOT/build/dl/$(basename "${orig//%2b/+}")"
  if [ -n "$orig" ] && [ -n "$sha" ] && check_sha256 "$file" "$sha"; then
    log "source tarball ${file##*/}: sha256 $sha, as apt printed"
    echo "$sha" >"$TOP/source.sha256"
    return 0
  fi
  log "the source tarball ${file##*/} is missing or not apt's (sha256 ${sha:-not printed}): fetching and extracting it again"
  rm -f "$TOP/.done-source"
  run_stage source "${CRIMSON_TIMEOUT_SOURCE:-3600}"
}

run_stage chroot "${CRIMSON_TIMEOUT_CHROOT:-1800}"
chroot_mounts "$ROOT"
run_stage source "${CRIMSON_TIMEOUT_SOURCE:-3600}"
verify_source
run_stage builddeps "${CRIMSON_TIMEOUT_BUILDDEPS:-5400}"
# Always (idempotent): a patch added to fix a compile error applies on the next run, and one
# changed or removed is noticed.
rm -f "$TOP/.done-patch"
run_stage patch "${CRIMSON_TIMEOUT_PATCH:-300}"
# A binary an older run of this script built has no key and no record of what it compiled.
# Its tree is the one checked above (tarball's sha256, every wanted patch applied); when the
# build dir's CMakeCache also holds every flag, it was built from these inputs: it gets its
# key without cmake or ninja (a cmake run regenerates files most objects depend on: seen,
# 383 of 506 steps again).
cache_has_flags() {
  local cache="$ROOT$OBJ/CMakeCache.txt" a key val
  [ -s "$cache" ] && grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$cache" || return 1
  for a in "${CMAKE_ARGS[@]}"; do
    case $a in -D*=*) key=${a#-D}; val=${key#*=}; key=${key%%=*} ;; *) continue ;; esac
    grep -qx "$key:[A-Z]*=$val" "$cache" || { log "  CMakeCache has no $key=$val"; return 1; }
  done
}
if [ -x "$BIN" ] && [ ! -e "$STAMP" ] && [ ! -s "$TOP/.compiled-files" ] && cache_has_flags; then
  log "$BIN: built by an older run from these inputs (tarball, patches, flags checked): keyed, not rebuilt"
  record_compiled
  echo "${CMAKE_ARGS[*]}" >"$TOP/.configured-args"
  inputs >"$BIN.inputs"
  cache_key >"$STAMP.tmp"
  mv "$STAMP.tmp" "$STAMP"
  echo "$BIN"
  exit 0
fi
# Configure again when the flags differ from those of the build dir (or are unknown: a
# build dir of the older script); cmake keeps what did not change.
if [ "$(cat "$TOP/.configured-args" 2>/dev/null)" != "${CMAKE_ARGS[*]}" ]; then
  rm -f "$TOP/.done-configure"
fi
run_stage configure "${CRIMSON_TIMEOUT_CONFIGURE:-1800}"
# Here the binary lacks the wanted key: ninja does what changed (nothing, for a tree an
# older script built from the same inputs).
rm -f "$TOP/.done-compile"
run_stage compile "${CRIMSON_TIMEOUT_COMPILE:-28800}"
inputs >"$BIN.inputs"
cache_key >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "built in $((SECONDS - t_all))s (key $(cat "$STAMP"))"
echo "$BIN"
