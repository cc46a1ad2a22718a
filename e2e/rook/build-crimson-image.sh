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
set -euo pipefail
VERSION=${1:-${CRIMSON_VERSION:-20.2.4}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$("$HERE/../crimson/build-ceph-root.sh" "$VERSION")
root=${root##*$'\n'}
BASE_ROOTFS=$root CEPH_VERSION=$VERSION SUITE=sid OSD_FLAVOR=crimson exec "$HERE/build-image.sh"
