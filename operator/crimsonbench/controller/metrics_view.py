"""What /metrics shows for the operator: a derived, in-memory view of the runs it reconciles
(the state itself stays in the API), plus the operator's own health (reconcile errors and
durations). Same run and step metric names as local mode (crimsonbench.metrics).
Finished runs are dropped after a TTL so their series do not live forever, and their
per-step series before that once finished runs hold more than FINISHED_STEPS_KEPT steps
(the newest finished runs keep theirs): memory must not grow with the runs of a day. A run
shows its last STEP_SERIES_KEPT steps' series. Its steps are the operator's slim copies
(step_index.py), shared with its ticks."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.stored_results import stored_steps
from crimsonbench.metrics import RunState
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.spec.status import Phase

_FINISHED = (Phase.COMPLETED, Phase.FAILED)
FINISHED_STEPS_KEPT = 50_000  # per-step series of finished runs (~1 KiB a step)
# Per-step series a run shows (14 gauges each): the largest sweep's 40,960 steps would be
# 570,000 series, built at every scrape; its other steps stay in the results ConfigMaps.
STEP_SERIES_KEPT = 4096
F = TypeVar("F", bound=Callable[..., Any])


# (steps done in the status, the steps shown, their wall seconds, the steps stored)
_Shown = tuple[int, list[StepResult], dict[str, float], int]


def _steps_shown(ctx: RunContext, done: int) -> _Shown:
    """The run's per-step series: its last STEP_SERIES_KEPT steps in step order (the
    operator's slim copies, never read from the API again)."""
    known = stored_steps(ctx)
    shown = sorted(known.results.values(), key=lambda r: r.step_id)[-STEP_SERIES_KEPT:]
    walls = ((r.step_id, known.beside.get(r.step_id, (1, "", None))[2]) for r in shown)
    seconds = {step: wall for step, wall in walls if wall}
    return done, shown, seconds, len(known.results)


class RunsView:
    def __init__(self, ttl_seconds: float) -> None:
        self._ttl = ttl_seconds
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._finished_at: dict[str, float] = {}
        self._results: dict[str, _Shown] = {}  # key -> what _steps_shown found
        # key -> (phase, steps done, current step) last seen, and when it last changed
        self._progress: dict[str, tuple[tuple[str, int, str], float]] = {}

    def observe(self, ctx: RunContext) -> None:
        key = f"{ctx.namespace}/{ctx.name}"
        status = ctx.record.status
        phase, done, current = status.phase, status.steps_done, status.current_step
        cached = self._results.get(key)
        if cached is None or cached[0] != done:  # only when a step was stored
            cached = _steps_shown(ctx, done)
            self._results[key] = cached
        _, steps, seconds, stored = cached
        state = RunState(
            info=RunInfo.from_spec(ctx.name, ctx.spec),
            namespace=ctx.namespace,
            phase=phase,
            steps_total=status.steps_total,
            steps=steps,
            step_seconds=seconds,
            failures=1 if phase == Phase.FAILED else 0,
            current_step=current,
            last_progress=self._progressed(key, (phase.value, done, current)),
            steps_done=stored,
        )
        with self._lock:
            self._runs[key] = state
            if phase in _FINISHED:
                self._finished_at.setdefault(key, time.monotonic())
                self._cap_finished()

    def _cap_finished(self) -> None:
        """Finished runs keep their per-step series, newest first, up to
        FINISHED_STEPS_KEPT steps in all; older ones keep their run series only."""
        kept = 0
        for key in sorted(self._finished_at, key=self._finished_at.__getitem__, reverse=True):
            state = self._runs.get(key)
            if state is None or not state.steps:
                continue
            if kept + len(state.steps) <= FINISHED_STEPS_KEPT:
                kept += len(state.steps)
                continue
            self._runs[key] = replace(state, steps=[], step_seconds={})  # steps_done stays
            self._results.pop(key, None)

    def _progressed(self, key: str, seen: tuple[str, int, str]) -> float:
        """Unix time the run last changed phase, finished a step or started one. After an
        operator restart it starts again from the first observation."""
        last = self._progress.get(key)
        if last is None or last[0] != seen:
            last = (seen, time.time())
            self._progress[key] = last
        return last[1]

    def forget(self, namespace: str | None, name: str) -> None:
        key = f"{namespace}/{name}"
        with self._lock:
            self._drop(key)

    def _drop(self, key: str) -> None:
        self._runs.pop(key, None)
        self._finished_at.pop(key, None)
        self._results.pop(key, None)
        self._progress.pop(key, None)

    def states(self) -> list[RunState]:
        now = time.monotonic()
        with self._lock:
            for key, since in list(self._finished_at.items()):
                if now - since > self._ttl:
                    self._drop(key)
            return list(self._runs.values())


# Reconcile durations are seconds to minutes (API calls, Job waits are not in a tick).
_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ReconcileStats(Collector):
    """Counts and times reconcile ticks; errors by exception class (a bounded set).
    Plain counters, registered with the operator's registry at startup."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._sum = 0.0
        self._buckets = [0] * len(_BUCKETS)
        self._errors: dict[str, int] = {}

    def observe(self, seconds: float, error: str | None = None) -> None:
        with self._lock:
            self._count += 1
            self._sum += seconds
            for i, bound in enumerate(_BUCKETS):
                if seconds <= bound:
                    self._buckets[i] += 1
            if error is not None:
                self._errors[error] = self._errors.get(error, 0) + 1

    def instrument(self, handler: F) -> F:
        """Decorator for the reconcile handler: time it, count what it raises."""

        @functools.wraps(handler)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = handler(*args, **kwargs)
            except BaseException as exc:
                self.observe(time.perf_counter() - started, type(exc).__name__)
                raise
            self.observe(time.perf_counter() - started)
            return result

        return wrapper  # type: ignore[return-value]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            count, total, buckets = self._count, self._sum, list(self._buckets)
            errors = dict(self._errors)
        hist = HistogramMetricFamily(
            "crimsonbench_operator_reconcile_duration_seconds",
            "Wall time of one reconcile tick of a run",
        )
        hist.add_metric(
            [],
            [
                *((str(b), float(n)) for b, n in zip(_BUCKETS, buckets, strict=True)),
                ("+Inf", float(count)),
            ],
            total,
        )
        errs = CounterMetricFamily(
            "crimsonbench_operator_reconcile_errors",
            "Reconcile ticks that raised, by exception class",
            labels=["error"],
        )
        for name, n in sorted(errors.items()):
            errs.add_metric([name], float(n))
        yield hist
        yield errs


# Created at import so the handler can be decorated; registered only in the startup handler.
RECONCILES = ReconcileStats()
