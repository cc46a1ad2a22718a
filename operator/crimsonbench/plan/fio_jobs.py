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
from crimsonbench.plan.types import BarrierAddress, ClientPlan, FioJob, FioPlan, RunPlan, Step
from crimsonbench.spec.models import RECORDED_PERCENTILES, BenchmarkRunSpec, size_bytes

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

# A step with several fio processes (one per client) must start them together. fio starts
# one process's jobs at once (its startup semaphore), but only after every job's setup
# (stock fio: a librbd connect and image open per job, one after the other in its main
# thread; ours, images/fio/ 0002: all at once, the jobs still let go together), and
# startdelay counts from the end of that: setups that take different times would start
# the clients apart (seen: 1.4 s between two kind nodes on a
# loaded machine). So every job of such a step waits, in exec_prerun (the last thing fio
# does before a job's clock starts, after its setup), at a rendezvous
# (manifests/start_barrier.py) until every job of every client is there; the last one to
# arrive starts them all. No clock is compared across nodes. The cap bounds the wait when
# a client never comes (its setup failed): the others start then, and the step says so.
BARRIER_CAP_BASE_S = 30.0
BARRIER_CAP_PER_JOB_S = 0.5  # librbd connect + open, one job: ~0.055 s measured locally
# expected setup, for the step's expected end (not a wait: the rendezvous ends it)
SETUP_BASE_S = 1.0
SETUP_PER_JOB_S = 0.06
# python3 is there wherever fio with the rbd engine is (ceph-common needs it). The job
# connects, sends the step's token and waits for the one byte that lets it go; exit 1 (the
# job fails, fio says so) if the rendezvous cannot be reached. The value holds no `;`/`#`
# (fio ends a value there) and no `$`/`[`/`]` (ini.FIO refuses them).
_MEET_ALL = (
    "python3 -c \"exit((lambda c: c.sendall(b'{token}') or c.recv(1) != b'g')("
    "__import__('socket').create_connection(('{host}', {port}), {timeout:.0f})))\""
)


# Options that set the byte range a job touches: where a workload sets one, the planner
# leaves size= to it (a planned size= beside a workload's offset= would reach past the
# image's end).
RANGE_OPTIONS = frozenset({"size", "offset"})


# What the planner decides; a workload's options may not set any of it (the spec's
# allow-list refuses them first; this refuses them again where the file is written).
PLANNER_OPTIONS = frozenset({
    "ioengine", "clientname", "pool", "rbdname", "direct", "invalidate", "cpus_allowed",
    "cpus_allowed_policy", "rw", "bs", "iodepth", "numjobs", "time_based", "runtime",
    "ramp_time", "percentile_list", "log_avg_msec", "log_unix_epoch", "write_iops_log",
    "steadystate", "ss_dur", "ss_ramp", "stonewall", "new_group", "wait_for", "exec_prerun",
})  # fmt: skip


def client_threads(client: ClientPlan, processes_per_image: int, num_jobs: int) -> int:
    """The fio jobs (threads) one client runs in a step: a section per image and process,
    each numjobs times."""
    return len(client.images) * processes_per_image * num_jobs


def start_barrier(
    clients: Sequence[ClientPlan], processes_per_image: int, num_jobs: int
) -> tuple[int, float, float]:
    """(jobs that meet at the rendezvous, the most any waits for the others, the expected
    setup before they start): (0, 0, setup) when one fio process (one client) runs the
    step, which starts its own jobs together."""
    jobs = [client_threads(c, processes_per_image, num_jobs) for c in clients if c.images]
    setup = round(SETUP_BASE_S + SETUP_PER_JOB_S * max(jobs, default=0), 3)
    if len(jobs) < 2:
        return 0, 0.0, setup
    return sum(jobs), round(BARRIER_CAP_BASE_S + BARRIER_CAP_PER_JOB_S * max(jobs), 3), setup


