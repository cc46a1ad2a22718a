"""Which step runs next: resume (done steps), early exit and the latency target, or a knee
search, as one pure state both executors share (local mode and the operator).

Full sweep: the plan's steps in order, a (workload, repeat) stopping at the first step
that meets the early-exit or latency-target rule. Knee search (sweep.kneeSearch): per
(workload, repeat), plan.knee_search.next_iodepth picks the next iodepth from the steps
done so far (it keeps no state, so a restarted executor continues exactly), until the
bracket closes; the other iodepths are skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from crimsonbench.plan.knee_search import KneeDecision, Observation, next_iodepth
from crimsonbench.plan.types import Step
from crimsonbench.results.rules import latency_at, misses_target, should_stop
from crimsonbench.results.types import FioSummary, StepResult
from crimsonbench.spec.models import KneeSearch, SweepSpec

_METRIC = {"mean": None, "p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99}


class SweepState:
    """Feed it finished steps in run order; it says which step runs next and why others
    are skipped."""

    def __init__(
        self,
        sweep: SweepSpec,
        done: Mapping[str, StepResult],
        bandwidth_workloads: Collection[str] = (),
    ) -> None:
        self.sweep = sweep
        self.bandwidth = frozenset(bandwidth_workloads)
        self.done: dict[str, StepResult] = dict(done)
        self.stopped: dict[tuple[str, int], str] = {}  # (workload, repeat) -> reason
        self.stopped_after: dict[str, str] = {}  # step id that ended its sweep -> reason
        if sweep.knee_search is None:
            for result in sorted(self.done.values(), key=lambda r: r.step_id):
                self._note(result)

    # ------------------------------------------------------------ full sweep rules

    def _note(self, result: StepResult) -> str | None:
        key = (result.workload, result.repeat)
        if key in self.stopped:
            return None
        reason = self._stop_reason(result.fio)
        if reason:
            self.stopped[key] = reason
            self.stopped_after[result.step_id] = reason
        return reason

    def _stop_reason(self, fio: FioSummary) -> str | None:
        ee = self.sweep.early_exit
        reason = (
            should_stop(fio, ee.clat_cv_limit, ee.mean_latency_ms_limit) if ee.enabled else None
        )
        lt = self.sweep.latency_target
        if reason is None and lt is not None and lt.stop_when_exceeded:
            reason = misses_target(fio, lt.percentile, lt.latency_ms)
        return reason

    # ------------------------------------------------------------ knee search

    def knee(self, steps: Sequence[Step], workload: str, repeat: int) -> KneeDecision:
        """The knee search's decision for one (workload, repeat) from its done steps."""
        ks = self.sweep.knee_search
        if ks is None:
            raise ValueError("not a knee search")
        depths = [s.iodepth for s in steps if s.workload == workload and s.repeat == repeat]
        observed = {
            s.iodepth: self._observation(self.done[s.id], ks)
            for s in steps
            if s.workload == workload and s.repeat == repeat and s.id in self.done
        }
        return next_iodepth(depths, observed, ks.latency_ms, ks.min_gain_pct)

    def _observation(self, result: StepResult, ks: KneeSearch) -> Observation:
        f = result.fio
        throughput = f.bw_mib_s if result.workload in self.bandwidth else f.iops
        pct = _METRIC[ks.metric]
        latency = f.clat_mean_ms if pct is None else latency_at(f, pct)
        return Observation(throughput, latency)

    # ------------------------------------------------------------ both

    def next_step(self, steps: Sequence[Step]) -> Step | None:
        """The step to run now, or None when the sweep is finished."""
        if self.sweep.knee_search is None:
            return next((s for s in steps if self.skip_reason(s) is None), None)
        for workload, repeat in dict.fromkeys((s.workload, s.repeat) for s in steps):
            decision = self.knee(steps, workload, repeat)
            if decision.done:
                continue
            return next(
                s
                for s in steps
                if (s.workload, s.repeat, s.iodepth) == (workload, repeat, decision.next_iodepth)
            )
        return None

    def skip_reason(self, step: Step) -> str | None:
        if step.id in self.done:
            return "already done"
        stopped = self.stopped.get((step.workload, step.repeat))
        return f"skipped: sweep stopped early ({stopped})" if stopped else None

    def record(self, step: Step, result: StepResult) -> str:
        """Store the result; returns a note when this step ends its sweep."""
        self.done[step.id] = result
        if self.sweep.knee_search is not None:
            return ""
        reason = self._note(result)
        return f"sweep of {step.workload} stops here: {reason}" if reason else ""
