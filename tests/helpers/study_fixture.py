"""A study made of copies of the real results fixture (results_fixture.FIXTURE): the
baseline variant is the fixture as measured, `faster` the same run as if the system were
1.3 times as fast, each variant two runs (its repeats), so the figures a study report
shows can be checked against the fixture's own."""

from __future__ import annotations

from pathlib import Path

from results_fixture import STEP_IDS, copy_run, scale_step

from crimsonbench.reports.study import VariantRow
from crimsonbench.reports.study_report import VariantRuns

FASTER = 1.3


def variant_dirs(root: Path, name: str, factor: float, repeats: int = 2) -> list[Path]:
    dirs = []
    for k in range(1, repeats + 1):
        d = copy_run(root / f"{name}-r{k}")
        # the repeats differ a little, as real ones do (Welch's t needs some spread)
        for step_id in STEP_IDS:
            scale_step(d, step_id, factor * (1 + 0.01 * k))
        dirs.append(d)
    return dirs


def fixture_study(root: Path) -> list[VariantRuns]:
    base = variant_dirs(root, "baseline", 1.0)
    fast = variant_dirs(root, "faster", FASTER)
    return [
        VariantRuns(VariantRow("baseline", "the base", 2, 2), base),
        VariantRuns(VariantRow("faster", "every figure x 1.3 (a scaled copy)", 2, 2), fast),
    ]
