"""Run one sweep step locally: each client's fio pinned to its CPUs, resources sampled,
the CPU affinity of every OSD and fio thread checked, the output combined per client."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crimsonbench.errors import ExecutionError
from crimsonbench.local.barrier import LOG_NAME as BARRIER_LOG
from crimsonbench.local.barrier import start_barrier
from crimsonbench.local.fio_procs import FioGroup, thread_affinities
from crimsonbench.local.interference import InterferenceMeter
from crimsonbench.local.new_lines import NewLines
from crimsonbench.local.sampler import ResourceSampler
from crimsonbench.local.userland import Userland
from crimsonbench.plan.fio_jobs import step_job_files
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results.barrier_log import barrier_summary
from crimsonbench.results.fio_eta import total_live_iops
from crimsonbench.results.fio_json import parse_fio_json
from crimsonbench.results.health_log import health_faults
from crimsonbench.results.prefill_check import prefill_faults
from crimsonbench.results.resources import summarize_samples
from crimsonbench.results.step_result import check_job_counts, step_result
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import judged, time_based_runtime
from crimsonbench.spec.cpuset import format_cpuset

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepContext:
    plan: RunPlan
    env: dict[str, str]  # CEPH_CONF etc. for fio's rbd engine
    osd_pids: Callable[[], dict[int, int]]  # osd id -> pid, live
    health_check: Callable[[], None]  # raises ExecutionError if an OSD died
    live: Callable[[float], None] = lambda iops: None  # live IOPS readout for the display
    userland: Userland = field(default_factory=Userland)  # where fio comes from
    # crimson: every reactor's Seastar utilization now, and its threads vs the plan
    reactor_util: Callable[[], dict[int, list[float]]] | None = None
    crimson_threads: Callable[[], tuple[dict[str, dict[str, str]], list[str]]] | None = None
    # the run's processes on no planned CPU (mon, mgr): not interference
    other_pids: Callable[[], Iterable[int]] = lambda: ()
    cluster_log: Path | None = None  # the mons' cluster log: health raised during a step
    # image -> share written, of the images the prefill left short (rbd du): read steps
    # over them are suspect (results/prefill_check.py)
    unwritten: Mapping[str, float] = field(default_factory=dict)


def _affinity_violations(
    observed: dict[int, list[int]], allowed: frozenset[int], forbidden: frozenset[int]
) -> list[str]:
    bad = []
    for tid, cpus in sorted(observed.items()):
        if not set(cpus) <= allowed or set(cpus) & forbidden:
            bad.append(f"tid {tid} on {format_cpuset(cpus)}")
    return bad


def check_affinity(
    ctx: StepContext, fio_pids: Mapping[str, list[int]]
) -> tuple[dict[str, object], list[str]]:
    """The real affinity of every OSD and fio thread, and any overlap or leak seen: OSD
    threads stay on their OSD's CPUs and off every client's; each client's fio threads
    stay on that client's CPUs and off every OSD's."""
    host = ctx.plan.local_host.cpu
    osd_all = host.osd_cpus()
    clients_all = frozenset(c for client in ctx.plan.clients for c in client.cpus)
    report: dict[str, object] = {}
    problems: list[str] = []
    for osd in host.osds:
        pid = ctx.osd_pids().get(osd.osd_id)
        if pid is None:
            continue
        seen = thread_affinities([pid])
        report[f"osd.{osd.osd_id}"] = {str(t): format_cpuset(c) for t, c in seen.items()}
        bad = _affinity_violations(seen, osd.all_cpus, clients_all)
        problems += [f"osd.{osd.osd_id} " + b for b in bad]
    for client in ctx.plan.clients:
        seen = thread_affinities(fio_pids.get(client.name, []))
        report[f"fio/{client.name}"] = {str(t): format_cpuset(c) for t, c in seen.items()}
        bad = _affinity_violations(seen, frozenset(client.cpus), osd_all)
        problems += [f"fio of {client.name} " + b for b in bad]
    return report, problems


def run_step(step: Step, store: ResultStore, ctx: StepContext) -> StepResult:
    started = time.monotonic()
    deadline = ctx.plan.timing.deadline_s
    plan = ctx.plan
    log_lines = NewLines(ctx.cluster_log) if ctx.cluster_log else None
    with (
        start_barrier(plan, store.step_dir(step.id)) as meet,
        FioGroup(step.id, step_job_files(plan, step, meet), plan.clients, store, ctx.env,
                 ctx.userland) as fio,
    ):  # fmt: skip
        osd_pids = lambda: list(ctx.osd_pids().values())  # noqa: E731
        interval = ctx.plan.sample_interval_s
        meter = interference_meter(ctx, fio)
        with ResourceSampler(osd_pids, fio.pids, interval, ctx.reactor_util,
                             meter.sample) as sampler:  # fmt: skip
            time.sleep(min(1.0, deadline / 4))  # let fio fork its workers
            affinity, problems = check_affinity(ctx, fio.pids_by_client())
            if ctx.crimson_threads is not None:  # each reactor alone on a planned CPU
                affinity["crimson"], reactor_problems = ctx.crimson_threads()
                problems += reactor_problems
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

            fio.wait(deadline, tick=tick)
        ctx.health_check()
    loads = meter.result()
    samples = sampler.samples
    store.write_samples(step.id, samples)
    jobs = {p.client.name: parse_fio_json(p.paths.output.read_text()) for p in fio.procs}
    check_job_counts(f"step {step.id}", ctx.plan.fio.jobs, jobs, ctx.plan.fio_numjobs)
    logs = {p.name: p.read_text() for p in store.iops_logs(step.id)}
    extra: dict[str, object] = {"wall_seconds": round(time.monotonic() - started, 3)}
    barrier = barrier_summary(_read_or_empty(store.step_dir(step.id) / BARRIER_LOG))
    if barrier is not None:
        extra["start_barrier"] = barrier
    result = step_result(step, ctx.plan.fio.jobs, jobs, logs, summarize_samples(samples), extra)
    faults = health_faults(log_lines.read_new()) if log_lines else ()
    faults = (*faults, *prefill_faults(plan, step, ctx.unwritten))
    return judged(result, logs, plan.sweep.validity, runtime_s=time_based_runtime(plan),
                  interference=loads, faults=faults)  # fmt: skip


def interference_meter(ctx: StepContext, fio: FioGroup) -> InterferenceMeter:
    """Every OSD's planned CPUs and every client's, against the run's pids on each."""
    host = ctx.plan.local_host.cpu
    sets: dict[str, Iterable[int]] = {f"osd.{o.osd_id}": o.all_cpus for o in host.osds}
    sets.update({f"client {c.name}": c.cpus for c in ctx.plan.clients})

    def pinned() -> dict[str, list[int]]:
        osds = ctx.osd_pids()
        out = {f"osd.{i}": [pid] for i, pid in osds.items()}
        out.update({f"client {n}": pids for n, pids in fio.pids_by_client().items()})
        return out

    return InterferenceMeter(sets, pinned, lambda: [*ctx.other_pids(), os.getpid()])


def _read_or_empty(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
