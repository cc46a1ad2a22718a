"""Resource samples taken while fio runs -> the OSD_cpu / OSD_mem / FIO_cpu columns."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from crimsonbench.errors import ParseError
from crimsonbench.results.seastar_metrics import parse_reactor_log
from crimsonbench.results.types import ResourceSummary
from crimsonbench.spec.status import StepSample


def summarize_samples(samples: Sequence[StepSample]) -> ResourceSummary:
    """Means over the samples (as `top` averages in the published tables).

    No samples (a step shorter than one interval) gives zeros with samples=0, so the row
    still renders and readers can tell the figures are missing.
    """
    n = len(samples)
    if n == 0:
        return ResourceSummary(osd_cpu=0.0, osd_mem_mib=0.0, fio_cpu=0.0, samples=0)
    util = [s.reactor_util for s in samples if s.reactor_util is not None]
    busiest = [s.reactor_util_max for s in samples if s.reactor_util_max is not None]
    return ResourceSummary(
        osd_cpu=math.fsum(s.osd_cpu for s in samples) / n,
        osd_mem_mib=math.fsum(s.osd_mem_mib for s in samples) / n,
        fio_cpu=math.fsum(s.fio_cpu for s in samples) / n,
        samples=n,
        reactor_util=math.fsum(util) / len(util) if util else None,
        reactor_util_max=math.fsum(busiest) / len(busiest) if busiest else None,
        reactor_util_osd=mean_by_key([s.reactor_util_osd for s in samples]),
    )


def mean_by_key(dicts: Sequence[dict[str, float] | None]) -> dict[str, float] | None:
    """Per key, the mean over the dicts that have it (None when none has any)."""
    sums: dict[str, list[float]] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            sums.setdefault(k, []).append(v)
    return {k: math.fsum(v) / len(v) for k, v in sorted(sums.items())} or None


def reactor_fields(per_osd: Mapping[int, Sequence[float]]) -> dict[str, Any]:
    """One sample's reactor figures: mean and busiest over every reactor, mean per OSD."""
    util = [u for values in per_osd.values() for u in values]
    return {
        "reactor_util": math.fsum(util) / len(util) if util else None,
        "reactor_util_max": max(util) if util else None,
        "reactor_util_osd": {
            f"osd.{i}": math.fsum(v) / len(v) for i, v in sorted(per_osd.items()) if v
        }
        or None,
    }


def with_reactor_log(summary: ResourceSummary, text: str) -> tuple[ResourceSummary, str | None]:
    """The summary with the reactor columns from the fio driver's reactor.log (Kubernetes;
    the other columns come from the metrics API), and what went wrong, if anything: a
    refused or cut answer, or no answer at all. An unreadable log costs the columns, never
    the step (its fio figures stand)."""
    try:
        log = parse_reactor_log(text)
    except ParseError as exc:
        return summary, str(exc)
    samples = [StepSample(t=0.0, osd_cpu=0.0, osd_mem_mib=0.0, fio_cpu=0.0,
                              **reactor_fields(r)) for r in log.rounds]  # fmt: skip
    reactors = summarize_samples(samples)
    problem = "; ".join(log.problems) or (None if samples else "no sample while fio ran")
    return replace(
        summary,
        reactor_util=reactors.reactor_util,
        reactor_util_max=reactors.reactor_util_max,
        reactor_util_osd=reactors.reactor_util_osd,
    ), problem
