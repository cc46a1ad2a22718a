from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace

import pytest
from report_helpers import make_step, sweep

from crimsonbench.reports.tables import (
    ROW_FIELDS,
    markdown_table,
    to_csv,
    to_json,
    workload_tables,
)
from crimsonbench.results.types import FioSummary, ResourceSummary, StepResult

HEADER = (
    "| iodepth| iops| total\\_ios| clat\\_ms| clat\\_stdev| usr\\_cpu| sys\\_cpu| OSD\\_cpu|"
    " OSD\\_mem| FIO\\_cpu|"
)
# The first row of "Classic OSD - rand4read k - detailed stats" as published (no FIO_cpu)
PUBLISHED_ROW = (
    " | 1  | 108365.87  | 32509868.00  | 0.29  | 0.11  | 1.41  | 1.26  | 353.20  | 53.66  |"
)


def published_qd1() -> StepResult:
    # 32 jobs: the published usr/sys_cpu (1.41, 1.26) are sums over them, so per job
    # (what FioSummary keeps) they are 1/32 of that
    fio = FioSummary(
        108365.87, 423.3, 32509868, 0.29, 0.11, 0.25, 0.9, 1.8, 1.41 / 32, 1.26 / 32, 300, 32
    )
    return StepResult(
        "000-randread4k-qd001-r1", "randread4k", 1, 1, fio, ResourceSummary(353.2, 53.66, 12.5, 300)
    )


def test_header_and_row_in_the_published_layout() -> None:
    lines = markdown_table([published_qd1()]).splitlines()
    assert lines[0] == HEADER
    assert lines[1] == "| ---| ---| ---| ---| ---| ---| ---| ---| ---| ---|"
    assert lines[2] == PUBLISHED_ROW + " 12.50  |"


def test_sequential_workloads_lead_with_bw() -> None:
    rows = sweep("seqread64k", [(1, 20000.0, 1.4), (4, 30000.0, 4.6)])
    lines = markdown_table(rows).splitlines()
    # bw in MiB/s, then the published tables' figure (KiB/s / 1000) beside it
    assert lines[0] == HEADER.replace("| iops|", "| bw| bw\\_pub|")
    mib = 20000 * 64 / 1024
    assert lines[2].startswith(f" | 1  | {mib:.2f}  | {mib * 1.024:.2f}  |")
    # the caller can overrule the name
    assert markdown_table(rows, bandwidth=False).splitlines()[0] == HEADER


def test_percentile_columns_are_appended() -> None:
    exact = replace(published_qd1(), fio=replace(published_qd1().fio, percentiles_exact=True))
    lines = markdown_table([exact], percentiles=True).splitlines()
    assert lines[0] == HEADER + " clat\\_p99\\_ms| clat\\_p99.9\\_ms|"
    assert lines[2].endswith("| 12.50  | 0.90  | 1.80  |")
    # percentiles from plain JSON (no histogram to merge) are marked as approximations
    approx = markdown_table([published_qd1()], percentiles=True).splitlines()[2]
    assert approx.endswith("| 12.50  | ~0.90  | ~1.80  |")
    missing = replace(exact, fio=replace(exact.fio, clat_p999_ms=math.nan))
    assert markdown_table([missing], percentiles=True).splitlines()[2].endswith("| n/a  |")


def test_repeats_add_their_95_percent_interval() -> None:
    # three repeats at qd 8 (300, 500, 400 IOPS), one step at qd 1
    reps = [
        make_step("randread4k", 8, v, index=i, repeat=i + 1)
        for i, v in enumerate((300.0, 500.0, 400.0))
    ]
    lines = markdown_table([*reps, make_step("randread4k", 1, 100.0, index=3)]).splitlines()
    assert lines[0].endswith("| sd| ±ci95| clat\\_ms sd| clat\\_ms ±ci95| repeats|")
    qd1, qd8 = lines[2], lines[3]
    assert qd1.endswith("| n/a  | n/a  | n/a  | n/a  | 1  |")
    # mean 400, sample stddev 100, t(0.975, 2) = 4.30265: 100 * 4.30265 / sqrt(3) = 248.41
    assert " 400.00 " in qd8 and qd8.endswith("| 100.00  | ±248.41  | 0.00  | ±0.00  | 3  |")


def test_rows_by_iodepth_and_repeats_averaged() -> None:
    a = make_step("randread4k", 8, 300.0, index=0, repeat=1)
    b = make_step("randread4k", 8, 500.0, index=1, repeat=2)
    c = make_step("randread4k", 1, 100.0, index=2)
    lines = markdown_table([a, b, c]).splitlines()
    assert len(lines) == 4
    assert lines[2].startswith(" | 1  | 100.00  |")
    assert lines[3].startswith(" | 8  | 400.00  |")


