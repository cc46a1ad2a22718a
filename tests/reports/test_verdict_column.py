"""The verdict on the tables, the reasons under them and in Prometheus: a copy of a real
run (tests/fixtures/results/gate-1image) with its steps judged as a run judges them, one
of them with a hog's share on the OSD's CPU. The run's own seqwrite64k qd1 is suspect on
its own figures: its per-second IOPS were 1090, 1427, 1528 then 551 (fio's log): unsteady,
though its trend does not stand out of 4 seconds' noise (no drift)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from prometheus_client.exposition import generate_latest
from results_fixture import STEP_IDS, copy_run, edit_result

from crimsonbench.metrics import RunCollector, new_registry, state_from_store
from crimsonbench.reports.report import final_table
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import CpuSetLoad, judged
from crimsonbench.spec.sweep import ValiditySpec

HOG = CpuSetLoad("osd.0", (0,), 10.0, 5.2, 0.0, ("stress[4242] 5.2 s",))


def judge_all(root: Path, suspect_step: str) -> None:
    for step_id in STEP_IDS:

        def change(d: dict[str, Any], hog: bool = step_id == suspect_step) -> None:
            r = judged(StepResult.from_json_dict(d), {}, ValiditySpec(),
                       interference=(HOG,) if hog else ())  # fmt: skip
            d["extra"] = r.to_json_dict()["extra"]

        edit_result(root, step_id, change)


def test_the_summary_marks_the_suspect_rows_and_says_why(tmp_path: Path) -> None:
    root = copy_run(tmp_path / "run")
    judge_all(root, "001-randread4k-qd004-r1")
    md = final_table(root, "md")
    rows = [ln for ln in md.splitlines() if ln.startswith(" | ")]
    assert "| verdict|" in md
    assert [ln.split("|")[1].strip() for ln in rows if "SUSPECT" in ln] == ["4", "1"], md
    assert sum(ln.endswith("| valid  |") for ln in rows) == 2, md
    tail = md[md.index("## suspect steps (2)") :]
    assert "- randread4k iodepth 4: **suspect**: interference: osd.0 (CPU 0): 52.0 %" in tail
    assert "busiest others: stress[4242] 5.2 s" in tail
    assert "- seqwrite64k iodepth 1: **suspect**: unsteady: per-second IOPS vary by 0.33" in tail
    # its fall (-40 % of the mean) is within the noise of 4 seconds: no drift
    assert "drift" not in tail
    table = list(csv.DictReader(io.StringIO(final_table(root, "csv"))))
    assert [r["verdict"] for r in table] == ["valid", "suspect", "suspect", "valid"]
    assert [r["suspect_reasons"] for r in table] == ["", "interference", "unsteady", ""]


def test_an_unjudged_run_keeps_the_published_layout(tmp_path: Path) -> None:
    md = final_table(copy_run(tmp_path / "run"), "md")
    assert "verdict" not in md and "suspect" not in md


def test_prometheus_says_which_step_is_suspect_and_why(tmp_path: Path) -> None:
    root = copy_run(tmp_path / "run")
    judge_all(root, "000-randread4k-qd001-r1")
    text = generate_latest(new_registry(RunCollector(lambda: state_from_store(root)))).decode()
    got = {}
    for ln in text.splitlines():
        if ln.startswith("crimsonbench_step_suspect{"):
            labels = dict(
                kv.split("=", 1) for kv in ln[ln.index("{") + 1 : ln.index("}")].split(",")
            )
            got[(labels["step"].strip('"'), labels["reason"].strip('"'))] = float(ln.split()[-1])
    assert got == {
        ("000-randread4k-qd001-r1", "interference"): 1.0,
        ("001-randread4k-qd004-r1", "none"): 0.0,
        ("002-seqwrite64k-qd001-r1", "unsteady"): 1.0,
        ("003-seqwrite64k-qd004-r1", "none"): 0.0,
    }
