#!/usr/bin/env bash
# The kind CLI, built from the Go module proxy (no release download), cached outside the
# repository, keyed by version.
#
#   e2e/kind/build-kind.sh            -> prints the path of the kind binary
#   KIND_VERSION=v0.33.0 ...
set -euo pipefail

KIND_VERSION=${KIND_VERSION:-v0.33.0}
CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
OUT="$CACHE/kind/$KIND_VERSION/bin"
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

if [ -x "$OUT/kind" ]; then echo "$OUT/kind"; exit 0; fi
command -v go >/dev/null || { echo "[build-kind] ERROR: Go is not installed" >&2; exit 1; }
mkdir -p "$OUT"
t0=$SECONDS
echo "[build-kind] go install sigs.k8s.io/kind@$KIND_VERSION" >&2
GOBIN="$OUT" timeout 900 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION" >&2
"$OUT/kind" version >&2
echo "[build-kind] done in $((SECONDS - t0))s" >&2
echo "$OUT/kind"
