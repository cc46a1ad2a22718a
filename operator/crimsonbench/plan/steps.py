"""Expand the sweep into steps: workloads x repeats x iodepths, in run order."""

from __future__ import annotations

from crimsonbench.plan.fio_jobs import prefill_job_file, step_job_file
from crimsonbench.plan.types import FioJob, Step
from crimsonbench.spec.models import BenchmarkRunSpec


def image_names(spec: BenchmarkRunSpec) -> tuple[str, ...]:
    return tuple(f"{spec.client.image_prefix}{i}" for i in range(spec.client.images))


def expand_steps(spec: BenchmarkRunSpec, client_cpus: str) -> tuple[Step, ...]:
    """Each repeat sweeps the whole iodepth list before the next starts, so a slow
    drift of the machine shows as a difference between repeats, not as a bent curve."""
    steps: list[Step] = []
    images = image_names(spec)
    for workload in spec.workloads:
        for repeat in range(1, spec.sweep.repeats + 1):
            for iodepth in spec.sweep.iodepths:
                jobs = tuple(
                    FioJob(
                        name=f"{image}-p{proc}",
                        image=image,
                        job_file=step_job_file(
                            client=spec.client,
                            sweep=spec.sweep,
                            workload=workload,
                            image=image,
                            iodepth=iodepth,
                            cpus=client_cpus,
                            job_name=f"{workload.key}-qd{iodepth}-{image}-p{proc}",
                        ),
                    )
                    for image in images
                    for proc in range(spec.client.processes_per_image)
                )
                steps.append(Step(len(steps), workload.key, iodepth, repeat, jobs))
    return tuple(steps)


def prefill_jobs(spec: BenchmarkRunSpec, client_cpus: str) -> tuple[FioJob, ...]:
    if not spec.client.prefill:
        return ()
    return tuple(
        FioJob(
            f"prefill-{image}",
            image,
            prefill_job_file(client=spec.client, image=image, cpus=client_cpus),
        )
        for image in image_names(spec)
    )
