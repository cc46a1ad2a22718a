"""Our fio connects every job at once; stock fio 3.33 connects them one after another
before any starts (images/fio/, patch 0002; bench/bench_fio_start.py measures the cost).

Seen from outside, in /proc: each librados connection starts its own messenger threads
(`msgr-worker-N`). Stock fio's main thread connects job after job before it makes any job
thread: messenger threads while fio has no thread but its main one and a helper. Ours
connects each job in a thread of its own (`rbd-connect`), all at once: several of them
seen alive together. The step is the planner's: 8 images x 4 processes, 32 jobs.
(A first version of this test asserted "no connection before every job thread exists";
ours starts the connections in setup(), before fio makes the job threads, so it held only
while the machine was fast enough, and a cold run's prefetch made it fail.)
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


def _threads(pid: int) -> tuple[int, int, int]:
    """(threads named fio: its main thread, helpers and jobs; our rbd-connect threads;
    librados messenger threads), read from /proc now."""
    fio = connecting = messengers = 0
    for comm in Path(f"/proc/{pid}/task").glob("*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue  # the thread ended
        fio += name == "fio"
        connecting += name == "rbd-connect"
        messengers += name.startswith("msgr-worker")
    return fio, connecting, messengers


def _run_watched(fio: str, job_file: Path, env: dict[str, str]) -> list[tuple[int, int, int]]:
    """Run fio on the job file; its thread counts, sampled every few ms until it ends."""
    seen: list[tuple[int, int, int]] = []
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
def test_ours_connects_every_job_at_once_and_stock_one_after_another(tmp_path: Path) -> None:
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

    # stock: connections made while it has no job threads yet, by its main thread (no
    # thread of its own for them)
    stock = runs["stock"]
    assert any(m and f < JOBS for f, _, m in stock), f"stock never seen connecting first: {stock}"
    assert not any(c for _, c, _ in stock), stock
    # ours: each connection in a thread of its own, several alive at once
    seen = runs["ours"]
    assert max(c for _, c, _ in seen) >= 2, f"ours never seen connecting jobs at once: {seen}"
    assert max(m for _, _, m in seen) >= JOBS, f"not every job connected: {seen}"
    # and ours' jobs still ran together, from fio's own JSON and IOPS logs
    work = tmp_path / "ours"
    docs = fio_documents([(work / "step.json").read_text()])
    logs = {p.name: p.read_text() for p in work.glob("*_iops.*.log")}
    assert [j["error"] for j in docs[0]["jobs"]] == [0] * JOBS
    o = overlap(docs, logs)
    assert len(o.runtimes_ms) == JOBS, o
    assert o.start_spread_ms <= 1000, f"ours started its jobs {o.start_spread_ms} ms apart: {o}"
    assert o.common_s >= RUNTIME_S - 1, f"ours' jobs ran together only {o.common_s} s: {o}"
