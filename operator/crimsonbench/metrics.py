"""Prometheus metrics over the live run state. Same names in local mode and the operator.

A custom collector reads the state at scrape time, so nothing is updated twice and a
finished run's series can simply be dropped from the state when it expires.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import RunInfo, StepResult
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
)


class RunCollector(Collector):
    """Reads the runs from `source` at every scrape (the results store in local mode)."""

    def __init__(self, source: Callable[[], list[RunState]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        runs = self._source()
        yield from self._run_metrics(runs)
        yield from self._step_metrics(runs)

    def _run_metrics(self, runs: list[RunState]) -> Iterator[Metric]:
        phase = GaugeMetricFamily(
            "crimsonbench_run_phase", "1 for the run's current phase", labels=[*RUN_LABELS, "phase"]
        )
        total = GaugeMetricFamily("crimsonbench_run_steps", "Steps planned", labels=RUN_LABELS)
        done = GaugeMetricFamily("crimsonbench_run_steps_done", "Steps finished", labels=RUN_LABELS)
        failed = GaugeMetricFamily(
            "crimsonbench_run_failures", "Failed steps or runs", labels=RUN_LABELS
        )
        for s in runs:
            labels = s.run_labels()
            for p in Phase:
                phase.add_metric([*labels, p.value], 1.0 if s.phase == p else 0.0)
            total.add_metric(labels, float(s.steps_total))
            done.add_metric(labels, float(len(s.steps)))
            failed.add_metric(labels, float(s.failures))
        yield from (phase, total, done, failed)

    def _step_metrics(self, runs: list[RunState]) -> Iterator[Metric]:
        duration = GaugeMetricFamily(
            "crimsonbench_step_duration_seconds", "Wall time of the step", labels=STEP_LABELS
        )
        families = [
            (GaugeMetricFamily(f"crimsonbench_step_{n}", h, labels=STEP_LABELS), fn)
            for n, h, fn in _STEP_GAUGES
        ]
        for s in runs:
            for r in s.steps:
                labels = [*s.run_labels(), r.workload, str(r.iodepth), r.step_id]
                for fam, fn in families:
                    fam.add_metric(labels, float(fn(r)))
                if r.step_id in s.step_seconds:
                    duration.add_metric(labels, s.step_seconds[r.step_id])
        yield from (fam for fam, _ in families)
        yield duration


def new_registry(collector: RunCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return registry


def state_from_store(root: Path) -> list[RunState]:
    """A local run's state, read from its results directory (see local.runner)."""
    store = ResultStore(root)
    try:
        info = store.read_run_info()
    except (OSError, ValueError, KeyError):
        return []  # not written yet
    status_file = root / "status.json"
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    results = store.load_results()
    return [
        RunState(
            info=info,
            phase=Phase(status.get("phase", Phase.PENDING.value)),
            steps_total=int(status.get("stepsTotal", 0)),
            steps=results,
            step_seconds={r.step_id: float(r.extra.get("wall_seconds", 0.0)) for r in results},
            failures=1 if status.get("phase") == Phase.FAILED.value else 0,
        )
    ]
