"""`crimsonbench compare` as a CI gate: a verdict per workload and iodepth, exit 1 when
NEW is significantly worse than BASE beyond the threshold, 0 otherwise.

Steps are built from one real rbd step (tests/fixtures/fio/rbd) with five repeats whose
IOPS differ by under 1 %, so the decision is clear-cut; the statistics themselves are
tested in tests/results/test_stats.py and test_verdict.py against published values."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import ResourceSummary, RunInfo, StepResult

RBD = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "rbd"
ROW = combine(parse_fio_json((RBD / "randread4k.json").read_text()))
NOISE = (1.0, 1.004, 0.996, 1.008, 0.993)


def write_run(root: Path, name: str, scale: dict[int, float]) -> Path:
    store = ResultStore(root)
    store.write_run_info(RunInfo(name, "classic", "memstore", 1, 0, "default", "dual"))
    index = 0
    for qd in (1, 4, 16):
        for rep, wiggle in enumerate(NOISE, 1):
            f = scale.get(qd, 1.0) * wiggle
            fio = replace(ROW, iops=ROW.iops * f, clat_mean_ms=ROW.clat_mean_ms / f)
            store.write_step(
                StepResult(
                    f"{index:03d}-randread4k-qd{qd:03d}-r{rep}",
                    "randread4k",
                    qd,
                    rep,
                    fio,
                    ResourceSummary(0.0, 0.0, 0.0, 0),
                )  # fmt: skip
            )
            index += 1
    return root


def compare(*dirs: Path, out: Path, threshold: str = "5") -> tuple[int, str]:
    result = CliRunner().invoke(
        app, ["compare", *map(str, dirs), "--out", str(out), "--threshold", threshold]
    )
    return result.exit_code, result.output


def test_a_significant_drop_beyond_the_threshold_fails_the_gate(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", "base", {})
    worse = write_run(tmp_path / "new", "new", {16: 0.80})  # qd16: 20 % fewer IOPS
    code, out = compare(base, worse, out=tmp_path / "cmp")
    assert code == 1, out
    rows = {
        line.split("|")[2].strip(): line for line in out.splitlines() if "| randread4k |" in line
    }
    assert "**REGRESSION** (worse)" in rows["16"] and "-20.0%" in rows["16"]
    assert "welch" in rows["16"]
    assert "no significant change" in rows["1"] and "no significant change" in rows["4"]
    assert "1 regression(s)" in out
    assert "## Verdicts" in (tmp_path / "cmp" / "comparison.md").read_text()


def test_a_drop_under_the_threshold_or_a_gain_passes(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", "base", {})
    small = write_run(tmp_path / "small", "small", {16: 0.97})  # -3 %, significant
    better = write_run(tmp_path / "better", "better", {4: 1.25})
    code, out = compare(base, small, better, out=tmp_path / "cmp")
    assert code == 0, out
    assert "better" in next(
        line for line in out.splitlines() if "| 4 |" in line and "better" in line
    )
    assert out.count("no regression beyond the threshold") == 2
    # the same -3 % fails a stricter gate
    code, _ = compare(base, small, out=tmp_path / "cmp2", threshold="2")
    assert code == 1
