"""`report --output markdown|csv|json` when stdout is not a terminal (CI logs, `| tee`):
every column whole, machine-readable where asked."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from test_compare_gate import write_run
from typer.testing import CliRunner

from crimsonbench.cli import app

COLUMNS = ("iodepth", "iops", "total\\_ios", "clat\\_ms", "clat\\_stdev", "usr\\_cpu", "sys\\_cpu",
           "OSD\\_cpu", "OSD\\_mem", "FIO\\_cpu")  # fmt: skip


def report(root: Path, fmt: str) -> str:
    got = CliRunner().invoke(app, ["report", str(root), "--output", fmt])
    assert got.exit_code == 0, got.output
    return got.stdout


def test_markdown_keeps_every_column_past_80_characters(tmp_path: Path) -> None:
    out = report(write_run(tmp_path / "run", "run", {}), "markdown")
    header = next(ln for ln in out.splitlines() if ln.startswith("| iodepth"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert tuple(cells[: len(COLUMNS)]) == COLUMNS, cells
    rows = [ln for ln in out.splitlines() if ln.lstrip().startswith("| ") and "---" not in ln]
    data = [r for r in rows if not r.startswith("| iodepth")]
    assert len(data) == 3  # iodepths 1, 4, 16 (five repeats each, averaged)
    for row in data:
        assert len(row) > 80 and "…" not in row, row
        assert len(row.strip().strip("|").split("|")) == len(cells), row


def test_csv_and_json_hold_every_step(tmp_path: Path) -> None:
    root = write_run(tmp_path / "run", "run", {4: 2.0})
    rows = list(csv.DictReader(io.StringIO(report(root, "csv"))))
    assert [int(r["iodepth"]) for r in rows] == [1] * 5 + [4] * 5 + [16] * 5
    doc = json.loads(report(root, "json"))
    assert [d["step_id"] for d in doc] == [r["step_id"] for r in rows]
    by_qd = {d["iodepth"]: d["iops"] for d in doc if d["repeat"] == 1}
    assert by_qd[4] == 2 * by_qd[1]  # the numbers, not only the shape
    assert all(d["osd_cpu"] is None for d in doc)  # nothing sampled: null, never 0
