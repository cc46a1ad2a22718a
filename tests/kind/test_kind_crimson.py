"""The kind variant (e2e/kind/run.sh): Rook + our chart + a crimson cyanstore run in a kind
cluster built here (our dockerd and node image: tests/kind checks the cluster itself).
Nothing can be pulled here, so it needs a crimson Ceph image as an archive to load into the
nodes (CRIMSON_IMAGE + CRIMSON_IMAGE_ARCHIVE); without one it is skipped with the reason
printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.kind import prerequisites

REPO = Path(__file__).resolve().parents[2]


def _why_not() -> str:
    reason = prerequisites()
    if reason:
        return reason
    if not os.environ.get("CRIMSON_IMAGE") or not os.environ.get("CRIMSON_IMAGE_ARCHIVE"):
        return (
            "CRIMSON_IMAGE / CRIMSON_IMAGE_ARCHIVE not set: no Ceph image whose ceph-osd is "
            "crimson exists here, and none can be pulled"
        )
    return ""


@pytest.mark.kind
def test_kind_rook_chart_and_a_cyanstore_run() -> None:
    reason = _why_not()
    if reason:
        print(f"\ntests/kind/test_kind_crimson.py skipped: {reason}", file=sys.stderr)
        pytest.skip(f"kind variant cannot run here: {reason}")
    proc = subprocess.run(
        ["bash", str(REPO / "e2e" / "kind" / "run.sh")], capture_output=True, text=True,
        timeout=90 * 60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "phase: Completed" in proc.stdout
