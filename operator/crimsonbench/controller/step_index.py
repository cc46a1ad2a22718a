"""What the operator keeps in memory of each run's stored step results: slim copies, read
from the API once per operator process (stored_results.py) and added to as steps are
stored, so no tick parses the run's results again.

Slim: a StepResult without its per-client rows and per-second series, which only
`crimsonbench fetch` and the reports read (from the ConfigMaps). What the sweep's decisions
(SweepState), the status summary and the metrics read stays: the combined fio figures, the
resources, the wall time; a step's client count and slowest client are kept beside it for
the status summary. ~0.9 KiB a step: 37 MiB for the largest admitted sweep (40,960 steps).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from crimsonbench.results.types import StepResult


def slim(result: StepResult) -> StepResult:
    """The result without what only the full record needs (clients, extra but wall time)."""
    wall = result.extra.get("wall_seconds")
    return replace(result, clients={}, extra={} if wall is None else {"wall_seconds": wall})


@dataclass
class RunSteps:
    """One run's stored steps, as this process knows them."""

    results: dict[str, StepResult] = field(default_factory=dict)  # key -> slim result
    clients: dict[str, tuple[int, str]] = field(default_factory=dict)  # step_id -> n, slowest
    unreadable: list[str] = field(default_factory=list)  # what could not be read, and why

    def add(self, result: StepResult) -> None:
        self.results[result.key] = slim(result)
        slowest = ""
        if len(result.clients) > 1:
            slowest = min(result.clients, key=lambda c: result.clients[c].iops)
        self.clients[result.step_id] = (max(1, len(result.clients)), slowest)


class StepIndex:
    """Every run's RunSteps, by the run's uid (kopf's memo holds one per process). A run is
    forgotten when it ends or is deleted, so memory follows the runs in progress."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, RunSteps] = {}

    def get(self, uid: str) -> RunSteps | None:
        with self._lock:
            return self._runs.get(uid)

    def put(self, uid: str, steps: RunSteps) -> None:
        with self._lock:
            self._runs[uid] = steps

    def forget(self, uid: str) -> None:
        with self._lock:
            self._runs.pop(uid, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)
