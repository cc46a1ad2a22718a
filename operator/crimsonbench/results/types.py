"""Step results: the published table's row, plus what is needed to recompute it."""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from crimsonbench.plan.types import step_key
from crimsonbench.results import checked_json as cj
from crimsonbench.results.iops_log import IOPS_PER_SECOND
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

    @property
    def key(self) -> str:
        """What the step measured (plan.types.step_key). A result written before steps
        were keyed by content has its position in its step_id: it matches its step by
        this key, never by the id."""
        return step_key(self.workload, self.iodepth, self.repeat)

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
    def from_json_dict(cls, d: Any) -> StepResult:
        """The inverse of to_json_dict, for files this or an older version wrote (older
        files lack clients, skew and the json+ percentiles). Input is untrusted: every
        field is checked for its type and range, and ResultFormatError names the first
        one that is wrong; keys it does not know are ignored (a newer version's)."""
        d = cj.obj(d, "the step result")
        extra = d.get("extra")
        extra = {} if extra is None else dict(cj.obj(extra, "extra"))
        if IOPS_PER_SECOND in extra:
            extra[IOPS_PER_SECOND] = _series(extra[IOPS_PER_SECOND], f"extra.{IOPS_PER_SECOND}")
        clients = d.get("clients")
        clients = {} if clients is None else cj.obj(clients, "clients")
        skew = d.get("start_skew_ms")
        from crimsonbench.results.validity import stored_verdict  # it builds on this module

        stored_verdict(extra)  # a verdict that is not one crimsonbench writes: refused here
        return cls(
            step_id=cj.text(cj.required(d, "step_id", ""), "step_id", max_len=200),
            workload=cj.text(cj.required(d, "workload", ""), "workload", max_len=200),
            iodepth=cj.integer(cj.required(d, "iodepth", ""), "iodepth", minimum=1),
            repeat=cj.integer(cj.required(d, "repeat", ""), "repeat", minimum=0),
            fio=_fio_summary(cj.required(d, "fio", ""), "fio"),
            resources=_resource_summary(cj.required(d, "resources", ""), "resources"),
            extra=extra,
            clients={
                cj.text(k, "clients key"): _fio_summary(v, f"clients.{k}")
                for k, v in clients.items()
            },
            start_skew_ms=None if skew is None else cj.number(skew, "start_skew_ms", minimum=0),
        )


# FioSummary fields fio may leave unreported (null in JSON, NaN in memory)
_NULLABLE_FIO = frozenset(
    {"clat_p50_ms", "clat_p90_ms", "clat_p99_ms", "clat_p999_ms", "clat_p9999_ms", "clat_max_ms"}
)
# Figures that can only be >= 0 (counts, rates, times)
_NON_NEGATIVE_FIO = frozenset(
    {"iops", "bw_mib_s", "total_ios", "clat_mean_ms", "clat_stdev_ms", "runtime_s", "jobs",
     "errors", "usr_cpu", "sys_cpu"} | _NULLABLE_FIO
)  # fmt: skip


def _fio_summary(raw: Any, where: str) -> FioSummary:
    d = cj.obj(raw, where)
    values: dict[str, Any] = {}
    for f in fields(FioSummary):
        at = f"{where}.{f.name}"
        if f.name not in d:
            if f.default is MISSING:
                raise cj.ResultFormatError(f"{at} is missing")
            continue  # an older file: the default (NaN / False / 0) applies
        v = d[f.name]
        minimum = 0 if f.name in _NON_NEGATIVE_FIO else None
        if f.type == "bool":
            values[f.name] = cj.boolean(v, at)
        elif f.type == "int":
            values[f.name] = cj.integer(v, at, minimum=minimum)
        else:
            nullable = f.name in _NULLABLE_FIO
            values[f.name] = cj.number(v, at, nullable=nullable, minimum=minimum)
    return FioSummary(**values)


def _resource_summary(raw: Any, where: str) -> ResourceSummary:
    d = cj.obj(raw, where)

    def opt(key: str) -> float | None:
        v = d.get(key)
        return None if v is None else cj.number(v, f"{where}.{key}")

    per_osd = d.get("reactor_util_osd")
    return ResourceSummary(
        osd_cpu=cj.number(cj.required(d, "osd_cpu", f"{where}."), f"{where}.osd_cpu"),
        osd_mem_mib=cj.number(
            cj.required(d, "osd_mem_mib", f"{where}."), f"{where}.osd_mem_mib", minimum=0
        ),
        fio_cpu=cj.number(cj.required(d, "fio_cpu", f"{where}."), f"{where}.fio_cpu"),
        samples=cj.integer(cj.required(d, "samples", f"{where}."), f"{where}.samples", minimum=0),
        reactor_util=opt("reactor_util"),
        reactor_util_max=opt("reactor_util_max"),
        reactor_util_osd=None
        if per_osd is None
        else {
            cj.text(k, f"{where}.reactor_util_osd key"): cj.number(
                v, f"{where}.reactor_util_osd.{k}"
            )
            for k, v in cj.obj(per_osd, f"{where}.reactor_util_osd").items()
        },
    )


MAX_SERIES = 1_000_000  # seconds of per-second IOPS in one step: 11 days


def _series(raw: Any, where: str) -> list[float]:
    if not isinstance(raw, list):
        raise cj.ResultFormatError(f"{where} is not a list of numbers")
    if len(raw) > MAX_SERIES:
        raise cj.ResultFormatError(f"{where} has {len(raw)} values, more than {MAX_SERIES}")
    return [cj.number(v, f"{where}[{i}]", minimum=0) for i, v in enumerate(raw)]


def _nan_to_none(fio: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in fio.items()
    }


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

    @classmethod
    def from_json_dict(cls, raw: Any) -> RunInfo:
        """run.json's "info", checked: strings without control characters, counts as
        integers; keys from newer versions are ignored, missing optional ones default."""
        d = cj.obj(raw, "info")
        values: dict[str, Any] = {}
        for f in fields(cls):
            at = f"info.{f.name}"
            if f.name not in d:
                if f.default is MISSING:
                    raise cj.ResultFormatError(f"{at} is missing")
                continue
            if f.type == "int":
                values[f.name] = cj.integer(d[f.name], at, minimum=0, maximum=1_000_000)
            else:
                values[f.name] = cj.text(d[f.name], at)
        return cls(**values)

    @property
    def label(self) -> str:
        shape = f"{self.osds}osd" + (f"_{self.reactors}reactor" if self.reactors else "")
        return f"{self.name} ({self.flavor}/{self.object_store} {shape} {self.policy})"
