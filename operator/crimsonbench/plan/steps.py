"""Expand the sweep into steps: workloads x repeats x iodepths, in run order, each with
one fio job per image and process, run by the client that owns the image."""

from __future__ import annotations

from collections.abc import Sequence

from crimsonbench.plan.fio_jobs import image_job, prefill_job_file, step_global
from crimsonbench.plan.types import ClientPlan, FioJob, Step
from crimsonbench.spec.models import BenchmarkRunSpec


def expand_steps(spec: BenchmarkRunSpec, clients: Sequence[ClientPlan]) -> tuple[Step, ...]:
    """Each repeat sweeps the whole iodepth list before the next starts, so a slow
    drift of the machine shows as a difference between repeats, not as a bent curve."""
    steps: list[Step] = []
    cpusets = {c.name: c.cpuset for c in clients}
    for workload in spec.workloads:
        for repeat in range(1, spec.sweep.repeats + 1):
            for iodepth in spec.sweep.iodepths:
                jobs: list[FioJob] = []
                for client in clients:
                    shared = step_global(
                        client=spec.client,
                        sweep=spec.sweep,
                        workload=workload,
                        iodepth=iodepth,
                        cpus=cpusets[client.name],
                    )
                    for image in client.images:
                        for proc in range(spec.client.processes_per_image):
                            name = f"{image}-p{proc}"
                            text = image_job(
                                shared,
                                image=image,
                                job_name=f"{workload.key}-qd{iodepth}-{name}",
                                log_name=name,
                            )
                            jobs.append(FioJob(name, image, client.name, text))
                steps.append(Step(len(steps), workload.key, iodepth, repeat, tuple(jobs)))
    return tuple(steps)


def prefill_jobs(spec: BenchmarkRunSpec, clients: Sequence[ClientPlan]) -> tuple[FioJob, ...]:
    """Every image written once by the client that will drive it (on its CPUs)."""
    if not spec.client.prefill:
        return ()
    return tuple(
        FioJob(
            f"prefill-{image}",
            image,
            client.name,
            prefill_job_file(client=spec.client, image=image, cpus=client.cpuset),
        )
        for client in clients
        for image in client.images
    )
