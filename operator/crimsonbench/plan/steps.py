"""Expand the sweep into steps: workloads x repeats x iodepths, in run order. Every step
runs the plan's fio jobs (FioPlan.jobs: one per image and process, on the client that
owns the image)."""

from __future__ import annotations

from crimsonbench.plan.types import Step
from crimsonbench.spec.models import BenchmarkRunSpec


def expand_steps(spec: BenchmarkRunSpec) -> tuple[Step, ...]:
    """Each repeat sweeps the whole iodepth list before the next starts, so a slow
    drift of the machine shows as a difference between repeats, not as a bent curve."""
    steps: list[Step] = []
    for workload in spec.workloads:
        for repeat in range(1, spec.sweep.repeats + 1):
            for iodepth in spec.sweep.iodepths:
                steps.append(Step(len(steps), workload.key, iodepth, repeat))
    return tuple(steps)
