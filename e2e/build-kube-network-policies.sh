#!/usr/bin/env bash
# Build kube-network-policies (sigs.k8s.io/kube-network-policies, the NetworkPolicy agent of
# recent kindnet, Apache-2.0) from the Go module proxy, once, cached OUTSIDE the repository,
# keyed by version and our patch. Our kind nodes' pod network (e2e/kind/images/kindnet, a
# bash agent) enforces no NetworkPolicy; this agent does, beside it: nftables rules send
# the first packet of every new connection from or to a pod that a policy selects to an
# NFQUEUE, where it reads the policies and accepts or drops it.
#
#   e2e/build-kube-network-policies.sh            -> prints the binary's path
#   KUBE_NETWORK_POLICIES_VERSION=v0.8.0 e2e/build-kube-network-policies.sh
#
# Our patch (one file added, two expressions replaced; the build stops if they moved):
# upstream queues with nftables' own `queue` expression, which needs CONFIG_NFT_QUEUE; this
# VM's kernel (6.18, no loadable modules) lacks it ("Could not process rule: No such file or
# directory") but has the xtables NFQUEUE target and nft_compat (CONFIG_NFT_COMPAT), which
# is how iptables-nft queues. So the rules use the xt NFQUEUE target (revision 3, one queue,
# bypass when --fail-open) through nft_compat: the same queue, the same verdicts. Checked
# here in two throwaway network namespaces: a TCP connect queued to a queue nobody reads
# times out, with bypass it connects. The DNS agent's queue (only with the AdminNetworkPolicy
# flags, which we do not set) is left as it is.
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
PATCH=xt-nfqueue-1  # change it with the patch below: the cache is keyed by it
DIR="$CACHE/kube-network-policies/$VERSION+$PATCH"
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
cat > pkg/networkpolicy/xt_nfqueue.go <<'GO'
package networkpolicy

// crimsonbench's build (e2e/build-kube-network-policies.sh): the xtables NFQUEUE target
// through nft_compat, for kernels without nftables' own queue expression (CONFIG_NFT_QUEUE).

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// xtNFQueue queues to queue num (struct xt_NFQ_info_v3: queuenum, queues_total, flags,
// padded to 8 bytes); bypass accepts packets while nobody reads the queue.
func xtNFQueue(num uint16, bypass bool) expr.Any {
	info := make([]byte, 8)
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
	}
	raw := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &raw}
}
GO
python3 - pkg/networkpolicy/controller.go <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = """queue := &expr.Queue{Num: uint16(c.config.QueueID)}
	if c.config.FailOpen {
		queue.Flag = expr.QueueFlagBypass
	}"""
if text.count(old) != 2:
    sys.exit(f"{path}: the two queue expressions moved ({text.count(old)} found): update the patch")
open(path, "w").write(text.replace(old, "queue := xtNFQueue(uint16(c.config.QueueID), c.config.FailOpen)"))
PY
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
