"""Step results: the published table's row, plus what is needed to recompute it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from crimsonbench.spec.models import BenchmarkRunSpec


@dataclass(frozen=True)
class FioSummary:
    """fio figures of one step, combined over every fio process and job in it."""

    iops: float  # summed over processes/jobs and directions
    bw_mib_s: float  # summed, MiB/s (fio reports KiB/s)
    total_ios: int
    clat_mean_ms: float  # weighted by total_ios
    clat_stdev_ms: float  # pooled
    clat_p50_ms: float  # percentiles: from the merged histogram (percentiles_exact), else
    clat_p99_ms: float  # the I/O-weighted mean of each job's percentile (an approximation)
    clat_p999_ms: float
    usr_cpu: float  # fio's per-job usr %, averaged over jobs (as the published tables)
    sys_cpu: float
    runtime_s: float  # longest job runtime
    jobs: int  # fio jobs combined
    errors: int = 0  # fio's per-job error count, summed
    # Results from before json+ lack these: NaN / False when read back.
    clat_p90_ms: float = math.nan
    clat_p9999_ms: float = math.nan
    clat_max_ms: float = math.nan
    percentiles_exact: bool = False  # every job's fio histogram merged (fio --output json+)


@dataclass(frozen=True)
class ResourceSample:
    """One sample while fio runs. CPU as % of one core; memory as RSS in MiB."""

    t: float  # seconds since the step started
    osd_cpu: float  # summed over every OSD process
    osd_mem_mib: float  # summed RSS
    fio_cpu: float  # summed over every fio process
    # crimson: Seastar's reactor_utilization %, mean and busiest over every reactor
    reactor_util: float | None = None
    reactor_util_max: float | None = None
    reactor_util_osd: dict[str, float] | None = None  # "osd.N" -> mean over its reactors


@dataclass(frozen=True)
class ResourceSummary:
    osd_cpu: float
    osd_mem_mib: float
    fio_cpu: float
    samples: int
    reactor_util: float | None = None  # crimson only: mean % over reactors and samples
    reactor_util_max: float | None = None  # mean over samples of the busiest reactor
    reactor_util_osd: dict[str, float] | None = None  # "osd.N" -> mean over its reactors


@dataclass(frozen=True)
class StepResult:
    step_id: str
    workload: str
    iodepth: int
    repeat: int
    fio: FioSummary  # every client combined: the table's row
    resources: ResourceSummary
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. wall time, metrics source
    clients: dict[str, FioSummary] = field(default_factory=dict)  # per fio client
    start_skew_ms: float | None = None  # latest minus earliest client start (fio's logs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json_dict(self) -> dict[str, Any]:
        """to_dict for JSON files and ConfigMaps: a figure fio did not report (NaN in
        memory) is null, so the JSON stays strict."""
        d = self.to_dict()
        d["fio"] = _nan_to_none(d["fio"])
        d["clients"] = {k: _nan_to_none(v) for k, v in d["clients"].items()}
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> StepResult:
        """The inverse of to_json_dict (older files without clients/skew read too)."""
        clients = {k: _none_to_nan(v) for k, v in (d.get("clients") or {}).items()}
        return cls.from_dict({**d, "fio": _none_to_nan(d["fio"]), "clients": clients})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepResult:
        skew = d.get("start_skew_ms")
        return cls(
            step_id=d["step_id"],
            workload=d["workload"],
            iodepth=int(d["iodepth"]),
            repeat=int(d["repeat"]),
            fio=FioSummary(**d["fio"]),
            resources=ResourceSummary(**d["resources"]),
            extra=dict(d.get("extra") or {}),
            clients={k: FioSummary(**v) for k, v in (d.get("clients") or {}).items()},
            start_skew_ms=None if skew is None else float(skew),
        )


_FIO_FLOATS = frozenset(f.name for f in fields(FioSummary) if f.type == "float")


def _nan_to_none(fio: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in fio.items()
    }


def _none_to_nan(fio: dict[str, Any]) -> dict[str, Any]:
    return {k: (math.nan if v is None and k in _FIO_FLOATS else v) for k, v in fio.items()}


@dataclass(frozen=True)
class RunInfo:
    """Labels a run for reports and comparisons (the series name in a plot)."""

    name: str
    flavor: str
    object_store: str
    osds: int
    reactors: int  # 0 for classic
    policy: str
    hyper_threads: str
    ceph_version: str = ""
    host: str = ""
    started: str = ""  # ISO 8601

    @classmethod
    def from_spec(cls, name: str, spec: BenchmarkRunSpec, **extra: str) -> RunInfo:
        o = spec.osd
        return cls(
            name=name,
            flavor=o.flavor.value,
            object_store=o.object_store.value,
            osds=o.count,
            reactors=o.reactors_per_osd,
            policy=o.cpu_policy.value,
            hyper_threads=o.hyper_threads.value,
            **extra,
        )

    @property
    def label(self) -> str:
        shape = f"{self.osds}osd" + (f"_{self.reactors}reactor" if self.reactors else "")
        return f"{self.name} ({self.flavor}/{self.object_store} {shape} {self.policy})"
