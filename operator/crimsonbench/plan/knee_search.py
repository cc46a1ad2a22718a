"""Knee search: run only the iodepths needed to find the most throughput under a
latency limit, instead of the whole sweep.

next_iodepth is a pure function of what was observed so far, so a runner (local or the
operator) can call it after every step, also after a restart: no hidden state.

The search bisects the sweep's iodepth list between `lo`, the deepest iodepth seen that
meets the limit while throughput still rose, and `hi`, the shallowest one seen past the
knee: latency over the limit, or saturation: throughput up by no more than
min_gain_pct since `lo` while latency rose (a deeper queue adds latency, not work). When
lo and hi are neighbours in the list the answer is the most throughput among the
observed iodepths that meet the limit (ties go to the shallower one), the same rule as
results.rules.knee over a full sweep. With 10 iodepths that is at most 5 steps instead
of 10, plus one when the step past the knee did less work than `lo` (a noisy step on a
busy machine looks like that): the next iodepth confirms the knee, or shows the step was
an outlier and the search goes on past it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Observation:
    """One finished step: throughput (IOPS, or MiB/s) and the latency the limit is on
    (mean or a percentile, ms; the caller chooses)."""

    throughput: float
    latency_ms: float


@dataclass(frozen=True)
class KneeDecision:
    """Either run next_iodepth, or done: knee_iodepth (None if no iodepth meets the
    limit), with the reason in words."""

    next_iodepth: int | None
    knee_iodepth: int | None
    reason: str

    @property
    def done(self) -> bool:
        return self.next_iodepth is None


def next_iodepth(
    iodepths: Sequence[int],
    observed: Mapping[int, Observation],
    latency_limit_ms: float,
    min_gain_pct: float = 5.0,
) -> KneeDecision:
    """The next iodepth to run, or the knee once the bracket is closed.

    iodepths: the sweep's list (any order, each once); observed: iodepth -> Observation
    of the steps run so far (others are ignored); min_gain_pct <= 0 turns the saturation
    rule off (then only the latency limit bounds the search)."""
    depths = sorted(set(iodepths))
    if len(depths) != len(iodepths):
        raise ValueError(f"iodepths repeats values: {list(iodepths)}")
    if not depths:
        raise ValueError("no iodepths to search")
    if latency_limit_ms <= 0:
        raise ValueError(f"latency limit {latency_limit_ms} ms must be positive")
    seen = {i: observed[d] for i, d in enumerate(depths) if d in observed}
    if 0 not in seen:
        return KneeDecision(depths[0], None, "start at the shallowest iodepth")

    lo: int | None = None
    hi, why = len(depths), "the deepest iodepth meets the limit"
    for i in sorted(seen):
        obs = seen[i]
        past = None
        if not _meets(obs, latency_limit_ms):
            past = f"qd{depths[i]} latency {obs.latency_ms:.3g} ms > {latency_limit_ms:g} ms"
        elif lo is not None and min_gain_pct > 0 and _saturated(seen[lo], obs, min_gain_pct):
            gain = _gain_pct(seen[lo], obs)
            past = (
                f"saturated: qd{depths[lo]} -> qd{depths[i]} throughput {gain:+.1f}% "
                f"(<= {min_gain_pct:g}%) while latency rose"
            )
        if past is None:
            lo = i
            continue
        if lo is not None and _outlier(seen, lo, i, latency_limit_ms, min_gain_pct):
            continue  # the next iodepth beat lo: this step was noise, not the knee
        hi, why = i, past
        break
    if lo is None:
        return KneeDecision(None, None, f"no iodepth meets the limit: {why}")
    if hi - lo > 1:
        return KneeDecision(
            depths[(lo + hi) // 2], None, f"bisect qd{depths[lo]}..{_name(depths, hi)}"
        )
    if hi + 1 < len(depths) and hi + 1 not in seen and _dropped(seen[lo], seen[hi], min_gain_pct):
        # a deeper queue doing less work than lo is what a noisy step looks like (a
        # neighbour's burst, a PG peering): one step past it says whether the knee is real
        return KneeDecision(
            depths[hi + 1], None,
            f"confirm: qd{depths[hi]} did less than qd{depths[lo]}; try qd{depths[hi + 1]}",
        )  # fmt: skip
    ok = [(d, o) for d, o in observed.items() if d in depths and _meets(o, latency_limit_ms)]
    best = max(sorted(ok), key=lambda x: x[1].throughput)  # sorted: the shallower on ties
    return KneeDecision(None, best[0], f"knee qd{best[0]}; bracket closed: {why}")


def _meets(obs: Observation, limit: float) -> bool:
    # NaN latency (fio reported none) or no throughput never qualifies
    return obs.latency_ms <= limit and obs.throughput > 0


def _dropped(lo: Observation, past: Observation, min_gain_pct: float) -> bool:
    return _gain_pct(lo, past) < -max(min_gain_pct, 0.0)


def _outlier(
    seen: Mapping[int, Observation], lo: int, i: int, limit: float, min_gain_pct: float
) -> bool:
    """Step i looks past the knee, but did less than lo, and the next iodepth (observed)
    meets the limit with more throughput than lo."""
    after = seen.get(i + 1)
    return (
        after is not None
        and _dropped(seen[lo], seen[i], min_gain_pct)
        and _meets(after, limit)
        and _gain_pct(seen[lo], after) > max(min_gain_pct, 0.0)
    )


def _gain_pct(a: Observation, b: Observation) -> float:
    return (b.throughput / a.throughput - 1.0) * 100.0


def _saturated(a: Observation, b: Observation, min_gain_pct: float) -> bool:
    return _gain_pct(a, b) <= min_gain_pct and b.latency_ms > a.latency_ms


def _name(depths: Sequence[int], i: int) -> str:
    return f"qd{depths[i]}" if i < len(depths) else "end"


def full_sweep_knee(observed: Mapping[int, Observation], latency_limit_ms: float) -> int | None:
    """What a full sweep concludes: the most throughput under the limit (shallower on
    ties), for comparing a search against it."""
    ok = sorted((d, o) for d, o in observed.items() if _meets(o, latency_limit_ms))
    return max(ok, key=lambda x: x[1].throughput)[0] if ok else None


def search(
    iodepths: Sequence[int],
    measure: Mapping[int, Observation],
    latency_limit_ms: float,
    min_gain_pct: float = 5.0,
) -> tuple[list[int], KneeDecision]:
    """Drive next_iodepth against known results (a table, a simulation): the iodepths
    run in order, and the final decision."""
    seen: dict[int, Observation] = {}
    ran: list[int] = []
    for _ in range(len(iodepths) + 1):
        decision = next_iodepth(iodepths, seen, latency_limit_ms, min_gain_pct)
        if decision.done:
            return ran, decision
        assert decision.next_iodepth is not None
        if decision.next_iodepth in seen:
            raise AssertionError(f"search asked for qd{decision.next_iodepth} twice")
        seen[decision.next_iodepth] = measure[decision.next_iodepth]
        ran.append(decision.next_iodepth)
    raise AssertionError("search did not finish within len(iodepths) steps")


# ---------------------------------------------------------------- steady state
