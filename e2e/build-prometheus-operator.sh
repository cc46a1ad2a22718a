#!/usr/bin/env bash
# Build prometheus-operator's two programs, `operator` (cmd/operator) and
# `prometheus-config-reloader` (cmd/prometheus-config-reloader, the sidecar of every
# Prometheus pod it runs), from the Go module proxy, once, cached OUTSIDE the repository,
# keyed by version. No registry, no release download.
#
#   e2e/build-prometheus-operator.sh       -> prints the bin directory (both programs in it)
#   PROMETHEUS_OPERATOR_VERSION=v0.93.0 ...   (the default)
#   FORCE=1 ...                            -> rebuild even when both binaries exist
#
# Why a scratch module: the module's go.mod replaces its own pkg/apis/monitoring and
# pkg/client with ./pkg/..., so `go install .../cmd/operator@v` fails. A module of our own
# that requires the operator module ignores its replace lines; pkg/apis/monitoring and
# pkg/client are published modules at the same version (the operator's go.mod requires them
# at it), so minimal version selection picks the same source the replace points at.
# Version ldflags as the upstream Makefile sets them (github.com/prometheus/common/version),
# CGO off as upstream builds it: static programs that run on an empty image.
#
# Its CRDs are not built: tests read example/prometheus-operator-crd/*.yaml from the same
# module at test time (e2e/harness/monitoring.py).
#
# Cold build ≈ 5-10 min on 2 cores (under load; shares client-go etc. with the Kubernetes
# build's Go cache), warm seconds. The images around these programs: e2e/monitoring/.
set -euo pipefail

VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.93.0}
MODULE=github.com/prometheus-operator/prometheus-operator
CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
DIR="$CACHE/prometheus-operator/$VERSION"
BIN="$DIR/bin"
PROGRAMS=(operator prometheus-config-reloader)
FORCE=${FORCE:-0}
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

log() { echo "[build-prometheus-operator] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

mkdir -p "$BIN"
# one build at a time per machine (make test's background prefetch and a test may both ask)
exec 8>"$DIR/.script.lock"; flock 8
missing=()
for p in "${PROGRAMS[@]}"; do
  if [ "$FORCE" = 1 ] || [ ! -x "$BIN/$p" ]; then missing+=("$p"); fi
done
if [ "${#missing[@]}" -eq 0 ]; then echo "$BIN"; exit 0; fi
command -v go >/dev/null || die "Go is not installed; prometheus-operator is built from the module proxy"
buildlog="$DIR/build.log"
: > "$buildlog"
log "building ${missing[*]} $VERSION into $BIN (cold: several minutes; log: $buildlog)"
t0=$SECONDS

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
timeout 600 go mod download -json "$MODULE@$VERSION" > dl.json 2>>"$buildlog" \
  || die "go mod download $MODULE@$VERSION failed: $(tail -3 "$buildlog")"
gomod=$(python3 -c 'import json; print(json.load(open("dl.json"))["GoMod"])')
go_line=$(awk '$1 == "go" {print; exit}' "$gomod")
{
  echo "module crimsonbench.local/prometheusoperatorbuild"
  echo
  echo "$go_line"
  echo
  echo "require ("
  echo "	$MODULE $VERSION"
  # the two modules the upstream go.mod points at ./pkg/...: their published releases
  awk -v m="$MODULE" '($1 == m "/pkg/apis/monitoring" || $1 == m "/pkg/client") && $2 ~ /^v/ {print "\t" $1 " " $2}' \
    "$gomod" | sort -u
  echo ")"
} > go.mod
grep -q "pkg/apis/monitoring $VERSION" go.mod || die "$MODULE@$VERSION's go.mod does not require pkg/apis/monitoring $VERSION: $(cat go.mod)"

ldflags="-s -w"
for kv in "Version=${VERSION#v}" "Revision=$VERSION" "Branch=$VERSION" \
          "BuildUser=crimsonbench" "BuildDate=19700101-00:00:00"; do
  ldflags+=" -X github.com/prometheus/common/version.$kv"
done
for p in "${missing[@]}"; do
  log "go build cmd/$p"
  timeout 3600 go build -trimpath -ldflags "$ldflags" -o "$work/$p" "$MODULE/cmd/$p" \
    >>"$buildlog" 2>&1 || { tail -30 "$buildlog" >&2; die "go build cmd/$p failed (log: $buildlog)"; }
  "$work/$p" --version >>"$buildlog" 2>&1 || die "the built $p does not run: $(tail -3 "$buildlog")"
  mv "$work/$p" "$BIN/$p.tmp" && mv "$BIN/$p.tmp" "$BIN/$p"
done
cp go.mod "$DIR/go.mod"  # what was built, for the record
log "built in $((SECONDS - t0))s"
echo "$BIN"
