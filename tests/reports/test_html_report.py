"""report.html and comparison.html of the real results fixture (gate-1image: a local run,
2 workloads x 2 iodepths) and of copies of it edited the way other runs or hostile files
would differ: what a reader sees is checked against the fixture's own figures."""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path
from typing import Any

from fixture_reports import FixtureReports
from html_doc import EXTERNAL, Doc, parse
from results_fixture import FIXTURE, STEP_IDS, copy_run, dump, edit_result, load, result_path

from crimsonbench.reports.html import (
    COMPARISON_SECTIONS,
    RUN_SECTIONS,
    comparison_anchor,
    workload_anchor,
)
from crimsonbench.reports.html_figures import MAX_POINTS, bucket_means
from crimsonbench.reports.report import write_comparison, write_report
from crimsonbench.results.provenance import option_readback
from crimsonbench.results.verdict import HEADER

HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
MiB = 1024 * 1024


def steps() -> list[dict[str, Any]]:
    return [load(result_path(FIXTURE, sid)) for sid in STEP_IDS]


def workloads() -> list[str]:
    return list(dict.fromkeys(s["workload"] for s in steps()))


def tooltip(s: dict[str, Any], label: str = "") -> str:
    f, bw = s["fio"], s["workload"].startswith("seq")
    figure = f"{f['bw_mib_s']:.2f} MiB/s" if bw else f"{f['iops']:.2f} IOPS"
    lines = [label] if label else []
    lines += [
        f"iodepth {s['iodepth']}",
        figure,
        f"mean clat {f['clat_mean_ms']:.2f} ms",
        f"p99 clat {f['clat_p99_ms']:.2f} ms",
        f"OSD CPU {s['resources']['osd_cpu']:.2f} % of one core",
    ]
    return "\n".join(lines)


def md_tables(markdown: str) -> dict[str, list[list[str]]]:
    """summary.md's first table under each "## workload" heading, escapes undone."""
    out: dict[str, list[list[str]]] = {}
    for block in markdown.split("\n## ")[1:]:
        title, _, body = block.partition("\n")
        rows = [ln for ln in body.splitlines() if ln.lstrip().startswith("|")]
        if rows and title not in out:
            cells = [[c.strip().replace("\\_", "_") for c in r.strip().strip("|").split("|")]
                     for r in rows]  # fmt: skip
            out[title] = [cells[0], *cells[2:]]  # without the |---| line
    return out


def test_run_report_has_every_section_and_the_fixture_figures_per_step(
    fixture_reports: FixtureReports,
) -> None:
    doc = parse(fixture_reports.report.read_text())
    assert set(RUN_SECTIONS) <= set(doc.sections)
    summary = md_tables((fixture_reports.run_dir / "report" / "summary.md").read_text())
    for workload in workloads():
        section = doc.sections[workload_anchor(workload)]
        rows = {r["iodepth"]: r for r in section.table_dicts()}
        mine = [s for s in steps() if s["workload"] == workload]
        assert sorted(rows) == sorted(str(s["iodepth"]) for s in mine)
        for s in mine:
            row, f, res = rows[str(s["iodepth"])], s["fio"], s["resources"]
            bw = workload.startswith("seq")
            assert row["bw" if bw else "iops"] == f"{f['bw_mib_s' if bw else 'iops']:.2f}"
            assert row["total_ios"] == f"{f['total_ios']:.2f}"
            assert row["clat_ms"] == f"{f['clat_mean_ms']:.2f}"
            assert row["clat_p99_ms"] == f"{f['clat_p99_ms']:.2f}"  # json+: exact, no ~
            assert row["OSD_cpu"] == f"{res['osd_cpu']:.2f}"
            assert row["OSD_mem"] == f"{res['osd_mem_mib']:.2f}"
            assert row["FIO_cpu"] == f"{res['fio_cpu']:.2f}"
        # the very table of summary.md: same columns, same cells
        assert section.tables[0] == summary[workload]
        assert "peak:" in section.all_text


