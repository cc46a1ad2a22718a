"""The kind variant (e2e/kind/): Rook + our chart + a crimson cyanstore run in a kind
cluster. It needs Docker able to pull kindest/node and a crimson Ceph image; where that is
not possible (no registry here) it is skipped with the reason printed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KIND_NODE_IMAGE = "kindest/node:v1.33.1"


def _why_not() -> str:
    missing = [t for t in ("kind", "docker", "kubectl") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    if not os.environ.get("CRIMSON_IMAGE"):
        return "CRIMSON_IMAGE not set (a Ceph image whose ceph-osd is crimson)"
    pull = subprocess.run(
        ["docker", "pull", KIND_NODE_IMAGE], capture_output=True, text=True, timeout=600
    )
    if pull.returncode != 0:
        return f"docker cannot pull {KIND_NODE_IMAGE}: {pull.stderr.strip()[-300:]}"
    return ""


@pytest.mark.node
def test_kind_rook_chart_and_a_cyanstore_run() -> None:
    reason = _why_not()
    if reason:
        print(f"\ntests/e2e/test_kind.py skipped: {reason}", file=sys.stderr)
        pytest.skip(f"kind variant cannot run here: {reason}")
    proc = subprocess.run(
        ["bash", str(REPO / "e2e" / "kind" / "run.sh")], capture_output=True, text=True,
        timeout=90 * 60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "phase: Completed" in proc.stdout
