"""Our fio connects every job at once; stock fio 3.33 connects them one after another
before any starts (images/fio/, patch 0002; bench/bench_fio_start.py measures the cost).

Seen from outside, in /proc: fio makes every job's thread before any job goes on (its
startup semaphore), and each librados connection starts its own messenger threads
(`msgr-worker-N`). Stock fio's main thread connects job after job while no job thread
exists yet; ours connects only in the jobs' own threads, so no connection is seen before
every job thread is. The step is the planner's: 8 images x 4 processes, 32 jobs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fio_overlap import fio_documents, overlap

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.fio_program import host_fio
from crimsonbench.local.topology_probe import local_topology
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.fio_jobs import step_job_file
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import BenchmarkRunSpec, validate_spec

pytestmark = pytest.mark.ceph

STOCK = shutil.which("fio", path="/usr/bin")
CPUS = sorted(os.sched_getaffinity(0))
RUNTIME_S = 3
JOBS = 32


def _plan() -> tuple[BenchmarkRunSpec, RunPlan]:
    spec = validate_spec({
        "target": {"local": {}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "cpuSet": str(CPUS[0])},
        "client": {"cpuSet": str(CPUS[-1]), "images": 8, "processesPerImage": 4,
                   "imageSize": "16Mi"},
        "workloads": [{"preset": "randwrite4k"}],
        "sweep": {"iodepths": [2], "runtimeSeconds": RUNTIME_S, "rampSeconds": 0},
    })  # fmt: skip
    return spec, build_plan("start", spec, local_topology())


def _threads(pid: int) -> tuple[int, int]:
    """(threads still named fio: its main thread, helpers and jobs; librados messenger
    threads), read from /proc now."""
    jobs = messengers = 0
    for comm in Path(f"/proc/{pid}/task").glob("*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue  # the thread ended
        jobs += name == "fio"
        messengers += name.startswith("msgr-worker")
    return jobs, messengers


def _before_the_jobs(samples: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The samples taken before fio had made every job's thread."""
    made = next((i for i, (jobs, _) in enumerate(samples) if jobs >= JOBS), len(samples))
    return samples[:made]


def _run_watched(fio: str, job_file: Path, env: dict[str, str]) -> list[tuple[int, int]]:
    """Run fio on the job file; its thread counts, sampled every few ms until it ends."""
    seen: list[tuple[int, int]] = []
    out = job_file.with_suffix(".json")
    argv = [fio, "--output-format=json", f"--output={out}", str(job_file)]
    with subprocess.Popen(argv, env=env, cwd=job_file.parent, stderr=subprocess.PIPE) as proc:
        while proc.poll() is None:
            try:
                seen.append(_threads(proc.pid))
            except FileNotFoundError:
                break
            time.sleep(0.003)
        err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.returncode == 0, f"{fio} failed: {err[-2000:]}"
    return seen


@pytest.mark.skipif(STOCK is None, reason="needs Debian's fio (/usr/bin/fio): setup.sh")
def test_ours_connects_every_job_in_its_own_thread_and_stock_does_not(tmp_path: Path) -> None:
    ours = host_fio()
    assert ours != "fio" and os.path.realpath(ours) != os.path.realpath(STOCK or ""), (
        f"local runs would start {ours}, not our fio: scripts/build-fio.sh (setup.sh) did "
        "not put it beside this Python"
    )
    spec, plan = _plan()
    step = plan.steps[0]
    local = spec.target.local
    assert local is not None
    with LocalCluster(local, spec.osd, plan.local_host.cpu.osds, plan.ceph) as cluster:
        cluster.create_pool("rbd", 8, plan.client_options)
        cluster.create_images(plan.images, plan.pool.image_size_bytes)
        env = {**os.environ, **cluster.client_conf().env}
        text = step_job_file(plan, step, plan.clients[0])
        assert text.count("rbdname=") == JOBS and f"size={16 * 2**20}" in text
        runs = {}
        for name, fio in (("stock", STOCK or ""), ("ours", ours)):
            work = tmp_path / name
            work.mkdir()
            (work / "step.fio").write_text(text)
            runs[name] = _run_watched(fio, work / "step.fio", env)

    # stock: connections before the job threads exist (its main thread's serial setup)
    stock = _before_the_jobs(runs["stock"])
    assert any(m for _, m in stock), f"stock fio never seen connecting first: {runs['stock']}"
    # ours: none until every job thread exists; then every job's
    ours_early = _before_the_jobs(runs["ours"])
    assert ours_early and not any(m for _, m in ours_early), (
        f"ours connected before every job thread existed: {runs['ours']}"
    )
    assert max(m for _, m in runs["ours"]) >= JOBS, f"not every job connected: {runs['ours']}"
    # and ours' jobs still ran together, from fio's own JSON and IOPS logs
    work = tmp_path / "ours"
    docs = fio_documents([(work / "step.json").read_text()])
    logs = {p.name: p.read_text() for p in work.glob("*_iops.*.log")}
    assert [j["error"] for j in docs[0]["jobs"]] == [0] * JOBS
    o = overlap(docs, logs)
    assert len(o.runtimes_ms) == JOBS, o
    assert o.start_spread_ms <= 1000, f"ours started its jobs {o.start_spread_ms} ms apart: {o}"
    assert o.common_s >= RUNTIME_S - 1, f"ours' jobs ran together only {o.common_s} s: {o}"
