"""The run's step results: one ConfigMap per step (manifests/results.py), the source of
truth for resume (a stored step is never run again, matched by what it measured:
StepResult.key) and for `crimsonbench fetch`; the status carries their summary.

A tick never reads them whole. The largest admitted sweep (40,960 steps of 16 clients)
holds ~330 MiB of JSON, which every tick used to list and parse. Now each run's results
are read once per operator process, a page at a time, and kept slim in memory
(step_index.py); a step is written once, when it ends, and goes into memory as written.
"""

from __future__ import annotations

from collections.abc import Mapping

from crimsonbench.controller.run_context import RunContext
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
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.slim_steps import RunSteps
from crimsonbench.results.status_summary import status_summary
from crimsonbench.results.types import StepResult
from crimsonbench.spec.status import BenchmarkRunStatus, ResultsRef

PAGE = 100  # step ConfigMaps per list call (~1.2 MiB with 16 clients a step)


def load_results(ctx: RunContext) -> dict[str, StepResult]:
    """step key -> slim result (step_index.slim) of every stored step: from memory, read
    from the API the first time."""
    return dict(_known(ctx).results)


def stored_steps(ctx: RunContext) -> RunSteps:
    """The run's stored steps as this process keeps them (read the first time)."""
    return _known(ctx)


def _known(ctx: RunContext) -> RunSteps:
    known = ctx.steps.get(ctx.uid)
    if known is None:
        known = read_all(ctx)
        ctx.steps.put(ctx.uid, known)
        for why in known.unreadable:  # its step runs again
            ctx.logger.warning("a stored step result cannot be read: %s", why)
    return known


def read_all(ctx: RunContext) -> RunSteps:
    """Every step the API holds for the run, a page at a time. A step that cannot be read
    is left out (it runs again) and named in `unreadable`."""
    known = RunSteps()
    kube, ns = ctx.kube, ctx.namespace
    others: list[str] = []  # found by the run's name, not the run's own: never its results
    for page in kube.configmap_pages(ns, step_selector(ctx.name), PAGE):
        others += not_owned(page, ctx.uid)
        for head in (h for h in page if owned_by(h, ctx.uid)):
            parts = {n: p for n in part_names(head) if (p := kube.read_configmap(ns, n))}
            try:
                known.add_json(read_step_json(head, parts))
            except ValueError as exc:
                known.unreadable.append(str(exc))
    if others:
        ctx.logger.warning(
            "%d results ConfigMap(s) labelled with this run's name are not its own (an "
            "earlier run of that name, or another's): not read as its results: %s",
            len(others), ", ".join(others[:10]))  # fmt: skip
    return known


def store_results(ctx: RunContext, plan: RunPlan, results: Mapping[str, StepResult]) -> None:
    """Every result not stored yet into its ConfigMaps (owned by the run; parts before the
    head), and the status's summary. ExecutionError for a step too large to store."""
    known, owner = _known(ctx), ctx.owner_reference()
    for result in results.values():
        if result.key in known.results:
            continue
        try:
            cms = step_configmaps(ctx.name, result, namespace=ctx.namespace, owner=owner)
        except StepTooLarge as exc:
            raise ExecutionError(f"{exc}: the run stops (fewer clients per step fit)") from exc
        for cm in cms:
            ctx.kube.write_configmap(ctx.namespace, cm)
        known.add(result)
    summary = _summary(known, ctx)
    done = sum(s.id in known.results for s in plan.steps)
    status = ctx.record.status
    status.steps, status.peaks, status.peak_iops = summary.steps, summary.peaks, summary.peak_iops
    status.suspect_steps = summary.suspect_steps
    if summary.suspect_steps:  # results.validity: kubectl get br shows the count too
        listed = [
            f"{st.id} ({st.suspect_reasons})" for st in summary.steps if st.verdict == "suspect"
        ]
        said = f"{summary.suspect_steps} step(s) suspect: " + ", ".join(listed[:20])
        ctx.record.condition("StepsSuspect", True, "Suspect", said)
    status.steps_done, status.progress = done, f"{done}/{len(plan.steps)}"
    status.results = ResultsRef(kind="ConfigMap", name=run_configmap_name(ctx.name),
                                selector=results_selector(ctx.name))  # fmt: skip


def _summary(known: RunSteps, ctx: RunContext) -> BenchmarkRunStatus:
    """status_summary of the slim results, with each step's clients as stored."""
    ordered = sorted(known.results.values(), key=lambda r: r.step_id)
    raw = status_summary(ordered, ctx.spec)
    for step in raw["steps"]:
        step["clients"], step["slowestClient"], _ = known.beside.get(step["id"], (1, "", None))
    return BenchmarkRunStatus.model_validate(raw)
