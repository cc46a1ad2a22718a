"""`crimsonbench compare` as a CI gate: a verdict per workload and iodepth, exit 1 when
NEW is significantly worse than BASE beyond the threshold, 0 otherwise.

The first tests build steps from one real rbd step (tests/fixtures/fio/rbd) with five
repeats whose IOPS differ by under 1 %, so the decision is clear-cut (Welch). The rest
use copies of a real single-repeat run (tests/fixtures/results): the gate passes identical
runs and fails, saying which row and why, on a slower step, missing steps, a step it
cannot test, a figure that is not a number and a linked steps/. The statistics themselves
are tested in tests/results/test_stats.py and test_verdict.py against published values."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from results_fixture import STEP_IDS, copy_run, edit_result, result_path, scale_step
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import ResourceSummary, RunInfo, StepResult
from crimsonbench.results.validity import judged
from crimsonbench.spec.sweep import ValiditySpec

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


def compare(
    *dirs: Path,
    out: Path,
    threshold: str = "5",
    allow_untested: bool = False,
    allow_suspect: bool = False,
) -> tuple[int, str]:
    extra = ["--allow-untested"] if allow_untested else []
    extra += ["--allow-suspect"] if allow_suspect else []
    result = CliRunner().invoke(
        app, ["compare", *map(str, dirs), "--out", str(out), "--threshold", threshold, *extra]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"crashed with {result.exception!r}:\n{result.output}")
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


# ------------------------------------------------------- the gate on copies of a real run
# tests/fixtures/results/gate-1image: a real local run, one repeat per step, fio's
# per-second IOPS in every result (extra.iops_per_second): the bootstrap decides.


def gate_lines(out: str) -> list[str]:
    """The gate's reasons as the CLI prints them after `gate failed (N):`."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("gate failed"))
    return [ln.strip() for ln in lines[start + 1 :] if ln.startswith("  ")]


