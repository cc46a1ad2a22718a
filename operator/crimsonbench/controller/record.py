"""Everything the operator remembers of a run, as one typed record: the run's status as the
models of spec/status.py (what it shows, and `record`: what it only remembers to carry on
after a restart), loaded once per tick and written back as a diff (a JSON merge patch of
the status: only what the tick changed).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from crimsonbench.manifests.cephcluster import merge_patch
from crimsonbench.spec.status import (
    BenchmarkRunStatus,
    Condition,
    RunBookkeeping,
)

WaitName = Literal["rollout", "pool", "removal", "target", "client"]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- the record


def _dump(status: BenchmarkRunStatus) -> dict[str, Any]:
    """The status as JSON, every field (defaults too); a field set to None is left out."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class RunRecord:
    """The run's status for one tick. Change `status` (and `status.record`, as `book`)
    field by field; `status_patch()` is what the tick changed."""

    status: BenchmarkRunStatus
    loaded: dict[str, Any]  # the status as read, as the models say it: the diff's base
    # no record was read: a new run, or a CRD that prunes status.record (main.py says so)
    migrated: bool = False
    events: list[tuple[str, str]] = field(default_factory=list)  # Warning events to post

    @classmethod
    def load(cls, status: Mapping[str, Any] | None) -> RunRecord:
        """From the run's status as the API returns it."""
        typed = BenchmarkRunStatus.model_validate(dict(status or {}))
        loaded = _dump(typed)
        missing = typed.record is None
        if typed.record is None:
            typed.record = RunBookkeeping()
        return cls(typed, loaded, missing)

    @property
    def book(self) -> RunBookkeeping:
        if self.status.record is None:  # load() makes one; kept so by whoever sets it
            self.status.record = RunBookkeeping()
        return self.status.record

    def status_patch(self) -> dict[str, Any]:
        """The merge patch from the status as loaded to the status now ({}: no change)."""
        return merge_patch(self.loaded, _dump(self.status))

    # ------------------------------------------------------------ what the status shows

    @property
    def placement(self) -> dict[int, str]:
        """OSD id -> node, as observe found them."""
        return {int(k): v for k, v in self.status.osd_placement.items()}

    def condition(self, type_: str, ok: bool, reason: str, message: str) -> None:
        """Set a standard condition; lastTransitionTime changes only when status flips."""
        status = "True" if ok else "False"
        conditions = list(self.status.conditions)
        at = next((i for i, c in enumerate(conditions) if c.type == type_), None)
        old = None if at is None else conditions[at]
        since = old.last_transition_time if old is not None and old.status == status else None
        new = Condition(type=type_, status=status, reason=reason, message=message[:32000],
                        last_transition_time=since or now_iso())  # fmt: skip
        if at is None:
            conditions.append(new)
        else:
            conditions[at] = new
        self.status.conditions = conditions

    def conditions(self) -> dict[str, Condition]:
        return {c.type: c for c in self.status.conditions}

    # ------------------------------------------------------------ bounded waits

    def waited(self, name: WaitName, now: float) -> float:
        """Seconds since the wait `name` began; it begins now if it had not."""
        waits = self.book.waits
        since = getattr(waits, name)
        if since is None:
            since = round(now, 1)
            setattr(waits, name, since)
        return max(0.0, now - since)