def test_each_plot_is_one_inline_svg_and_each_curve_point_has_its_tooltip(
    fixture_reports: FixtureReports,
) -> None:
    text = fixture_reports.report.read_text()
    doc = parse(text)
    for workload in workloads():
        section = doc.sections[workload_anchor(workload)]
        # response curve, CPU and memory per step, per-second IOPS
        assert len(section.svgs) == 3
        curve = section.svgs[0]
        assert curve.titles == [tooltip(s) for s in steps() if s["workload"] == workload]
        assert f"{workload}: IOPS per second of each step" in text
    assert text.count("<svg") == 3 * len(workloads())
    assert re.findall(r"<svg\b[^>]*>", text)[0].count('class="plot"') == 1
    # the classic fixture: no reactor figures, no verdicts, no provenance, each said so
    assert doc.sections["reactors"].svgs == []
    assert "(a classic OSD has none)" in doc.sections["reactors"].all_text
    assert "No step was judged" in doc.sections["suspect"].all_text
    assert "run.json has no provenance" in doc.sections["provenance"].all_text
    run = doc.sections["run"].all_text
    assert "CPU set of local osd.0 0" in run and "CPU set of client-0 1" in run
    assert "iodepths 1, 4" in run and "Ceph 16.2.15" in run


def test_comparison_has_the_table_the_curves_and_the_verdicts_of_the_markdown(
    fixture_reports: FixtureReports,
) -> None:
    doc = parse(fixture_reports.comparison.read_text())
    assert set(COMPARISON_SECTIONS) <= set(doc.sections)
    label = "gate-1image (classic/memstore 1osd default)"
    labels = [label, f"{label} #2"]
    md = (fixture_reports.comparison.parent / "comparison.md").read_text()
    for workload in workloads():
        section = doc.sections[comparison_anchor(workload)]
        rows = section.table_dicts()
        assert [r["run"] for r in rows] == labels
        assert [r["ratio"] for r in rows] == ["1.00", "1.00"]
        mine = [s for s in steps() if s["workload"] == workload]
        top = max(mine, key=lambda s: s["fio"]["bw_mib_s" if workload[:3] == "seq" else "iops"])
        assert rows[0]["iodepth"] == str(top["iodepth"])
        assert len(section.svgs) == 2  # curves overlaid, CPU and memory overlaid
        assert section.svgs[0].titles == [tooltip(s, name) for name in labels for s in mine]
    verdicts = doc.sections["verdicts"]
    assert verdicts.tables[0][0] == list(HEADER)
    md_rows = [
        [c.strip() for c in ln.strip().strip("|").split("|")]
        for ln in md.split("## Verdicts")[1].splitlines()
        if ln.startswith("| ") and not ln.startswith("| ---")
    ]
    assert verdicts.tables[0] == [[c.replace("**", "") for c in r] for r in md_rows]
    assert len(verdicts.tables[0]) == 1 + len(steps())
    gate = "Gate: passed" if "Gate: passed" in md else "Gate: FAILED"
    assert gate in verdicts.all_text


def test_nothing_is_fetched_nothing_runs_and_every_id_is_unique(
    fixture_reports: FixtureReports,
) -> None:
    for path in (fixture_reports.report, fixture_reports.comparison):
        text = path.read_text()
        assert EXTERNAL.search(text) is None, EXTERNAL.search(text)
        assert "http://" not in text and "https://" not in text
        assert "<image" not in text  # no plot rasterized
        assert "Content-Security-Policy\" content=\"default-src 'none'" in text
        ids = parse(text).ids
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)[:5]


def test_the_detector_of_external_references_finds_them() -> None:
    for bad in ('<img src="https://x/y.png">', "<a href='http://x'>", '<script src="a.js">',
                '<link rel="stylesheet" href="a.css">', "x{background:url(https://x)}",
                '<use xlink:href="other.svg#m"/>', '<p style="@import \'a.css\'">'):  # fmt: skip
        assert EXTERNAL.search(bad), bad
    assert EXTERNAL.search('<a href="#run">run</a><use xlink:href="#f1-m0"/>') is None


