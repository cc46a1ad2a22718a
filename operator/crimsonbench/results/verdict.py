"""BASE vs NEW, per (workload, iodepth): better, worse or no significant change, by how
much, with which test and what confidence.

The unit of evidence is a repeat (sweep.repeats): with 2+ repeats on both sides the
per-repeat throughputs go through Welch's t-test (no equal-variance assumption, unlike
CBT's tools/is-regression.py, which also needs 3+ samples and has no effect-size
threshold; CBT's compare.py checks single values against fixed ratios). With one repeat,
fio's per-second IOPS log of each side is compared by a seeded block bootstrap, which
sees within-run noise only and says so in the row. Many rows are compared at once
(workloads x iodepths): Holm's step-down adjustment keeps the chance of any false
"worse" at alpha for the whole table.

A row that cannot be judged says why instead of passing for "no change": MISSING (BASE
has the step, NEW none), NO_FIGURE (a throughput that is NaN, or iops on one side and
MiB/s on the other), UNTESTED (no test possible: one repeat and no per-second series, too
short a series, a zero base, a step only in NEW). results.gate turns rows into what a CI
gate fails on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from crimsonbench.results import stats
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import stored_verdict

BETTER = "better"
WORSE = "worse"
NO_CHANGE = "no significant change"
NOT_COMPARED = "not compared"  # kept for old callers; rows now say MISSING or UNTESTED
MISSING = "missing in NEW"
NO_FIGURE = "no figure"
UNTESTED = "untested"

SINGLE_SAMPLE = "none: single sample"
MIN_SERIES = 3  # per-second values per side below which a bootstrap means nothing


@dataclass(frozen=True)
class StepFigures:
    """One repeat of one step, as the comparison needs it.

    throughput: IOPS, or MiB/s for bandwidth workloads (bandwidth=True); per_second: that
    repeat's per-second IOPS (fio write_iops_log, log_avg_msec=1000, every process
    summed: stats.per_second_series), empty if not logged. Any unit proportional to the
    throughput does (the bootstrap's p-value and relative interval do not depend on it),
    as long as both sides use the same block size."""

    workload: str
    iodepth: int
    throughput: float
    mean_latency_ms: float
    p99_latency_ms: float = math.nan
    per_second: tuple[float, ...] = ()
    bandwidth: bool = False
    step_id: str = ""  # where the figures come from (named in the reasons of a row)
    suspect: str = ""  # results.validity: why the step's figure cannot be trusted ("" = not)

    @classmethod
    def from_result(
        cls,
        result: StepResult,
        bandwidth: bool = False,
        per_second: Sequence[float] = (),
    ) -> StepFigures:
        f = result.fio
        return cls(
            workload=result.workload,
            iodepth=result.iodepth,
            throughput=f.bw_mib_s if bandwidth else f.iops,
            mean_latency_ms=f.clat_mean_ms,
            p99_latency_ms=f.clat_p99_ms,
            per_second=tuple(per_second),
            bandwidth=bandwidth,
            step_id=result.step_id,
            suspect=_suspect(result),
        )


def _suspect(result: StepResult) -> str:
    v = stored_verdict(result.extra)
    if v is None or not v.suspect:
        return ""
    return ", ".join(v.codes()) or "suspect"


@dataclass(frozen=True)
class Verdict:
    """One row of the comparison. Changes are (new / base - 1) in %; positive latency
    change = slower. p_adjusted is Holm's over the rows compared together (= p_value
    when adjustment is off); the verdict uses it."""

    workload: str
    iodepth: int
    metric: str  # "iops" or "bw (MiB/s)"
    base: float  # mean over repeats
    new: float
    change_pct: float
    ci_low_pct: float  # confidence interval of change_pct (NaN without a test)
    ci_high_pct: float
    mean_latency_change_pct: float
    p99_latency_change_pct: float
    test: str
    p_value: float
    p_adjusted: float
    alpha: float
    verdict: str
    why: str = ""  # MISSING / NO_FIGURE / UNTESTED: the reason, naming the steps

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p_value)

    def significant(self, alpha: float | None = None) -> bool:
        a = self.alpha if alpha is None else alpha
        return self.tested and self.p_adjusted < a

    def regression(self, threshold_pct: float, alpha: float | None = None) -> bool:
        """Worse, by more than threshold_pct of the base, and significant at alpha."""
        return self.significant(alpha) and self.change_pct < 0 and -self.change_pct > threshold_pct

    def cells(self) -> tuple[str, ...]:
        """The row as strings, in HEADER order."""

        def pct(v: float) -> str:
            return "n/a" if math.isnan(v) else f"{v:+.1f}%"

        ci = (
            "n/a"
            if math.isnan(self.ci_low_pct)
            else f"[{self.ci_low_pct:+.1f}%, {self.ci_high_pct:+.1f}%]"
        )
        p = "n/a" if math.isnan(self.p_value) else fmt_p(self.p_adjusted)
        return (
            self.workload,
            str(self.iodepth),
            self.metric,
            _fmt_num(self.base),
            _fmt_num(self.new),
            pct(self.change_pct),
            ci,
            pct(self.mean_latency_change_pct),
            pct(self.p99_latency_change_pct),
            self.test,
            p,
            self.verdict,
        )


HEADER = (
    "workload",
    "iodepth",
    "metric",
    "base",
    "new",
    "change",
    "95% CI",  # level follows compare(level=...); the default is 0.95
    "mean lat",
    "p99 lat",
    "test",
    "p",
    "verdict",
)


def _fmt_num(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.2f}"


def fmt_p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def _rel(new: float, base: float) -> float:
    if math.isnan(new) or math.isnan(base) or base == 0:
        return math.nan
    return (new / base - 1.0) * 100.0


def compare(
    base: Iterable[StepFigures],
    new: Iterable[StepFigures],
    alpha: float = 0.05,
    level: float = 0.95,
    holm: bool = True,
    seed: int = 0,
    allow_suspect: bool = False,
) -> list[Verdict]:
    """One Verdict per (workload, iodepth) of either side, in workload order of BASE
    (then NEW), iodepth ascending. Pure and deterministic (the bootstrap is seeded).
    A row with a suspect step on either side is UNTESTED (naming the step and why)
    unless allow_suspect: a figure that cannot be trusted is never a verdict."""
    b, n = _group(base), _group(new)
    keys = list(b) + [k for k in n if k not in b]
    order = {w: i for i, w in enumerate(dict.fromkeys(k[0] for k in keys))}
    rows = [_row(k, b.get(k, []), n.get(k, []), alpha, level, seed, allow_suspect)
            for k in keys]  # fmt: skip
    rows.sort(key=lambda r: (order[r.workload], r.iodepth))
    return holm_adjust(rows) if holm else rows


def _group(figs: Iterable[StepFigures]) -> dict[tuple[str, int], list[StepFigures]]:
    out: dict[tuple[str, int], list[StepFigures]] = {}
    for f in figs:
        out.setdefault((f.workload, f.iodepth), []).append(f)
    return out


def _row(
    key: tuple[str, int],
    base: Sequence[StepFigures],
    new: Sequence[StepFigures],
    alpha: float,
    level: float,
    seed: int,
    allow_suspect: bool = False,
) -> Verdict:
    workload, iodepth = key
    sides = [s for s in (base, new) if s]
    bandwidth = {f.bandwidth for s in sides for f in s}
    metric = "bw (MiB/s)" if bandwidth == {True} else "iops"

    def avg(figs: Sequence[StepFigures], attr: str) -> float:
        vals = [getattr(f, attr) for f in figs if math.isfinite(getattr(f, attr))]
        return stats.mean(vals) if vals else math.nan

    mb, mn = avg(base, "throughput"), avg(new, "throughput")
    row = Verdict(
        workload=workload,
        iodepth=iodepth,
        metric=metric,
        base=mb,
        new=mn,
        change_pct=_rel(mn, mb),
        ci_low_pct=math.nan,
        ci_high_pct=math.nan,
        mean_latency_change_pct=_rel(avg(new, "mean_latency_ms"), avg(base, "mean_latency_ms")),
        p99_latency_change_pct=_rel(avg(new, "p99_latency_ms"), avg(base, "p99_latency_ms")),
        test=SINGLE_SAMPLE,
        p_value=math.nan,
        p_adjusted=math.nan,
        alpha=alpha,
        verdict=NO_CHANGE,
    )
    refused = _not_testable(row, base, new, len(bandwidth) > 1, allow_suspect)
    if refused is not None:
        return refused
    result, untested = _test(base, new, level, seed)
    if result is None or mb == 0:
        why = untested or f"BASE {metric} is 0: no change to measure"
        return replace(row, test=f"none: {why}", verdict=UNTESTED, why=why)
    _, low, high = result.relative()
    return replace(
        row,
        ci_low_pct=low,
        ci_high_pct=high,
        test=result.method,
        p_value=result.p_value,
        p_adjusted=result.p_value,
        verdict=_verdict(result.p_value, row.change_pct, alpha),
    )


def _not_testable(
    row: Verdict, base: Sequence[StepFigures], new: Sequence[StepFigures], mixed: bool,
    allow_suspect: bool,
) -> Verdict | None:  # fmt: skip
    """The row, saying why, when the two sides cannot be tested against each other: a side
    missing, iops against MiB/s (mixed), a figure that is not a number, a suspect step."""
    if not new:
        why = f"BASE has it ({_steps(base)}), NEW has no such step"
        return replace(row, test="none: missing in NEW", verdict=MISSING, why=why)
    if not base:
        why = f"only in NEW ({_steps(new)}): BASE has nothing to test it against"
        return replace(row, test="none: only in NEW", verdict=UNTESTED, why=why)
    if mixed:
        why = "iops on one side, MiB/s on the other: not the same figure"
        return replace(row, test="none: not comparable", verdict=NO_FIGURE, why=why)
    sides = (("BASE", base), ("NEW", new))
    bad = [(side, f) for side, figs in sides for f in figs if not math.isfinite(f.throughput)]
    if bad:
        why = "; ".join(f"{side} {_name(f)}: {row.metric} is {f.throughput}" for side, f in bad)
        return replace(row, test="none: no figure", verdict=NO_FIGURE, why=why)
    suspect = [(side, f) for side, figs in sides for f in figs if f.suspect]
    if suspect and not allow_suspect:
        why = "suspect: " + "; ".join(f"{side} {_name(f)} ({f.suspect})" for side, f in suspect)
        return replace(row, test="none: suspect step", verdict=UNTESTED, why=why)
    return None


def _name(f: StepFigures) -> str:
    return f"step {f.step_id}" if f.step_id else f"{f.workload} qd{f.iodepth}"


def _steps(figs: Sequence[StepFigures]) -> str:
    named = [f.step_id for f in figs if f.step_id]
    if not named:
        return f"{len(figs)} step(s)"
    return ", ".join(named)


def _test(
    base: Sequence[StepFigures], new: Sequence[StepFigures], level: float, seed: int
) -> tuple[stats.TestResult | None, str]:
    """The test that fits the data, or None and why none does."""
    if len(base) >= 2 and len(new) >= 2:
        return stats.welch([f.throughput for f in base], [f.throughput for f in new], level), ""
    for side, figs in (("BASE", base), ("NEW", new)):
        lacking = [f for f in figs if not f.per_second]
        if lacking:
            return None, (
                f"{side} {', '.join(_name(f) for f in lacking)} has one repeat and no "
                "per-second IOPS series (extra.iops_per_second) to test it with"
            )
        bad = [f for f in figs if not all(math.isfinite(v) for v in f.per_second)]
        if bad:
            return None, f"{side} {_name(bad[0])}: its per-second IOPS series is not all numbers"
        count = sum(len(f.per_second) for f in figs)
        if count < MIN_SERIES:
            return None, (
                f"{side} has {count} per-second IOPS value(s), fewer than the {MIN_SERIES} a "
                "bootstrap needs (a longer runtimeSeconds gives more)"
            )
    sb = [f.per_second for f in base]
    sn = [f.per_second for f in new]
    return stats.bootstrap_compare(sb, sn, level=level, seed=seed), ""


def _verdict(p: float, change_pct: float, alpha: float) -> str:
    if math.isnan(p) or p >= alpha or not change_pct:  # NaN or 0: no direction to call
        return NO_CHANGE
    return BETTER if change_pct > 0 else WORSE


def holm_adjust(rows: Sequence[Verdict]) -> list[Verdict]:
    """Holm-Bonferroni over the tested rows: the k-th smallest of m p-values becomes
    max over j <= k of min(1, (m - j + 1) p_(j)); verdicts are re-judged on it."""
    tested = sorted((r.p_value, i) for i, r in enumerate(rows) if r.tested)
    m = len(tested)
    adjusted: dict[int, float] = {}
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    out: list[Verdict] = []
    for i, r in enumerate(rows):
        if i not in adjusted:
            out.append(r)
            continue
        verdict = _verdict(adjusted[i], r.change_pct, r.alpha)
        out.append(replace(r, p_adjusted=adjusted[i], verdict=verdict))
    return out


def figures_from_results(
    results: Iterable[StepResult],
    bandwidth_workloads: Iterable[str] = (),
    per_second: Mapping[str, Sequence[float]] | None = None,
) -> list[StepFigures]:
    """StepFigures of every result; per_second maps step_id -> per-second series."""
    bw = set(bandwidth_workloads)
    series = per_second or {}
    return [
        StepFigures.from_result(r, r.workload in bw, series.get(r.step_id, ())) for r in results
    ]
