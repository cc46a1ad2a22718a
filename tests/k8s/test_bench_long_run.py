"""bench/bench_long_run.py still runs the operator it measures. Its stand-ins replace the
step loop's `_carry_out` and the driver's end; when their signatures moved (ca0a02d), every
step failed in the bench and it printed "no new step stored" for 20 minutes. A small run
(200 steps stored, 3 more) proves the stand-ins still fit, in ~15 s."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ControlPlane

pytestmark = pytest.mark.k8s

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_long_run.py"


def test_the_long_run_bench_stores_steps_through_the_operator(
    control_plane: ControlPlane,  # binaries built, or the tier skipped; the bench starts its own
) -> None:
    argv = [sys.executable, str(BENCH), "--stored", "200", "--steps", "3", "--minutes", "2"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout
    stored = re.search(r"steps stored while watched: (\d+)", out)
    assert stored is not None and int(stored[1]) >= 3, out
    assert "operator exited" not in out, out
