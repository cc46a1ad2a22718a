"""A run's stored step results kept slim: what the sweep's decisions (SweepState), the
status summary and the metrics read, without what only `crimsonbench fetch` and the reports
read (from the stored results themselves).

Slim: a StepResult without its per-client rows and its `extra` (per-second IOPS, the start
barrier...; its verdict's codes stay, results.validity). A step's client count, slowest
client and wall time are kept beside it. A step read as JSON never has its clients' rows
built at all. ~1 KiB a step (a StepResult and its FioSummary): 43 MiB for the largest
admitted sweep's 40,900th step, where the operator runs at 170 MiB
(bench/bench_long_run.py). The operator keeps one per run in memory
(controller/step_index.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from crimsonbench.results.types import ResourceSummary, StepResult
from crimsonbench.results.validity import SUSPECT, VALID, VALIDITY, stored_verdict

# Shared by every slim result (a stored result is never changed: nothing writes into it).
_NOTHING: dict[str, Any] = {}
_VALID: dict[str, Any] = {VALIDITY: {"verdict": VALID, "reasons": []}}


def _slim_verdict(extra: Mapping[str, Any]) -> dict[str, Any]:
    """Of extra, only the verdict and its reason codes (the status and metrics show them):
    one shared object for every valid step."""
    v = stored_verdict(extra)
    if v is None:
        return _NOTHING
    if not v.suspect:
        return _VALID
    reasons = [{"code": c, "detail": "", "value": 0.0, "limit": 0.0} for c in v.codes()]
    return {VALIDITY: {"verdict": SUSPECT, "reasons": reasons}}


@dataclass
class RunSteps:
    """One run's stored steps, as this process knows them."""

    results: dict[str, StepResult] = field(default_factory=dict)  # key -> slim result
    # step_id -> (clients, the slowest client, wall seconds): what the slim result lacks
    beside: dict[str, tuple[int, str, float | None]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)  # what could not be read, and why
    _resources: ResourceSummary | None = None  # the last one kept: steps share equal ones

    @classmethod
    def of(cls, result: StepResult) -> RunSteps:
        """One whole result, slim (a step about to be stored)."""
        one = cls()
        one.add(result)
        return one

    @classmethod
    def joined(cls, parts: Iterable[RunSteps]) -> RunSteps:
        """Several, as one (a later one's step wins): the pages of a read, or what was
        stored and what is being stored."""
        out = cls()
        for part in parts:
            out.merge(part)
        return out

    def merge(self, other: RunSteps) -> None:
        """Add another's steps to these (a step just stored)."""
        self.results.update(other.results)
        self.beside.update(other.beside)
        self.unreadable += other.unreadable

    def add(self, result: StepResult) -> None:
        """A whole result (a step just stored)."""
        clients = {name: row.iops for name, row in result.clients.items()}
        self._keep(result, clients, result.extra.get("wall_seconds"), _slim_verdict(result.extra))

    def add_json(self, doc: Mapping[str, Any]) -> None:
        """A stored step's JSON object, its clients' rows never built (ValueError: not a
        step result)."""
        raw = doc.get("clients")
        rows = raw if isinstance(raw, dict) else {}
        clients = {str(n): float((r or {}).get("iops") or 0.0) for n, r in rows.items()}
        extra = doc.get("extra")
        wall = extra.get("wall_seconds") if isinstance(extra, dict) else None
        verdict = extra.get(VALIDITY) if isinstance(extra, dict) else None
        slim = {VALIDITY: verdict} if verdict is not None else {}
        result = StepResult.from_json_dict({**doc, "clients": {}, "extra": slim})
        self._keep(result, clients, wall, _slim_verdict(result.extra))

    def _keep(
        self, result: StepResult, clients: Mapping[str, float], wall: Any, extra: dict[str, Any]
    ) -> None:
        resources = result.resources
        if resources == self._resources and resources.reactor_util_osd is None:
            resources = self._resources  # one object for equal figures (e.g. all n/a)
        self._resources = resources
        step_id = sys.intern(result.step_id)
        key = step_id if step_id == result.key else result.key
        kept = replace(result, step_id=step_id, workload=sys.intern(result.workload),
                       resources=resources, clients=_NOTHING, extra=extra)  # fmt: skip
        self.results[key] = kept
        slowest = sys.intern(min(clients, key=clients.__getitem__)) if len(clients) > 1 else ""
        seconds = float(wall) if isinstance(wall, int | float) else None
        self.beside[step_id] = (max(1, len(clients)), slowest, seconds)
