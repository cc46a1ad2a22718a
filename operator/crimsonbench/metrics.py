"""Prometheus metrics over the live run state. Same names in local mode and the operator.

A custom collector reads the state at scrape time, so nothing is updated twice and a
finished run's series can simply be dropped from the state when it expires.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from crimsonbench.results.fio_eta import total_live_iops
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.validity import stored_verdict
from crimsonbench.spec.status import Phase

RUN_LABELS = ("run", "namespace", "backend", "flavor", "policy", "reactors", "osds")
STEP_LABELS = (*RUN_LABELS, "workload", "iodepth", "step")


@dataclass
class RunState:
    info: RunInfo
    namespace: str = ""
    phase: Phase = Phase.PENDING
    steps_total: int = 0
    steps: list[StepResult] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)
    failures: int = 0
    current_step: str = ""  # the running step's id ("" between steps)
    last_progress: float = 0.0  # Unix time of the last phase change or step start/finish
    cpu_overlap: bool | None = None  # None: this executor does not check affinity
    live_iops: float | None = None  # None: no live readout (the operator)
    steps_done: int | None = None  # None: len(steps) (the operator shows only its newest steps)

    def run_labels(self) -> list[str]:
        i = self.info
        return [
            i.name,
            self.namespace,
            i.object_store,
            i.flavor,
            i.policy,
            str(i.reactors),
            str(i.osds),
        ]


# (metric suffix, help, value from a StepResult)
_STEP_GAUGES = (
    ("iops", "IOPS of the step, summed over fio processes", lambda r: r.fio.iops),
    ("bandwidth_bytes_per_second", "Bandwidth of the step", lambda r: r.fio.bw_mib_s * 2**20),
    ("total_ios", "I/Os completed in the step", lambda r: float(r.fio.total_ios)),
    ("clat_mean_seconds", "Mean completion latency", lambda r: r.fio.clat_mean_ms / 1e3),
    (
        "clat_stdev_seconds",
        "Pooled stddev of completion latency",
        lambda r: r.fio.clat_stdev_ms / 1e3,
    ),
    ("clat_p99_seconds", "99th percentile completion latency", lambda r: r.fio.clat_p99_ms / 1e3),
    (
        "clat_p999_seconds",
        "99.9th percentile completion latency",
        lambda r: r.fio.clat_p999_ms / 1e3,
    ),
    ("usr_cpu_percent", "fio usr CPU per job", lambda r: r.fio.usr_cpu),
    ("sys_cpu_percent", "fio sys CPU per job", lambda r: r.fio.sys_cpu),
    (
        "osd_cpu_percent",
        "OSD CPU in % of one core, mean over samples",
        lambda r: r.resources.osd_cpu,
    ),
    (
        "osd_memory_bytes",
        "OSD resident memory, mean over samples",
        lambda r: r.resources.osd_mem_mib * 2**20,
    ),
    (
        "fio_cpu_percent",
        "fio CPU in % of one core, mean over samples",
        lambda r: r.resources.fio_cpu,
    ),
    (  # crimson only: Seastar's own busy measure (reactors poll, so OSD CPU stays high)
        "reactor_utilization_percent",
        "Crimson reactor_utilization, mean over reactors and samples",
        lambda r: r.resources.reactor_util,
    ),
    (
        "reactor_utilization_max_percent",
        "Crimson reactor_utilization of the busiest reactor, mean over samples",
        lambda r: r.resources.reactor_util_max,
    ),
)


class RunCollector(Collector):
    """Reads the runs from `source` at every scrape (the results store in local mode)."""

    def __init__(self, source: Callable[[], list[RunState]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        runs = self._source()
        yield from self._run_metrics(runs)
        yield from self._live_metrics(runs)
        yield from self._step_metrics(runs)

    def _run_metrics(self, runs: list[RunState]) -> Iterator[Metric]:
        phase = GaugeMetricFamily(
            "crimsonbench_run_phase", "1 for the run's current phase", labels=[*RUN_LABELS, "phase"]
        )
        total = GaugeMetricFamily("crimsonbench_run_steps", "Steps planned", labels=RUN_LABELS)
        done = GaugeMetricFamily("crimsonbench_run_steps_done", "Steps finished", labels=RUN_LABELS)
        ratio = GaugeMetricFamily(
            "crimsonbench_run_progress_ratio", "Steps finished / steps planned", labels=RUN_LABELS
        )
        failed = GaugeMetricFamily(
            "crimsonbench_run_failures", "Failed steps or runs", labels=RUN_LABELS
        )
        progress_at = GaugeMetricFamily(
            "crimsonbench_run_last_progress_timestamp_seconds",
            "Unix time of the run's last progress (phase change, step started or finished)",
            labels=RUN_LABELS,
        )
        for s in runs:
            labels = s.run_labels()
            for p in Phase:
                phase.add_metric([*labels, p.value], 1.0 if s.phase == p else 0.0)
            total.add_metric(labels, float(s.steps_total))
            n = len(s.steps) if s.steps_done is None else s.steps_done
            done.add_metric(labels, float(n))
            ratio.add_metric(labels, n / s.steps_total if s.steps_total else 0.0)
            failed.add_metric(labels, float(s.failures))
            if s.last_progress:
                progress_at.add_metric(labels, s.last_progress)
        yield from (phase, total, done, ratio, failed, progress_at)

    def _live_metrics(self, runs: list[RunState]) -> Iterator[Metric]:
        """What is known only while a run goes on; absent when the executor cannot tell."""
        current = GaugeMetricFamily(
            "crimsonbench_run_current_step",
            "1 for the step running now (step ids come from the plan: bounded)",
            labels=[*RUN_LABELS, "step"],
        )
        overlap = GaugeMetricFamily(
            "crimsonbench_run_cpu_overlap_detected",
            "1 if an OSD and a fio thread were seen sharing CPUs (the step failed); local mode",
            labels=RUN_LABELS,
        )
        live = GaugeMetricFamily(
            "crimsonbench_run_live_iops",
            "IOPS of the running step from fio's status line, summed over fio processes; "
            "local mode",
            labels=[*RUN_LABELS, "step"],
        )
        for s in runs:
            labels = s.run_labels()
            if s.current_step and s.phase == Phase.RUNNING:
                current.add_metric([*labels, s.current_step], 1.0)
                if s.live_iops is not None:
                    live.add_metric([*labels, s.current_step], s.live_iops)
            if s.cpu_overlap is not None:
                overlap.add_metric(labels, 1.0 if s.cpu_overlap else 0.0)
        yield from (current, overlap, live)

    def _step_metrics(self, runs: list[RunState]) -> Iterator[Metric]:
        duration = GaugeMetricFamily(
            "crimsonbench_step_duration_seconds", "Wall time of the step", labels=STEP_LABELS
        )
        families = [
            (GaugeMetricFamily(f"crimsonbench_step_{n}", h, labels=STEP_LABELS), fn)
            for n, h, fn in _STEP_GAUGES
        ]
        # results.validity: 1 per reason of a suspect step (reason: a closed set of codes,
        # so bounded cardinality), 0 with reason "none" for a valid one; unjudged: absent
        suspect = GaugeMetricFamily(
            "crimsonbench_step_suspect",
            "1 per reason the step's figure cannot be trusted (README: validity)",
            labels=[*STEP_LABELS, "reason"],
        )
        for s in runs:
            for r in s.steps:
                labels = [*s.run_labels(), r.workload, str(r.iodepth), r.step_id]
                v = stored_verdict(r.extra)
                if v is not None:
                    for code in v.codes() or ("none",):
                        suspect.add_metric([*labels, code], 1.0 if v.suspect else 0.0)
                for fam, fn in families:
                    value = fn(r)
                    if value is not None:  # reactor figures exist for crimson only
                        fam.add_metric(labels, float(value))
                if r.step_id in s.step_seconds:
                    duration.add_metric(labels, s.step_seconds[r.step_id])
        yield from (fam for fam, _ in families)
        yield duration
        yield suspect


class BuildInfoCollector(Collector):
    """crimsonbench_build_info{version, python} 1, in both modes."""

    def collect(self) -> Iterator[Metric]:
        try:
            version = importlib.metadata.version("crimsonbench")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        info = GaugeMetricFamily(
            "crimsonbench_build_info",
            "Always 1; the labels say which crimsonbench is running",
            labels=["version", "python"],
        )
        info.add_metric([version, platform.python_version()], 1.0)
        yield info


def new_registry(collector: RunCollector, *more: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    for c in (collector, BuildInfoCollector(), *more):
        registry.register(c)
    return registry


def state_from_store(root: Path) -> list[RunState]:
    """A local run's state, read from its results directory (see results.store)."""
    store = ResultStore(root)
    try:
        info = store.read_run_info()
    except (OSError, ValueError, KeyError):
        return []  # not written yet
    status = store.read_status()
    results = store.load_results()
    running = store.running_step()
    return [
        RunState(
            info=info,
            phase=status.phase,
            steps_total=status.steps_total,
            steps=results,
            step_seconds={r.step_id: float(r.extra.get("wall_seconds", 0.0)) for r in results},
            failures=1 if status.phase == Phase.FAILED else 0,
            current_step=running,
            last_progress=store.last_progress(),
            cpu_overlap=store.affinity_violations(),
            live_iops=total_live_iops(store.eta_tails(running)) if running else None,
        )
    ]
