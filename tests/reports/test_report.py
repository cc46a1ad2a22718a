"""Reports written from a results directory built from the real fio fixtures."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from matplotlib.image import imread

from crimsonbench.reports.report import write_comparison, write_report
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.resources import summarize_samples
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.spec.status import StepSample

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
# (workload, iodepth, fixture): real fio figures at made-up iodepths
STEPS = [
    ("randread4k", 1, "psync-note.json"),
    ("randread4k", 4, "randread4k.json"),
    ("randread4k", 8, "numjobs2.json"),
    ("randread4k", 16, "error-einval.json"),
    ("seqread64k", 4, "seqread64k.json"),
    ("mix", 8, "randrw.json"),
]
SPEC = {
    "workloads": [
        {"preset": "randread4k"},
        {"preset": "seqread64k"},
        {"name": "mix", "rw": "rw", "bs": "64k"},
    ],
    "sweep": {
        "earlyExit": {"clatCvLimit": 0.5, "meanLatencyMsLimit": 0.07},
        "latencyTarget": {"percentile": 99, "latencyMs": 0.1},
    },
}


def build_store(root: Path, name: str, extra: dict | None = None) -> list[StepResult]:
    store = ResultStore(root)
    store.write_run_info(
        RunInfo(name, "classic", "bluestore", 1, 0, "default", "dual"), extra or {}
    )
    out = []
    for i, (workload, qd, fixture) in enumerate(STEPS):
        sid = f"{i:03d}-{workload}-qd{qd:03d}-r1"
        raw = store.fio_paths(sid, "client-0").output
        raw.write_text((FIO / fixture).read_text())
        samples = [StepSample(t=t, osd_cpu=100.0 + t, osd_mem_mib=512.0, fio_cpu=20.0 + qd)
                   for t in range(3)]  # fmt: skip
        store.write_samples(sid, samples)
        # as an executor would: the result from the files just written
        fio = combine(parse_fio_json(raw.read_text()))
        result = StepResult(sid, workload, qd, 1, fio, summarize_samples(samples))
        store.write_step(result)
        out.append(result)
    return out


def test_report_files(tmp_path: Path) -> None:
    results = build_store(tmp_path, "base", {"spec": SPEC})
    paths = write_report(tmp_path)
    names = sorted(p.name for p in paths)
    assert names == sorted(
        [
            "summary.md",
            "results.csv",
            "results.json",
            "randread4k_iops_vs_lat.png",
            "randread4k_cpu.png",
            "seqread64k_bw_vs_lat.png",
            "seqread64k_cpu.png",
            "mix_bw_vs_lat.png",
            "mix_cpu.png",
            "report.html",
        ]
    )
    assert all(p.parent == tmp_path / "report" and p.stat().st_size > 0 for p in paths)
    for p in paths:
        if p.suffix == ".png":
            assert imread(p).ndim == 3
    rows = list(csv.DictReader((tmp_path / "report" / "results.csv").open()))
    assert [float(r["iops"]) for r in rows] == [r.fio.iops for r in results]
    assert len(json.loads((tmp_path / "report" / "results.json").read_text())) == len(STEPS)


def test_summary_content(tmp_path: Path) -> None:
    results = build_store(tmp_path, "base", {"spec": SPEC})
    write_report(tmp_path)
    md = (tmp_path / "report" / "summary.md").read_text()
    assert md.startswith("# base (classic/bluestore 1osd default)")
    assert "completed steps: 6" in md
    randread = [r for r in results if r.workload == "randread4k"]
    best = max(randread, key=lambda r: r.fio.iops)
    assert f"- peak: {best.fio.iops:.2f} IOPS at iodepth {best.iodepth}" in md
    # the custom "mix" workload is sequential rw: the spec, not its name, makes it bw
    mix = md[md.index("## mix") :]
    assert "| iodepth| bw|" in mix
    assert "- knee (mean clat ≤ 0.07 ms): " in md
    assert "- best with p99 clat ≤ 0.1 ms: " in md
    assert "- fio jobs failed at iodepth (jobs): 16 (1)" in md
    for qd_row in (" | 1  |", " | 4  |", " | 8  |", " | 16  |"):
        assert qd_row in md[md.index("## randread4k") : md.index("## seqread64k")]


def test_knee_and_target_lines_follow_the_data(tmp_path: Path) -> None:
    results = build_store(tmp_path, "base", {"spec": SPEC})
    write_report(tmp_path)
    md = (tmp_path / "report" / "summary.md").read_text()
    section = md[md.index("## randread4k") : md.index("## seqread64k")]
    rr = [r for r in results if r.workload == "randread4k"]
    under = [r for r in rr if r.fio.clat_mean_ms <= 0.07 and not r.fio.errors]
    expected = f"{max(under, key=lambda r: r.fio.iops).fio.iops:.2f}" if under else "no step"
    assert f"- knee (mean clat ≤ 0.07 ms): {expected}" in section


def test_unreadable_sweep_rules_still_give_tables(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The spec now rejects percentile 95; an old run.json holding it must not break reports.
    spec = {"sweep": {"latencyTarget": {"percentile": 95, "latencyMs": 1}}}
    build_store(tmp_path, "base", {"spec": spec})
    write_report(tmp_path)
    md = (tmp_path / "report" / "summary.md").read_text()
    assert "| iodepth| iops|" in md
    assert "latency target" not in md
    assert "spec.sweep is unreadable" in caplog.text


def test_report_without_run_json(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = tmp_path / "lost-run"
    build_store(run, "x")
    (run / "run.json").unlink()
    write_report(run)
    assert (run / "report" / "summary.md").read_text().startswith("# lost-run (")
    assert "no run.json" in caplog.text


def test_comparison_of_two_runs(tmp_path: Path) -> None:
    build_store(tmp_path / "a", "a", {"spec": SPEC})
    build_store(tmp_path / "b", "b")
    done = write_comparison([tmp_path / "a", tmp_path / "b"], tmp_path / "cmp")
    paths = done.written
    assert paths[0].name == "comparison.md"
    assert done.regressions == 0  # the same data twice
    assert {p.name for p in paths[1:]} == {
        "randread4k_iops_vs_lat.png",
        "randread4k_cpu.png",
        "seqread64k_bw_vs_lat.png",
        "seqread64k_cpu.png",
        "mix_bw_vs_lat.png",
        "mix_cpu.png",
        "comparison.html",
    }
    md = paths[0].read_text()
    assert "## randread4k" in md and "![randread4k](randread4k_iops_vs_lat.png)" in md
    # same data twice: every ratio is 1.00
    ratios = [
        line.rstrip(" |").rsplit("|", 1)[1].strip()
        for line in md.splitlines()
        if line.startswith(" | b (")
    ]
    assert ratios == ["1.00"] * 3
