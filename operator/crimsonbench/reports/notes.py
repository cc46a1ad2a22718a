"""The lines under a workload's table: its peak, failed fio jobs, and what the sweep's
rules (early exit, knee, latency target) make of its steps. Markdown list items, shared
by summary.md and the HTML report."""

from __future__ import annotations

from collections.abc import Sequence

from crimsonbench.results.rules import average_repeats, best_under_target, knee, peak, should_stop
from crimsonbench.results.types import StepResult
from crimsonbench.spec.models import SweepSpec


def workload_notes(rows: Sequence[StepResult], bw: bool, sweep: SweepSpec | None) -> list[str]:
    """rows: one workload's steps (repeats are averaged here)."""
    avg = average_repeats(rows)
    unit = "MiB/s" if bw else "IOPS"
    top = peak(avg, bandwidth=bw)
    value = top.fio.bw_mib_s if bw else top.fio.iops
    notes = [
        f"- peak: {value:.2f} {unit} at iodepth {top.iodepth} (clat {top.fio.clat_mean_ms:.2f} ms)"
    ]
    failed = [f"{r.iodepth} ({r.fio.errors})" for r in avg if r.fio.errors]
    if failed:
        notes.append("- fio jobs failed at iodepth (jobs): " + ", ".join(failed))
    return notes + _rule_notes(avg, bw, unit, sweep)


def _rule_notes(
    avg: Sequence[StepResult], bw: bool, unit: str, sweep: SweepSpec | None
) -> list[str]:
    if sweep is None:
        return []
    notes: list[str] = []
    ee = sweep.early_exit
    if ee.enabled:
        for r in sorted(avg, key=lambda r: r.iodepth):
            reason = should_stop(r.fio, ee.clat_cv_limit, ee.mean_latency_ms_limit)
            if reason:
                notes.append(f"- early exit at iodepth {r.iodepth}: {reason}")
                break
    if ee.mean_latency_ms_limit is not None:
        k = knee(avg, ee.mean_latency_ms_limit, bandwidth=bw)
        notes.append(
            f"- knee (mean clat ≤ {ee.mean_latency_ms_limit:g} ms): "
            + (_at(k, bw, unit) if k else "no step")
        )
    lt = sweep.latency_target
    if lt is not None:
        try:
            best = best_under_target(avg, lt.percentile, lt.latency_ms, bandwidth=bw)
        except ValueError as exc:  # the spec accepts percentiles fio was not asked for
            notes.append(f"- latency target: {exc}")
        else:
            notes.append(
                f"- best with p{lt.percentile:g} clat ≤ {lt.latency_ms:g} ms: "
                + (_at(best, bw, unit) if best else "no step")
            )
    return notes


def _at(r: StepResult, bw: bool, unit: str) -> str:
    value = r.fio.bw_mib_s if bw else r.fio.iops
    return f"{value:.2f} {unit} at iodepth {r.iodepth}"
