"""fio's `steadystate` section of a job: whether steady state was reached, and when."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import ParseError


@dataclass(frozen=True)
class SteadyStateResult:
    """fio's `steadystate` section of one job (or group).

    setting: what was asked ("iops_slope:0.100000%"); observed: the criterion's value
    over the last window ("1.65%" of the mean for a slope); stopped_after_ms: how long
    the job ran (job_runtime): with attained, when steady state was reached and fio
    ended the job; without, the full runtime. window_iops: the last window's samples."""

    setting: str
    attained: bool
    observed: str
    duration_s: int
    max_deviation: float
    slope: float
    iops_mean: float
    bw_mean_bytes: float
    window_iops: tuple[float, ...]
    stopped_after_ms: int


def parse_steady_state(job: Mapping[str, Any]) -> SteadyStateResult | None:
    """From one entry of a fio JSON document's "jobs"; None when ss was not used."""
    sec = job.get("steadystate")
    if not isinstance(sec, Mapping):
        return None
    data = sec.get("data") or {}
    try:
        return SteadyStateResult(
            setting=str(sec["ss"]),
            attained=bool(sec["attained"]),
            observed=str(sec.get("criterion", "")),
            duration_s=int(sec["duration"]),
            max_deviation=float(sec.get("max_deviation", math.nan)),
            slope=float(sec.get("slope", math.nan)),
            iops_mean=float(data.get("iops_mean", math.nan)),
            bw_mean_bytes=float(data.get("bw_mean", math.nan)),
            window_iops=tuple(float(v) for v in data.get("iops") or ()),
            stopped_after_ms=int(job.get("job_runtime", 0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(f"fio steadystate section not understood: {exc!r}") from None