def test_a_real_run_against_its_copy_passes(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 0, out
    rows = [ln for ln in out.splitlines() if ln.startswith(("| randread4k", "| seqwrite64k"))]
    assert len(rows) == 4
    assert all("bootstrap (per-second, 4 s vs 4 s)" in r and "| 1.000 |" in r for r in rows), rows
    assert "Gate: passed" in out and "gate failed" not in out


@pytest.mark.parametrize(
    ("step", "row"),
    [
        ("001-randread4k-qd004-r1", "randread4k qd4: regression: iops -30.0 %"),
        ("003-seqwrite64k-qd004-r1", "seqwrite64k qd4: regression: bw (MiB/s) -30.0 %"),
    ],
)
def test_one_step_30_percent_slower_fails_naming_it(tmp_path: Path, step: str, row: str) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    scale_step(new, step, 0.7)
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 1, out
    (line,) = gate_lines(out)
    assert line.startswith(f"gate-1image (classic/memstore 1osd default) #2: {row}"), line
    assert "bootstrap (per-second, 4 s vs 4 s)" in line and "worse than -5 %" in line
    assert "**REGRESSION** (worse)" in (tmp_path / "cmp" / "comparison.md").read_text()


def test_a_new_run_without_steps_fails_listing_every_missing_one(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    shutil.rmtree(new / "steps")  # 0 of 4 steps: run.json alone
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 1, out
    lines = gate_lines(out)
    assert [ln.split(": ", 1)[1].split(" (", 1)[0] for ln in lines] == [
        "randread4k qd1: missing in NEW: BASE has it",
        "randread4k qd4: missing in NEW: BASE has it",
        "seqwrite64k qd1: missing in NEW: BASE has it",
        "seqwrite64k qd4: missing in NEW: BASE has it",
    ]
    assert lines[0].endswith("BASE has it (000-randread4k-qd001-r1), NEW has no such step")


def test_a_step_that_did_not_finish_in_new_is_missing(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    result_path(new, STEP_IDS[2]).unlink()  # its raw files stay: a step cut short
    code, out = compare(base, new, out=tmp_path / "cmp", allow_untested=True)
    assert code == 1, out
    assert gate_lines(out) == [
        "gate-1image (classic/memstore 1osd default) #2: seqwrite64k qd1: missing in NEW: "
        "BASE has it (002-seqwrite64k-qd001-r1), NEW has no such step"
    ]


def test_a_step_without_its_per_second_series_is_untested(tmp_path: Path) -> None:
    """One repeat and no per-second IOPS: nothing to test with. The gate fails naming the
    step, unless --allow-untested, which lists it and lets the tested rows decide."""
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    scale_step(new, STEP_IDS[1], 0.1)  # -90 %: what passed the gate before
    edit_result(new, STEP_IDS[1], lambda d: d["extra"].pop("iops_per_second"))
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 1, out
    assert gate_lines(out) == [
        "gate-1image (classic/memstore 1osd default) #2: randread4k qd4: untested: NEW step "
        "001-randread4k-qd004-r1 has one repeat and no per-second IOPS series "
        "(extra.iops_per_second) to test it with"
    ]
    code, out = compare(base, new, out=tmp_path / "cmp2", allow_untested=True)
    assert code == 0, out
    assert "note: 1 untested row(s) allowed by --allow-untested" in out
    assert "Untested, allowed by --allow-untested (1):" in out


@pytest.mark.parametrize(
    ("break_it", "words"),
    [
        (
            lambda root: edit_result(root, STEP_IDS[0], lambda d: d["fio"].update(iops=None)),
            "steps/000-randread4k-qd001-r1/result.json: fio.iops is null, not a number",
        ),
        (
            lambda root: edit_result(
                root, STEP_IDS[3], lambda d: d["fio"].update(bw_mib_s=float("nan"))
            ),
            "steps/003-seqwrite64k-qd004-r1/result.json: NaN is not a number JSON allows",
        ),
    ],
    ids=["iops-null", "bw-nan"],
)
def test_a_figure_that_is_not_a_number_is_refused(
    tmp_path: Path, break_it: Callable[[Path], None], words: str
) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    break_it(new)
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 2, out
    assert out.startswith(f"error: {new}/") and words in out, out
    assert not (tmp_path / "cmp").exists()  # nothing written


def test_a_symlinked_steps_directory_is_refused(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    elsewhere = copy_run(tmp_path / "elsewhere")
    shutil.rmtree(new / "steps")
    (new / "steps").symlink_to(elsewhere / "steps")
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 2, out
    assert out.startswith(
        f"error: {new}/steps is a symbolic link (to {elsewhere}/steps); crimsonbench never "
        "reads or writes through a link inside a results directory"
    ), out


def test_compare_writes_only_into_out_and_never_through_a_link(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    out = tmp_path / "cmp"
    code, _ = compare(base, new, out=out)
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.html",
        "comparison.md",
        "randread4k_cpu.png",
        "randread4k_iops_vs_lat.png",
        "seqwrite64k_bw_vs_lat.png",
        "seqwrite64k_cpu.png",
    ]
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (out / "comparison.md").unlink()
    (out / "comparison.md").symlink_to(precious)
    code, text = compare(base, new, out=out)
    assert code == 2, text
    assert text == (
        f"error: {out}/comparison.md is a symbolic link (to {precious}); a comparison is "
        "never written through one: remove it or pick another --out\n"
    )
    assert precious.read_text() == "keep me\n"


# ------------------------------------------------------- suspect steps (results.validity)


def mark_suspect(root: Path, step_id: str, fault: str) -> None:
    """The step judged as a run judges it, with a fault seen during it."""

    def change(d: dict[str, Any]) -> None:
        r = judged(StepResult.from_json_dict(d), {}, ValiditySpec(), faults=(fault,))
        d["extra"] = r.to_json_dict()["extra"]

    edit_result(root, step_id, change)


def test_a_suspect_row_is_never_a_verdict(tmp_path: Path) -> None:
    """A step marked suspect is untested whatever its figure: 30 % slower and suspect is
    no regression (nor a pass); --allow-suspect judges it like any other."""
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    step = "001-randread4k-qd004-r1"
    scale_step(new, step, 0.7)
    mark_suspect(new, step, "health check OSD_DOWN: 1 osds down")
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 1, out
    (line,) = gate_lines(out)
    assert line.endswith(f": randread4k qd4: untested: suspect: NEW step {step} (fault)"), out
    assert "REGRESSION" not in out
    code, out = compare(base, new, out=tmp_path / "cmp2", allow_untested=True)
    assert code == 0 and "Gate: passed" in out, out
    code, out = compare(base, new, out=tmp_path / "cmp3", allow_suspect=True)
    assert code == 1, out
    (line,) = gate_lines(out)
    assert ": randread4k qd4: regression: iops -30.0 %" in line, out


def test_a_suspect_base_step_is_untested_too(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    mark_suspect(base, "000-randread4k-qd001-r1", "cluster error: scrub errors")
    code, out = compare(base, new, out=tmp_path / "cmp")
    assert code == 1
    (line,) = gate_lines(out)
    assert ": randread4k qd1: untested: suspect: BASE step 000-randread4k-qd001-r1" in line, out
