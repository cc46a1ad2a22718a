#!/usr/bin/env bash
# Build real Kubernetes control-plane binaries (and etcd) from the Go module proxy, once,
# cached OUTSIDE the repository, keyed by version. No registry or release download needed.
#
#   e2e/build-k8s-binaries.sh            -> prints the bin directory
#   K8S_VERSION=v1.36.3 ETCD_VERSION=v3.6.5 K8S_COMPONENTS="kube-apiserver ..." ...
#
# Why a scratch module: k8s.io/kubernetes replaces its staging modules with ./staging/...,
# so `go install k8s.io/kubernetes/cmd/...@v` fails; requiring it from a module of our own
# that points every staging module at its published k8s.io/<name> v0.Y.Z builds fine.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
K8S_COMPONENTS=${K8S_COMPONENTS:-"kube-apiserver kube-controller-manager kube-scheduler"}
LOG_TAG=build-k8s-binaries
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DIR="$CACHE/k8s/$K8S_VERSION"
BIN="$DIR/bin"

one_build_at_a_time "$DIR/.script.lock"
missing=()
for c in $K8S_COMPONENTS; do [ -x "$BIN/$c" ] || missing+=("$c"); done
[ -x "$BIN/etcd" ] || missing+=(etcd)
if [ "${#missing[@]}" -eq 0 ]; then echo "$BIN"; exit 0; fi
go_build_start "$DIR" "${missing[*]} for $K8S_VERSION (cold: ~15-20 min)"
mkdir -p "$BIN"

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
patch=${K8S_VERSION##*.}
staging_version="v0.$minor.$patch"

go mod init crimsonbench.local/k8sbuild >/dev/null 2>&1
gomod=$(go_module GoMod "k8s.io/kubernetes@$K8S_VERSION")
{
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo "replace ("
  # every staging module k8s.io/kubernetes replaces, at its published version
  sed -n '/^replace (/,/^)/p' "$gomod" | awk '$2 == "=>" && $3 ~ /^\.\/staging/ {print "\t" $1 " => " $1 " '"$staging_version"'"}'
  echo ")"
} >> go.mod

pkg="k8s.io/component-base/version"
cgo="k8s.io/client-go/pkg/version"
ldflags="-s -w"
for p in $pkg $cgo; do
  ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
printf 'package main\nimport (\n' > tools.go
for c in $K8S_COMPONENTS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >> tools.go; done
printf ')\nfunc main() {}\n' >> tools.go
go mod tidy >>"$BUILD_LOG" 2>&1 || true
for c in "${missing[@]}"; do
  [ "$c" = etcd ] && continue
  echo "  go build $c" >&2
  go build -trimpath -ldflags "$ldflags" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c" >>"$BUILD_LOG" 2>&1
done
if [ ! -x "$BIN/etcd" ]; then
  # `go install go.etcd.io/etcd/server/v3@v` fails: server/v3's go.mod has replace
  # directives (../api, ../pkg, ...). A scratch module ignores its dependencies' replaces.
  echo "  go build etcd $ETCD_VERSION" >&2
  mkdir "$WORK/etcd"
  (
    cd "$WORK/etcd"
    go mod init crimsonbench.local/etcdbuild >/dev/null 2>&1
    printf 'package main\nimport _ "go.etcd.io/etcd/server/v3"\nfunc main() {}\n' > tools.go
    go mod edit -require "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go mod tidy >>"$BUILD_LOG" 2>&1 || true
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3 >>"$BUILD_LOG" 2>&1
  )
fi
echo "$BIN"
