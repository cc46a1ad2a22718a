#!/usr/bin/env bash
# Build Rook's operator binary (`rook`) from the Go module proxy, once, cached OUTSIDE the
# repository, keyed by version. No registry, no release download.
#
#   e2e/build-rook.sh                -> prints the rook binary's path
#   ROOK_VERSION=v1.17.8 ROOK_APIS_VERSION=v0.0.0-... e2e/build-rook.sh
#   FORCE=1 e2e/build-rook.sh        -> rebuild even when the binary exists
# The harness passes ROOK_VERSION and ROOK_APIS_VERSION from its one setting
# (e2e/harness/rook.py RELEASES, CRIMSONBENCH_ROOK_VERSION).
#
# Why a scratch module: github.com/rook/rook's go.mod replaces github.com/rook/rook/pkg/apis
# with ./pkg/apis, a directory its module zip lacks, so `go install .../cmd/rook@v` fails.
# A module of our own requires pkg/apis at the pseudo-version of the release tag's commit
# (the same source the replace points at) and keeps rook's other replace and exclude lines.
# That pseudo-version carries the commit's time, which only git knows: it is written here
# per Rook version (the module proxy answers 403 to a bare commit hash).
# The proxy serves that module only at the pseudo-versions someone asked it for before:
# v1.17.8's is served; v1.20.6's (v0.0.0-20260820210534-4e1b7a626891), like v1.20.5's,
# v1.19.10's and v1.18.11's, answers 403 "This module version is not available".
# Rook v1.20.6 is built from its release source instead: rook-v1.20.6.tar.gz (`git archive`
# of the tag, sha256 checked below) in $CRIMSONBENCH_SOURCES (default ../shared/sources next
# to the repository). Inside that tree Rook's own go.mod and its ./pkg/apis replace work;
# everything else comes from the module proxy. Without the archive the script says so in
# one line and stops (a user's cluster runs Rook's official images instead: README).
#
# Cold build ≈ 5-10 min on 2 cores (under load), warm (Go build cache) seconds.
set -euo pipefail
LOG_TAG=build-rook
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOK_VERSION=${ROOK_VERSION:-v1.17.8}
case "$ROOK_VERSION" in
  v1.17.8) default_apis=v0.0.0-20250820174513-8c7a83a2cf89 ;;  # tag commit 8c7a83a2cf89
  *) default_apis= ;;
esac
ROOK_APIS_VERSION=${ROOK_APIS_VERSION:-$default_apis}
# releases built from their source archive: version -> sha256 of rook-<version>.tar.gz
declare -A SOURCE_SHA256=(
  [v1.20.6]=88139d032d788e64e741b1a740231d50fac68be5106365d76b99e21a64f7f648
)
SOURCES=${CRIMSONBENCH_SOURCES:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/sources}
DIR="$CACHE/rook/$ROOK_VERSION"
BIN="$DIR/bin/rook"
export CGO_ENABLED=0
ldflags="-s -w -X github.com/rook/rook/pkg/version.Version=$ROOK_VERSION"
# Build tags as Rook's own Makefile sets them (TAGS): empty for v1.17, ceph_preview later
# (v1.20.6 calls go-ceph APIs that exist only under that tag: rgw accounts)
case "$ROOK_VERSION" in v1.17.*) tags= ;; *) tags=ceph_preview ;; esac

if [ -n "${SOURCE_SHA256[$ROOK_VERSION]:-}" ]; then
  archive="$SOURCES/rook-$ROOK_VERSION.tar.gz"
  want=${SOURCE_SHA256[$ROOK_VERSION]}
  [ -r "$archive" ] || die "Rook $ROOK_VERSION is built from its release source, and $archive is not there: put rook-$ROOK_VERSION.tar.gz (sha256 $want, \`git archive --prefix=rook-${ROOK_VERSION#v}/ $ROOK_VERSION\`) in \$CRIMSONBENCH_SOURCES, or run Rook's official images (README, Rook versions)"
  go_build_once "$DIR" "$BIN" "rook $ROOK_VERSION from $archive"
  got=$(sha256sum "$archive" | cut -d' ' -f1)
  [ "$got" = "$want" ] || die "$archive has sha256 $got, not Rook $ROOK_VERSION's $want"
  t0=$SECONDS
  tar xzf "$archive"
  cd "rook-${ROOK_VERSION#v}"
  log "go build in Rook's own tree (its go.mod; modules from the proxy) ..."
  timeout 3600 go build -tags "$tags" -trimpath -ldflags "$ldflags" -o "$WORK/rook" ./cmd/rook \
    >>"$BUILD_LOG" 2>&1 || { tail -30 "$BUILD_LOG" >&2; die "go build failed (log: $BUILD_LOG)"; }
  "$WORK/rook" version >&2 || die "the built rook does not run"
  mkdir -p "$DIR/bin"
  mv "$WORK/rook" "$BIN.tmp"
  mv "$BIN.tmp" "$BIN"
  echo "$want  rook-$ROOK_VERSION.tar.gz" >"$DIR/source.sha256"  # what was built
  log "built in $((SECONDS - t0))s"
  echo "$BIN"
  exit 0
fi

go_build_once "$DIR" "$BIN" "rook $ROOK_VERSION"
[ -n "$ROOK_APIS_VERSION" ] || die "no pkg/apis pseudo-version known for $ROOK_VERSION: set ROOK_APIS_VERSION"
mkdir -p "$DIR/bin"
t0=$SECONDS
gomod=$(go_module GoMod "github.com/rook/rook@$ROOK_VERSION")
if ! timeout 600 go mod download -json \
     "github.com/rook/rook/pkg/apis@$ROOK_APIS_VERSION" > apis.json 2>>"$BUILD_LOG"; then
  why=$(python3 -c 'import json; print(json.load(open("apis.json")).get("Error", ""))' 2>/dev/null || true)
  die "github.com/rook/rook/pkg/apis@$ROOK_APIS_VERSION (Rook $ROOK_VERSION's tag commit) is not served by the Go module proxy: ${why:-$(tail -3 "$BUILD_LOG")}"
fi

go mod init crimsonbench.local/rookbuild >/dev/null 2>&1
go_line=$(awk '$1 == "go" {print; exit}' "$gomod")
{
  echo
  echo "$go_line"
  echo
  echo "require ("
  echo "	github.com/rook/rook $ROOK_VERSION"
  echo "	github.com/rook/rook/pkg/apis $ROOK_APIS_VERSION"
  echo ")"
  echo
  # rook's replace block, minus the local path that does not exist in the zip
  sed -n '/^replace (/,/^)/p' "$gomod" | grep -v 'pkg/apis => \./'
  echo
  sed -n '/^exclude (/,/^)/p' "$gomod"
} > go.mod.tail
# go mod init wrote "module ...\n\ngo X"; keep only its module line, take rook's go line
head -1 go.mod > go.mod.new && cat go.mod.tail >> go.mod.new && mv go.mod.new go.mod

# rook's own versions for everything else (minimal version selection from its go.mod
# already picks them; tidy-less build adds the indirect lines it needs)
timeout 3600 go build -tags "$tags" -trimpath -ldflags "$ldflags" -o "$WORK/rook" github.com/rook/rook/cmd/rook \
  >>"$BUILD_LOG" 2>&1 || { tail -30 "$BUILD_LOG" >&2; die "go build failed (log: $BUILD_LOG)"; }
"$WORK/rook" version >&2 || die "the built rook does not run"
mv "$WORK/rook" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
cp go.mod "$DIR/go.mod"  # what was built, for the record
log "built in $((SECONDS - t0))s"
echo "$BIN"
