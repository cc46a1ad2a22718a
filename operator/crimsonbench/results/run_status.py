"""A run's progress as both executors say it: local mode's status.json and, for a fetched
run, the visible part of the operator's .status (spec.status.BenchmarkRunStatus, whose
field types and names it shares). Written and read only by results.store.ResultStore."""

from __future__ import annotations

import datetime as dt

from pydantic import Field, ValidationError

from crimsonbench.spec.status import (
    BenchmarkRunStatus,
    Message,
    Phase,
    Reason,
    Short,
    StatusModel,
)


class RunStatus(StatusModel):
    phase: Phase = Field(default=Phase.PENDING, strict=False)
    message: Message = ""
    current_step: Reason = ""  # the step in flight ('' between steps)
    steps_done: int = 0
    steps_total: int = 0
    progress: Short = ""  # "done/total"
    skipped: list[Reason] = Field(default_factory=list)  # steps the sweep's rules skipped
    updated_at: Short = ""  # ISO 8601, when it was written

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.COMPLETED, Phase.FAILED)

    def updated(self) -> float | None:
        """updated_at as Unix time; None when it is not a time."""
        try:
            return dt.datetime.fromisoformat(self.updated_at).timestamp()
        except ValueError:
            return None

    def stamped(self) -> RunStatus:
        """A copy saying it was written now."""
        return self.model_copy(update={"updated_at": now_iso()})

    @classmethod
    def of_operator(cls, status: BenchmarkRunStatus, steps_done: int) -> RunStatus:
        """A fetched run's: its operator status's visible part (steps_done: the steps
        fetched), updated when it finished, or now."""
        return cls(phase=status.phase, message=status.message, current_step=status.current_step,
                   steps_done=steps_done, steps_total=status.steps_total,
                   progress=status.progress,
                   updated_at=status.finished_at or now_iso())  # fmt: skip

    @classmethod
    def read(cls, doc: object) -> RunStatus | None:
        """From status.json's object; None when it is not a run status (edited by hand,
        another tool's file): the caller says so, never trusts part of it."""
        try:
            return cls.model_validate(doc)
        except ValidationError:
            return None


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()
