"""What /metrics shows for the operator: a derived, in-memory view of the runs it reconciles
(the state itself stays in the API). Same metric names as local mode (crimsonbench.metrics).
Finished runs are dropped after a TTL so their series do not live forever."""

from __future__ import annotations

import threading
import time

from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.steps_stage import load_results
from crimsonbench.metrics import RunState
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.spec.status import Phase

_FINISHED = (Phase.COMPLETED, Phase.FAILED)


class RunsView:
    def __init__(self, ttl_seconds: float) -> None:
        self._ttl = ttl_seconds
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._finished_at: dict[str, float] = {}
        self._results: dict[str, tuple[int, list[StepResult]]] = {}  # key -> (done, results)

    def observe(self, ctx: RunContext) -> None:
        key = f"{ctx.namespace}/{ctx.name}"
        phase = Phase(ctx.get("phase") or Phase.PENDING.value)
        done = int(ctx.get("stepsDone") or 0)
        cached = self._results.get(key)
        if cached is None or cached[0] != done:  # read the results ConfigMaps only on change
            cached = (done, sorted(load_results(ctx).values(), key=lambda r: r.step_id))
            self._results[key] = cached
        info = RunInfo.from_spec(ctx.name, ctx.spec)
        state = RunState(
            info=info,
            namespace=ctx.namespace,
            phase=phase,
            steps_total=int(ctx.get("stepsTotal") or 0),
            steps=cached[1],
            failures=1 if phase == Phase.FAILED else 0,
        )
        with self._lock:
            self._runs[key] = state
            if phase in _FINISHED:
                self._finished_at.setdefault(key, time.monotonic())

    def forget(self, namespace: str | None, name: str) -> None:
        key = f"{namespace}/{name}"
        with self._lock:
            self._runs.pop(key, None)
            self._finished_at.pop(key, None)
            self._results.pop(key, None)

    def states(self) -> list[RunState]:
        now = time.monotonic()
        with self._lock:
            for key, since in list(self._finished_at.items()):
                if now - since > self._ttl:
                    self._runs.pop(key, None)
                    self._finished_at.pop(key, None)
                    self._results.pop(key, None)
            return list(self._runs.values())
