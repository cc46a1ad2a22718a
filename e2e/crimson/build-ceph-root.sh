#!/usr/bin/env bash
# A runnable Ceph root for local mode: a lean Debian sid rootfs with Debian's own Ceph
# <VERSION> daemons (ceph-mon, ceph-mgr, classic ceph-osd, ceph-common, ceph-base), fio
# (with its rbd engine), util-linux and procps, plus the crimson-osd built by
# e2e/build-crimson.sh at /usr/bin/crimson-osd with every shared library it needs.
# No compiler or build dependency is installed in it.
#
#   e2e/crimson/build-ceph-root.sh [VERSION]   -> prints .../ceph-root/<VERSION>/rootfs
#   CRIMSON_OSD=/path/crimson-osd ...          use that binary instead of building it
#   CEPH_ROOT_WITHOUT_CRIMSON=1 ...            stop before crimson-osd (classic only; the
#                                              next call without it adds crimson-osd)
#
# Cache (CRIMSONBENCH_CACHE, default ~/.cache/crimsonbench): ceph-root/<VERSION>/rootfs,
# stage markers .done-<stage> and build.log next to it. Stages: rootfs, packages, crimson.
# .done-crimson holds the key of the crimson-osd installed (e2e/build-crimson.sh's
# bin/crimson-osd.key: its source, patches and CMake flags; "file <sha256>" for
# CRIMSON_OSD): a root is current only while that key is the one build-crimson.sh
# --print-key gives now, so a changed patch or flag rebuilds crimson-osd (incrementally)
# and installs it again, instead of keeping the old binary under the same version.
# Use it: mount proc, sys and dev into it (e2e/crimson/root-mounts.sh), then
# `chroot ROOTFS ceph-mon ...` with host networking.
set -euo pipefail
# Edit this file only by replacing it (write a copy, then mv): a running build reads it lazily.

VERSION=${1:-${CRIMSON_VERSION:-20.2.4}}
CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
TOP="$CACHE/ceph-root/$VERSION"
ROOT="$TOP/rootfs"
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${CEPH_ROOT_SUITE:-sid}
LOG="$TOP/build.log"
PACKAGES=(ceph-mon ceph-mgr ceph-osd ceph-common ceph-base fio util-linux procps
  iproute2 ca-certificates)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=ceph-root
source "$HERE/../lib.sh"
# The key the installed crimson-osd must carry (see above).
crimson_key() {
  if [ -n "${CRIMSON_OSD:-}" ]; then
    echo "file $(sha256sum "$CRIMSON_OSD" | cut -d' ' -f1)"
  else
    "$HERE/../build-crimson.sh" --print-key "$VERSION"
  fi
}
crimson_current() { [ -e "$TOP/.done-crimson" ] && [ "$(cat "$TOP/.done-crimson")" = "$(crimson_key)" ]; }
if crimson_current; then echo "$ROOT"; exit 0; fi
if [ -n "${CEPH_ROOT_WITHOUT_CRIMSON:-}" ] && [ -e "$TOP/.done-packages" ]; then
  echo "$ROOT"; exit 0
fi
mkdir -p "$TOP"
exec 9>"$TOP/.lock"
flock 9

mounted=()
trap resumable_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

in_root() { timeout -k 30 "${STAGE_TIMEOUT:-3600}" chroot "$ROOT" "${CHROOT_ENV[@]}" "$@"; }

stage() {  # stage NAME: true when it still has to run
  if [ -e "$TOP/.done-$1" ]; then log "stage $1: done before"; return 1; fi
  log "stage $1: start"
  STAGE_T0=$SECONDS
  echo "=== stage $1 $(date -Is)" >>"$LOG"
}
done_stage() { log "stage $1: done in $((SECONDS - STAGE_T0))s"; touch "$TOP/.done-$1"; }

