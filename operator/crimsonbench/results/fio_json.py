"""fio `--output-format=json` -> per-job numbers -> one FioSummary per step.

A step runs one fio per client: locally a fio process with the client's job files; on
Kubernetes a fio server per client node, driven by one `fio --client` run whose document
lists every server's jobs under "client_stats" (with the server's hostname and port).
parse_fio_json reads either kind of document; combine merges jobs into the table's row,
and combine_clients gives the row of every client and of all of them together.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import ParseError
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.histogram import DIRECTIONS, NS_PER_MS, LatencyHistogram
from crimsonbench.results.steady_state import SteadyStateResult, parse_steady_state
from crimsonbench.results.types import FioSummary

log = logging.getLogger(__name__)


# fio's rw values -> the JSON sections that carry the workload's I/O. Anything after ':'
# (e.g. "randread:8", a sequence modifier) does not change the directions.
_RW_DIRECTIONS: dict[str, tuple[str, ...]] = {
    "read": ("read",),
    "randread": ("read",),
    "write": ("write",),
    "randwrite": ("write",),
    "trim": ("trim",),
    "randtrim": ("trim",),
    "rw": ("read", "write"),
    "readwrite": ("read", "write"),
    "randrw": ("read", "write"),
    "trimwrite": ("trim", "write"),
    "randtrimwrite": ("trim", "write"),
}
_FIO_DEFAULT_RW = "read"  # what fio does when no rw option is given

ALL_CLIENTS = "All clients"  # fio's own sum over servers in client mode; we sum ourselves


@dataclass(frozen=True)
class DirectionStats:
    """One direction (read/write/trim) of one fio job, in fio's own units."""

    direction: str
    iops: float
    bw_kib_s: float  # fio's "bw" is KiB/s
    bw_bytes: int  # bytes/s
    total_ios: int
    clat_samples: int  # clat_ns.N: the latencies mean/stddev/percentiles were computed over
    clat_mean_ns: float
    clat_stddev_ns: float
    clat_p50_ns: float  # NaN when fio reported no such percentile
    clat_p99_ns: float
    clat_p999_ns: float
    runtime_ms: int  # the direction's run time (not summed under group_reporting)
    hist: LatencyHistogram | None = None  # fio's clat_ns.bins (json+), for exact merges
    clat_p90_ns: float = math.nan
    clat_p9999_ns: float = math.nan
    clat_max_ns: float = 0.0


@dataclass(frozen=True)
class JobStats:
    """One entry of fio's "jobs" list: the directions its rw mode uses, plus job figures."""

    name: str
    rw: str
    usr_cpu: float  # %
    sys_cpu: float
    error: int  # fio's errno for the job (first error), 0 when fine
    job_runtime_ms: int  # summed over the group's jobs under group_reporting
    directions: tuple[DirectionStats, ...]
    host: str = ""  # "hostname:port" of the fio server that ran it (fio --client)
    steady_state: SteadyStateResult | None = None  # when the job file asked for it


def parse_fio_json(text: str, directions: Sequence[str] | None = None) -> list[JobStats]:
    """Parse one fio JSON document, tolerating the lines fio prints before it.

    `directions` picks the sections to keep; by default they follow each job's rw option
    (job options, else global options, else fio's default "read").
    """
    doc = _load_document(text)
    jobs = doc.get("jobs")
    if jobs is None and isinstance(doc.get("client_stats"), list):
        # fio --client: one entry per server job, plus "All clients" with several servers
        jobs = [j for j in doc["client_stats"] if j.get("jobname") != ALL_CLIENTS]
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("fio JSON has no jobs; was fio run with --output-format=json?")
    global_opts = doc.get("global options") or {}
    return [_job(job, i, global_opts, directions) for i, job in enumerate(jobs)]


def _load_document(text: str) -> dict[str, Any]:
    doc = find_json_document(text)
    if doc is None:
        head = text.strip().splitlines()[0][:200] if text.strip() else "(empty output)"
        raise ParseError(f"no fio JSON document in the output; it starts with: {head}")
    return doc


