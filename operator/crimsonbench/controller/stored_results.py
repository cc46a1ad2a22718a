"""The run's step results: one ConfigMap per step (manifests/results.py), the source of
truth for resume (a stored step is never run again, matched by what it measured:
StepResult.key) and for `crimsonbench fetch`; the status carries their summary.

A tick never reads them whole. The largest admitted sweep (40,960 steps of 16 clients)
holds ~330 MiB of JSON, which every tick used to list and parse. Now each run's results
are read once per operator process, a page at a time, and kept slim in memory
(step_index.py); a step is written once, when it ends, and goes into memory as written.

What is read, written and summarized is decided in decisions/stored_steps.py; this only
carries it out (the API's pages and ConfigMaps, the memory, the status).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from crimsonbench.controller.carry_out import Again, Finished, carry_out
from crimsonbench.controller.decisions.stored_steps import (
    MOST_READS,
    KeepPage,
    Known,
    ListPage,
    ReadAction,
    ReadParts,
    ReadView,
    SetSummary,
    StoreAction,
    StoreView,
    WriteStep,
    next_read,
    next_store,
)
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.slim_steps import RunSteps
from crimsonbench.results.types import StepResult

OTHERS_NAMED = 10  # another's ConfigMaps named in the warning


def load_results(ctx: RunContext) -> dict[str, StepResult]:
    """step key -> slim result (step_index.slim) of every stored step: from memory, read
    from the API the first time."""
    return dict(_known(ctx).results)


def stored_steps(ctx: RunContext) -> RunSteps:
    """The run's stored steps as this process keeps them (read the first time)."""
    return _known(ctx)


def _known(ctx: RunContext) -> RunSteps:
    known = ctx.steps.get(ctx.uid)
    return read_all(ctx) if known is None else known


def read_all(ctx: RunContext) -> RunSteps:
    """Every step the API holds for the run, a page at a time, remembered (step_index). A
    step that cannot be read is left out (it runs again) and named in `unreadable`."""
    ns = ctx.namespace

    def act(action: ReadAction, view: ReadView) -> Again[ReadView] | Finished[RunSteps]:
        match action:
            case ListPage(selector=selector, limit=limit, token=token):
                heads, after = ctx.kube.configmap_page(ns, selector, limit, token)
                return Again(replace(view, page=tuple(heads), token=after, parts=None))
            case ReadParts(names=names):
                parts = {n: p for n in names if (p := ctx.kube.read_configmap(ns, n))}
                return Again(replace(view, parts=parts))
            case KeepPage(steps=steps, others=others):
                return Again(ReadView(view.run, view.uid, token=view.token,
                                      pages=(*view.pages, steps), others=others))  # fmt: skip
            case Known(steps=steps, others=others):
                ctx.steps.put(ctx.uid, steps)
                for why in steps.unreadable:  # its step runs again
                    ctx.logger.warning("a stored step result cannot be read: %s", why)
                if others:
                    ctx.logger.warning(
                        "%d results ConfigMap(s) labelled with this run's name are not its "
                        "own (an earlier run of that name, or another's): not read as its "
                        "results: %s", len(others), ", ".join(others[:OTHERS_NAMED]))  # fmt: skip
                return Finished(steps)

    what = f"the results of {ctx.name}: the API's pages do not end; again"
    return carry_out(next_read, act, ReadView(ctx.name, ctx.uid), most=MOST_READS,
                     contradiction=what)  # fmt: skip


def store_results(ctx: RunContext, plan: RunPlan, results: Mapping[str, StepResult]) -> None:
    """Every result not stored yet into its ConfigMaps (owned by the run; parts before the
    head), and the status's summary. ExecutionError for a step too large to store."""
    view = StoreView(ctx.name, ctx.namespace, ctx.owner_reference(), ctx.spec,
                     tuple(s.id for s in plan.steps), _known(ctx),
                     tuple(results.values()))  # fmt: skip

    def act(action: StoreAction, view: StoreView) -> StoreView:
        match action:
            case WriteStep(configmaps=configmaps, kept=kept):
                for cm in configmaps:
                    ctx.kube.write_configmap(ctx.namespace, cm)
                ctx.steps.add(ctx.uid, kept)
            case SetSummary(summary=summary, suspect=suspect, results=ref):
                status = ctx.record.status
                status.steps, status.peaks = summary.steps, summary.peaks
                status.peak_iops, status.suspect_steps = summary.peak_iops, summary.suspect_steps
                status.steps_done, status.progress = action.steps_done, action.progress
                status.results = ref
                if suspect:
                    ctx.record.condition("StepsSuspect", True, "Suspect", suspect)
            case ExecutionError():
                raise action
        return view

    carry_out(next_store, act, view, most=1, settled=lambda _: None)
