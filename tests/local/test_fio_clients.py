"""Several fio clients in one local step: one real fio per client, each pinned to its own
CPUs, started together, combined into the step's row with a per-client breakdown.

A Ceph cluster with an OSD on its own CPU plus two disjoint client sets needs three CPUs;
this machine has two, so the clients drive fio's null engine here (the rbd engine path is
the single-client end-to-end test). The job files are the planner's, engine swapped."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from crimsonbench.local.fio_procs import FioGroup, thread_affinities
from crimsonbench.plan.fio_jobs import IOPS_LOG_MSEC, step_job_file
from crimsonbench.plan.types import ClientPlan, FioJob, Step
from crimsonbench.results.fio_json import combine, combine_clients, parse_fio_json
from crimsonbench.results.histogram import LatencyHistogram
from crimsonbench.results.iops_log import iops_log_job, job_start_ms, start_skew_ms
from crimsonbench.results.store import ResultStore
from crimsonbench.spec.models import ClientSpec, SweepSpec, WorkloadSpec

CPUS = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(
    shutil.which("fio") is None or len(CPUS) < 2,
    reason="needs fio (scripts/setup.sh installs it) and 2 CPUs",
)


def _job(client: ClientPlan, image: str) -> FioJob:
    text = step_job_file(
        client=ClientSpec(),
        sweep=SweepSpec(runtime_seconds=3, ramp_seconds=0),
        workload=WorkloadSpec(preset="randread4k"),
        image=image,
        iodepth=4,
        cpus=client.cpuset,
        job_name=f"randread4k-qd4-{image}-p0",
        log_name=f"{image}-p0",
    )
    null = text.replace("ioengine=rbd", "ioengine=null\nsize=64m")
    null = "\n".join(
        line
        for line in null.splitlines()
        if not line.startswith(("pool=", "rbdname=", "clientname="))
    )
    return FioJob(f"{image}-p0", image, client.name, null + "\n")


def test_one_pinned_fio_per_client_combined_with_a_breakdown(tmp_path: Path) -> None:
    clients = (
        ClientPlan("client-0", None, (CPUS[0],), ("img0", "img2")),
        ClientPlan("client-1", None, (CPUS[1],), ("img1",)),
    )
    step = Step(0, "randread4k", 4, 1, tuple(_job(c, i) for c in clients for i in c.images))
    store = ResultStore(tmp_path)
    seen: dict[str, set[int]] = {}
    with FioGroup(step, clients, store, dict(os.environ)) as fio:
        time.sleep(1.0)
        for name, pids in fio.pids_by_client().items():
            seen[name] = {c for cpus in thread_affinities(pids).values() for c in cpus}
        fio.wait(30)
    # each client's fio and its workers ran on that client's CPU only (seen from /proc)
    assert seen == {"client-0": {CPUS[0]}, "client-1": {CPUS[1]}}
    outputs = {p.client.name: parse_fio_json(p.paths.output.read_text()) for p in fio.procs}
    assert {k: len(v) for k, v in outputs.items()} == {"client-0": 2, "client-1": 1}
    total, per_client = combine_clients(outputs)
    assert per_client == {k: combine(v) for k, v in outputs.items()}
    assert total.iops == pytest.approx(sum(s.iops for s in per_client.values()))
    assert total.total_ios == sum(s.total_ios for s in per_client.values())
    assert total.jobs == 3
    # fio wrote json+: the step's percentiles are read from the merged histograms of every
    # job of both clients, exactly as fio reads its own
    assert total.percentiles_exact and all(c.percentiles_exact for c in per_client.values())
    merged = LatencyHistogram.merge(
        d.hist for jobs in outputs.values() for j in jobs for d in j.directions if d.hist
    )
    assert total.clat_p99_ms == merged.percentile(99.0) / 1e6
    assert total.clat_max_ms == merged.max_ns / 1e6
    # started together: the skew comes from each job's own IOPS log
    starts: dict[str, list[int | None]] = {}
    for path in store.iops_logs(step.id):
        job = next(j for j in step.jobs if j.name == iops_log_job(path.name))
        starts.setdefault(job.client, []).append(job_start_ms(path.read_text(), IOPS_LOG_MSEC))
    assert sorted(starts) == ["client-0", "client-1"]
    skew = start_skew_ms(starts)
    assert skew is not None and 0 <= skew < 1000, skew
