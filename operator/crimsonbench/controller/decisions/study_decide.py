"""What a BenchmarkStudy does next, from its runs (plan.study) and the BenchmarkRuns seen
in its namespace: create the next run, wait for the one going, or end. Pure.

A study never adopts a run it did not create: a BenchmarkRun of a child's name that is
not owned by this study (another team's, or a study deleted and made again) ends the
study with that name in its message, and nothing is created or deleted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crimsonbench.plan.study import StudyRun
from crimsonbench.spec.status import Phase

FINISHED = (Phase.COMPLETED.value, Phase.FAILED.value)


@dataclass(frozen=True)
class ChildRun:
    """A BenchmarkRun as the study sees it."""

    name: str
    owner_uid: str  # the controller ownerReference's uid ('' when none)
    phase: str  # '' before its operator wrote a status
    message: str = ""


@dataclass(frozen=True)
class CreateRun:
    run: StudyRun


@dataclass(frozen=True)
class WaitFor:
    run: StudyRun


@dataclass(frozen=True)
class Finish:
    failed: tuple[str, ...]  # runs that ended Failed (the study still compares the rest)


@dataclass(frozen=True)
class Refuse:
    message: str


StudyAction = CreateRun | WaitFor | Finish | Refuse


def next_study_action(
    runs: Sequence[StudyRun], children: Mapping[str, ChildRun], study_uid: str
) -> StudyAction:
    """Runs go one after another in the study's order (interleaved repeats): the first
    without a child is created once every run before it has finished."""
    failed = []
    for run in runs:
        child = children.get(run.name)
        if child is None:
            return CreateRun(run)
        if child.owner_uid != study_uid:
            return Refuse(
                f"a BenchmarkRun named {run.name} exists and is not this study's (its "
                "owner is "
                + (f"uid {child.owner_uid}" if child.owner_uid else "none")
                + "); the study never adopts a run: delete or rename that run, or the study"
            )
        if child.phase not in FINISHED:
            return WaitFor(run)
        if child.phase == Phase.FAILED.value:
            failed.append(run.name)
    return Finish(tuple(failed))


def progress(runs: Sequence[StudyRun], children: Mapping[str, ChildRun], uid: str) -> str:
    done = sum(
        1
        for r in runs
        if (c := children.get(r.name)) is not None and c.owner_uid == uid and c.phase in FINISHED
    )
    return f"{done}/{len(runs)}"