def _job(
    job: Any, index: int, global_opts: Mapping[str, Any], directions: Sequence[str] | None
) -> JobStats:
    if not isinstance(job, dict):
        raise ParseError(f"fio jobs[{index}] is not an object")
    name = str(job.get("jobname", f"jobs[{index}]"))
    where = f"fio job {name!r} (jobs[{index}])"
    rw = str((job.get("job options") or {}).get("rw") or global_opts.get("rw") or _FIO_DEFAULT_RW)
    wanted = tuple(directions) if directions is not None else _directions_of(rw, where)
    host = f"{job['hostname']}:{job.get('port', '')}" if "hostname" in job else ""
    return JobStats(
        name=name,
        rw=rw,
        usr_cpu=_num(job, "usr_cpu", where),
        sys_cpu=_num(job, "sys_cpu", where),
        error=int(_num(job, "error", where)),
        job_runtime_ms=int(_num(job, "job_runtime", where, default=0.0)),
        directions=tuple(_direction(job, d, where) for d in wanted),
        host=host,
        steady_state=parse_steady_state(job),
    )


def _directions_of(rw: str, where: str) -> tuple[str, ...]:
    mode = rw.split(":", 1)[0].strip()
    try:
        return _RW_DIRECTIONS[mode]
    except KeyError:
        raise ParseError(f"{where}: unknown rw mode {rw!r}") from None


def _direction(job: Mapping[str, Any], direction: str, where: str) -> DirectionStats:
    if direction not in DIRECTIONS:
        raise ParseError(f"{where}: unknown direction {direction!r}; use one of {DIRECTIONS}")
    sec = job.get(direction)
    if not isinstance(sec, dict):
        raise ParseError(f"{where}: no {direction!r} section")
    where = f"{where}.{direction}"
    clat = sec.get("clat_ns")
    if not isinstance(clat, dict):
        raise ParseError(f"{where}: no clat_ns (fio older than 3.0 reports clat in usec)")
    pct = _percentiles(clat.get("percentile"), where)
    return DirectionStats(
        direction=direction,
        iops=_num(sec, "iops", where),
        bw_kib_s=_num(sec, "bw", where),
        bw_bytes=int(_num(sec, "bw_bytes", where, default=_num(sec, "bw", where) * 1024)),
        total_ios=int(_num(sec, "total_ios", where)),
        clat_samples=int(_num(clat, "N", f"{where}.clat_ns")),
        clat_mean_ns=_num(clat, "mean", f"{where}.clat_ns"),
        clat_stddev_ns=_num(clat, "stddev", f"{where}.clat_ns"),
        clat_p50_ns=pct.get(50.0, math.nan),
        clat_p99_ns=pct.get(99.0, math.nan),
        clat_p999_ns=pct.get(99.9, math.nan),
        clat_p90_ns=pct.get(90.0, math.nan),
        clat_p9999_ns=pct.get(99.99, math.nan),
        clat_max_ns=_num(clat, "max", f"{where}.clat_ns", default=0.0),
        runtime_ms=int(_num(sec, "runtime", where)),
        hist=LatencyHistogram.from_clat(clat, f"{where}.clat_ns") if clat.get("bins") else None,
    )


def _percentiles(raw: Any, where: str) -> dict[float, float]:
    # fio keys them as "%f" ("99.900000"); it omits the map when there are no samples.
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ParseError(f"{where}.clat_ns.percentile is not an object")
    try:
        return {round(float(k), 6): float(v) for k, v in raw.items()}
    except (TypeError, ValueError) as exc:
        raise ParseError(f"{where}.clat_ns.percentile: {exc}") from None