def hostile_run(root: Path) -> Path:
    """The fixture with a script tag in every kind of string a report shows: the run's
    name and host (run.json), a spec value, the provenance, a CPU set of the plan, and a
    step's verdict reason."""
    run = copy_run(root)
    info = load(run / "run.json")
    info["info"]["name"] = f"run {HOSTILE}"
    info["info"]["host"] = HOSTILE
    info["extra"]["spec"]["client"]["imageSize"] = HOSTILE
    info["extra"]["provenance"] = {"kernel": HOSTILE, "fio": "fio-3.33", "ceph": HOSTILE,
                                   "cpus": {"governor": {"0": HOSTILE}}, "osds": {}}  # fmt: skip
    dump(run / "run.json", info)
    plan = load(run / "plan.json")
    plan["clients"]["client-0"]["cpus"] = HOSTILE
    dump(run / "plan.json", plan)

    def suspect(d: dict[str, Any]) -> None:
        d["extra"]["validity"] = {
            "verdict": "suspect",
            "reasons": [
                {"code": "interference", "detail": f"osd.0: {HOSTILE}", "value": 12.5, "limit": 5.0}
            ],  # fmt: skip
        }

    edit_result(run, STEP_IDS[0], suspect)
    return run


def test_strings_from_results_are_escaped_everywhere(tmp_path: Path) -> None:
    run = hostile_run(tmp_path / "run")
    write_report(run)
    text = (run / "report" / "report.html").read_text()
    assert HOSTILE not in text and "<script" not in text
    # name (title, h1), host, imageSize, kernel, ceph, governor, CPU set, reason
    assert text.count(ESCAPED) >= 9
    doc = parse(text)
    first = steps()[0]
    section = doc.sections[workload_anchor(first["workload"])]
    rows = section.table_dicts()
    assert [r["verdict"] for r in rows] == ["SUSPECT", "n/a"]  # the other: judged by none
    assert section.row_classes[0][1] == "suspect"  # [0] is the header
    assert f"interference: osd.0: {HOSTILE}" in doc.sections["suspect"].all_text
    # and in a comparison, where the name is a label in tables and in the SVG legends
    write_comparison([run, copy_run(tmp_path / "plain")], tmp_path / "cmp")
    cmp = (tmp_path / "cmp" / "comparison.html").read_text()
    assert HOSTILE not in cmp and "<script" not in cmp
    assert parse(cmp).sections["runs"].table_dicts()[0]["run"].startswith(f"run {HOSTILE}")


def test_provenance_shows_versions_and_options_the_daemon_did_not_take(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "run")
    info = load(run / "run.json")
    readback = option_readback({"osd_memory_target": "4294967296", "debug_osd": "0/5"},
                               {"osd_memory_target": "2147483648", "debug_osd": "0/5",
                                "osd_objectstore": "memstore"})  # fmt: skip
    info["extra"]["provenance"] = {
        "kernel": "Linux 6.1.0-13-amd64 #1 SMP",
        "cpus": {"governor": {"0": None, "1": None}, "boost": None, "intel_no_turbo": None},
        "fio": "fio-3.33",
        "ceph": "16.2.15",
        "osds": {
            "osd.0": {"version": {"version": "16.2.15"}, **readback},
            "osd.1": {"error": "admin socket gone"},
        },  # fmt: skip
    }
    dump(run / "run.json", info)
    write_report(run)
    section = parse((run / "report" / "report.html").read_text()).sections["provenance"]
    text = section.all_text
    assert "Linux 6.1.0-13-amd64 #1 SMP" in text and "fio-3.33" in text
    assert "did not take the planned osd_memory_target" in text
    assert "osd_objectstore memstore" in text
    assert ["osd_memory_target", "4294967296", "2147483648"] in section.tables[2]
    assert "not read back: admin socket gone" in text


def crimson_run(root: Path) -> Path:
    """The fixture as if its OSD were crimson: reactor figures in every step."""
    run = copy_run(root)
    info = load(run / "run.json")
    info["info"].update(flavor="crimson", reactors=2)
    dump(run / "run.json", info)
    for sid in STEP_IDS:

        def reactors(d: dict[str, Any]) -> None:
            qd = d["iodepth"]
            d["resources"].update(reactor_util=40.0 + qd, reactor_util_max=90.0 + qd / 10,
                                  reactor_util_osd={"osd.0": 40.0 + qd})  # fmt: skip

        edit_result(run, sid, reactors)
    return run


