"""Early exit, knee, peak and latency target, on the figures of the published Crimson
comparison (ceph.io, "Performance comparison Classic vs. Crimson OSD with Seastore",
2025-10-06): (iodepth, iops or MiB/s, clat_ms, clat_stdev)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from crimsonbench.results.rules import (
    average_repeats,
    best_under_target,
    by_workload,
    knee,
    latency_at,
    misses_target,
    peak,
    should_stop,
)
from crimsonbench.results.types import FioSummary, ResourceSummary, StepResult

CLASSIC_RANDREAD = [
    (1, 108365.87, 0.29, 0.11),
    (2, 124779.61, 0.51, 0.31),
    (4, 130072.33, 0.98, 0.86),
    (8, 130657.61, 1.96, 2.59),
]
SEASTORE_RANDWRITE = [
    (1, 31367.49, 1.01, 2.37),
    (2, 42493.17, 1.50, 3.97),
    (4, 58204.73, 2.19, 3.76),
    (8, 65861.89, 3.88, 5.34),
    (16, 69801.80, 7.33, 29.56),
    (24, 68240.35, 11.25, 46.16),
    (32, 71570.20, 14.31, 60.14),
    (40, 10710.19, 354.63, 691.85),
]
SEASTORE_SEQREAD_BW = [
    (1, 1473.66, 1.38, 0.78),
    (16, 1957.45, 16.74, 15.61),
    (52, 2293.93, 46.42, 59.17),
    (64, 2241.97, 42.65, 61.72),
]


def fio(mean: float, stdev: float, iops: float = 1000.0, **kw: float) -> FioSummary:
    values = dict(
        iops=iops,
        bw_mib_s=iops * 4 / 1024,
        total_ios=int(iops * 300),
        clat_mean_ms=mean,
        clat_stdev_ms=stdev,
        clat_p50_ms=mean,
        clat_p99_ms=mean * 3,
        clat_p999_ms=mean * 5,
        usr_cpu=1.0,
        sys_cpu=1.0,
        runtime_s=300.0,
        jobs=32,
    )
    values.update(kw)
    return FioSummary(**values)  # type: ignore[arg-type]


def step(workload: str, qd: int, f: FioSummary, repeat: int = 1, index: int = 0) -> StepResult:
    return StepResult(
        step_id=f"{index:03d}-{workload}-qd{qd:03d}-r{repeat}",
        workload=workload,
        iodepth=qd,
        repeat=repeat,
        fio=f,
        resources=ResourceSummary(100.0, 50.0, 10.0, 5),
    )


def table(
    workload: str, rows: list[tuple[int, float, float, float]], bw: bool = False
) -> list[StepResult]:
    out = []
    for i, (qd, value, mean, stdev) in enumerate(rows):
        f = fio(mean, stdev, iops=value * 16 if bw else value)
        if bw:
            f = replace(f, bw_mib_s=value, iops=value * 16 if qd != 52 else 1.0)
        out.append(step(workload, qd, f, index=i))
    return out


# ------------------------------------------------------------ early exit


def test_clat_6_22_with_stdev_18_48_stops() -> None:
    assert should_stop(fio(6.22, 18.48), 0.5, None) == "clat stddev/mean 2.97 ≥ 0.5"


def test_published_classic_randread_stops_at_iodepth_2_with_the_default_limit() -> None:
    reasons = [(qd, should_stop(fio(m, s), 0.5, None)) for qd, _, m, s in CLASSIC_RANDREAD]
    assert reasons[0] == (1, None)  # 0.11/0.29 = 0.38
    assert reasons[1] == (2, "clat stddev/mean 0.61 ≥ 0.5")


def test_cv_exactly_at_the_limit_stops() -> None:
    assert should_stop(fio(2.0, 1.0), 0.5, None) == "clat stddev/mean 0.50 ≥ 0.5"
    assert should_stop(fio(2.0, 0.999), 0.5, None) is None


def test_mean_latency_limit() -> None:
    assert should_stop(fio(7.33, 1.0), 0.5, 10.0) is None
    assert should_stop(fio(11.25, 1.0), 0.5, 10.0) == "mean clat 11.25 ms > 10 ms"
    assert should_stop(fio(11.25, 1.0), 0.5, None) is None


def test_no_io_and_failed_jobs_stop() -> None:
    empty = fio(0.0, 0.0, iops=0.0, total_ios=0)
    assert should_stop(empty, 0.5, None) == "fio completed no I/O"
    assert should_stop(fio(1.0, 0.1, errors=2), 0.5, None) == "2 fio job(s) failed"


# ------------------------------------------------------------ knee, peak, target


def test_knee_is_the_most_iops_under_the_mean_latency_limit() -> None:
    rows = table("randwrite4k", SEASTORE_RANDWRITE)
    k = knee(rows, latency_ms_limit=10.0)
    assert k is not None and (k.iodepth, k.fio.iops) == (16, 69801.80)
    assert peak(rows).iodepth == 32  # more IOPS, but 14.31 ms
    assert knee(rows, latency_ms_limit=7.33) is k  # the limit itself is allowed
    assert knee(rows, latency_ms_limit=0.5) is None
    assert knee([], 10.0) is None


def test_peak_of_a_sequential_workload_is_by_bandwidth() -> None:
    rows = table("seqread64k", SEASTORE_SEQREAD_BW, bw=True)
    # qd 52 has the most MiB/s but (deliberately here) the fewest IOPS
    assert peak(rows).iodepth == 52
    assert peak(rows, bandwidth=False).iodepth == 64


def test_peak_ties_prefer_the_shallower_queue() -> None:
    rows = [step("randread4k", qd, fio(qd, 0.1, iops=500.0)) for qd in (8, 4, 16)]
    assert peak(rows).iodepth == 4


def test_rules_refuse_mixed_workloads() -> None:
    rows = table("randwrite4k", SEASTORE_RANDWRITE) + table("randread4k", CLASSIC_RANDREAD)
    with pytest.raises(ValueError, match="one workload.*by_workload"):
        peak(rows)
    assert {w: peak(r).iodepth for w, r in by_workload(rows).items()} == {
        "randwrite4k": 32,
        "randread4k": 8,
    }


def test_best_under_target_uses_the_percentile() -> None:
    rows = [
        step("randread4k", 1, fio(0.3, 0.1, iops=100.0, clat_p99_ms=0.9, clat_p50_ms=0.2)),
        step("randread4k", 8, fio(2.0, 0.5, iops=300.0, clat_p99_ms=4.0, clat_p50_ms=1.0)),
        step("randread4k", 16, fio(4.0, 2.0, iops=350.0, clat_p99_ms=9.0, clat_p50_ms=3.0)),
    ]
    best = best_under_target(rows, 99.0, 5.0)
    assert best is not None and best.iodepth == 8
    best50 = best_under_target(rows, 50, 3.0)
    assert best50 is not None and best50.iodepth == 16
    assert best_under_target(rows, 99.9, 0.1) is None
    assert best_under_target([], 99.0, 5.0) is None


@pytest.mark.parametrize("pct", [95.0, 99.999, 1.0])
def test_unmeasured_percentiles_name_the_spec_field(pct: float) -> None:
    with pytest.raises(ValueError, match=r"sweep\.latencyTarget\.percentile"):
        best_under_target([], pct, 5.0)
    with pytest.raises(ValueError, match=r"sweep\.latencyTarget\.percentile"):
        latency_at(fio(1, 1), pct)


def test_misses_target() -> None:
    assert misses_target(fio(1.0, 0.1, clat_p99_ms=4.0), 99, 5.0) is None
    assert misses_target(fio(1.0, 0.1, clat_p99_ms=6.0), 99, 5.0) == "p99 clat 6.00 ms > 5 ms"
    assert misses_target(fio(1.0, 0.1, clat_p999_ms=math.nan), 99.9, 5.0) == (
        "fio reported no p99.9 clat"
    )


# ------------------------------------------------------------ repeats


def test_repeats_are_averaged_and_errors_summed() -> None:
    a = step("randread4k", 4, fio(1.0, 0.2, iops=100.0, total_ios=1001), repeat=1, index=0)
    b = step("randread4k", 4, fio(3.0, 0.4, iops=300.0, total_ios=2000, errors=1), 2, 1)
    other = step("randread4k", 8, fio(5.0, 1.0, iops=400.0), index=2)
    rows = average_repeats([other, b, a])
    assert [r.iodepth for r in rows] == [4, 8]
    avg = rows[0]
    assert avg.fio.iops == 200.0 and avg.fio.clat_mean_ms == 2.0
    assert avg.fio.total_ios == 1500 and isinstance(avg.fio.total_ios, int)
    assert avg.fio.errors == 1
    assert avg.resources.samples == 10
    assert avg.extra == {"averaged_repeats": 2, "step_ids": [a.step_id, b.step_id]}
    assert rows[1] is other


def test_failed_steps_never_win() -> None:
    good = step("randread4k", 1, fio(0.3, 0.1, iops=100.0), index=0)
    broken = step("randread4k", 8, fio(0.2, 0.1, iops=900.0, errors=1), index=1)
    assert peak([good, broken]) is good
    assert knee([good, broken], 10.0) is good
    assert best_under_target([good, broken], 99, 10.0) is good
    assert peak([broken]) is broken  # nothing else to show
    assert knee([broken], 10.0) is None
