"""Run one sweep step locally: fio pinned to the client set, resources sampled, parsed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from crimsonbench.errors import ExecutionError
from crimsonbench.local.fio_procs import FioGroup, thread_affinities
from crimsonbench.local.sampler import ResourceSampler
from crimsonbench.plan.types import CpuPlan, Step
from crimsonbench.results.fio_eta import total_live_iops
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.resources import summarize_samples
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import StepResult
from crimsonbench.spec.cpuset import format_cpuset

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepContext:
    cpu: CpuPlan
    env: dict[str, str]  # CEPH_CONF etc. for fio's rbd engine
    osd_pids: Callable[[], dict[int, int]]  # osd id -> pid, live
    health_check: Callable[[], None]  # raises ExecutionError if an OSD died
    sample_interval: float
    deadline_s: float  # runtime + ramp + grace
    live: Callable[[float], None] = lambda iops: None  # live IOPS readout for the display


def _affinity_violations(
    observed: dict[int, list[int]], allowed: frozenset[int], forbidden: frozenset[int]
) -> list[str]:
    bad = []
    for tid, cpus in sorted(observed.items()):
        if not set(cpus) <= allowed or set(cpus) & forbidden:
            bad.append(f"tid {tid} on {format_cpuset(cpus)}")
    return bad


def check_affinity(
    ctx: StepContext, fio_pids: Iterable[int]
) -> tuple[dict[str, object], list[str]]:
    """The real affinity of every OSD and fio thread, and any overlap or leak seen."""
    client = frozenset(ctx.cpu.client)
    osd_all = ctx.cpu.osd_cpus()
    report: dict[str, object] = {}
    problems: list[str] = []
    for osd in ctx.cpu.osds:
        pid = ctx.osd_pids().get(osd.osd_id)
        if pid is None:
            continue
        seen = thread_affinities([pid])
        report[f"osd.{osd.osd_id}"] = {str(t): format_cpuset(c) for t, c in seen.items()}
        problems += [
            f"osd.{osd.osd_id} " + b for b in _affinity_violations(seen, osd.all_cpus, client)
        ]
    seen_fio = thread_affinities(list(fio_pids))
    report["fio"] = {str(t): format_cpuset(c) for t, c in seen_fio.items()}
    problems += ["fio " + b for b in _affinity_violations(seen_fio, client, osd_all)]
    return report, problems


def run_step(step: Step, store: ResultStore, ctx: StepContext) -> StepResult:
    started = time.monotonic()
    paths = partial(store.fio_paths, step.id)
    with FioGroup(step.jobs, paths, frozenset(ctx.cpu.client), ctx.env) as fio:
        osd_pids = lambda: list(ctx.osd_pids().values())  # noqa: E731
        with ResourceSampler(osd_pids, fio.pids, ctx.sample_interval) as sampler:
            time.sleep(min(1.0, ctx.deadline_s / 4))  # let fio fork its workers
            affinity, problems = check_affinity(ctx, fio.pids())
            # Written before failing: crimsonbench.metrics reports the violations.
            store.write_affinity(step.id, affinity, problems)
            if problems:
                raise ExecutionError(
                    "OSD and client CPU sets overlap or leak: " + "; ".join(problems[:8])
                )

            # A dead OSD fails the step at once instead of after fio's own timeouts.
            def tick() -> None:
                ctx.health_check()
                ctx.live(total_live_iops(store.eta_tails(step.id)))

            fio.wait(ctx.deadline_s, tick=tick)
        ctx.health_check()
    samples = sampler.samples
    store.write_samples(step.id, samples)
    jobs = []
    for proc in fio.procs:
        jobs.extend(parse_fio_json(proc.output.read_text()))
    summary = combine(jobs)
    if summary.errors:
        raise ExecutionError(f"step {step.id}: fio reported {summary.errors} I/O errors")
    return StepResult(
        step_id=step.id,
        workload=step.workload,
        iodepth=step.iodepth,
        repeat=step.repeat,
        fio=summary,
        resources=summarize_samples(samples),
        extra={"wall_seconds": round(time.monotonic() - started, 3)},
    )
