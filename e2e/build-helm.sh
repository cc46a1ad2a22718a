#!/usr/bin/env bash
# Build helm (v3) from the Go module proxy, once, cached OUTSIDE the repository, keyed by
# version. No package ships helm and no release download is reachable; the proxy is.
#
#   e2e/build-helm.sh                 -> prints the helm binary's path
#   HELM_VERSION=v3.22.0 e2e/build-helm.sh
#
# Idempotent: a second call only prints the path. Cold build ≈ 2-4 min on 2 cores.
set -euo pipefail

LOG_TAG=build-helm
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HELM_VERSION=${HELM_VERSION:-v3.22.0}
DIR="$CACHE/helm/$HELM_VERSION"
BIN="$DIR/bin/helm"
go_build_once "$DIR" "$BIN" "helm $HELM_VERSION"
# helm.sh/helm/v3 has no replace directives, so `go install pkg@version` works. The
# Kubernetes version helm assumes offline (helm template's .Capabilities.KubeVersion, the
# deprecation lint) comes from ldflags, as in helm's Makefile: client-go v0.Y.Z -> 1.Y.
gomod=$(go_module GoMod "helm.sh/helm/v3@$HELM_VERSION")
client_go=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")
k8s_minor=$(echo "$client_go" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$k8s_minor"
done
GOBIN="$WORK/bin" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >>"$BUILD_LOG" 2>&1 \
  || { tail -20 "$BUILD_LOG" >&2; exit 1; }
mkdir -p "$DIR/bin" && mv "$WORK/bin/helm" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
"$BIN" version --short >&2
echo "$BIN"