def test_crimson_runs_get_a_reactor_heatmap_with_a_tooltip_per_cell(tmp_path: Path) -> None:
    run = crimson_run(tmp_path / "run")
    write_report(run)
    text = (run / "report" / "report.html").read_text()
    section = parse(text).sections["reactors"]
    assert len(section.svgs) == 1
    tips = section.svgs[0].titles
    assert len(tips) == 2 * len(STEP_IDS)  # osd.0's mean and the busiest, per step
    for s in steps():
        where = f"{s['workload']} iodepth {s['iodepth']}"
        assert f"{where}\nosd.0 (mean): {40 + s['iodepth']:.0f} %" in tips
        assert f"{where}\nbusiest reactor: {90 + s['iodepth'] / 10:.0f} %" in tips
    assert "<image" not in text  # the colorbar too is vector
    table = parse(text).sections[workload_anchor(workloads()[0])].tables[0]
    assert "reactor_util" in table[0] and "reactor_max" in table[0]


def test_bucket_means_limit_the_points_and_keep_the_mean() -> None:
    series = [float(i % 7) for i in range(3601)]
    t, v = bucket_means(series)
    assert len(t) == len(v) <= MAX_POINTS
    assert t[0] == (1 + 13) / 2 and t == sorted(t)  # buckets of 13 s, at their middle
    assert abs(sum(v) / len(v) - sum(series) / len(series)) < 0.05
    assert bucket_means([5.0, 6.0]) == ([1.0, 2.0], [5.0, 6.0])


def reference_sized_run(root: Path) -> Path:
    """4 workloads x 10 iodepths of 300 s (per-second IOPS of each), crimson, from the
    fixture's first step: the size of the issue's reference run."""
    run = copy_run(root)
    info = load(run / "run.json")
    info["info"].update(flavor="crimson", reactors=8)
    dump(run / "run.json", info)
    template = load(result_path(run, STEP_IDS[0]))
    for sid in STEP_IDS:
        for p in (run / "steps" / sid).iterdir():
            p.unlink()
        (run / "steps" / sid).rmdir()
    n = 0
    for workload in ("randread4k", "randwrite4k", "seqread64k", "seqwrite64k"):
        for qd in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
            d = copy.deepcopy(template)
            sid = f"{n:03d}-{workload}-qd{qd:03d}-r1"
            d.update(step_id=sid, workload=workload, iodepth=qd)
            d["fio"]["iops"] *= 1 + qd / 10
            d["extra"]["iops_per_second"] = [1000.0 + (i * 37 + qd) % 101 for i in range(300)]
            d["resources"].update(reactor_util=50.0, reactor_util_max=70.0,
                                  reactor_util_osd={"osd.0": 50.0})  # fmt: skip
            (run / "steps" / sid).mkdir()
            dump(result_path(run, sid), d)
            n += 1
    return run


def test_the_reference_sized_run_stays_under_5_mib(tmp_path: Path) -> None:
    run = reference_sized_run(tmp_path / "run")
    started = time.perf_counter()
    write_report(run)
    seconds = time.perf_counter() - started
    path = run / "report" / "report.html"
    size = path.stat().st_size
    print(f"\nreport.html of 4 workloads x 10 iodepths x 300 s: {size / MiB:.2f} MiB, "
          f"report written in {seconds:.1f} s")  # fmt: skip
    assert size < 5 * MiB
    doc: Doc = parse(path.read_text())
    assert len(doc.sections["reactors"].svgs) == 1
    for workload in ("randread4k", "randwrite4k", "seqread64k", "seqwrite64k"):
        section = doc.sections[workload_anchor(workload)]
        assert len(section.svgs) == 3 and len(section.table_dicts()) == 10
    assert size > 500_000  # a real page: 40 steps, 12 plots
