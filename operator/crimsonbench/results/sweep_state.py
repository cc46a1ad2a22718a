"""Which steps still need to run: resume (done steps) and early exit, as one pure state."""

from __future__ import annotations

from collections.abc import Mapping

from crimsonbench.plan.types import Step
from crimsonbench.results.rules import misses_target, should_stop
from crimsonbench.results.types import FioSummary, StepResult
from crimsonbench.spec.models import SweepSpec


class SweepState:
    """Feed it finished steps in run order; it says which later steps to skip and why."""

    def __init__(self, sweep: SweepSpec, done: Mapping[str, StepResult]) -> None:
        self.sweep = sweep
        self.done: dict[str, StepResult] = dict(done)
        self.stopped: dict[tuple[str, int], str] = {}  # (workload, repeat) -> reason
        self.stopped_after: dict[str, str] = {}  # step id that ended its sweep -> reason
        for result in sorted(self.done.values(), key=lambda r: r.step_id):
            self._note(result)

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

    def skip_reason(self, step: Step) -> str | None:
        if step.id in self.done:
            return "already done"
        stopped = self.stopped.get((step.workload, step.repeat))
        return f"skipped: sweep stopped early ({stopped})" if stopped else None

    def record(self, step: Step, result: StepResult) -> str:
        """Store the result; returns the early-exit reason if this step ends the sweep."""
        self.done[step.id] = result
        reason = self._note(result)
        return f"sweep of {step.workload} stops here: {reason}" if reason else ""
