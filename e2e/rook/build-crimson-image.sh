#!/usr/bin/env bash
# One Rook + Ceph image whose OSD daemon is crimson: the Ceph root of
# e2e/crimson/build-ceph-root.sh (Debian sid's 20.2.4 daemons + our crimson-osd) as the base,
# Rook's binary and the tools Rook's pods need on top (e2e/rook/build-image.sh with
# OSD_FLAVOR=crimson: see e2e/rook/image/ceph-osd and ceph-mon for what the flavour changes).
# Saved as a docker-archive for `ctr images import` / `kind load image-archive`.
#
#   e2e/rook/build-crimson-image.sh [VERSION]   -> prints the archive path
#     (also images/crimsonbench-fio-dev-ceph<V>.tar: our fio runner on the same Ceph client)
#                                                  (image localhost/rook-ceph:<rook>-<V>-crimson)
# Builds the Ceph root first when it is not cached, and with it crimson-osd (~1-2 h on 2
# cores): run it in the background on a fresh machine.
#
# On a machine that can pull images, one build argument replaces that build: an upstream
# Ceph CI image that carries the crimson OSD (Ceph main ships ceph-osd-crimson beside
# ceph-osd; its CI publishes such images, e.g. the crimson-release tags doc/crimson/crimson.rst
# names):
#
#   CEPH_IMAGE=<registry>/ceph-ci/ceph:<sha1>-crimson-release e2e/rook/build-crimson-image.sh
#     -> images/rook-ceph-<rook>-upstream-crimson.tar (image localhost/rook-ceph:<rook>-upstream-crimson)
#
# That image is pulled (the only network step), and e2e/rook/Containerfile.upstream adds
# Rook's binary, the toolbox scripts and our crimson wrappers (ceph-osd runs crimson,
# `--mkfs` stays classic; ceph-mon allows crimson OSDs before any exists). It is CentOS
# Stream, so nothing is installed on top. Its Ceph is main (21): crimson_cpu_set and
# osd_objectstore, which the operator asks the mons for; our fio runner must have a client
# of 20.2 or newer (fio.image). Where no registry answers (our machines) the script stops,
# printing podman's reason, with exit code 3: build from Debian's source as above instead.
set -euo pipefail
VERSION=${1:-${CRIMSON_VERSION:-20.2.4}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${CEPH_IMAGE:-}" ]; then
  exec "$HERE/build-upstream-crimson-image.sh" "$CEPH_IMAGE"
fi
root=$("$HERE/../crimson/build-ceph-root.sh" "$VERSION")
root=${root##*$'\n'}
# OSD_FLAVOR=classic: the same daemons with the classic ceph-osd as the OSD (image
# localhost/rook-ceph:<rook>-<V>-classic), for classic-vs-crimson on one Ceph build; its fio
# runner is the crimson build's (WITH_FIO=0)
flavor=${OSD_FLAVOR:-crimson}
with_fio=1
[ "$flavor" = classic ] && with_fio=0
BASE_ROOTFS=$root CEPH_VERSION=$VERSION SUITE=sid OSD_FLAVOR=$flavor WITH_FIO=$with_fio \
  exec "$HERE/build-image.sh"
