"""Each step's verdict on a real local run (issue 37): a CPU hog (a real process pinned
with taskset, started and stopped by the test when the run's status names the step) on the
OSD's CPU for one step and on fio's CPU for another: those steps are suspect with the hog's
share and its name, the quiet steps before and after are not; sweep.rerunSuspect runs a
suspect step again and keeps a valid attempt, recording the suspect one. An OSD killed
mid-step ends the run at once, naming it. The harness's background builds are paused meanwhile
(tests/helpers/quiet.py): anything else on the machine shows in the verdicts printed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from quiet import prefetch_paused
from run_watch import Run, clean_up, write_spec
from test_local_run import quick_spec

pytestmark = pytest.mark.ceph

OSD_CPU, FIO_CPU = 0, 1  # quick_spec's


@contextmanager
def hog_on(cpu: int) -> Iterator[psutil.Process]:
    """A busy loop at normal priority, pinned to one CPU (what another team's job does)."""
    proc = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def verdicts(results: Path) -> dict[str, dict[str, Any]]:
    """step id -> its result.json's validity, as the run wrote it."""
    out = {}
    for f in sorted((results / "steps").glob("*/result.json")):
        out[f.parent.name] = json.loads(f.read_text())["extra"]["validity"]
    return out


def reasons(v: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [r for r in v["reasons"] if r["code"] == code]


def current(run: Run, qd: str) -> bool:
    return qd in str(run.status().get("currentStep", ""))


def test_a_hog_marks_the_steps_it_shared_a_cpu_with_and_no_other(tmp_path: Path) -> None:
    spec = quick_spec("memstore", iodepths=[1, 4, 16, 32], runtimeSeconds=4, rerunSuspect=1)
    spec["workloads"] = [{"preset": "randread4k"}]
    spec["target"]["local"]["workDir"] = str(tmp_path / "cluster")
    res = tmp_path / "res"
    try:
        with prefetch_paused():
            run = Run(write_spec(tmp_path / "hog.yaml", "hog", spec), res)
            run.wait_until("the qd4 step", lambda: current(run, "qd004"))
            with hog_on(OSD_CPU) as osd_hog:
                run.wait_until("the qd16 step", lambda: current(run, "qd016"))
            with hog_on(FIO_CPU) as fio_hog:  # until the run sees it and runs the step again
                run.wait_until("the qd16 step judged", lambda: run.said("qd016-r1 is suspect"))
            assert run.finish() == 0, run.output[-3000:]
    finally:
        clean_up(tmp_path / "cluster", res)
    got = verdicts(res)
    print(json.dumps(got, indent=1))  # the figures behind every verdict, in the test's log
    assert sorted(got) == ["randread4k-qd001-r1", "randread4k-qd004-r1",
                           "randread4k-qd016-r1", "randread4k-qd032-r1"]  # fmt: skip
    loads = {s: {c["name"]: c for c in v["interference"]} for s, v in got.items()}
    # the OSD's hog, on for both attempts: the step stays suspect, on osd.0's CPU, the hog named
    v = got["randread4k-qd004-r1"]
    (hit,) = reasons(v, "interference")
    assert v["verdict"] == "suspect" and hit["detail"].startswith(f"osd.0 (CPU {OSD_CPU}): ")
    assert hit["value"] > 15, hit  # a busy loop beside a busy OSD: ~31 % measured here
    assert f"[{osd_hog.pid}]" in hit["detail"], hit
    assert loads["randread4k-qd004-r1"]["client client-0"]["others_pct"] < 10
    assert [a["verdict"] for a in v["attempts"]] == ["suspect"], v
    # fio's hog, gone once the run saw it: the rerun is kept, valid; the first attempt says why
    v = got["randread4k-qd016-r1"]
    assert v["verdict"] == "valid" and v["reasons"] == [], v
    (first,) = v["attempts"]
    (hit,) = [r for r in first["reasons"] if r["code"] == "interference"]
    assert hit["detail"].startswith(f"client client-0 (CPU {FIO_CPU}): ") and hit["value"] > 15
    assert f"[{fio_hog.pid}]" in hit["detail"], hit
    # before and after: nothing of the kind
    for quiet in ("randread4k-qd001-r1", "randread4k-qd032-r1"):
        assert reasons(got[quiet], "interference") == [], got[quiet]
        assert got[quiet]["attempts"] == [], got[quiet]
        assert all(c["others_pct"] < 10 for c in got[quiet]["interference"]), got[quiet]
    # provenance: what the run ran with, every option the plan set read back from the OSD
    prov = json.loads((res / "run.json").read_text())["extra"]["provenance"]
    osd = prov["osds"]["osd.0"]
    assert osd["options"] == {} and osd["differ"] == [], osd  # classic: the plan sets none
    assert osd["effective"]["osd_objectstore"] == "memstore", osd  # the bootstrap's, read back
    assert prov["fio"].startswith("fio-") and prov["kernel"].startswith("Linux ")
    assert prov["ceph"] and osd["version"]["version"].startswith(prov["ceph"]), prov
    # the summary the run printed marks them on their rows
    rows = [ln for ln in run.output.splitlines() if ln.startswith(" | ") and "SUSPECT" in ln]
    assert [r.split("|")[1].strip() for r in rows] == ["4"], run.output[-3000:]
    assert "## suspect steps (" in run.output


def test_an_osd_killed_mid_step_ends_the_run_naming_it(tmp_path: Path) -> None:
    spec = quick_spec("memstore", iodepths=[1, 4], runtimeSeconds=6)
    spec["workloads"] = [{"preset": "randread4k"}]
    spec["target"]["local"]["workDir"] = str(tmp_path / "cluster")
    res = tmp_path / "res"
    try:
        run = Run(write_spec(tmp_path / "kill.yaml", "kill", spec), res)
        run.wait_until("a step running", lambda: current(run, "qd001"))
        osd = next(
            p for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "ceph-osd" and str(tmp_path) in " ".join(p.info["cmdline"] or [])
        )  # fmt: skip
        run.wait_until("fio running", lambda: bool(list(res.glob("steps/*/fio-client-0.eta"))))
        osd.send_signal(signal.SIGKILL)
        rc = run.finish()
    finally:
        clean_up(tmp_path / "cluster", res)
    assert rc != 0, run.output[-3000:]
    status = run.status()
    assert status["phase"] == "Failed", status
    assert f"osd.0 (pid {osd.pid}) died" in status["message"], status
    assert not (res / "steps" / "randread4k-qd001-r1" / "result.json").exists()


def test_reads_of_images_never_written_are_suspect_and_writes_are_not(tmp_path: Path) -> None:
    """Prefill off: `rbd du` finds the images empty, so the read step read extents never
    written (answered without the store) and is suspect saying so; the write step is not."""
    spec = quick_spec("memstore", iodepths=[4])
    spec["client"]["prefill"] = False
    spec["target"]["local"]["workDir"] = str(tmp_path / "cluster")
    res = tmp_path / "res"
    try:
        run = Run(write_spec(tmp_path / "unfilled.yaml", "unfilled", spec), res)
        assert run.finish() == 0, run.output[-3000:]
    finally:
        clean_up(tmp_path / "cluster", res)
    got = verdicts(res)
    print(json.dumps(got, indent=1))
    (fault,) = [r for r in reasons(got["randread4k-qd004-r1"], "fault") if "rbd du" in r["detail"]]
    assert got["randread4k-qd004-r1"]["verdict"] == "suspect"
    assert "not fully written" in fault["detail"] and " 0 %" in fault["detail"], fault
    assert not [r for r in reasons(got["seqwrite64k-qd004-r1"], "fault") if "rbd du" in r["detail"]]
    prov = json.loads((res / "run.json").read_text())["extra"]["provenance"]
    assert prov["images_not_fully_written"] and set(
        prov["images_not_fully_written"].values()) == {0.0}, prov  # fmt: skip