t_all=$SECONDS
if stage rootfs; then
  if [ -d "$ROOT" ]; then
    umount "$ROOT/proc" "$ROOT/sys" 2>/dev/null || true
    rm -rf --one-file-system "$ROOT"
  fi
  timeout -k 30 1800 debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >>"$LOG" 2>&1
  printf 'deb %s %s main\n' "$MIRROR" "$SUITE" >"$ROOT/etc/apt/sources.list"
  echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99no-valid-until"
  # Package scripts must not start daemons in here.
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod +x "$ROOT/usr/sbin/policy-rc.d"
  done_stage rootfs
fi

chroot_mounts "$ROOT"
if stage packages; then
  in_root "${CHROOT_APT[@]}" update >>"$LOG" 2>&1
  in_root "${CHROOT_APT[@]}" install "${PACKAGES[@]}" >>"$LOG" 2>&1
  have=$(in_root dpkg-query -W -f '${Version}' ceph-osd)
  case $have in
    "$VERSION"|"$VERSION"[+-]*) ;;
    *) log "$SUITE's ceph-osd is $have, not $VERSION"; exit 1 ;;
  esac
  in_root apt-get clean
  done_stage packages
fi
if [ -n "${CEPH_ROOT_WITHOUT_CRIMSON:-}" ]; then echo "$ROOT"; exit 0; fi

# A crimson-osd installed under another key (or by an older script, without one) is
# replaced: build-crimson.sh rebuilds what changed, if anything.
if [ -e "$TOP/.done-crimson" ] && ! crimson_current; then
  log "the installed crimson-osd's key is not $(crimson_key): installing the current one"
  rm -f "$TOP/.done-crimson"
fi
if stage crimson; then
  osd=${CRIMSON_OSD:-$("$HERE/../build-crimson.sh" "$VERSION")}
  osd=${osd##*$'\n'}
  if [ -n "${CRIMSON_OSD:-}" ]; then key=$(crimson_key); else key=$(cat "$osd.key"); fi
  install -m 0755 "$osd" "$ROOT/usr/bin/crimson-osd.tmp"
  mv "$ROOT/usr/bin/crimson-osd.tmp" "$ROOT/usr/bin/crimson-osd"
  # Install the sid packages that own the libraries crimson-osd still lacks, as the build
  # chroot (same suite) names them; repeat, since new libraries bring their own needs.
  build_root="$CACHE/crimson/$VERSION/chroot"
  for _ in 1 2 3; do
    missing=$(in_root ldd /usr/bin/crimson-osd | awk '/not found/ {print $1}')
    [ -n "$missing" ] || break
    pkgs=()
    for so in $missing; do
      owner=$(chroot "$build_root" dpkg -S "*/$so" 2>/dev/null | head -1 | cut -d: -f1)
      [ -n "$owner" ] || { log "no package in $build_root owns $so"; exit 1; }
      pkgs+=("$owner")
    done
    log "  libraries for crimson-osd: ${pkgs[*]}"
    in_root "${CHROOT_APT[@]}" install "${pkgs[@]}" >>"$LOG" 2>&1
  done
  if in_root ldd /usr/bin/crimson-osd | grep 'not found' >&2; then exit 1; fi
  # Our build's compiled-in osd_class_dir is "lib/rados-classes" (CMAKE_INSTALL_LIBDIR=lib),
  # relative to the daemon's cwd (/): point it at Debian's object classes (cls_rbd, cls_lock
  # ...; same 20.2.4 source, they load into crimson-osd). Without them `rbd create` fails
  # with EOPNOTSUPP. Setting osd_class_dir=/usr/lib/x86_64-linux-gnu/rados-classes works too.
  ln -sfn x86_64-linux-gnu/rados-classes "$ROOT/usr/lib/rados-classes"
  in_root crimson-osd --version >&2
  in_root apt-get clean
  done_stage crimson
  echo "$key" >"$TOP/.done-crimson"
fi
log "ceph root ready in $((SECONDS - t_all))s"
echo "$ROOT"
