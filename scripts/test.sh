#!/usr/bin/env bash
# The whole test suite. Exits non-zero on any failure (static checks included).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
status=0
echo "== ruff";          ruff check operator tests bench e2e dashboards || status=1
echo "== mypy";          mypy || status=1
echo "== import-linter"; lint-imports || status=1
echo "== pytest"
# -rs prints the reason of every skipped test (e.g. no crimson binary on this machine).
python -m pytest -rs "$@" || status=1
exit $status
