"""dashboards/ is not a package (it is not shipped): its modules are imported by path."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT / "dashboards", ROOT / "tests" / "local"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
