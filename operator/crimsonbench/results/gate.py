"""What a CI gate fails on (`compare --gate`), from the rows of results.verdict:
regressions, missing steps and missing figures always, untested rows unless the caller
allows them, and two runs without a finished step."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crimsonbench.results.verdict import MISSING, NO_FIGURE, UNTESTED, Verdict, fmt_p


def regressions(
    rows: Iterable[Verdict], threshold_pct: float, alpha: float | None = None
) -> list[Verdict]:
    """The rows a CI gate fails on (exit non-zero when not empty)."""
    return [r for r in rows if r.regression(threshold_pct, alpha)]


@dataclass(frozen=True)
class GateFailure:
    """One reason a CI gate fails: a row (workload, iodepth) and what is wrong with it."""

    workload: str
    iodepth: int
    kind: str  # "regression", MISSING, NO_FIGURE, UNTESTED, or "nothing compared"
    reason: str

    def line(self) -> str:
        where = f"{self.workload} qd{self.iodepth}" if self.workload else "the comparison"
        return f"{where}: {self.kind}: {self.reason}"


def gate(
    rows: Sequence[Verdict],
    threshold_pct: float,
    alpha: float | None = None,
    allow_untested: bool = False,
) -> tuple[list[GateFailure], list[GateFailure]]:
    """(failures, allowed): what fails a CI gate, and the untested rows let through
    because allow_untested. Regressions, missing steps and missing figures always fail,
    and so does a comparison of two runs without a finished step."""
    failures: list[GateFailure] = []
    allowed: list[GateFailure] = []
    for r in rows:
        if r.regression(threshold_pct, alpha):
            ci = "" if math.isnan(r.ci_low_pct) else (
                f", CI [{r.ci_low_pct:+.1f} %, {r.ci_high_pct:+.1f} %]"
            )  # fmt: skip
            reason = (
                f"{r.metric} {r.change_pct:+.1f} %{ci}, p = {fmt_p(r.p_adjusted)} "
                f"({r.test}): worse than -{threshold_pct:g} %"
            )
            failures.append(GateFailure(r.workload, r.iodepth, "regression", reason))
        elif r.verdict in (MISSING, NO_FIGURE):
            failures.append(GateFailure(r.workload, r.iodepth, r.verdict, r.why))
        elif r.verdict == UNTESTED:
            failure = GateFailure(r.workload, r.iodepth, UNTESTED, r.why)
            (allowed if allow_untested else failures).append(failure)
    if not rows:
        failures.append(GateFailure("", 0, "nothing compared", "neither run has a finished step"))
    return failures, allowed