def _num(obj: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = obj.get(key, default)
    if value is None:
        raise ParseError(f"{where}: missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: {key!r} is {value!r}, not a number")
    return float(value)


def combine(jobs: Sequence[JobStats]) -> FioSummary:
    """Merge every job (of every fio process) of one step into the table's row.

    Each direction of each job is one sample: a mixed workload's reads and writes are
    pooled like two jobs. Latency is weighted by clat samples (clat_ns.N, which equals
    total_ios unless I/Os failed), so idle or failed directions do not drag the mean.
    Percentiles: when every job carries fio's histogram (json+), the histograms are merged
    and read as fio reads its own (exact: what fio would say of all the step's I/O);
    otherwise the sample-weighted mean of each job's percentile, an approximation
    (percentiles_exact False). `errors` counts the jobs fio reports an error for.
    """
    if not jobs:
        raise ParseError("no fio jobs to combine")
    dirs = [d for job in jobs for d in job.directions]
    mean, stdev = _pooled([(d.clat_samples, d.clat_mean_ns, d.clat_stddev_ns) for d in dirs])
    busy = [d for d in dirs if d.clat_samples > 0]
    exact = bool(busy) and all(d.hist is not None for d in busy)
    if exact:
        merged = LatencyHistogram.merge(d.hist for d in busy if d.hist is not None)
        p = {k: float(v) / NS_PER_MS for k, v in merged.percentiles().items()}
        pct = [p[50.0], p[90.0], p[99.0], p[99.9], p[99.99], merged.max_ns / NS_PER_MS]
    else:
        attrs = ("clat_p50_ns", "clat_p90_ns", "clat_p99_ns", "clat_p999_ns", "clat_p9999_ns")
        pct = [_weighted_percentile(dirs, a) / NS_PER_MS for a in attrs]
        pct.append(max((d.clat_max_ns for d in busy), default=0.0) / NS_PER_MS)
    return FioSummary(
        iops=math.fsum(d.iops for d in dirs),
        bw_mib_s=math.fsum(d.bw_kib_s for d in dirs) / 1024.0,
        total_ios=sum(d.total_ios for d in dirs),
        clat_mean_ms=mean / NS_PER_MS,
        clat_stdev_ms=stdev / NS_PER_MS,
        clat_p50_ms=pct[0],
        clat_p99_ms=pct[2],
        clat_p999_ms=pct[3],
        usr_cpu=math.fsum(j.usr_cpu for j in jobs) / len(jobs),
        sys_cpu=math.fsum(j.sys_cpu for j in jobs) / len(jobs),
        runtime_s=max((d.runtime_ms for d in dirs), default=0) / 1000.0,
        jobs=len(jobs),
        errors=_failed(jobs),
        clat_p90_ms=pct[1],
        clat_p9999_ms=pct[4],
        clat_max_ms=pct[5],
        percentiles_exact=exact,
    )


def combine_clients(
    jobs_by_client: Mapping[str, Sequence[JobStats]],
) -> tuple[FioSummary, dict[str, FioSummary]]:
    """The row of every client, and of all clients together (summed IOPS and bandwidth,
    latency pooled over every job of every client): a slow client shows in its own row."""
    if not jobs_by_client or not all(jobs_by_client.values()):
        empty = sorted(c for c, jobs in jobs_by_client.items() if not jobs)
        raise ParseError(f"no fio jobs from client(s) {', '.join(empty) or '(none)'}")
    per_client = {client: combine(jobs) for client, jobs in sorted(jobs_by_client.items())}
    total = combine([j for jobs in jobs_by_client.values() for j in jobs])
    return total, per_client


def steady_state_summary(jobs: Sequence[JobStats]) -> dict[str, Any] | None:
    """For StepResult.extra: how many jobs reached fio's steady state and how long the
    longest ran (None when the step did not ask for steady state)."""
    found = [j.steady_state for j in jobs if j.steady_state is not None]
    if not found:
        return None
    return {
        "setting": found[0].setting,
        "jobs": len(found),
        "attained": sum(1 for s in found if s.attained),
        "longest_s": max(s.stopped_after_ms for s in found) / 1000.0,
    }


def _failed(jobs: Sequence[JobStats]) -> int:
    # fio's per-job "error" is an errno (22 = EINVAL), not a count: count the failed jobs.
    failed = [j for j in jobs if j.error]
    for j in failed:
        log.warning("fio job %r failed: %s (errno %d)", j.name, os.strerror(j.error), j.error)
    return len(failed)


def _pooled(groups: Sequence[tuple[int, float, float]]) -> tuple[float, float]:
    """Mean and standard deviation of the union of groups given as (n, mean, stddev).

    The variance is sum n_i (s_i^2 + m_i^2) / N - m^2, computed in the equivalent form
    sum n_i (s_i^2 + (m_i - m)^2) / N, which does not lose digits when stddev << mean.
    Exact for population (ddof=0) deviations; fio's are sample deviations, which differ by
    a factor (n-1)/n, negligible at fio's sample counts.
    """
    total = sum(n for n, _, _ in groups)
    if total == 0:
        return 0.0, 0.0
    mean = math.fsum(n * m for n, m, _ in groups) / total
    var = math.fsum(n * (s * s + (m - mean) ** 2) for n, m, s in groups) / total
    return mean, math.sqrt(var)


def _weighted_percentile(dirs: Sequence[DirectionStats], attr: str) -> float:
    weighted = [(d.clat_samples, getattr(d, attr)) for d in dirs if d.clat_samples > 0]
    if not weighted:
        return 0.0  # no I/O completed: like the mean, report 0 rather than fail
    known = [(n, v) for n, v in weighted if not math.isnan(v)]
    if not known:
        return math.nan  # fio was told not to report this percentile
    return math.fsum(n * v for n, v in known) / sum(n for n, _ in known)
