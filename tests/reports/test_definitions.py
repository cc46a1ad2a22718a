"""The column definitions (reports.definitions) are in every summary.md and in the README,
and the table computes what they say: checked against fio's own JSON documents, reduced
the published tables' way (ceph-aprg's fio-parse-jsons.py: sums over jobs, KiB/s / 1000)
independently of our parser."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from results_fixture import FIXTURE, STEP_IDS, copy_run

from crimsonbench.reports.definitions import definitions_markdown
from crimsonbench.reports.report import write_report
from crimsonbench.reports.tables import markdown_table, to_csv
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.types import ResourceSummary, StepResult

ROOT = Path(__file__).resolve().parents[2]
FIO = ROOT / "tests" / "fixtures" / "fio"


def fio_doc(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[text.index("{") :])


def cells(table: str) -> list[dict[str, str]]:
    lines = [ln for ln in table.splitlines() if ln.strip().startswith("|")]
    header = [c.strip() for c in lines[0].strip(" |").split("|")]
    return [
        dict(zip(header, (c.strip() for c in ln.strip(" |").split("|")), strict=True))
        for ln in lines[2:]
    ]


def test_the_readme_has_the_definitions_of_every_summary() -> None:
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"<!-- columns:begin -->\n(.*?)<!-- columns:end -->", readme, re.S)
    assert section is not None, "README lost its table-columns markers"
    assert section.group(1) == definitions_markdown(), (
        "README's table columns differ from reports/definitions.py: paste "
        "definitions_markdown() between the markers"
    )


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the real run, reported once for the tests of this module."""
    run = copy_run(tmp_path_factory.mktemp("definitions") / "run")
    write_report(run)
    return run


def test_the_summary_of_a_real_run_ends_with_the_definitions(reported: Path) -> None:
    run = reported
    summary = (run / "report" / "summary.md").read_text()
    assert summary.endswith("## Columns\n\n" + definitions_markdown())
    # every column of every table in it is defined there
    defs = definitions_markdown()
    tables = summary[: summary.index("## Columns")]
    headers = {c.strip() for ln in tables.splitlines() if ln.startswith("| iodepth")
               for c in ln.strip(" |").split("|")}  # fmt: skip
    assert "bw\\_pub" in headers and "usr\\_cpu" in headers
    undefined = [h for h in headers if h not in defs]
    assert undefined == [], undefined


def test_usr_and_sys_cpu_are_summed_over_jobs_as_published() -> None:
    """Two jobs (fio's numjobs=2 document): the table's usr/sys_cpu are fio's per-job
    values summed; the CSV has the sums and the per-job means, both named."""
    doc = fio_doc(FIO / "numjobs2.json")
    usr = sum(j["usr_cpu"] for j in doc["jobs"])
    sys_ = sum(j["sys_cpu"] for j in doc["jobs"])
    fio = combine(parse_fio_json((FIO / "numjobs2.json").read_text()))
    step = StepResult("000-randread4k-qd004-r1", "randread4k", 4, 1, fio,
                      ResourceSummary(1.0, 1.0, 1.0, 1))  # fmt: skip
    (row,) = cells(markdown_table([step]))
    assert row["usr\\_cpu"] == f"{usr:.2f}" and row["sys\\_cpu"] == f"{sys_:.2f}"
    (csv_row,) = csv.DictReader(io.StringIO(to_csv([step])))
    assert float(csv_row["usr_cpu_sum"]) == pytest.approx(usr, rel=1e-12)
    assert float(csv_row["sys_cpu_sum"]) == pytest.approx(sys_, rel=1e-12)
    assert float(csv_row["usr_cpu"]) == pytest.approx(usr / 2, rel=1e-12)  # per job
    # the published bw: fio's KiB/s summed, / 1000
    bw_pub = sum(j["read"]["bw"] for j in doc["jobs"]) / 1000
    assert float(csv_row["bw_published"]) == pytest.approx(bw_pub, rel=1e-12)


@pytest.mark.parametrize("step_id", STEP_IDS)
def test_a_real_run_reduced_the_published_way(reported: Path, step_id: str) -> None:
    """Each step of the real run: fio's document reduced as fio-parse-jsons.py reduces it
    gives our iops/total_ios/usr/sys and bw_pub exactly; clat mean within the bound the
    definitions state; clat_ns.N exceeds total_ios by at most iodepth - 1."""
    run = reported
    (doc_path,) = (FIXTURE / "steps" / step_id).glob("fio-*.json")
    jobs = fio_doc(doc_path)["jobs"]
    iodepth = int(step_id.split("-qd")[1][:3])
    seq = "seqwrite" in step_id
    d = "write" if seq else "read"
    secs = [j[d] for j in jobs]
    for s in secs:
        assert 0 <= s["clat_ns"]["N"] - s["total_ios"] <= iodepth - 1
    total = sum(s["total_ios"] for s in secs)
    published_clat = sum(s["clat_ns"]["mean"] * s["total_ios"] for s in secs) / total / 1e6
    md = (run / "report" / "summary.md").read_text()
    workload = step_id.split("-")[1]
    section = md[md.index(f"## {workload}") :]
    table = section[section.index("| iodepth") : section.index("![")]
    row = next(r for r in cells(table) if r["iodepth"] == str(iodepth))
    if seq:
        assert row["bw\\_pub"] == f"{sum(s['bw'] for s in secs) / 1000:.2f}"
    else:
        assert row["iops"] == f"{sum(s['iops'] for s in secs):.2f}"
    assert row["total\\_ios"] == f"{total:.2f}"
    assert row["usr\\_cpu"] == f"{sum(j['usr_cpu'] for j in jobs):.2f}"
    assert row["sys\\_cpu"] == f"{sum(j['sys_cpu'] for j in jobs):.2f}"
    ours = float(row["clat\\_ms"])
    assert abs(ours - published_clat) <= 0.005 + published_clat * (iodepth - 1) / total
