"""The run's step results, kept in `<run>-results-N` ConfigMaps (manifests/results.py): the
source of truth for resume (a stored step is never run again, matched by what it measured:
StepResult.key) and for `crimsonbench fetch`; the status carries their summary."""

from __future__ import annotations

from collections.abc import Mapping

from crimsonbench.controller.run_context import RunContext
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.manifests.results import read_results_configmaps, results_configmaps
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.status_summary import status_summary
from crimsonbench.results.types import StepResult
from crimsonbench.spec.status import BenchmarkRunStatus, ResultsRef


def load_results(ctx: RunContext) -> dict[str, StepResult]:
    """step key -> result of every stored step (an older operator's positional ids too)."""
    selector = f"{LABEL_RUN}={label_value(ctx.name)},{LABEL_ROLE}=results"
    cms = ctx.kube.list_configmaps(ctx.namespace, selector)
    return {r.key: r for r in read_results_configmaps(cms)} if cms else {}


def store_results(ctx: RunContext, plan: RunPlan, results: Mapping[str, StepResult]) -> None:
    """Every result into the ConfigMaps (owned by the run), and the status's summary."""
    ordered = sorted(results.values(), key=lambda r: r.step_id)
    for cm in results_configmaps(ctx.name, ordered, namespace=ctx.namespace):
        cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]
        ctx.kube.replace_configmap(ctx.namespace, cm)
    summary = BenchmarkRunStatus.model_validate(status_summary(ordered, ctx.spec))
    done = sum(s.id in results for s in plan.steps)
    status = ctx.record.status
    status.steps, status.peaks, status.peak_iops = summary.steps, summary.peaks, summary.peak_iops
    status.steps_done, status.progress = done, f"{done}/{len(plan.steps)}"
    status.results = ResultsRef(kind="ConfigMap", name=f"{ctx.name}-results-0")
