"""Local mode end to end against a real Ceph cluster: sweep, results, pinning, interrupt,
resume. Runtimes are short; the point is the plumbing, not the figures."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from fio_overlap import assert_ran_together, fio_documents, overlap

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.runner import LocalRun
from crimsonbench.progress import QuietEvents
from crimsonbench.reports.report import write_report
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.store import ResultStore
from crimsonbench.spec.cpuset import parse_cpuset
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import Phase

pytestmark = pytest.mark.ceph


def quick_spec(store: str, **sweep: Any) -> dict[str, Any]:
    osd: dict[str, Any] = {"flavor": "classic", "objectStore": store, "count": 1, "cpuSet": "0"}
    return {
        "target": {"local": {"bluestoreSize": "2Gi"}},
        "osd": osd,
        "client": {"cpuSet": "1", "images": 2, "imageSize": "64Mi"},
        "workloads": [{"preset": "randread4k"}, {"preset": "seqwrite64k"}],
        "sweep": {
            "iodepths": [1, 4],
            "runtimeSeconds": 3,
            "rampSeconds": 1,
            "earlyExit": {"enabled": False},
            **sweep,
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ceph_daemons_under(root: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "ceph-" in line and str(root) in line]


class AffinityObserver:
    """Watches, from outside the product, the CPU affinity of every thread of the OSDs and
    fio processes under a directory while a run goes on (psutil on /proc)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.seen: dict[str, set[int]] = {"ceph-osd": set(), "fio": set()}
        self.threads: dict[str, int] = {"ceph-osd": 0, "fio": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> AffinityObserver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            procs = [
                p
                for p in psutil.process_iter(["name", "cmdline"])
                if p.info.get("name") in self.seen
                and self.root in " ".join(p.info["cmdline"] or [])
            ]
            # only while a step runs (fio is up): `ceph-osd --mkfs` during bring-up is not
            # the measured OSD and is not pinned
            if any(p.info["name"] == "fio" for p in procs):
                for proc in procs:
                    try:
                        for th in proc.threads():
                            self.seen[proc.info["name"]] |= set(
                                psutil.Process(th.id).cpu_affinity()
                            )
                            self.threads[proc.info["name"]] += 1
                    except psutil.Error:
                        continue
            time.sleep(0.2)


@pytest.mark.parametrize("store", ["memstore", "bluestore"])
def test_sweep_end_to_end(tmp_path: Path, store: str) -> None:
    doc = quick_spec(store)
    doc["target"]["local"]["workDir"] = str(tmp_path / "cluster")  # the OSDs' command lines
    spec = validate_spec(doc)
    events = QuietEvents()
    with AffinityObserver(tmp_path) as observer:
        outcome = LocalRun(f"e2e-{store}", spec, tmp_path / "res", events).execute()
    assert outcome.phase == Phase.COMPLETED, outcome.message
    # seen independently of the product's own affinity.json: OSD on CPU 0, fio on CPU 1
    assert observer.threads["ceph-osd"] > 0 and observer.threads["fio"] > 0, observer.threads
    assert observer.seen == {"ceph-osd": {0}, "fio": {1}}, observer.seen
    results = {r.step_id: r for r in outcome.results}
    assert sorted(results) == [
        "randread4k-qd001-r1",
        "randread4k-qd004-r1",
        "seqwrite64k-qd001-r1",
        "seqwrite64k-qd004-r1",
    ]
    store_ = ResultStore(tmp_path / "res")
    for step_id, result in results.items():
        step_dir = store_.step_dir(step_id)
        # One fio for the one client, running a job file per image; the stored summary is
        # exactly what that fio's JSON says.
        outputs = sorted(step_dir.glob("fio-*.json"))
        assert [f.name for f in outputs] == ["fio-client-0.json"]
        raw = parse_fio_json(outputs[0].read_text())
        assert len(raw) == 2  # one job per image
        assert combine(raw) == result.fio
        assert result.clients == {"client-0": result.fio}
        assert result.start_skew_ms is None  # one client: nothing to be skewed against
        assert len(store_.iops_logs(step_id)) == 2  # fio's per-second log of each job
        assert result.fio.iops > 0 and result.fio.total_ios > 0
        assert result.resources.samples >= 2
        assert result.resources.osd_cpu > 0 and result.resources.osd_mem_mib > 10
        # Pinning as observed in /proc while fio ran: OSD on CPU 0, fio on CPU 1.
        affinity = json.loads((step_dir / "affinity.json").read_text())
        assert affinity["osd.0"] and affinity["fio/client-0"]
        assert {c for cpus in affinity["osd.0"].values() for c in parse_cpuset(cpus)} == {0}
        assert {c for cpus in affinity["fio/client-0"].values() for c in parse_cpuset(cpus)} == {1}
    reports = write_report(tmp_path / "res")
    names = {p.name for p in reports}
    assert {"summary.md", "results.csv", "results.json"} <= names
    assert any(n.endswith(".png") for n in names)
    status = json.loads((tmp_path / "res" / "status.json").read_text())
    assert status["phase"] == "Completed" and status["stepsDone"] == 4
    # run.json carries the spec, so reports made later from files alone know the workloads
    run_json = json.loads((tmp_path / "res" / "run.json").read_text())
    assert run_json["extra"]["spec"] == spec.model_dump(mode="json", by_alias=True)
    assert ceph_daemons_under(tmp_path) == []


def test_every_job_of_a_step_runs_at_once(tmp_path: Path) -> None:
    """2 images x 2 processes: the four jobs of a step run together, as fio's own IOPS
    logs and JSON say (read without the product's parser), and the step's rate is fio's
    I/Os over the seconds they all ran. Before one job file per client, fio ran the files
    given on its command line one after another (starts 18.8 s apart for 5 s jobs) and the
    step reported the sum of four single-image rates."""
    doc = quick_spec("memstore", iodepths=[4], runtimeSeconds=5)
    doc["client"].update(images=2, processesPerImage=2, imageSize="128Mi")
    doc["workloads"] = [{"preset": "randread4k"}, {"preset": "seqwrite64k"}]
    outcome = LocalRun("overlap", validate_spec(doc), tmp_path / "res", QuietEvents()).execute()
    assert outcome.phase == Phase.COMPLETED, outcome.message
    assert len(outcome.results) == 2
    for result in outcome.results:
        step_dir = ResultStore(tmp_path / "res").step_dir(result.step_id)
        docs = fio_documents(p.read_text() for p in step_dir.glob("fio-*.json"))
        logs = {p.name: p.read_text() for p in step_dir.glob("*_iops.*.log*")}
        o = overlap(docs, logs)
        assert len(o.runtimes_ms) == 4, o
        assert_ran_together(o, runtime_s=5, step_rate=result.fio.iops)
        (job_file,) = step_dir.glob("*.fio")  # one file for the one client, a section a job
        assert job_file.read_text().count("rbdname=") == 4
        # fio's per-second series exists for a single-repeat step (the gate's samples)
        assert len(result.extra["iops_per_second"]) >= 4, result.extra


def test_interrupt_keeps_finished_steps_and_resume_runs_only_the_rest(tmp_path: Path) -> None:
    spec_file = tmp_path / "run.yaml"
    spec = quick_spec("memstore", runtimeSeconds=4)
    spec["target"]["local"]["workDir"] = str(tmp_path / "cluster")
    spec_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "bench.crimson.ceph.io/v1alpha1",
                "kind": "BenchmarkRun",
                "metadata": {"name": "interrupt"},
                "spec": spec,
            }
        )
    )
    res = tmp_path / "res"
    cmd = [sys.executable, "-m", "crimsonbench.cli", "run", str(spec_file), "--results", str(res)]
    port = free_port()
    proc = subprocess.Popen(
        [*cmd, "--metrics-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    first = res / "steps" / "randread4k-qd001-r1" / "result.json"
    deadline = time.monotonic() + 240
    while not first.exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "first step never finished"
        time.sleep(0.5)
    # The metrics endpoint serves the finished step while the run goes on.
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    text = metrics.decode()
    stored = ResultStore(res).completed_steps()["randread4k-qd001-r1"]
    iops_line = next(
        line
        for line in text.splitlines()
        if line.startswith("crimsonbench_step_iops{") and 'step="randread4k-qd001-r1"' in line
    )
    assert 'workload="randread4k"' in iops_line and 'iodepth="1"' in iops_line
    assert 'backend="memstore"' in iops_line and 'flavor="classic"' in iops_line
    assert float(iops_line.rsplit(" ", 1)[1]) == pytest.approx(stored.fio.iops)
    current = [
        line
        for line in text.splitlines()
        if line.startswith("crimsonbench_run_phase{") and line.endswith(" 1.0")
    ]
    assert len(current) == 1 and 'phase="Running"' in current[0]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    status = json.loads((res / "status.json").read_text())
    assert status["phase"] == "Failed" and "interrupted" in status["message"]
    done_before = set(ResultStore(res).completed_steps())
    assert "randread4k-qd001-r1" in done_before and len(done_before) < 4
    assert ceph_daemons_under(tmp_path) == [], "SIGTERM left Ceph daemons running"
    assert not (tmp_path / "cluster").exists() or not any((tmp_path / "cluster").iterdir())
    mtimes = {s: (res / "steps" / s / "result.json").stat().st_mtime_ns for s in done_before}

    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert set(ResultStore(res).completed_steps()) == {
        "randread4k-qd001-r1",
        "randread4k-qd004-r1",
        "seqwrite64k-qd001-r1",
        "seqwrite64k-qd004-r1",
    }
    for step, mtime in mtimes.items():  # finished steps were not run again
        assert (res / "steps" / step / "result.json").stat().st_mtime_ns == mtime


def test_early_exit_skips_the_rest_of_a_workload(tmp_path: Path) -> None:
    # A latency limit every real step exceeds: the sweep must stop after its first step.
    spec = validate_spec(
        quick_spec(
            "memstore",
            iodepths=[1, 2, 4],
            earlyExit={"enabled": True, "meanLatencyMsLimit": 0.000001},
        )
    )
    events = QuietEvents()
    outcome = LocalRun("early", spec, tmp_path / "res", events).execute()
    assert outcome.phase == Phase.COMPLETED, outcome.message
    assert [r.step_id for r in outcome.results] == [
        "randread4k-qd001-r1",
        "seqwrite64k-qd001-r1",
    ]
    assert outcome.skipped == [
        "randread4k-qd002-r1",
        "randread4k-qd004-r1",
        "seqwrite64k-qd002-r1",
        "seqwrite64k-qd004-r1",
    ]
    notes = dict(events.notes)
    assert "stops here" in notes["randread4k-qd001-r1"]


def test_crimson_spec_fails_fast_without_a_crimson_binary(tmp_path: Path) -> None:
    spec = validate_spec(
        {
            **quick_spec("memstore"),
            "osd": {
                "flavor": "crimson",
                "objectStore": "cyanstore",
                "cpuSet": "0",
                "optionNaming": "legacy",
            },
        }
    )
    if any(
        os.access(os.path.join(d, b), os.X_OK)
        for d in os.environ["PATH"].split(":")
        for b in ("crimson-osd", "ceph-osd-crimson")
    ):
        pytest.skip("a crimson binary is installed here; this test covers its absence")
    outcome = LocalRun("crimson", spec, tmp_path / "res", QuietEvents()).execute()
    assert outcome.phase == Phase.FAILED
    assert "crimson" in outcome.message and "Debian" in outcome.message
    assert ceph_daemons_under(tmp_path) == []


def test_osd_crash_mid_step_fails_the_run_and_keeps_finished_steps(tmp_path: Path) -> None:
    spec = quick_spec("memstore", runtimeSeconds=6)
    spec["target"]["local"]["workDir"] = str(tmp_path / "cluster")
    res = tmp_path / "res"
    killed: list[int] = []

    def kill_osd_during_second_step() -> None:
        second = res / "steps" / "randread4k-qd004-r1"
        deadline = time.monotonic() + 240
        while not any(second.glob("fio-*.json")) and time.monotonic() < deadline:
            time.sleep(0.2)  # fio creates its output file when it starts
        time.sleep(2)
        for p in psutil.process_iter(["name", "cmdline"]):
            if p.info["name"] == "ceph-osd" and str(tmp_path) in " ".join(p.info["cmdline"]):
                p.kill()
                killed.append(p.pid)

    killer = threading.Thread(target=kill_osd_during_second_step, daemon=True)
    killer.start()
    outcome = LocalRun("crash", validate_spec(spec), res, QuietEvents()).execute()
    killer.join(timeout=10)
    assert killed, "the OSD was never found to kill"
    assert outcome.phase == Phase.FAILED
    assert "randread4k-qd004-r1" in outcome.message and "osd.0" in outcome.message
    assert [r.step_id for r in outcome.results] == ["randread4k-qd001-r1"]
    status = json.loads((res / "status.json").read_text())
    assert status["phase"] == "Failed" and "osd.0" in status["message"]
    assert ceph_daemons_under(tmp_path) == []
    # this run's fio only (its job files are under tmp_path): other fio may run on the machine
    fio_left = [
        p.pid
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "fio" and str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert fio_left == [], "fio processes survived the failed step"


def test_a_results_directory_in_use_is_refused(tmp_path: Path) -> None:
    """Two runs writing one results directory would mix their steps: the second is refused
    before it starts anything (no cluster needed to show it)."""
    import fcntl

    res = tmp_path / "res"
    res.mkdir()
    with (res / ".lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242")
        held.flush()
        run = LocalRun(
            "busy", validate_spec(quick_spec("memstore")), res, QuietEvents(), fresh=True
        )
        with pytest.raises(InvalidSpec) as info:
            run.execute()
    assert info.value.field == "--results" and "pid 4242" in info.value.message
    assert (res / ".lock").exists() and not (res / "spec.json").exists()


def test_knee_search_with_steady_state_runs_fewer_steps(tmp_path: Path) -> None:
    """A knee search on a real memstore OSD: only the iodepths it needs run; fio ends a
    step at steady state (recorded per step); the rest are skipped, named in the status."""
    spec = quick_spec("memstore", iodepths=[1, 2, 4, 8, 16, 32], runtimeSeconds=12)
    spec["workloads"] = [{"preset": "randread4k"}]
    spec["sweep"]["kneeSearch"] = {"latencyMs": 50, "metric": "mean", "minGainPct": 5}
    spec["sweep"]["steadyState"] = {"criterion": "iops", "limit": 50, "durationSeconds": 4,
                                    "rampSeconds": 1}  # fmt: skip
    outcome = LocalRun("knee", validate_spec(spec), tmp_path / "res", QuietEvents()).execute()
    assert outcome.phase == Phase.COMPLETED, outcome.message
    ran = sorted(r.iodepth for r in outcome.results)
    assert 2 <= len(ran) < 6, ran
    status = json.loads((tmp_path / "res" / "status.json").read_text())
    assert sorted(status["skipped"]) == sorted(
        s
        for s in (f"randread4k-qd{qd:03d}-r1" for qd in [1, 2, 4, 8, 16, 32])
        if int(s.split("-qd")[1][:3]) not in ran
    )
    for r in outcome.results:
        ss = r.extra["steady_state"]
        assert ss["setting"].startswith("iops:50") and ss["jobs"] == 2
        assert ss["longest_s"] <= 12.5  # steady state ends a step early, never late
    assert ceph_daemons_under(tmp_path) == []
