#!/usr/bin/env bash
# Build Grafana's own dashboard linter (github.com/grafana/dashboard-linter) from the Go
# module proxy, once, cached OUTSIDE the repository, keyed by version. No package ships it
# and no release download is reachable; the proxy serves the module (ask for the exact
# version: listing versions is refused).
#
#   e2e/build-dashboard-linter.sh            -> prints the binary's path
#   DASHBOARD_LINTER_VERSION=v0.2.0 e2e/build-dashboard-linter.sh
#
# How: `go install ...@v0.2.0` refuses it (its go.mod has a replace directive), so its
# module source is copied from the module cache and built as the main module (its replace
# directive applies), with two files swapped for ours, each the one import of AGPL-3.0 code
# of Grafana's (Grafana stays out of this project: README):
# - lint/v2.go imports Grafana's v2 dashboard schema (github.com/grafana/grafana/apps/
#   dashboard; the module proxy refuses that module here anyway, 403): ours refuses v2
#   (Kubernetes-shaped) dashboards with a message;
# - lint/rule_target_logql_auto.go imports Loki's LogQL parser (github.com/grafana/loki/v3,
#   AGPL-3.0-only there): ours fails every Loki target in target-logql-rule (never a silent
#   pass) and makes target-logql-auto-rule check nothing.
# Every rule for Prometheus targets runs unchanged on classic dashboard JSON, which is what
# dashboards/generate.py writes (Prometheus only).
# Licence: the linter is Apache-2.0 (checked below on the downloaded module: the build stops
# otherwise); what is left in the binary is Apache-2.0 or more permissive.
# Idempotent: a second call only prints the path. Cold: bench/RESULTS.md ("dashboard linter").
set -euo pipefail

LOG_TAG=build-dashboard-linter
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VERSION=${DASHBOARD_LINTER_VERSION:-v0.2.0}
MODULE=github.com/grafana/dashboard-linter
DIR="$CACHE/dashboard-linter/$VERSION"
BIN="$DIR/bin/dashboard-linter"
go_build_once "$DIR" "$BIN" "$MODULE $VERSION"
# outside any module: a go.mod in the working directory cannot interfere
src=$(go_module Dir "$MODULE@$VERSION")
if ! head -n 3 "$src/LICENSE" | grep -q "Apache License" \
   || ! head -n 3 "$src/LICENSE" | grep -q "Version 2.0"; then
  echo "$MODULE $VERSION is not under the Apache License 2.0 any more ($src/LICENSE):" \
       "check its licence before using it here" >&2
  exit 1
fi
cp -r "$src" linter && chmod -R u+w linter && cd linter
cat > lint/v2.go <<'GO'
package lint

// crimsonbench's build of the linter (e2e/build-dashboard-linter.sh): without Grafana's v2
// dashboard schema package. Classic dashboards are linted as upstream lints them.

import (
	"encoding/json"
	"fmt"
	"strings"
)

func isV2APIVersion(apiVersion string) bool {
	return strings.HasPrefix(apiVersion[strings.LastIndex(apiVersion, "/")+1:], "v2")
}

func newDashboardFromV2(_ json.RawMessage, apiVersion string) (Dashboard, error) {
	return Dashboard{}, fmt.Errorf("%s dashboards are not supported by this build "+
		"(no Grafana schema package): lint classic dashboard JSON", apiVersion)
}
GO
cat > lint/rule_target_logql_auto.go <<'GO'
package lint

// crimsonbench's build of the linter (e2e/build-dashboard-linter.sh): without Loki's LogQL
// parser. A Loki target fails target-logql-rule with the error below; Prometheus targets
// never get here.

import "errors"

func parseLogQL(string, []Template) (struct{}, error) {
	return struct{}{}, errors.New("this build of the linter has no LogQL parser")
}

func NewTargetLogQLAutoRule() *TargetRuleFunc {
	return &TargetRuleFunc{
		name:        "target-logql-auto-rule",
		description: "Checks that each Loki target uses $__auto for range vectors when appropriate.",
		fn:          func(Dashboard, Panel, Target) TargetRuleResults { return TargetRuleResults{} },
	}
}
GO
rm -f lint/*_test.go  # upstream's tests use what was swapped out
go mod edit -droprequire=github.com/grafana/grafana/apps/dashboard \
  -droprequire=github.com/grafana/loki/v3
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$WORK/dashboard-linter" . \
  >>"$BUILD_LOG" 2>&1 || { tail -20 "$BUILD_LOG" >&2; exit 1; }
"$WORK/dashboard-linter" rules >/dev/null  # it runs
mkdir -p "$DIR/bin"
mv "$WORK/dashboard-linter" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
echo "$BIN"
