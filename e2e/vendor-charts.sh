#!/usr/bin/env bash
# Vendor the chart's optional dependencies into charts/ from the Go module proxy (no Helm
# repository needed): Rook's operator chart `rook-ceph` and cluster chart
# `rook-ceph-cluster`, each with Rook's `library` chart in its own charts/.
#
#   e2e/vendor-charts.sh [DEST]   # rewrites DEST/rook-ceph, DEST/rook-ceph-cluster (DEST: charts)
#   ROOK_VERSION=v1.17.8 e2e/vendor-charts.sh
#
# The copies are committed (helm refuses to render a chart whose declared dependency is
# missing from charts/); tests/chart checks they equal a fresh vendoring. The only change
# to Rook's files: version/appVersion set to the Rook version (0.0.1 in Rook's source; Rook's
# release sets them the same way when it packages the charts).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOK_VERSION=${ROOK_VERSION:-v1.17.8}
DEST=${1:-charts}
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
command -v go >/dev/null || { echo "Go is not installed; Rook's charts come from the module proxy" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=$(cd "$tmp" && go mod download -json "github.com/rook/rook@$ROOK_VERSION" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))')
src="$dir/deploy/charts"
for chart in rook-ceph rook-ceph-cluster; do
  rm -rf "$DEST/$chart"
  mkdir -p "$DEST/$chart/charts"
  cp -R "$src/$chart/." "$DEST/$chart/"
  cp -R "$src/library" "$DEST/$chart/charts/library"
  chmod -R u+w,go-w "$DEST/$chart"
  sed -i -E "s/^(version|appVersion): .*/\1: $ROOK_VERSION/" "$DEST/$chart/Chart.yaml"
done
echo "vendored rook-ceph and rook-ceph-cluster $ROOK_VERSION into $DEST/" >&2