def test_workload_tables_split_and_pick_the_column() -> None:
    rows = sweep("randread4k", [(1, 100.0, 0.3)]) + sweep("seqwrite64k", [(1, 50.0, 1.0)], 1)
    tables = workload_tables(rows)
    assert list(tables) == ["randread4k", "seqwrite64k"]
    assert "| iops|" in tables["randread4k"] and "| bw|" in tables["seqwrite64k"]
    assert "| iops|" in workload_tables(rows, bandwidth_workloads=set())["seqwrite64k"]


def test_csv_keeps_every_repeat_at_full_precision() -> None:
    a = make_step("randread4k", 8, 300.123456789, index=0, repeat=1)
    b = make_step("randread4k", 8, 500.0, index=1, repeat=2)
    nan = replace(b, step_id="002-x", fio=replace(b.fio, clat_p99_ms=math.nan))
    rows = list(csv.DictReader(io.StringIO(to_csv([nan, b, a]))))
    assert tuple(rows[0]) == ROW_FIELDS
    assert [r["step_id"] for r in rows] == [a.step_id, b.step_id, "002-x"]
    assert float(rows[0]["iops"]) == 300.123456789
    assert rows[0]["osd_mem_mib"] == "3600.0" and rows[0]["resource_samples"] == "300"
    assert rows[2]["clat_p99_ms"] == ""


def test_json_rows_are_strict_json() -> None:
    a = make_step("randread4k", 8, 300.0)
    nan = replace(a, fio=replace(a.fio, clat_p50_ms=math.nan))
    rows = json.loads(to_json([nan]), parse_constant=pytest.fail)
    assert rows[0]["clat_p50_ms"] is None
    assert rows[0]["iops"] == 300.0 and rows[0]["fio_cpu"] == 30.0
    assert set(rows[0]) == set(ROW_FIELDS)


def test_crimson_reactor_columns_mean_busiest_and_per_osd() -> None:
    """Crimson rows carry Seastar's reactor utilization: mean, busiest reactor, and with
    several OSDs a column per OSD; repeats are averaged like every other figure."""
    from dataclasses import replace

    from crimsonbench.reports.tables import markdown_table, to_csv
    from helpers.step_results import result

    def crimson(repeat: int, a: float, b: float) -> StepResult:
        r = result(0, "randread4k", 8, 1000.0, repeat=repeat)
        res = replace(
            r.resources,
            reactor_util=(a + b) / 2,
            reactor_util_max=max(a, b),
            reactor_util_osd={"osd.0": a, "osd.1": b},
        )
        return replace(r, resources=res)

    table = markdown_table([crimson(1, 40.0, 60.0), crimson(2, 50.0, 70.0)])
    header, _, row = table.splitlines()[:3]
    cols = [c.strip() for c in header.strip("| ").split("|")]
    cells = dict(zip(cols, (c.strip() for c in row.strip(" |").split("|")), strict=False))
    assert cells["reactor\\_util"] == "55.00" and cells["reactor\\_max"] == "65.00"
    assert cells["osd.0\\_util"] == "45.00" and cells["osd.1\\_util"] == "65.00"
    csv_header = to_csv([crimson(1, 40.0, 60.0)]).splitlines()[0]
    assert "reactor_util" in csv_header and "reactor_util_osd" not in csv_header
    # classic rows: no reactor columns at all
    assert "reactor" not in markdown_table([result(0, "randread4k", 8, 1000.0)])


def test_unsampled_resources_read_n_a_never_zero() -> None:
    """A step nothing sampled (the operator without metrics.k8s.io, a step shorter than one
    interval): OSD_cpu, OSD_mem and FIO_cpu are n/a in the table, empty in the CSV and
    null in the JSON; a sampled 0.0 stays 0.00."""
    unsampled = replace(published_qd1(), resources=ResourceSummary(0.0, 0.0, 0.0, 0))
    row = markdown_table([unsampled]).splitlines()[2]
    assert row.endswith("| 1.41  | 1.26  | n/a  | n/a  | n/a  |"), row
    (csv_row,) = csv.DictReader(io.StringIO(to_csv([unsampled])))
    assert csv_row["osd_cpu"] == csv_row["osd_mem_mib"] == csv_row["fio_cpu"] == ""
    assert csv_row["resource_samples"] == "0"
    (json_row,) = json.loads(to_json([unsampled]))
    assert json_row["osd_cpu"] is None and json_row["fio_cpu"] is None
    idle = replace(published_qd1(), resources=ResourceSummary(0.0, 0.0, 0.0, 3))
    assert markdown_table([idle]).splitlines()[2].endswith("| 0.00  | 0.00  | 0.00  |")
