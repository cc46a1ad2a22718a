#!/usr/bin/env bash
# Build the fio local mode runs: Debian bookworm's fio source (the version and checksum
# the Dockerfile's fio-build stage names, so both executors run the same fio) with the
# patches in images/fio/ applied. Cached OUTSIDE the repository, keyed by version and by
# the patches' content; Debian's own /usr/bin/fio stays for comparison.
#
#   scripts/build-fio.sh        -> prints the fio binary's path
#
# Idempotent: a second call only prints the path. Cold: ~1.5 min on 2 cores, plus the
# librbd/librados headers from apt the first time. Why patch: images/fio/README.md.
set -euo pipefail

LOG_TAG=build-fio
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/e2e/lib.sh"

arg() { sed -n "s/^ARG $1=//p" "$ROOT/Dockerfile" | head -n1; }
FIO_VERSION=$(arg FIO_VERSION)
FIO_SHA256=$(arg FIO_SHA256)
[ -n "$FIO_VERSION" ] && [ -n "$FIO_SHA256" ] || die "no ARG FIO_VERSION/FIO_SHA256 in the Dockerfile"
key=$(cat "$ROOT"/images/fio/*.patch "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
DIR="$CACHE/fio/$FIO_VERSION-$key"
BIN="$DIR/bin/fio"

one_build_at_a_time "$CACHE/fio/.build.lock"
if [ "$FORCE" != 1 ] && [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi

# The rbd engine is left out silently by configure without librbd's headers.
headers=(gcc make pkg-config patch libc6-dev librbd-dev librados-dev libaio-dev zlib1g-dev)
missing=()
for p in "${headers[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  step "apt-get install ${missing[*]}" 900 "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}"
fi

mkdir -p "$DIR"
BUILD_LOG="$DIR/build.log"
: >"$BUILD_LOG"
WORK=$(mktemp -d)
on_exit "rm -rf '$WORK'"
cd "$WORK"
log "building fio $FIO_VERSION with images/fio/*.patch into $DIR (log: $BUILD_LOG)"
step "download fio $FIO_VERSION" 300 curl -fsSL --retry 3 -o fio.tar.gz \
  "$(debian_mirror)/pool/main/f/fio/fio_${FIO_VERSION}.orig.tar.gz"
echo "$FIO_SHA256  fio.tar.gz" | sha256sum -c --quiet - || die "fio source checksum differs"
tar xzf fio.tar.gz
cd "fio-$FIO_VERSION"
for p in "$ROOT"/images/fio/*.patch; do patch -p1 --quiet <"$p" || die "patch $p does not apply"; done
# `fio --version` says which fio a run used (provenance): ours, by the patches' key.
echo "fio-$FIO_VERSION-crimsonbench.$key" >version
# As Debian builds its fio (debian/rules: no tcmalloc on its buildds): linked with tcmalloc,
# which librados pulls in here, our fio ran 14 % fewer IOPS than Debian's on the same jobs.
step "configure" 300 ./configure --disable-native --disable-tcmalloc --prefix=/usr
step "make" 1200 sh -c "make -j$(nproc) fio >>'$BUILD_LOG' 2>&1"
verify "the rbd engine is built in" ./fio --enghelp=rbd
mkdir -p "$DIR/bin"
install -m 0755 fio "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
"$BIN" --version >&2
echo "$BIN"
