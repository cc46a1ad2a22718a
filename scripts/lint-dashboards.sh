#!/usr/bin/env bash
# Grafana's own dashboard linter (github.com/grafana/dashboard-linter) on every
# dashboards/*.json, strict (a warning fails too), with dashboards/.lint (each exclusion
# there says why). The linter is built once from the Go module proxy and cached outside the
# repository (e2e/build-dashboard-linter.sh; make test prefetches it). Exits non-zero on any
# finding, printing it; fix it in dashboards/generate.py and regenerate.
#
#   scripts/lint-dashboards.sh [DASHBOARD.json ...]   # default: dashboards/*.json
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
linter=$("$repo/e2e/build-dashboard-linter.sh")
[ "$#" -gt 0 ] || set -- "$repo"/dashboards/*.json
status=0
for board in "$@"; do
  if out=$("$linter" lint --strict --config "$repo/dashboards/.lint" "$board" 2>&1); then
    echo "$board: clean"
  else
    # the rule descriptions it prints before each rule's results are noise here
    grep -v '^Checks that ' <<<"$out" >&2 || true
    echo "$board: the dashboard linter found the above" >&2
    status=1
  fi
done
exit "$status"
