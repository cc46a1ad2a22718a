#!/usr/bin/env bash
# Build kube-network-policies (sigs.k8s.io/kube-network-policies, the NetworkPolicy agent of
# recent kindnet, Apache-2.0) from the Go module proxy, once, cached OUTSIDE the repository,
# keyed by version. Our kind nodes' pod network (e2e/kind/images/kindnet, a bash agent)
# enforces no NetworkPolicy; this agent does, beside it, with nftables + NFQUEUE: the first
# packet of every new connection to or from a pod that a policy selects is queued to it and
# accepted or dropped by the policies (the kernel needs nfnetlink_queue: checked below).
#
#   e2e/build-kube-network-policies.sh            -> prints the binary's path
#   KUBE_NETWORK_POLICIES_VERSION=v0.8.0 e2e/build-kube-network-policies.sh
#
# How: its go.mod has no replace directive, but `go install MODULE/cmd@VERSION` asks the
# proxy for the version list (403 for some modules here) and names the binary `cmd`; so
# its module source is built as the main module, ./cmd, as upstream's Dockerfile does
# (CGO_ENABLED=0: a static binary for any base image). Idempotent: a second call only
# prints the path. Cold: bench/RESULTS.md ("kube-network-policies").
set -euo pipefail

LOG_TAG=build-kube-network-policies
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VERSION=${KUBE_NETWORK_POLICIES_VERSION:-v0.8.0}
MODULE=sigs.k8s.io/kube-network-policies
DIR="$CACHE/kube-network-policies/$VERSION"
BIN="$DIR/bin/kube-network-policies"
go_build_once "$DIR" "$BIN" "$MODULE $VERSION"
# Enforcement needs the kernel's NFQUEUE (nfnetlink_queue): without it every connection to
# a selected pod would hang (or, fail-open, pass), so say it before building anything.
[ -e /proc/net/netfilter/nfnetlink_queue ] \
  || die "this kernel has no nfnetlink_queue (/proc/net/netfilter/nfnetlink_queue): kube-network-policies cannot enforce policies here"
src=$(go_module Dir "$MODULE@$VERSION")
head -n 3 "$src/LICENSE" | grep -q "Apache License" \
  || die "$MODULE $VERSION is not under the Apache License any more ($src/LICENSE)"
cp -r "$src" src && chmod -R u+w src && cd src
t0=$SECONDS
CGO_ENABLED=0 timeout 2400 go build -trimpath -ldflags "-s -w" \
  -o "$WORK/kube-network-policies" ./cmd >>"$BUILD_LOG" 2>&1 \
  || { tail -20 "$BUILD_LOG" >&2; die "go build $MODULE/cmd@$VERSION failed"; }
log "go build done in $((SECONDS - t0))s"
usage=$("$WORK/kube-network-policies" --help 2>&1 || true)
grep -q -- "nfqueue-id" <<<"$usage" || die "the built binary does not run: $usage"
mkdir -p "$DIR/bin"
mv "$WORK/kube-network-policies" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
echo "$BIN"
