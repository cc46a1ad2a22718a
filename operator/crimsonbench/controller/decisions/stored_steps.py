"""What the results store (controller/stored_results.py) reads and writes next, decided from
what it read. Pure: every branch is tested without a cluster.

Reading: the run's step ConfigMaps a page at a time (the API's limit/continue: the largest
admitted sweep holds ~330 MiB of JSON, never one response); of each page, the run's own
heads are parsed with the parts they name, slim (results/slim_steps.py). A head that is not
the run's (an earlier run of that name, another's labelled alike) is named, never read as
its results; a step that cannot be read (a part missing, its sha256 not matching: it was
being written) is named and left out, so it runs again.

Writing: each step not stored yet becomes its ConfigMaps (parts before the head, owned by
the run); then the status's summary of every stored step, its suspect steps and where the
results are.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import ExecutionError
from crimsonbench.manifests.results import (
    StepTooLarge,
    not_owned,
    owned_by,
    part_names,
    read_step_json,
    results_selector,
    run_configmap_name,
    step_configmaps,
    step_selector,
)
from crimsonbench.results.slim_steps import RunSteps
from crimsonbench.results.status_summary import status_summary
from crimsonbench.results.types import StepResult
from crimsonbench.spec.models import BenchmarkRunSpec
from crimsonbench.spec.status import BenchmarkRunStatus, ResultsRef

PAGE = 100  # step ConfigMaps per list call (~1.2 MiB with 16 clients a step)
# Decisions in one read: three a page (list, parts, keep) for 1,000 pages, 100,000 steps,
# twice the largest admitted sweep; more means the API's continue tokens never end.
MOST_READS = 3 * 1000
SUSPECT_LISTED = 20  # suspect steps named in the StepsSuspect condition


# ---------------------------------------------------------------- reading


@dataclass(frozen=True)
class ListPage:
    """List the next page of step heads (token None: the first page)."""

    selector: str
    limit: int
    token: str | None


@dataclass(frozen=True)
class ReadParts:
    """Read the parts the page's own heads name (a missing one is simply not answered)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class KeepPage:
    """The page's steps are parsed: keep them beside the earlier pages', list the next."""

    steps: RunSteps
    others: tuple[str, ...]


@dataclass(frozen=True)
class Known:
    """The read is over: these are the run's stored steps (remember them); `others` are the
    heads found by the run's name that are not its own."""

    steps: RunSteps
    others: tuple[str, ...]


ReadAction = ListPage | ReadParts | KeepPage | Known


@dataclass(frozen=True)
class ReadView:
    run: str
    uid: str
    page: tuple[Mapping[str, Any], ...] | None = None  # the heads just listed
    token: str | None = None  # the API's continue token after `page` (None: it was the last)
    parts: Mapping[str, Mapping[str, Any]] | None = None  # read for `page`'s own heads
    pages: tuple[RunSteps, ...] = ()  # the pages parsed before
    others: tuple[str, ...] = ()


def next_read(view: ReadView) -> list[ReadAction]:
    if view.page is None:
        return [ListPage(step_selector(view.run), PAGE, view.token)]
    own = [head for head in view.page if owned_by(head, view.uid)]
    wanted = tuple(name for head in own for name in part_names(head))
    if wanted and view.parts is None:
        return [ReadParts(wanted)]
    steps = RunSteps()
    for head in own:
        try:
            steps.add_json(read_step_json(head, view.parts or {}))
        except ValueError as exc:  # being written when the operator stopped: it runs again
            steps.unreadable.append(str(exc))
    others = view.others + tuple(not_owned(view.page, view.uid))
    if view.token is not None:
        return [KeepPage(steps, others)]
    return [Known(RunSteps.joined([*view.pages, steps]), others)]


# ---------------------------------------------------------------- writing


@dataclass(frozen=True)
class WriteStep:
    """Write one step's ConfigMaps in this order, then keep it (slim) as stored."""

    configmaps: tuple[dict[str, Any], ...]
    kept: RunSteps


@dataclass(frozen=True)
class SetSummary:
    """The status's summary of every stored step; a StepsSuspect condition when some are."""

    summary: BenchmarkRunStatus
    steps_done: int
    progress: str
    suspect: str  # the condition's message ("": no step is suspect)
    results: ResultsRef


StoreAction = WriteStep | SetSummary | ExecutionError


@dataclass(frozen=True)
class StoreView:
    run: str
    namespace: str
    owner: Mapping[str, Any]  # the ownerReference every step ConfigMap carries
    spec: BenchmarkRunSpec
    planned: tuple[str, ...]  # the plan's step ids, in order
    known: RunSteps  # stored before
    results: tuple[StepResult, ...]  # the run's results so far, stored or not


def next_store(view: StoreView) -> list[StoreAction]:
    actions: list[StoreAction] = []
    new: list[RunSteps] = []
    for result in view.results:
        if result.key in view.known.results or any(result.key in n.results for n in new):
            continue
        try:
            cms = step_configmaps(view.run, result, namespace=view.namespace, owner=view.owner)
        except StepTooLarge as exc:  # what was written before it stays stored
            return [*actions, ExecutionError(f"{exc}: the run stops (fewer clients per step fit)")]
        new.append(RunSteps.of(result))
        actions.append(WriteStep(tuple(cms), new[-1]))
    stored = [view.known, *new]  # not joined: a copy of every stored step a step
    summary = stored_summary(stored, view.spec)
    done = sum(any(step_id in part.results for part in stored) for step_id in view.planned)
    ref = ResultsRef(kind="ConfigMap", name=run_configmap_name(view.run),
                     selector=results_selector(view.run))  # fmt: skip
    progress = f"{done}/{len(view.planned)}"
    return [*actions, SetSummary(summary, done, progress, suspect_message(summary), ref)]


def stored_summary(parts: Sequence[RunSteps], spec: BenchmarkRunSpec) -> BenchmarkRunStatus:
    """status_summary of the slim results (of several parts: what was stored and what is
    being stored), with each step's clients as stored."""
    ordered = sorted((r for part in parts for r in part.results.values()), key=lambda r: r.step_id)
    beside = ChainMap(*(part.beside for part in reversed(parts)))  # a later part's wins
    raw = status_summary(ordered, spec)
    for step in raw["steps"]:
        step["clients"], step["slowestClient"], _ = beside.get(step["id"], (1, "", None))
    return BenchmarkRunStatus.model_validate(raw)


def suspect_message(summary: BenchmarkRunStatus) -> str:
    """The StepsSuspect condition's message (results.validity): `kubectl get br` shows the
    count too. "" when no step is suspect."""
    if not summary.suspect_steps:
        return ""
    listed: Sequence[str] = [
        f"{st.id} ({st.suspect_reasons})" for st in summary.steps if st.verdict == "suspect"
    ]
    return f"{summary.suspect_steps} step(s) suspect: " + ", ".join(listed[:SUSPECT_LISTED])
