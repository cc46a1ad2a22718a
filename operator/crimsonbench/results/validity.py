"""Can a step's figure be trusted? One verdict per step, `valid` or `suspect`, with
machine-readable reasons and the figures behind them. Pure: the executors measure (CPU
time on the planned CPUs, the cluster's health log), this module judges.

What is judged, and why each is a reason of its own:
- interference: CPU time on a planned CPU set taken by processes that are not the run's
  (the OSDs' and fio's sets). On a shared host the figure falls with it (the same spec gave
  5.7k to 19.1k IOPS on 2 vCPUs) while OSD_cpu and FIO_cpu look idle.
- steal: the hypervisor ran someone else on our vCPU.
- unsteady / drift: fio's per-second IOPS over the measured seconds vary (coefficient of
  variation) or trend (least-squares slope x duration, in % of the mean, standing out of
  the noise: |t| >= DRIFT_MIN_T): a warm-up still running, a write cliff, an
  interruption. With a fixed iodepth latency is iodepth / IOPS (Little's law), so IOPS's
  steadiness is latency's too.
- jobs_apart: the share of the step during which every fio job ran (fio's own IOPS logs);
  below it the step's rate is a sum of rates no moment of the run saw.
- fault: something happened to the cluster during the step (a health check raised that
  the method does not set itself, an OSD marked down).

The reason codes are a closed set (Prometheus labels them: bounded cardinality).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from crimsonbench.plan.fio_jobs import IOPS_LOG_MSEC
from crimsonbench.plan.types import RunPlan
from crimsonbench.results import checked_json as cj
from crimsonbench.results.iops_log import IOPS_PER_SECOND, iops_log_job, parse_iops_log
from crimsonbench.results.types import StepResult
from crimsonbench.spec.sweep import ValiditySpec

VALID = "valid"
SUSPECT = "suspect"
# StepResult.extra key
VALIDITY = "validity"

INTERFERENCE = "interference"
STEAL = "steal"
UNSTEADY = "unsteady"
DRIFT = "drift"
JOBS_APART = "jobs_apart"
FAULT = "fault"
REASON_CODES = (INTERFERENCE, STEAL, UNSTEADY, DRIFT, JOBS_APART, FAULT)

MIN_SERIES = 3  # per-second values below which steadiness is not judged (said so)
# A trend counts only when it stands out of the seconds' noise: |slope / its standard error|
# at least this (with 1 s samples and a CV of 0.15, a 10 s step's drift estimate alone
# spreads by ~15 %: the limit would otherwise flag noise)
DRIFT_MIN_T = 3.0
_T_CAP = 1000.0  # a perfect line has no error: its t is capped (JSON has no infinity)


@dataclass(frozen=True)
class CpuSetLoad:
    """What ran on one planned CPU set while the step was measured.

    others_s: CPU seconds (user+nice+system, /proc/stat) the set's CPUs spent on anything
    but the run's processes; steal_s: the hypervisor's steal on them; wall_s: how long
    was measured; top: the busiest processes that are not the run's, anywhere on the
    machine ("comm[pid] seconds"), to say what it was."""

    name: str  # "osd.0", "client client-0"
    cpus: tuple[int, ...]
    wall_s: float
    others_s: float
    steal_s: float
    top: tuple[str, ...] = ()

    def share(self, seconds: float) -> float:
        capacity = self.wall_s * max(1, len(self.cpus))
        return 100.0 * max(0.0, seconds) / capacity if capacity > 0 else 0.0

    @property
    def others_pct(self) -> float:
        return self.share(self.others_s)

    @property
    def steal_pct(self) -> float:
        return self.share(self.steal_s)


@dataclass(frozen=True)
class Reason:
    code: str  # one of REASON_CODES
    detail: str  # one line for people
    value: float  # the figure judged
    limit: float  # the limit it passed


@dataclass(frozen=True)
class Steadiness:
    samples: int
    mean: float  # IOPS
    cv: float  # pstdev / mean of the per-second IOPS
    drift_pct: float  # least-squares slope x (samples - 1), in % of the mean
    drift_t: float = 0.0  # slope / its standard error (capped at +-_T_CAP)


@dataclass(frozen=True)
class Evidence:
    """Everything a verdict is drawn from. None / empty: not measured (said in `unjudged`)."""

    interference: tuple[CpuSetLoad, ...] | None = None
    steadiness: Steadiness | None = None
    overlap: float | None = None  # share of the step every job ran, 0..1
    faults: tuple[str, ...] = ()
    unjudged: tuple[str, ...] = ()  # what could not be measured, and why


@dataclass(frozen=True)
class Validity:
    verdict: str
    reasons: tuple[Reason, ...]
    evidence: Evidence

    @property
    def suspect(self) -> bool:
        return self.verdict == SUSPECT

    def to_json_dict(self) -> dict[str, Any]:
        ev = self.evidence
        return {
            "verdict": self.verdict,
            "reasons": [asdict(r) for r in self.reasons],
            "interference": None
            if ev.interference is None
            else [
                {
                    **asdict(c),
                    "others_pct": round(c.others_pct, 2),
                    "steal_pct": round(c.steal_pct, 2),
                }  # fmt: skip
                for c in ev.interference
            ],
            "steadiness": None if ev.steadiness is None else asdict(ev.steadiness),
            "overlap": ev.overlap,
            "faults": list(ev.faults),
            "unjudged": list(ev.unjudged),
            "attempts": [],  # earlier attempts: results.attempts
        }


def steadiness(series: Sequence[float]) -> Steadiness | None:
    """CV and drift of per-second IOPS; None with fewer than MIN_SERIES values."""
    n = len(series)
    if n < MIN_SERIES:
        return None
    mean = math.fsum(series) / n
    if mean <= 0:  # judged apart: no I/O completed in any measured second
        return Steadiness(n, 0.0, 0.0, 0.0)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in series) / n)
    xm = (n - 1) / 2
    sxx = math.fsum((i - xm) ** 2 for i in range(n))
    slope = math.fsum((i - xm) * (v - mean) for i, v in enumerate(series)) / sxx
    residual = math.fsum((v - mean - slope * (i - xm)) ** 2 for i, v in enumerate(series))
    se = math.sqrt(residual / (n - 2) / sxx)
    t = 0.0 if slope == 0 else _T_CAP if se == 0 else min(_T_CAP, abs(slope) / se)
    return Steadiness(n, mean, sd / mean, 100.0 * slope * (n - 1) / mean,
                      round(math.copysign(t, slope), 2))  # fmt: skip


def overlap_share(
    iops_logs: Mapping[str, str], window_ms: int, runtime_ms: int | None = None
) -> float | None:
    """Share of the step (first job start to last job end) during which every job ran,
    from fio's per-job IOPS logs: a job starts one window before its first entry (windows
    start with its I/O, after the ramp). It ends runtime_ms later for a time-based job
    (its last window may go unlogged: a log's end is only known to a window), else at its
    last entry (steady state ends jobs when each reaches it). None: no logs to read."""
    spans = []
    for name, text in iops_logs.items():
        if iops_log_job(name) is None:
            continue
        entries = parse_iops_log(text)
        if not entries:  # a job that never completed a window: it did not run with the rest
            return 0.0
        start = entries[0][0] - window_ms
        spans.append((start, start + runtime_ms if runtime_ms else entries[-1][0]))
    if not spans:
        return None
    whole = max(e for _, e in spans) - min(s for s, _ in spans)
    common = min(e for _, e in spans) - max(s for s, _ in spans)
    return 1.0 if whole <= 0 else max(0.0, common) / whole


def judge(evidence: Evidence, limits: ValiditySpec) -> Validity:
    reasons: list[Reason] = []

    def add(code: str, detail: str, value: float, limit: float) -> None:
        reasons.append(Reason(code, detail, round(value, 3), limit))

    for c in evidence.interference or ():
        where = f"{c.name} (CPU {','.join(map(str, c.cpus))})"
        if c.others_pct > limits.max_interference_percent:
            by = f"; busiest others: {', '.join(c.top)}" if c.top else ""
            detail = f"{where}: {c.others_pct:.1f} % taken by other processes{by}"
            add(INTERFERENCE, detail, c.others_pct, limits.max_interference_percent)
        if c.steal_pct > limits.max_steal_percent:
            detail = f"{where}: {c.steal_pct:.1f} % stolen by the hypervisor"
            add(STEAL, detail, c.steal_pct, limits.max_steal_percent)
    s = evidence.steadiness
    if s is not None and s.mean <= 0:
        add(UNSTEADY, f"no I/O completed in any of {s.samples} s", 0.0, limits.max_iops_cv)
    elif s is not None:
        if s.cv > limits.max_iops_cv:
            detail = f"per-second IOPS vary by {s.cv:.2f} (stdev/mean) over {s.samples} s"
            add(UNSTEADY, detail, s.cv, limits.max_iops_cv)
        if abs(s.drift_pct) > limits.max_drift_percent and abs(s.drift_t) >= DRIFT_MIN_T:
            way = "rising" if s.drift_pct > 0 else "falling"
            detail = (f"per-second IOPS {way} by {abs(s.drift_pct):.0f} % of the mean over "
                      f"{s.samples} s (t = {s.drift_t:.1f})")  # fmt: skip
            add(DRIFT, detail, s.drift_pct, limits.max_drift_percent)
    if evidence.overlap is not None and evidence.overlap < limits.min_overlap:
        detail = f"every fio job ran together for {evidence.overlap:.0%} of the step"
        add(JOBS_APART, detail, evidence.overlap, limits.min_overlap)
    for f in evidence.faults:
        add(FAULT, f, 1.0, 0.0)
    return Validity(SUSPECT if reasons else VALID, tuple(reasons), evidence)


@dataclass(frozen=True)
class StepVerdict:
    """What a reader of a stored step needs: the verdict and its reasons (untrusted input,
    checked)."""

    verdict: str
    reasons: tuple[Reason, ...]

    @property
    def suspect(self) -> bool:
        return self.verdict == SUSPECT

    def codes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.code for r in self.reasons))


def stored_verdict(extra: Mapping[str, Any]) -> StepVerdict | None:
    """The verdict a step result carries in extra["validity"]; None for a step judged
    by no version (written before verdicts existed). Refuses what crimsonbench would not
    write, naming the field."""
    raw = extra.get(VALIDITY)
    if raw is None:
        return None
    d = cj.obj(raw, f"extra.{VALIDITY}")
    verdict = cj.text(cj.required(d, "verdict", f"extra.{VALIDITY}."), f"extra.{VALIDITY}.verdict")
    if verdict not in (VALID, SUSPECT):
        raise cj.ResultFormatError(f"extra.{VALIDITY}.verdict: {verdict!r} is not valid or suspect")
    reasons = []
    for i, r in enumerate(d.get("reasons") or ()):
        at = f"extra.{VALIDITY}.reasons[{i}]"
        r = cj.obj(r, at)
        code = cj.text(cj.required(r, "code", f"{at}."), f"{at}.code", max_len=40)
        if code not in REASON_CODES:
            raise cj.ResultFormatError(f"{at}.code: {code!r} is not one of {REASON_CODES}")
        reasons.append(Reason(
            code,
            cj.text(r.get("detail", ""), f"{at}.detail", max_len=2000),
            cj.number(r.get("value", 0.0), f"{at}.value"),
            cj.number(r.get("limit", 0.0), f"{at}.limit"),
        ))  # fmt: skip
    return StepVerdict(verdict, tuple(reasons))


def judged(
    result: StepResult,
    iops_logs: Mapping[str, str],
    limits: ValiditySpec,
    *,
    runtime_s: int | None = None,
    interference: tuple[CpuSetLoad, ...] | None = None,
    faults: Iterable[str] = (),
    unjudged: Iterable[str] = (),
) -> StepResult:
    """result with its verdict in extra["validity"]: steadiness from its per-second IOPS,
    overlap from fio's per-job IOPS logs (runtime_s: every job's, when time-based), what
    the executor measured besides."""
    series = result.extra.get(IOPS_PER_SECOND) or ()
    evidence = Evidence(
        interference=interference,
        steadiness=steadiness(series),
        overlap=overlap_share(iops_logs, IOPS_LOG_MSEC, runtime_s * 1000 if runtime_s else None),
        faults=tuple(faults),
        unjudged=tuple(unjudged),
    )
    return with_validity(result, judge(evidence, limits))


def with_validity(result: StepResult, v: Validity) -> StepResult:
    return replace(result, extra={**result.extra, VALIDITY: v.to_json_dict()})


def merge_verdicts(repeats: Sequence[StepResult]) -> dict[str, Any] | None:
    """The verdict of repeats averaged into one row: suspect if any repeat is, with every
    suspect repeat's reasons (named by step) and how many of the repeats were suspect."""
    stored = [(r.step_id, stored_verdict(r.extra)) for r in repeats]
    judged_ = [(sid, v) for sid, v in stored if v is not None]
    if not judged_:
        return None
    suspect = [(sid, v) for sid, v in judged_ if v.suspect]
    reasons = [
        {**asdict(r), "detail": f"{sid}: {r.detail}"} for sid, v in suspect for r in v.reasons
    ]
    return {"verdict": SUSPECT if suspect else VALID, "reasons": reasons,
            "suspect_repeats": len(suspect), "judged_repeats": len(judged_)}  # fmt: skip


def verdict_cell(extra: Mapping[str, Any]) -> str:
    """A table's verdict cell: valid, SUSPECT, SUSPECT 1/3 (of repeats), or n/a (a step
    judged by no version)."""
    v = stored_verdict(extra)
    if v is None:
        return "n/a"
    if not v.suspect:
        return VALID
    raw = extra.get(VALIDITY) or {}
    k, n = raw.get("suspect_repeats"), raw.get("judged_repeats")
    return f"SUSPECT {k}/{n}" if isinstance(k, int) and isinstance(n, int) else "SUSPECT"


def suspect_lines(results: Iterable[StepResult]) -> list[str]:
    """One markdown bullet per suspect step, its reasons and figures: the reasons section
    under a table."""
    out = []
    for r in results:
        v = stored_verdict(r.extra)
        if v is not None and v.suspect:
            why = "; ".join(f"{x.code}: {x.detail}" for x in v.reasons)
            out.append(f"- {r.workload} iodepth {r.iodepth}: **suspect**: {why}")
    return out


def time_based_runtime(plan: RunPlan) -> int | None:
    """Every job's runtime in seconds, or None when steady state may end jobs sooner."""
    return None if plan.sweep.steady_state is not None else plan.sweep.runtime_seconds
