"""A study's figures: each variant's repeats as one run, and per variant and workload the
peak, the knee, the p99 there, and the peak per OSD CPU core and per GiB of OSD memory
(the equal-budget view published studies redo by hand). Pure.

A suspect step (results.validity) never decides a figure here: a variant's peak and knee
are taken among its trusted steps, and a workload where none is trusted says so.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from crimsonbench.results.rules import average_repeats, knee, peak
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.validity import verdict_cell

Run = tuple[RunInfo, Sequence[StepResult]]


def merge_repeats(variant: str, runs: Sequence[Run]) -> Run:
    """A variant's runs (its repeats, each a whole sweep) as one run whose steps are
    repeats of each other: run k's repeat r becomes repeat (k-1)*R + r, where R is the
    most repeats any run made, and its step id is prefixed `r<k>/` (still unique). The
    info is the first run's, named after the variant."""
    if not runs:
        raise ValueError(f"variant {variant} has no run to merge")
    most = max((r.repeat for _, results in runs for r in results), default=1)
    steps: list[StepResult] = []
    for k, (_, results) in enumerate(runs, start=1):
        for r in results:
            repeat = (k - 1) * most + r.repeat
            step_id = f"r{k}/{r.step_id}" if len(runs) > 1 else r.step_id
            steps.append(replace(r, repeat=repeat, step_id=step_id))
    return replace(runs[0][0], name=variant), steps


@dataclass(frozen=True)
class Point:
    """One step's figures as the grid shows them (averaged over repeats)."""

    iodepth: int
    value: float  # IOPS, or MiB/s for bandwidth workloads
    clat_ms: float
    p99_ms: float
    osd_cpu: float  # % of one core
    osd_mem_mib: float


@dataclass(frozen=True)
class Cell:
    """One variant's figures for one workload."""

    variant: str
    workload: str
    bandwidth: bool
    peak: Point | None  # None: no trusted step
    knee: Point | None
    knee_rule: str  # how the knee was chosen
    suspect_steps: int  # steps left out of peak and knee

    @property
    def per_core(self) -> float:
        """Peak per OSD CPU core (100 % = one core): what each core the OSDs burn buys."""
        p = self.peak
        if p is None or not p.osd_cpu > 0:
            return math.nan
        return p.value / (p.osd_cpu / 100)

    @property
    def per_gib(self) -> float:
        """Peak per GiB of OSD memory (RSS)."""
        p = self.peak
        if p is None or not p.osd_mem_mib > 0:
            return math.nan
        return p.value / (p.osd_mem_mib / 1024)


def power_knee_rule() -> str:
    return "most throughput / mean latency (Kleinrock's power: where more queue buys latency)"


def cells(
    variant: str,
    results: Sequence[StepResult],
    bandwidth_workloads: Collection[str],
    latency_limit_ms: float | None = None,
    allow_suspect: bool = False,
) -> list[Cell]:
    """One Cell per workload of the run, in the run's order. The knee is the sweep's (the
    most throughput with mean clat <= latency_limit_ms) when the spec set a limit, else
    the point of most power (throughput / mean latency). allow_suspect: suspect steps
    count like any other (`--allow-suspect`; still counted in suspect_steps)."""
    out = []
    for workload in dict.fromkeys(r.workload for r in results):
        bw = workload in bandwidth_workloads
        rows = average_repeats(r for r in results if r.workload == workload)
        trusted = [r for r in rows if not verdict_cell(r.extra).startswith("SUSPECT")]
        usable = rows if allow_suspect else trusted
        measured = [r for r in usable if r.fio.total_ios > 0 and r.fio.errors == 0]
        top = _point(peak(measured, bandwidth=bw), bw) if measured else None
        if latency_limit_ms is not None:
            rule = f"most throughput with mean clat <= {latency_limit_ms:g} ms"
            k = knee(measured, latency_limit_ms, bandwidth=bw) if measured else None
        else:
            rule = power_knee_rule()
            k = _most_power(measured, bw)
        knee_point = _point(k, bw) if k is not None else None
        out.append(Cell(variant, workload, bw, top, knee_point, rule, len(rows) - len(trusted)))
    return out


@dataclass(frozen=True)
class Best:
    """The best variant of one workload, and by how much it beats the next one."""

    workload: str
    variant: str
    value: float
    runner_up: str  # "" when only one variant has a trusted peak
    margin_pct: float  # best / runner_up - 1, in %


def best_per_workload(grid: Sequence[Cell]) -> list[Best]:
    """Per workload (first-seen order), the variant with the highest trusted peak."""
    out = []
    for workload in dict.fromkeys(c.workload for c in grid):
        ranked = sorted(
            (c for c in grid if c.workload == workload and c.peak is not None),
            key=lambda c: -c.peak.value if c.peak else 0.0,
        )
        if not ranked or ranked[0].peak is None:
            continue
        top = ranked[0].peak.value
        if len(ranked) > 1 and ranked[1].peak is not None and ranked[1].peak.value > 0:
            second = ranked[1].peak.value
            out.append(Best(workload, ranked[0].variant, top, ranked[1].variant,
                            (top / second - 1) * 100))  # fmt: skip
        else:
            out.append(Best(workload, ranked[0].variant, top, "", math.nan))
    return out


def _point(r: StepResult, bw: bool) -> Point:
    return Point(
        iodepth=r.iodepth,
        value=r.fio.bw_mib_s if bw else r.fio.iops,
        clat_ms=r.fio.clat_mean_ms,
        p99_ms=r.fio.clat_p99_ms,
        osd_cpu=r.resources.osd_cpu,
        osd_mem_mib=r.resources.osd_mem_mib,
    )


def _most_power(rows: Sequence[StepResult], bw: bool) -> StepResult | None:
    def power(r: StepResult) -> float:
        value = r.fio.bw_mib_s if bw else r.fio.iops
        lat = r.fio.clat_mean_ms
        return value / lat if lat > 0 and math.isfinite(value / lat) else -math.inf

    usable = [r for r in rows if power(r) > -math.inf]
    return max(usable, key=lambda r: (power(r), -r.iodepth)) if usable else None
