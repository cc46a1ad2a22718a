"""Prefill and sweep steps on Kubernetes: one Job per step on the client node, fio JSON read
back from the pod log, results kept in ConfigMaps (the source of truth for resume)."""

from __future__ import annotations

from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.sampling import sample_step, summarize
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady
from crimsonbench.manifests import jobs as job_manifests
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.manifests.results import (
    read_results_configmaps,
    results_configmaps,
    status_summary,
)
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import StepResult


def jobs_namespace(ctx: RunContext) -> str:
    """Rook's mon secret can only be mounted in its own namespace, so Jobs run there."""
    rook = ctx.spec.target.rook
    return rook.namespace if rook is not None else ctx.namespace


def ceph_access(ctx: RunContext) -> job_manifests.CephAccess:
    if ctx.spec.target.local is not None:
        raise InvalidSpec(
            "spec.target",
            "the operator runs rook or external targets; local targets run with `crimsonbench run`",
        )
    return job_manifests.ceph_access_for(ctx.spec, ctx.namespace)


def _await_job(
    ctx: RunContext, body: dict, configmap: dict | None, what: str, sample: bool = False
) -> str:
    """Create (once) and wait; returns the pod log when the Job succeeded."""
    ns = jobs_namespace(ctx)
    name = body["metadata"]["name"]
    body["metadata"]["namespace"] = ns
    state = ctx.kube.job_state(ns, name)
    if state == "missing":
        if configmap is not None:
            ctx.kube.replace_configmap(ns, configmap)
        ctx.kube.ensure_job(ns, body)
        raise NotReady(f"{what}: Job {ns}/{name} created")
    if state == "running":
        if sample:
            sample_step(ctx, ns, name)
        raise NotReady(f"{what}: Job {ns}/{name} running")
    if state == "failed":
        log = ctx.kube.job_log(ns, name)[-1500:]
        raise ExecutionError(f"{what}: Job {ns}/{name} failed; log tail:\n{log}")
    return ctx.kube.job_log(ns, name)


def run_prefill(ctx: RunContext, plan: RunPlan) -> None:
    if ctx.get("prefilled"):
        return
    access = ceph_access(ctx)
    body = job_manifests.prefill_job(
        ctx.name,
        plan,
        ctx.settings.fio_image,
        access,
        spec=ctx.spec,
        node=ctx.spec.client.node,
        **ctx.settings.job_options(),
    )
    cm = job_manifests.fio_jobs_configmap(ctx.name, plan.prefill_jobs, namespace=access.namespace)
    _await_job(ctx, body, cm, "pool, images and prefill")
    ctx.set(prefilled=True)


def load_results(ctx: RunContext) -> dict[str, StepResult]:
    selector = f"{LABEL_RUN}={label_value(ctx.name)},{LABEL_ROLE}=results"
    cms = ctx.kube.list_configmaps(ctx.namespace, selector)
    return {r.step_id: r for r in read_results_configmaps(cms)} if cms else {}


def _store(ctx: RunContext, results: dict[str, StepResult], total: int) -> None:
    ordered = [results[k] for k in sorted(results)]
    for cm in results_configmaps(ctx.name, ordered, namespace=ctx.namespace):
        cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]
        ctx.kube.replace_configmap(ctx.namespace, cm)
    ctx.set(
        **status_summary(ordered, ctx.spec),
        stepsDone=len(ordered),
        progress=f"{len(ordered)}/{total}",
        results={"kind": "ConfigMap", "name": f"{ctx.name}-results-0"},
    )


def _finish_step(ctx: RunContext, step: Step, log_text: str, wall_seconds: float) -> StepResult:
    outputs = job_manifests.parse_step_log(log_text)
    jobs = [j for text in outputs.values() for j in parse_fio_json(text)]
    fio = combine(jobs)
    resources, source = summarize(ctx)
    ctx.set(stepSamples=[])  # the next step starts its own samples
    return StepResult(
        step.id,
        step.workload,
        step.iodepth,
        step.repeat,
        fio,
        resources,
        # the Job's start -> completion, as local mode's wall time of a step
        extra={"metrics_source": source, "wall_seconds": round(wall_seconds, 3)},
    )


def run_steps(ctx: RunContext, plan: RunPlan) -> None:
    results = load_results(ctx)  # resume: what is stored is done, whatever status says
    state = SweepState(ctx.spec.sweep, results)
    access = ceph_access(ctx)
    node = ctx.spec.client.node or ""
    for index, step in enumerate(plan.steps, 1):
        if state.skip_reason(step):
            continue
        ctx.set(currentStep=step.id)
        body = job_manifests.fio_step_job(
            ctx.name,
            step,
            node,
            ctx.settings.fio_image,
            access,
            plan.cpu.client_cpuset,
            grace_seconds=ctx.settings.step_grace_seconds,
            **ctx.settings.job_options(),
        )
        cm = job_manifests.fio_jobs_configmap(ctx.name, step, namespace=access.namespace)
        what = f"step {index}/{len(plan.steps)} {step.id}"
        log_text = _await_job(ctx, body, cm, what, sample=True)
        wall = ctx.kube.job_seconds(jobs_namespace(ctx), body["metadata"]["name"])
        result = _finish_step(ctx, step, log_text, wall)
        results[step.id] = result
        _store(ctx, results, len(plan.steps))  # stored before the Job goes: never run twice
        ctx.kube.delete_job(jobs_namespace(ctx), body["metadata"]["name"])
        note = state.record(step, result)
        if note:
            ctx.logger.info("%s", note)
