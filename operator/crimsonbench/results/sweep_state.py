"""Which step runs next: resume (done steps), early exit and the latency target, or a knee
search, as one pure state both executors share (local mode and the operator).

Done steps are matched by what they measured (StepResult.key, the plan's Step.id), so a
resumed run finds them whatever their position in a spec that gained iodepths, repeats or
workloads since. Full sweep: the plan's steps in order, a (workload, repeat) stopping at
the first step that meets the early-exit or latency-target rule (in the order of
sweep.iodepths: an iodepth added before that step still runs). Knee search (sweep.kneeSearch): per
(workload, repeat), plan.knee_search.next_iodepth picks the next iodepth from the steps
done so far (it keeps no state, so a restarted executor continues exactly), until the
bracket closes; the other iodepths are skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

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
        done: Mapping[str, StepResult] | Iterable[StepResult],
        bandwidth_workloads: Collection[str] = (),
    ) -> None:
        """done: the finished steps (a mapping's keys are ignored: each result is keyed
        by what it measured)."""
        self.sweep = sweep
        self.bandwidth = frozenset(bandwidth_workloads)
        results = done.values() if isinstance(done, Mapping) else done
        self.done: dict[str, StepResult] = {r.key: r for r in results}
        # (workload, repeat) -> (position in sweep.iodepths of the step that stopped it, why)
        self.stopped: dict[tuple[str, int], tuple[int, str]] = {}
        self.stopped_after: dict[str, str] = {}  # step_id that ended its sweep -> reason
        if sweep.knee_search is None:
            for result in sorted(self.done.values(), key=self._run_order):
                self._note(result)

    def _position(self, iodepth: int) -> int:
        """Where an iodepth stands in the sweep (one no longer listed: after them all)."""
        depths = self.sweep.iodepths
        return depths.index(iodepth) if iodepth in depths else len(depths) + iodepth

    def _run_order(self, r: StepResult) -> tuple[str, int, int]:
        return (r.workload, r.repeat, self._position(r.iodepth))

    # ------------------------------------------------------------ full sweep rules

    def _note(self, result: StepResult) -> str | None:
        key = (result.workload, result.repeat)
        if key in self.stopped:
            return None
        reason = self._stop_reason(result.fio)
        if reason:
            self.stopped[key] = (self._position(result.iodepth), reason)
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
        if stopped is None or self._position(step.iodepth) < stopped[0]:
            return None
        return f"skipped: sweep stopped early ({stopped[1]})"

    def record(self, step: Step, result: StepResult) -> str:
        """Store the result; returns a note when this step ends its sweep."""
        self.done[step.id] = result
        if self.sweep.knee_search is not None:
            return ""
        reason = self._note(result)
        return f"sweep of {step.workload} stops here: {reason}" if reason else ""
