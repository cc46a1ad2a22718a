"""Judging a sweep: when to stop early, and which step is the knee, the peak or the best
under a latency target. Pure functions of StepResults, so reports can recompute them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields, replace
from typing import Any

from crimsonbench.results.resources import mean_by_key
from crimsonbench.results.types import FioSummary, ResourceSummary, StepResult
from crimsonbench.results.validity import VALIDITY, merge_verdicts

# Every step records these (merged histograms; percentile_list for the plain-JSON case).
SUPPORTED_PERCENTILES: dict[float, str] = {
    50.0: "clat_p50_ms",
    90.0: "clat_p90_ms",
    99.0: "clat_p99_ms",
    99.9: "clat_p999_ms",
    99.99: "clat_p9999_ms",
}


def is_bandwidth_workload(workload: str) -> bool:
    """From a name alone: sequential presets (seqread64k, ...) are read as MiB/s.

    When the spec is at hand, WorkloadSpec.reports_bandwidth is the authority.
    """
    return workload.startswith("seq")


def should_stop(
    result: FioSummary, clat_cv_limit: float, mean_latency_ms_limit: float | None
) -> str | None:
    """Why the sweep of this workload should end after this step, or None to go on.

    A coefficient of variation (clat stddev/mean) at the limit means requests queue behind
    each other: deeper queues add latency, not throughput (the hockey stick's blade).
    """
    if result.errors:
        return f"{result.errors} fio job(s) failed"
    if result.total_ios == 0:
        return "fio completed no I/O"
    if result.clat_mean_ms > 0:
        cv = result.clat_stdev_ms / result.clat_mean_ms
        if cv >= clat_cv_limit:
            return f"clat stddev/mean {cv:.2f} ≥ {clat_cv_limit:g}"
    if mean_latency_ms_limit is not None and result.clat_mean_ms > mean_latency_ms_limit:
        return f"mean clat {result.clat_mean_ms:.2f} ms > {mean_latency_ms_limit:g} ms"
    return None


def latency_at(result: FioSummary, percentile: float) -> float:
    """The clat percentile (ms) of the step (SUPPORTED_PERCENTILES)."""
    return float(getattr(result, _percentile_field(percentile)))


def _percentile_field(percentile: float) -> str:
    for pct, attr in SUPPORTED_PERCENTILES.items():
        if math.isclose(percentile, pct, abs_tol=1e-9):
            return attr
    raise ValueError(
        f"sweep.latencyTarget.percentile: {percentile:g} is not measured; "
        "use 50, 90, 99, 99.9 or 99.99"
    )


def misses_target(result: FioSummary, percentile: float, latency_ms: float) -> str | None:
    """Why this step misses the latency target, or None if it meets it."""
    value = latency_at(result, percentile)
    if math.isnan(value):
        return f"fio reported no p{percentile:g} clat"
    if value > latency_ms:
        return f"p{percentile:g} clat {value:.2f} ms > {latency_ms:g} ms"
    return None


def peak(results: Sequence[StepResult], bandwidth: bool | None = None) -> StepResult:
    """The step with the most IOPS (bandwidth workloads: the most MiB/s) of one workload.

    Steps with failed fio jobs or no I/O count only when there is nothing else.
    bandwidth=None decides from the workload name (is_bandwidth_workload).
    """
    workload = _one_workload(results, "peak")
    return _best([r for r in results if _measured(r)] or results, _metric(workload, bandwidth))


def knee(
    results: Sequence[StepResult], latency_ms_limit: float, bandwidth: bool | None = None
) -> StepResult | None:
    """The step with the most IOPS (or MiB/s) whose mean clat does not exceed the limit;
    steps with failed fio jobs or no I/O never qualify."""
    if not results:
        return None
    workload = _one_workload(results, "knee")
    ok = [r for r in results if _measured(r) and r.fio.clat_mean_ms <= latency_ms_limit]
    return _best(ok, _metric(workload, bandwidth)) if ok else None


def best_under_target(
    results: Sequence[StepResult],
    percentile: float,
    latency_ms: float,
    bandwidth: bool | None = None,
) -> StepResult | None:
    """The step with the most IOPS (or MiB/s) whose clat percentile meets latency_ms."""
    _percentile_field(percentile)  # reject an unmeasured percentile even on empty input
    if not results:
        return None
    workload = _one_workload(results, "best_under_target")
    ok = [
        r for r in results if _measured(r) and misses_target(r.fio, percentile, latency_ms) is None
    ]
    return _best(ok, _metric(workload, bandwidth)) if ok else None


def _measured(r: StepResult) -> bool:
    # a step whose fio jobs failed measured a broken system, not its capacity
    return r.fio.total_ios > 0 and r.fio.errors == 0


def _metric(workload: str, bandwidth: bool | None) -> Callable[[StepResult], float]:
    use_bw = is_bandwidth_workload(workload) if bandwidth is None else bandwidth
    return (lambda r: r.fio.bw_mib_s) if use_bw else (lambda r: r.fio.iops)


def _best(results: Iterable[StepResult], key: Callable[[StepResult], float]) -> StepResult:
    # On a tie the shallower queue wins: same throughput for less latency.
    ordered = sorted(results, key=lambda r: (r.iodepth, r.repeat, r.step_id))
    if not ordered:
        raise ValueError("no results to choose from")
    return max(ordered, key=key)


def _one_workload(results: Sequence[StepResult], what: str) -> str:
    names = sorted({r.workload for r in results})
    if len(names) != 1:
        raise ValueError(
            f"{what}() takes the results of one workload, got {names or 'none'}; "
            "split them with by_workload()"
        )
    return names[0]


def by_workload(results: Iterable[StepResult]) -> dict[str, list[StepResult]]:
    """Results per workload, workloads in run order, each list by iodepth then repeat."""
    out: dict[str, list[StepResult]] = {}
    for r in sorted(results, key=lambda r: r.step_id):
        out.setdefault(r.workload, []).append(r)
    for rows in out.values():
        rows.sort(key=lambda r: (r.iodepth, r.repeat))
    return out


def average_repeats(results: Iterable[StepResult]) -> list[StepResult]:
    """One result per (workload, iodepth): repeats averaged field by field.

    Errors and resource sample counts are summed, not averaged, so none are hidden. The
    averaged row keeps the first repeat's step_id and lists all in extra["step_ids"].
    """
    out: list[StepResult] = []
    for rows in by_workload(results).values():
        groups: dict[int, list[StepResult]] = {}
        for r in rows:
            groups.setdefault(r.iodepth, []).append(r)
        out.extend(_average(g) if len(g) > 1 else g[0] for g in groups.values())
    return out


def _average(group: Sequence[StepResult]) -> StepResult:
    n = len(group)

    def mean(values: Iterable[float]) -> float:
        return math.fsum(values) / n

    fio_vals: dict[str, Any] = {
        f.name: mean(getattr(r.fio, f.name) for r in group) for f in fields(FioSummary)
    }
    fio_vals.update(
        total_ios=round(fio_vals["total_ios"]),
        jobs=round(fio_vals["jobs"]),
        errors=sum(r.fio.errors for r in group),
        percentiles_exact=all(r.fio.percentiles_exact for r in group),
    )
    res = ResourceSummary(
        osd_cpu=mean(r.resources.osd_cpu for r in group),
        osd_mem_mib=mean(r.resources.osd_mem_mib for r in group),
        fio_cpu=mean(r.resources.fio_cpu for r in group),
        samples=sum(r.resources.samples for r in group),
        reactor_util=_mean_known([r.resources.reactor_util for r in group]),
        reactor_util_max=_mean_known([r.resources.reactor_util_max for r in group]),
        reactor_util_osd=mean_by_key([r.resources.reactor_util_osd for r in group]),
    )
    extra: dict[str, Any] = {"averaged_repeats": n, "step_ids": [r.step_id for r in group]}
    merged = merge_verdicts(group)
    if merged is not None:
        extra[VALIDITY] = merged
    return replace(group[0], fio=FioSummary(**fio_vals), resources=res, extra=extra)


def _mean_known(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None
