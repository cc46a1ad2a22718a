"""StepResults for the results tests: realistic figures, chosen per test."""

from __future__ import annotations

import math
from typing import Any

from crimsonbench.results.types import FioSummary, ResourceSummary, StepResult


def result(
    index: int, workload: str, iodepth: int, iops: float, repeat: int = 1, **fio: Any
) -> StepResult:
    values: dict[str, Any] = dict(
        iops=iops, bw_mib_s=iops * 4 / 1024, total_ios=int(iops * 300), clat_mean_ms=0.2 * iodepth,
        clat_stdev_ms=0.05 * iodepth, clat_p50_ms=0.2, clat_p99_ms=0.9, clat_p999_ms=math.nan,
        usr_cpu=10.0, sys_cpu=20.0, runtime_s=300.0, jobs=8,
    )  # fmt: skip
    values.update(fio)
    return StepResult(
        step_id=f"{index:04d}-{workload}-qd{iodepth:03d}-r{repeat}",
        workload=workload,
        iodepth=iodepth,
        repeat=repeat,
        fio=FioSummary(**values),
        resources=ResourceSummary(osd_cpu=1234.5, osd_mem_mib=4096.0, fio_cpu=321.0, samples=300),
        extra={"affinity": {"osd.0": {str(t): "0-4" for t in range(20)}}},
    )


def many(n: int) -> list[StepResult]:
    workloads = ["randread4k", "randwrite4k", "seqread64k", "seqwrite64k"]
    return [result(i, workloads[i % 4], 1 + i % 64, 1000.0 + i) for i in range(n)]
