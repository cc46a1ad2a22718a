#!/usr/bin/env bash
# The whole test suite: static checks, then the test tiers that fit in the time budget, cheapest
# and most telling first (scripts/test_tiers.py says why and how). Exits non-zero on any
# failure. `scripts/test.sh --tier rook` runs one tier; other arguments go to pytest as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
exec python scripts/test_tiers.py "$@"
