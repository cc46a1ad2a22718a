"""Copies of a real results directory (tests/fixtures/results/gate-1image: a local run of
2 workloads x 2 iodepths, one image, 5 s steps; capture.sh there regenerates it) and the
edits tests make to them: a step slowed down, a figure removed, a file broken."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "gate-1image"
STEP_IDS = sorted(p.name for p in (FIXTURE / "steps").iterdir())


def copy_run(dest: Path) -> Path:
    """A copy of the real run at dest (links kept as links; the fixture has none)."""
    shutil.copytree(FIXTURE, dest, symlinks=True)
    return dest


def result_path(root: Path, step_id: str) -> Path:
    return root / "steps" / step_id / "result.json"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def dump(path: Path, data: Any) -> None:
    """As the store writes it (indent 2, sorted keys); allow_nan for the tests that need
    a NaN literal on disk."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=True) + "\n")


def edit_result(root: Path, step_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = result_path(root, step_id)
    data = load(path)
    change(data)
    dump(path, data)


def scale_step(root: Path, step_id: str, factor: float) -> None:
    """The step as if the system were `factor` times as fast: IOPS, bandwidth, I/O count
    and every per-second IOPS value scaled alike, latency by 1/factor (same iodepth)."""

    def scale_fio(fio: dict[str, Any]) -> None:
        fio["iops"] *= factor
        fio["bw_mib_s"] *= factor
        fio["total_ios"] = round(fio["total_ios"] * factor)
        fio["clat_mean_ms"] /= factor

    def change(d: dict[str, Any]) -> None:
        scale_fio(d["fio"])
        for client in d["clients"].values():
            scale_fio(client)
        d["extra"]["iops_per_second"] = [v * factor for v in d["extra"]["iops_per_second"]]

    edit_result(root, step_id, change)
