"""fio job files for the rbd engine: one process per image (and per extra process)."""

from __future__ import annotations

from crimsonbench.plan.ini import render_ini
from crimsonbench.plan.steady_state import steady_state_options
from crimsonbench.spec.models import RECORDED_PERCENTILES, ClientSpec, SweepSpec, WorkloadSpec

# Options the planner owns. Custom workloads cannot override them (see FIO_OPTION_ALLOWLIST)
# so every run measures the same thing: the rbd engine, unbuffered, for a fixed time.

# librbd settings of every fio client ([client] section of its ceph.conf, local and pods):
# no client cache, no client-side I/O scheduler, as the reference method runs.
RBD_CLIENT_OPTIONS = {"rbd_cache": "false", "rbd_io_scheduler": "none"}

# Per-second IOPS log of every job (fio writes <job>_iops.<n>.log[.<host>]): its first
# timestamp is the job's start (log_unix_epoch) -> start skew between clients; its
# samples -> the spread of a step with one repeat.
IOPS_LOG_MSEC = 1000


def rbd_global(client: ClientSpec, cpus: str) -> dict[str, str | int]:
    return {
        "ioengine": "rbd",
        "clientname": client.user,
        "pool": client.pool,
        # rbd engine I/O never goes through a page cache; direct keeps reports honest
        "direct": 1,
        "invalidate": 0,
        "cpus_allowed": cpus,
        # all fio threads of this process share the reserved set (not one CPU per job)
        "cpus_allowed_policy": "shared",
    }


def step_global(
    *, client: ClientSpec, sweep: SweepSpec, workload: WorkloadSpec, iodepth: int, cpus: str
) -> str:
    """The [global] section every job of one step and client shares. Rendered once per
    step and client, not per image: the largest run has ~60,000 job files."""
    opts: dict[str, str | int] = rbd_global(client, cpus)
    opts.update(
        {
            "rw": workload.rw_mode,
            "bs": workload.block_size,
            "iodepth": iodepth,
            "numjobs": client.num_jobs,
            "time_based": 1,
            "runtime": sweep.runtime_seconds,
            "ramp_time": sweep.ramp_seconds,
            # p50/p99/p99.9 are what the reports and the latency-target mode read
            "percentile_list": ":".join(f"{p:g}" for p in RECORDED_PERCENTILES),
            "log_avg_msec": IOPS_LOG_MSEC,
            "log_unix_epoch": 1,
        }
    )
    if sweep.steady_state is not None:
        opts.update(steady_state_options(sweep.steady_state, sweep.runtime_seconds))
    opts.update(sorted(workload.options.items()))
    return render_ini({"global": opts})


def image_job(global_section: str, *, image: str, job_name: str, log_name: str) -> str:
    """One job file: the shared [global] plus this job's image and IOPS log name
    (<log_name>_iops.N.log)."""
    return render_ini(
        {job_name: {"rbdname": image, "write_iops_log": log_name}}, prefix=global_section
    )


def step_job_file(
    *,
    client: ClientSpec,
    sweep: SweepSpec,
    workload: WorkloadSpec,
    image: str,
    iodepth: int,
    cpus: str,
    job_name: str,
    log_name: str,
) -> str:
    """Job file for one fio job of one sweep step; its IOPS log is <log_name>_iops.N.log."""
    shared = step_global(client=client, sweep=sweep, workload=workload, iodepth=iodepth, cpus=cpus)
    return image_job(shared, image=image, job_name=job_name, log_name=log_name)


def prefill_job_file(*, client: ClientSpec, image: str, cpus: str) -> str:
    """Sequential write of the whole image, so reads hit allocated objects."""
    opts = rbd_global(client, cpus)
    opts.update({"rw": "write", "bs": client.prefill_block_size, "iodepth": 16, "numjobs": 1})
    return render_ini({"global": opts, f"prefill-{image}": {"rbdname": image}})
