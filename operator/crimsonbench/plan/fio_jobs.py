"""fio job files for the rbd engine: per step, ONE file per client, one section per job.

Why one file: fio runs the sections of one file together, but puts a stonewall between
job files given on its command line (init.c: every file after the first waits for the one
before), while its server mode (Kubernetes) parses each received file without one. One
file per client makes a step's jobs overlap in both executors, from the same text: the
step's rate is then a rate the cluster served at one moment, not single-image rates
added up.

Why rendered when a step starts: the largest spec admitted has ~10^5 jobs over its steps;
the plan keeps what a file is made of (FioPlan), the text of one step is made and dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.ini import FIO, render_ini
from crimsonbench.plan.steady_state import steady_state_options
from crimsonbench.plan.types import ClientPlan, FioJob, FioPlan, RunPlan, Step
from crimsonbench.spec.models import RECORDED_PERCENTILES, BenchmarkRunSpec

# librbd settings of every fio client ([client] section of its ceph.conf, local and pods):
# no client cache, no client-side I/O scheduler, as the reference method runs.
RBD_CLIENT_OPTIONS = {"rbd_cache": "false", "rbd_io_scheduler": "none"}

# Per-second IOPS log of every job (fio writes <job>_iops.<n>.log[.<host>]): its first
# timestamp is the job's start (log_unix_epoch) -> start skew between clients, and proof
# that the jobs of a step overlapped; its samples -> the spread of a step with one repeat.
IOPS_LOG_MSEC = 1000
PREFILL_IODEPTH = 16
# fio runs at most this many jobs (threads) in one process (fio.h: REAL_MAX_JOBS, 3.33)
FIO_MAX_JOBS = 4096

# What the planner decides; a workload's options may not set any of it (the spec's
# allow-list refuses them first; this refuses them again where the file is written).
PLANNER_OPTIONS = frozenset({
    "ioengine", "clientname", "pool", "rbdname", "direct", "invalidate", "cpus_allowed",
    "cpus_allowed_policy", "rw", "bs", "iodepth", "numjobs", "time_based", "runtime",
    "ramp_time", "percentile_list", "log_avg_msec", "log_unix_epoch", "write_iops_log",
    "steadystate", "ss_dur", "ss_ramp", "stonewall", "new_group", "wait_for",
})  # fmt: skip


def fio_plan(spec: BenchmarkRunSpec, clients: Sequence[ClientPlan], user: str) -> FioPlan:
    """user: the cephx user the clients hold a key for (PoolPlan.user)."""
    c, sweep = spec.client, spec.sweep
    rbd: dict[str, str | int] = {
        "ioengine": "rbd",
        "clientname": user,
        "pool": c.pool,
        # rbd engine I/O never goes through a page cache; direct keeps reports honest
        "direct": 1,
        "invalidate": 0,
        # all fio threads of a client share its reserved set (not one CPU per job)
        "cpus_allowed_policy": "shared",
    }
    step: dict[str, str | int] = {
        **rbd,
        "numjobs": c.num_jobs,
        "time_based": 1,
        "runtime": sweep.runtime_seconds,
        "ramp_time": sweep.ramp_seconds,
        # p50/p99/p99.9 are what the reports and the latency-target mode read
        "percentile_list": ":".join(f"{p:g}" for p in RECORDED_PERCENTILES),
        "log_avg_msec": IOPS_LOG_MSEC,
        "log_unix_epoch": 1,
    }
    if sweep.steady_state is not None:
        step.update(steady_state_options(sweep.steady_state, sweep.runtime_seconds))
    workloads: dict[str, dict[str, str | int]] = {}
    for i, w in enumerate(spec.workloads):
        owned = sorted(PLANNER_OPTIONS & set(w.options))
        if owned:
            raise InvalidSpec(
                f"spec.workloads[{i}].options",
                f"{', '.join(owned)} is decided by the planner for every run; remove it",
            )
        workloads[w.key] = {"rw": w.rw_mode, "bs": w.block_size, **dict(sorted(w.options.items()))}
    jobs = tuple(
        FioJob(image, client.name, proc)
        for client in clients
        for image in client.images
        for proc in range(c.processes_per_image)
    )
    for client in clients:
        threads = len(client.images) * c.processes_per_image * c.num_jobs
        if threads > FIO_MAX_JOBS:
            raise InvalidSpec(
                "spec.client.processesPerImage",
                f"fio client {client.name} would run {threads:,} jobs in one fio ("
                f"{len(client.images)} images x processesPerImage {c.processes_per_image} x "
                f"numJobs {c.num_jobs}); fio runs at most {FIO_MAX_JOBS:,}: use fewer, or "
                "more clients",
            )
    prefill = {**rbd, "rw": "write", "bs": c.prefill_block_size, "iodepth": PREFILL_IODEPTH,
               "numjobs": 1}  # fmt: skip
    return FioPlan(jobs, step, workloads, prefill)


def prefill_jobs(spec: BenchmarkRunSpec, clients: Sequence[ClientPlan]) -> tuple[FioJob, ...]:
    """Every image written once by the client that will drive it (on its CPUs)."""
    if not spec.client.prefill:
        return ()
    return tuple(
        FioJob(image, client.name)
        for client in clients
        for image in client.images
    )


def step_job_file(plan: RunPlan, step: Step, client: ClientPlan | str) -> str:
    """The job file of one client in one step: [global] with what every job shares, then a
    section per job of this client (its image, its IOPS log), all started together."""
    c = plan.client(client) if isinstance(client, str) else client
    fio = plan.fio
    shared: dict[str, str | int] = {
        **fio.step_options,
        **fio.workloads[step.workload],
        "iodepth": step.iodepth,
        "cpus_allowed": c.cpuset,
    }
    sections: dict[str, Mapping[str, str | int]] = {"global": shared}
    for job in fio.jobs_of(c.name):
        sections[f"{step.workload}-qd{step.iodepth}-{job.name}"] = {
            "rbdname": job.image,
            "write_iops_log": job.name,
        }
    return render_ini(sections, FIO)


def prefill_job_file(plan: RunPlan, client: ClientPlan | str) -> str:
    """Sequential write of every image of one client, all at once, so reads hit
    allocated objects."""
    c = plan.client(client) if isinstance(client, str) else client
    sections: dict[str, Mapping[str, str | int]] = {
        "global": {**plan.fio.prefill_options, "cpus_allowed": c.cpuset}
    }
    for job in plan.prefill.jobs_of(c.name):
        sections[f"prefill-{job.image}"] = {"rbdname": job.image}
    return render_ini(sections, FIO)
