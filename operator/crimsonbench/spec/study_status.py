"""status of a BenchmarkStudy, written by the operator: where the study stands (for
`kubectl get bs`), each of its runs, and the study as it was accepted (a study runs the
spec it started with; an edit afterwards is refused with an event, never half-applied)."""

from __future__ import annotations

from pydantic import Field

from crimsonbench.spec.status import Message, Name, Phase, Short, StatusModel
from crimsonbench.spec.study import MAX_REPEATS, MAX_VARIANTS

MAX_STUDY_RUNS = MAX_VARIANTS * MAX_REPEATS
ACCEPTED_SPEC_CHARS = 1 << 20  # JSON of the spec: its own bounds keep it far below


class StudyRunState(StatusModel):
    name: Name
    variant: Name
    repeat: int = 1
    phase: Short = Field(
        default="", description="The child BenchmarkRun's phase ('': not created)."
    )


class BenchmarkStudyStatus(StatusModel):
    phase: Phase = Field(default=Phase.PENDING, strict=False)
    message: Message = ""
    progress: Short = Field(default="", description="runs finished / total, for kubectl get.")
    current_run: Name = Field(default="", description="The child BenchmarkRun now running.")
    current_variant: Name = ""
    runs: list[StudyRunState] = Field(default_factory=list, max_length=MAX_STUDY_RUNS)
    failed_runs: int = 0
    observed_generation: int | None = None
    accepted_spec: str = Field(
        default="",
        max_length=ACCEPTED_SPEC_CHARS,
        description="The study's spec as accepted at its first reconcile (JSON).",
    )
