"""A study's comparison of copies of the real results fixture (study_fixture): the grid's
peaks, knees and per-core figures are the fixture files' own figures, the best variant and
its margin follow from them, a suspect step never decides a figure, and the page carries
the study's sections."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from results_fixture import STEP_IDS, edit_result, load, result_path
from study_fixture import FASTER, fixture_study

from crimsonbench.reports.study import STUDY_SECTIONS
from crimsonbench.reports.study_report import NothingToCompare, write_study_comparison
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import CpuSetLoad, judged
from crimsonbench.spec.sweep import ValiditySpec

HOG = CpuSetLoad("osd.0", (0,), 10.0, 5.2, 0.0, ("stress[4242] 5.2 s",))


def section_table(markdown: str, title: str) -> list[dict[str, str]]:
    """The first table under `## title`, as dicts by header (markdown escapes undone)."""
    body = markdown.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in body.splitlines() if ln.lstrip().startswith("|")]
    cells = [[c.strip().replace("\\_", "_") for c in ln.strip().strip("|").split("|")]
             for ln in lines]  # fmt: skip
    header, rows = cells[0], cells[2:]
    return [dict(zip(header, r, strict=True)) for r in rows]


def mean_of(dirs: list[Path], step_id: str, pick: Any) -> float:
    return sum(pick(load(result_path(d, step_id))) for d in dirs) / len(dirs)


def power(dirs: list[Path], step_id: str, value: Any) -> float:
    """Throughput / mean latency, each averaged over the repeats (the grid's knee rule)."""
    lat = mean_of(dirs, step_id, lambda d: d["fio"]["clat_mean_ms"])
    return mean_of(dirs, step_id, value) / lat


def test_the_grid_is_the_fixture_files_own_figures(tmp_path: Path) -> None:
    variants = fixture_study(tmp_path)
    write_study_comparison("s", variants, tmp_path / "out")
    md = (tmp_path / "out" / "comparison.md").read_text()
    grid = {(r["variant"], r["workload"]): r for r in section_table(md, "Grid")}
    assert len(grid) == 4
    for v in variants:
        dirs = list(v.dirs)
        by_depth: dict[str, dict[int, str]] = {}
        for sid in STEP_IDS:
            d = load(result_path(dirs[0], sid))
            by_depth.setdefault(d["workload"], {})[d["iodepth"]] = sid
        for workload, steps in by_depth.items():
            bw = workload.startswith("seq")

            def value(d: dict[str, Any], bw: bool = bw) -> float:
                return float(d["fio"]["bw_mib_s" if bw else "iops"])

            peak_depth = max(steps, key=lambda q: mean_of(dirs, steps[q], value))
            peak = mean_of(dirs, steps[peak_depth], value)
            cpu = mean_of(dirs, steps[peak_depth], lambda d: d["resources"]["osd_cpu"])
            mem = mean_of(dirs, steps[peak_depth], lambda d: d["resources"]["osd_mem_mib"])

            knee_depth = max(steps, key=lambda q, s=steps, v=value: power(dirs, s[q], v))
            row = grid[(v.row.name, workload)]
            unit = " MiB/s" if bw else ""
            assert row["peak"] == f"{peak:.2f}{unit}"
            assert row["iodepth"] == str(peak_depth)
            assert row["knee iodepth"] == str(knee_depth)
            assert row["per OSD core"] == f"{peak / (cpu / 100):.2f}"
            assert row["per GiB OSD mem"] == f"{peak / (mem / 1024):.2f}"
            assert row["suspect steps"] == "0"


def test_the_best_variant_wins_by_its_margin_beyond_noise(tmp_path: Path) -> None:
    write_study_comparison("s", fixture_study(tmp_path), tmp_path / "out")
    md = (tmp_path / "out" / "comparison.md").read_text()
    best = section_table(md, "Best variant per workload")
    assert [(b["best"], b["runner-up"]) for b in best] == [("faster", "baseline")] * 2
    for b in best:
        assert b["margin"] == f"{(FASTER - 1) * 100:+.1f}%"
        assert b["beyond noise?"].startswith("yes: better (p "), b
    against = section_table(md, "Against the baseline")
    assert {a["peak vs baseline"] for a in against} == {"+30.0%"}
    assert all(a["verdict"] == "better" for a in against), against


def test_a_suspect_peak_never_decides_the_grid_or_the_best(tmp_path: Path) -> None:
    variants = fixture_study(tmp_path)
    qd4 = next(s for s in STEP_IDS if "randread4k-qd004" in s)
    for d in variants[1].dirs:  # the faster variant's randread peak had a CPU hog beside it

        def hog(data: dict[str, Any]) -> None:
            r = judged(StepResult.from_json_dict(data), {}, ValiditySpec(), interference=(HOG,))
            data["extra"] = r.to_json_dict()["extra"]

        edit_result(d, qd4, hog)
    write_study_comparison("s", variants, tmp_path / "out")
    md = (tmp_path / "out" / "comparison.md").read_text()
    grid = {(r["variant"], r["workload"]): r for r in section_table(md, "Grid")}
    fast = grid[("faster", "randread4k")]
    assert fast["iodepth"] == "1" and fast["suspect steps"] == "1"
    best = {b["workload"]: b for b in section_table(md, "Best variant per workload")}
    assert best["randread4k"]["best"] == "baseline"  # its trusted qd4 beats faster's qd1
    assert best["seqwrite64k"]["best"] == "faster"
    # --allow-suspect: the suspect step counts, and is still counted as suspect
    write_study_comparison("s", variants, tmp_path / "allowed", allow_suspect=True)
    md = (tmp_path / "allowed" / "comparison.md").read_text()
    grid = {(r["variant"], r["workload"]): r for r in section_table(md, "Grid")}
    fast = grid[("faster", "randread4k")]
    assert fast["iodepth"] == "4" and fast["suspect steps"] == "1"
    assert "Here suspect steps count like any other (--allow-suspect)" in md


def test_the_study_page_has_its_sections_and_title(tmp_path: Path) -> None:
    write_study_comparison("s", fixture_study(tmp_path), tmp_path / "out")
    html = (tmp_path / "out" / "comparison.html").read_text()
    for anchor in STUDY_SECTIONS:
        assert f'<section id="{anchor}">' in html
    assert "<title>Study s</title>" in html
    assert html.index('id="variants"') < html.index('id="runs"') < html.index('id="verdicts"')


def test_without_a_second_variant_there_is_nothing_to_compare(tmp_path: Path) -> None:
    base, fast = fixture_study(tmp_path)
    fast_none = type(fast)(fast.row, [])
    with pytest.raises(NothingToCompare, match="only the baseline"):
        write_study_comparison("s", [base, fast_none], tmp_path / "out")
    with pytest.raises(NothingToCompare, match="baseline variant baseline has no finished run"):
        write_study_comparison("s", [type(base)(base.row, []), fast], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_per_core_is_nan_safe() -> None:
    from crimsonbench.results.study import Cell, Point

    c = Cell("v", "w", False, Point(4, 100.0, 1.0, 2.0, 0.0, 0.0), None, "", 0)
    assert math.isnan(c.per_core) and math.isnan(c.per_gib)


def test_a_stored_baseline_judges_every_variant_and_fails_the_gate(tmp_path: Path) -> None:
    """Last release's run, 1.5 times as fast as this study's baseline: both variants
    regress against it (the faster one by 1.3 / 1.5 - 1 = -13 %), each named in the gate."""
    from results_fixture import copy_run, scale_step

    stored = copy_run(tmp_path / "last-release")
    for step_id in STEP_IDS:
        scale_step(stored, step_id, 1.5)
    done = write_study_comparison("s", fixture_study(tmp_path), tmp_path / "out",
                                  stored_baseline=stored)  # fmt: skip
    md = (tmp_path / "out" / "comparison.md").read_text()
    assert "\n## Against the stored baseline\n" in md
    named = {name.split(" (")[0] + " " + name.rsplit(") ", 1)[1]
             for name, f in done.failures if f.kind == "regression"}  # fmt: skip
    assert named == {"baseline vs the stored baseline", "faster vs the stored baseline"}
    html = (tmp_path / "out" / "comparison.html").read_text()
    assert '<section id="stored-baseline">' in html
    # within the study, faster is still better than its baseline: no failure of its own
    assert not [f for name, f in done.failures if not name.endswith("the stored baseline")]


def test_a_value_with_a_pipe_or_a_line_break_stays_in_its_cell(tmp_path: Path) -> None:
    base, fast = fixture_study(tmp_path)
    odd = type(fast.row)("faster", "fio.extra=a|b\nosd.note=c", 2, 2)
    write_study_comparison("s", [base, type(fast)(odd, fast.dirs)], tmp_path / "out")
    md = (tmp_path / "out" / "comparison.md").read_text()
    body = md.split("\n## Variants\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in body.splitlines() if ln.lstrip().startswith("|")]
    columns = rows[0].count("|")
    # one row per variant, each with the header's cells: the pipe escaped, the break a space
    assert len(rows) == 2 + 2
    assert all(ln.count("|") - ln.count("\\|") == columns for ln in rows)
    assert "fio.extra=a\\|b osd.note=c" in rows[3]
    html = (tmp_path / "out" / "comparison.html").read_text()
    assert "a|b" in html and "a\\|b" not in html
