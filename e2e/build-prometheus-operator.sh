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
LOG_TAG=build-prometheus-operator
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.93.0}
MODULE=github.com/prometheus-operator/prometheus-operator
DIR="$CACHE/prometheus-operator/$VERSION"
BIN="$DIR/bin"
PROGRAMS=(operator prometheus-config-reloader)
export CGO_ENABLED=0

one_build_at_a_time "$DIR/.script.lock"
missing=()
for p in "${PROGRAMS[@]}"; do
  if [ "$FORCE" = 1 ] || [ ! -x "$BIN/$p" ]; then missing+=("$p"); fi
done
if [ "${#missing[@]}" -eq 0 ]; then echo "$BIN"; exit 0; fi
go_build_start "$DIR" "${missing[*]} $VERSION"
mkdir -p "$BIN"
t0=$SECONDS
gomod=$(go_module GoMod "$MODULE@$VERSION")
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
  timeout 3600 go build -trimpath -ldflags "$ldflags" -o "$WORK/$p" "$MODULE/cmd/$p" \
    >>"$BUILD_LOG" 2>&1 || { tail -30 "$BUILD_LOG" >&2; die "go build cmd/$p failed (log: $BUILD_LOG)"; }
  "$WORK/$p" --version >>"$BUILD_LOG" 2>&1 || die "the built $p does not run: $(tail -3 "$BUILD_LOG")"
  mv "$WORK/$p" "$BIN/$p.tmp" && mv "$BIN/$p.tmp" "$BIN/$p"
done
cp go.mod "$DIR/go.mod"  # what was built, for the record
log "built in $((SECONDS - t0))s"
echo "$BIN"
