"""The spread of a step over its repeats (sweep.repeats): mean, standard deviation and a
95 % Student-t interval of the throughput and of the mean latency, per (workload, iodepth).
Repeats are the unit of evidence: each is a whole sweep step run again."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from crimsonbench.results import stats
from crimsonbench.results.types import StepResult


@dataclass(frozen=True)
class RepeatSpread:
    throughput: stats.Interval  # IOPS, or MiB/s for bandwidth workloads
    latency: stats.Interval  # mean clat, ms
    throughput_stdev: float
    latency_stdev: float

    @property
    def n(self) -> int:
        return self.throughput.n


def repeat_spread(
    results: Iterable[StepResult],
    bandwidth_workloads: Collection[str] = (),
    level: float = 0.95,
) -> dict[tuple[str, int], RepeatSpread]:
    """(workload, iodepth) -> spread, for every step that ran more than once."""
    groups: dict[tuple[str, int], list[StepResult]] = {}
    for r in results:
        groups.setdefault((r.workload, r.iodepth), []).append(r)
    out = {}
    for key, rows in groups.items():
        if len(rows) < 2:
            continue
        bw = key[0] in bandwidth_workloads
        tput = [r.fio.bw_mib_s if bw else r.fio.iops for r in rows]
        lat = [r.fio.clat_mean_ms for r in rows]
        out[key] = RepeatSpread(
            stats.confidence_interval(tput, level),
            stats.confidence_interval(lat, level),
            stats.stdev(tput),
            stats.stdev(lat),
        )
    return out
