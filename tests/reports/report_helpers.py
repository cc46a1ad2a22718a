"""Synthetic step results for report tests (report inputs, not tool output)."""

from __future__ import annotations

from crimsonbench.results.types import FioSummary, ResourceSummary, RunInfo, StepResult


def run_info(name: str = "sea", flavor: str = "crimson", store: str = "seastore") -> RunInfo:
    return RunInfo(name, flavor, store, 1, 56 if flavor == "crimson" else 0, "osd", "dual")


def make_step(
    workload: str,
    qd: int,
    iops: float,
    mean: float = 1.0,
    stdev: float = 0.5,
    *,
    index: int = 0,
    repeat: int = 1,
    bw: float | None = None,
    osd_cpu: float = 400.0,
    fio_cpu: float = 30.0,
) -> StepResult:
    fio = FioSummary(
        iops=iops,
        bw_mib_s=iops * 4 / 1024 if bw is None else bw,
        total_ios=int(iops * 300),
        clat_mean_ms=mean,
        clat_stdev_ms=stdev,
        clat_p50_ms=mean * 0.9,
        clat_p99_ms=mean * 3,
        clat_p999_ms=mean * 6,
        usr_cpu=1.5,
        sys_cpu=1.25,
        runtime_s=300.0,
        jobs=32,
    )
    return StepResult(
        step_id=f"{index:03d}-{workload}-qd{qd:03d}-r{repeat}",
        workload=workload,
        iodepth=qd,
        repeat=repeat,
        fio=fio,
        resources=ResourceSummary(osd_cpu, 3600.0, fio_cpu, 300),
    )


def sweep(
    workload: str, points: list[tuple[int, float, float]], start: int = 0, scale: float = 1.0
) -> list[StepResult]:
    """(iodepth, iops, mean clat) per step; sequential names get bw = iops * 64 KiB."""
    out = []
    for i, (qd, iops, mean) in enumerate(points):
        bw = iops * scale * 64 / 1024 if workload.startswith("seq") else None
        out.append(make_step(workload, qd, iops * scale, mean, mean / 3, index=start + i, bw=bw))
    return out