def fio_plan(
    spec: BenchmarkRunSpec, clients: Sequence[ClientPlan], user: str, pool: str
) -> FioPlan:
    """user: the cephx user the clients hold a key for (PoolPlan.user); pool: the pool of
    the images (PoolPlan.name)."""
    c, sweep = spec.client, spec.sweep
    image_bytes = size_bytes(c.image_size)
    rbd: dict[str, str | int] = {
        "ioengine": "rbd",
        "clientname": user,
        "pool": pool,
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
    workloads = _workload_options(spec, image_bytes)
    jobs = tuple(
        FioJob(image, client.name, proc)
        for client in clients
        for image in client.images
        for proc in range(c.processes_per_image)
    )
    for client in clients:
        threads = client_threads(client, c.processes_per_image, c.num_jobs)
        if threads > FIO_MAX_JOBS:
            raise InvalidSpec(
                "spec.client.processesPerImage",
                f"fio client {client.name} would run {threads:,} jobs in one fio ("
                f"{len(client.images)} images x processesPerImage {c.processes_per_image} x "
                f"numJobs {c.num_jobs}); fio runs at most {FIO_MAX_JOBS:,}: use fewer, or "
                "more clients",
            )
    prefill = {**rbd, "rw": "write", "bs": c.prefill_block_size, "iodepth": PREFILL_IODEPTH,
               "numjobs": 1, "size": image_bytes}  # fmt: skip
    return FioPlan(jobs, step, workloads, prefill)


def _workload_options(spec: BenchmarkRunSpec, image_bytes: int) -> dict[str, dict[str, str | int]]:
    """workload key -> its own options: rw, bs, the image's size= and the spec's options."""
    workloads: dict[str, dict[str, str | int]] = {}
    for i, w in enumerate(spec.workloads):
        owned = sorted(PLANNER_OPTIONS & set(w.options))
        if owned:
            raise InvalidSpec(
                f"spec.workloads[{i}].options",
                f"{', '.join(owned)} is decided by the planner for every run; remove it",
            )
        # size= is the image's own: with it our fio (images/fio/, patch 0002) connects
        # every job at once instead of one after another before any starts. Stock fio
        # reads the same range either way.
        size = {} if RANGE_OPTIONS & set(w.options) else {"size": image_bytes}
        workloads[w.key] = {"rw": w.rw_mode, "bs": w.block_size, **size,
                            **dict(sorted(w.options.items()))}  # fmt: skip
    return workloads


def prefill_jobs(spec: BenchmarkRunSpec, clients: Sequence[ClientPlan]) -> tuple[FioJob, ...]:
    """Every image written once by the client that will drive it (on its CPUs)."""
    if not spec.client.prefill:
        return ()
    return tuple(FioJob(image, client.name) for client in clients for image in client.images)


def step_job_files(plan: RunPlan, step: Step, meet: BarrierAddress | None = None) -> dict[str, str]:
    """client name -> its job file for one step, for every client with jobs.
    meet: where the step's jobs meet before they start (a step with a barrier needs one)."""
    return {
        c.name: step_job_file(plan, step, c, meet) for c in plan.clients if plan.fio.jobs_of(c.name)
    }


def step_job_file(
    plan: RunPlan, step: Step, client: ClientPlan | str, meet: BarrierAddress | None = None
) -> str:
    """The job file of one client in one step: [global] with what every job shares, then a
    section per job of this client (its image, its IOPS log), all started together; with
    a start barrier (several clients), every job first meets the others at `meet`."""
    c = plan.client(client) if isinstance(client, str) else client
    if plan.timing.barrier_jobs and meet is None:
        raise ValueError(f"step {step.id} runs several fio processes: it needs a rendezvous")
    fio = plan.fio
    shared: dict[str, str | int] = {
        **fio.step_options,
        **fio.workloads[step.workload],
        "iodepth": step.iodepth,
        "cpus_allowed": c.cpuset,
    }
    if plan.timing.barrier_jobs and meet is not None:
        shared["exec_prerun"] = _MEET_ALL.format(
            token=meet.token, host=meet.host, port=meet.port,
            timeout=plan.timing.start_barrier_cap_s + 30,
        )  # fmt: skip
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
