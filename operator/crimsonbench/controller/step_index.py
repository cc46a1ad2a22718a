"""What the operator keeps in memory of each run's stored step results: slim copies
(results/slim_steps.py), read from the API once per operator process (stored_results.py)
and added to as steps are stored, so no tick parses the run's results again.
"""

from __future__ import annotations

import threading

from crimsonbench.results.slim_steps import RunSteps


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

    def add(self, uid: str, stored: RunSteps) -> None:
        """Steps just stored, to a run already read (one not read is read whole, later)."""
        with self._lock:
            known = self._runs.get(uid)
            if known is not None:
                known.merge(stored)

    def forget(self, uid: str) -> None:
        with self._lock:
            self._runs.pop(uid, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)
