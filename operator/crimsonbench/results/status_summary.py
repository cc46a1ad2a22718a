"""The summary a run's status carries (the operator's .status, local mode's status.json
steps): small on purpose, every step's full result lives in the results store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from crimsonbench.results.rules import average_repeats, by_workload, peak
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import stored_verdict
from crimsonbench.spec.models import BenchmarkRunSpec
from crimsonbench.spec.status import BenchmarkRunStatus, StepSummary, WorkloadPeak

STATUS_STEPS = 200  # steps kept in .status (the newest); all of them are in the store


def status_summary(
    results: Sequence[StepResult], spec: BenchmarkRunSpec, *, max_steps: int = STATUS_STEPS
) -> dict[str, Any]:
    """{"steps": [...], "peaks": [...], "peakIops": n} for .status, with the key names of
    spec.status (StepSummary, WorkloadPeak; camelCase). steps: the newest max_steps
    results in step order, each with the reason the sweep stopped after it, if it did
    (as SweepState decides while running). peaks: per workload (in spec order), the step
    with the most IOPS, or MiB/s for sequential workloads, after averaging repeats.
    peakIops: the most IOPS any workload reached (repeats averaged)."""
    ordered = sorted(results, key=lambda r: r.step_id)
    stops = SweepState(spec.sweep, {r.step_id: r for r in ordered}).stopped_after
    steps = [_step_summary(r, stops.get(r.step_id, "")) for r in ordered[-max_steps:]]
    groups = by_workload(average_repeats(ordered))
    bandwidth = {w.key: w.reports_bandwidth for w in spec.workloads}
    order = [w.key for w in spec.workloads] + sorted(set(groups) - set(bandwidth))
    peaks: list[WorkloadPeak] = []
    for workload in order:
        if workload not in groups:
            continue
        best = peak(groups[workload], bandwidth.get(workload))
        peaks.append(
            WorkloadPeak(
                workload=workload,
                iodepth=best.iodepth,
                iops=_num(best.fio.iops, 1),
                bw_mib_s=_num(best.fio.bw_mib_s, 2),
                clat_ms=_num(best.fio.clat_mean_ms, 3),
            )
        )
    # the most IOPS any workload reached (its IOPS peak, whichever metric it reports)
    top = max((peak(g, bandwidth=False).fio.iops for g in groups.values()), default=0.0)
    suspect = sum(bool((v := stored_verdict(r.extra)) and v.suspect) for r in ordered)
    status = BenchmarkRunStatus(steps=steps, peaks=peaks, peak_iops=round(_num(top, 0)),
                                suspect_steps=suspect)  # fmt: skip
    keep = {"steps", "peaks", "peak_iops", "suspect_steps"}
    return status.model_dump(by_alias=True, mode="json", include=keep)


def _step_summary(r: StepResult, stopped: str) -> StepSummary:
    slowest = min(r.clients, key=lambda c: r.clients[c].iops) if len(r.clients) > 1 else ""
    return StepSummary(
        id=r.step_id,
        workload=r.workload,
        iodepth=r.iodepth,
        repeat=r.repeat,
        iops=_num(r.fio.iops, 1),
        bw_mib_s=_num(r.fio.bw_mib_s, 2),
        clat_ms=_num(r.fio.clat_mean_ms, 3),
        clat_stdev_ms=_num(r.fio.clat_stdev_ms, 3),
        clat_p99_ms=_num(r.fio.clat_p99_ms, 3),
        osd_cpu=_num(r.resources.osd_cpu, 1),
        fio_cpu=_num(r.resources.fio_cpu, 1),
        clients=max(1, len(r.clients)),
        start_skew_ms=None if r.start_skew_ms is None else round(r.start_skew_ms, 1),
        slowest_client=slowest,
        stopped_early=stopped,
        verdict=v.verdict if (v := stored_verdict(r.extra)) else "",
        suspect_reasons=" ".join(v.codes()) if v else "",
    )


def _num(value: float, digits: int) -> float:
    # status is JSON: no NaN (a percentile fio did not report) or infinity
    return round(value, digits) if math.isfinite(value) else 0.0
