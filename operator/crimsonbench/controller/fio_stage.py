"""fio on Kubernetes: the run's cephx user and images, one pinned fio server per client
node, then the prefill and every step as one `fio --client` Job each. Results are kept in
ConfigMaps (the source of truth for resume: a stored step is never run again)."""

from __future__ import annotations

import json
from typing import Any

from crimsonbench.controller import decide
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.sampling import sample_step, summarize
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady, ParseError
from crimsonbench.manifests import fio, maintenance, rook_objects
from crimsonbench.manifests.ceph_access import CephAccess, ceph_access_for, rook_client_access
from crimsonbench.manifests.naming import GROUP, LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.manifests.results import read_results_configmaps, results_configmaps
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results import step_log
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.fio_json import JobStats, parse_fio_json
from crimsonbench.results.status_summary import status_summary
from crimsonbench.results.step_result import check_job_counts, step_result
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import StepResult


def jobs_namespace(ctx: RunContext) -> str:
    """Rook's secrets can only be mounted in their own namespace, so Jobs run there."""
    rook = ctx.spec.target.rook
    return rook.namespace if rook is not None else ctx.namespace


def admin_access(ctx: RunContext) -> CephAccess:
    """For cluster-wide reads and commands (facts, crimson setup, config cleanup)."""
    if ctx.spec.target.local is not None:
        raise InvalidSpec(
            "spec.target",
            "the operator runs rook or external targets; local targets run with `crimsonbench run`",
        )
    return ceph_access_for(ctx.spec, ctx.namespace)


def fio_access(ctx: RunContext, plan: RunPlan) -> CephAccess:
    """What fio and the image Jobs use: on Rook the run's CephClient, limited to the run's
    pool; on external clusters the user and keyring the spec names."""
    rook = ctx.spec.target.rook
    if rook is not None:
        return rook_client_access(rook.namespace, plan.pool.user)
    return admin_access(ctx)


def await_job(ctx: RunContext, body: dict[str, Any], what: str, cm: dict | None = None) -> str:
    """Create (once) and wait; returns the pod log when the Job succeeded."""
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    state = ctx.kube.job_state(ns, name)
    if state == "missing":
        if cm is not None:
            ctx.kube.replace_configmap(ns, cm)
        ctx.kube.ensure_job(ns, body)
        raise NotReady(f"{what}: Job {ns}/{name} created")
    if state == "running":
        raise NotReady(f"{what}: Job {ns}/{name} running")
    if state == "failed":
        raise ExecutionError(f"{what}: Job {ns}/{name} failed; {_failure_log(ctx, ns, name)}")
    return ctx.kube.job_log(ns, name)


def _failure_log(ctx: RunContext, namespace: str, name: str) -> str:
    """What a failed Job said: fio's own messages when it printed some (a fio client's
    JSON says nothing about why), else the log's tail."""
    log = ctx.kube.job_log(namespace, name)
    try:
        sections = step_log.parse_sections(log)
    except ParseError:
        sections = {}
    said = sections.get(step_log.FIO_MESSAGES, "").strip()
    doc = find_json_document(sections.get(step_log.FIO_OUTPUT, "")) or {}
    errors = [
        f"{j.get('jobname')} on {j.get('hostname')}: error {j.get('error')}"
        for j in doc.get("client_stats", doc.get("jobs", []))
        if j.get("error")
    ]
    if said or errors:
        return "fio said: " + "; ".join(errors) + (f"\n{said[-1500:]}" if said else "")
    return f"log tail:\n{log[-1500:] or '(empty: the pod never ran, or its log is gone)'}"


# ---------------------------------------------------------------- before the first step


def ensure_client_user(ctx: RunContext, plan: RunPlan) -> None:
    """Rook: the run's CephClient (caps on the run's pool only); NotReady until Rook made
    its key. External clusters use the keyring the spec names."""
    rook = ctx.spec.target.rook
    if rook is None:
        return
    body = rook_objects.ceph_client(ctx.name, plan.pool, namespace=rook.namespace)
    ctx.kube.ensure_custom(rook.namespace, "cephclients", body)
    found = ctx.kube.get_custom(rook.namespace, "cephclients", plan.pool.user) or {}
    phase = (found.get("status") or {}).get("phase", "")
    if phase != "Ready":
        raise NotReady(f"waiting for Rook to create cephx user client.{plan.pool.user} ({phase})")


def ensure_images(ctx: RunContext, plan: RunPlan) -> None:
    if ctx.get("imagesCreated"):
        return
    access = fio_access(ctx, plan)
    body = maintenance.create_images_job(
        ctx.name, plan.pool.name, plan.pool.images, plan.pool.image_size_bytes, access,
        ctx.settings.pod_options(),
    )  # fmt: skip
    await_job(ctx, body, f"creating {len(plan.pool.images)} RBD images")
    ctx.kube.delete_job(access.namespace, body["metadata"]["name"])
    ctx.set(imagesCreated=True)


def ensure_servers(ctx: RunContext, plan: RunPlan) -> dict[str, str]:
    """One fio server Job per client node; client -> "ip:port" once all are Ready."""
    access = fio_access(ctx, plan)
    opts = ctx.settings.pod_options()
    pods = {}
    for client in plan.clients:
        body = fio.fio_server_job(ctx.name, client, plan, access, opts, port=ctx.settings.fio_port)
        name = body["metadata"]["name"]
        if ctx.kube.job_state(access.namespace, name) == "missing":
            ctx.kube.ensure_job(access.namespace, body)
        pods[client.name] = ctx.kube.job_pod(access.namespace, name)
    found = decide.server_addresses(plan, pods, ctx.settings.fio_port)
    if isinstance(found, decide.Progress):
        raise NotReady(found.message)
    if found != ctx.get("fioServers"):
        ctx.set(fioServers=found)
    return found


def run_prefill(ctx: RunContext, plan: RunPlan, servers: dict[str, str]) -> None:
    if ctx.get("prefilled") or not plan.prefill.jobs:
        ctx.set(prefilled=True)
        return
    ns = jobs_namespace(ctx)
    cm = fio.fio_jobs_configmap(ctx.name, "prefill", plan.prefill.jobs, ns, user=plan.pool.user)
    body = fio.fio_client_job(
        ctx.name, "prefill", plan.prefill.jobs, servers, ns, ctx.settings.pod_options(),
        deadline_s=plan.prefill.deadline_s, node=plan.clients[0].node,
    )  # fmt: skip
    log = await_job(ctx, body, "prefill", cm)
    prefill = Step(-1, "prefill", 16, 1, plan.prefill.jobs)
    check_job_counts(prefill, _fio_jobs(step_log.parse_sections(log), servers), 1)
    ctx.kube.delete_job(ns, body["metadata"]["name"])
    ctx.kube.delete_configmap(ns, cm["metadata"]["name"])
    ctx.set(prefilled=True)


# ---------------------------------------------------------------- steps


def load_results(ctx: RunContext) -> dict[str, StepResult]:
    selector = f"{LABEL_RUN}={label_value(ctx.name)},{LABEL_ROLE}=results"
    cms = ctx.kube.list_configmaps(ctx.namespace, selector)
    return {r.step_id: r for r in read_results_configmaps(cms)} if cms else {}


def _store(ctx: RunContext, plan: RunPlan, results: dict[str, StepResult]) -> None:
    ordered = [results[k] for k in sorted(results)]
    for cm in results_configmaps(ctx.name, ordered, namespace=ctx.namespace):
        cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]
        ctx.kube.replace_configmap(ctx.namespace, cm)
    ctx.set(
        **status_summary(ordered, ctx.spec),
        stepsDone=len(ordered),
        progress=f"{len(ordered)}/{len(plan.steps)}",
        results={"kind": "ConfigMap", "name": f"{ctx.name}-results-0"},
    )


# On a step's client Job: every OSD daemon's incarnation when the step started.
OSD_INCARNATIONS = f"{GROUP}/osd-pods"
# On the run: {step id: [why it ran again, ...]} (the status schema has no field for it).
STEP_RETRIES = f"{GROUP}/step-retries"
MAX_STEP_RETRIES = 2


def run_steps(ctx: RunContext, plan: RunPlan, servers: dict[str, str]) -> None:
    """One step per call at most: NotReady while steps remain. A step during which an OSD
    restarted (Rook target) measured a cluster in recovery: its result is dropped and the
    step runs again once every OSD is back (at most MAX_STEP_RETRIES times)."""
    results = load_results(ctx)  # resume: what is stored is done, whatever status says
    state = SweepState(plan.sweep, results, plan.bandwidth_workloads)
    step = state.next_step(plan.steps)
    if step is None:
        ctx.set(currentStep="")
        return
    index = plan.steps.index(step)
    ns = jobs_namespace(ctx)
    ctx.set(currentStep=step.id)
    body = fio.fio_client_job(
        ctx.name, step.id, step.jobs, servers, ns, ctx.settings.pod_options(),
        deadline_s=plan.timing.deadline_s, node=plan.clients[0].node,
    )  # fmt: skip
    name = body["metadata"]["name"]
    what = f"step {index + 1}/{len(plan.steps)} {step.id}"
    job_state = ctx.kube.job_state(ns, name)
    if job_state == "running":
        sample_step(ctx, fio_access(ctx, plan).namespace, plan)
    elif job_state == "missing":
        # a previous attempt's pod (deleted in the background) still holds its Guaranteed
        # CPUs: the new one would wait behind it, maybe past the Job's deadline
        if ctx.kube.pod_names(ns, f"job-name={name}"):
            raise NotReady(f"{what} waits for the previous attempt's pod to go")
        osds = _osds_at_step_start(ctx, what)  # NotReady while an OSD is not back
        body["metadata"].setdefault("annotations", {})[OSD_INCARNATIONS] = json.dumps(osds)
    cm = fio.fio_jobs_configmap(ctx.name, step.id, step.jobs, ns, user=plan.pool.user)
    try:
        log = await_job(ctx, body, what, cm)
    except ExecutionError as exc:
        disturbed = _osd_disturbance(ctx, ns, name)
        if not disturbed:
            raise
        _run_again(ctx, step, what, ns, name, f"{disturbed}; the step failed: {exc}")
    disturbed = _osd_disturbance(ctx, ns, name)
    if disturbed:
        _run_again(ctx, step, what, ns, name, disturbed)
    wall = ctx.kube.job_seconds(ns, name)
    result = _step_result(ctx, plan, step, log, servers, wall)
    results[step.id] = result
    _store(ctx, plan, results)  # stored before the Job goes: never run twice
    ctx.kube.delete_job(ns, name)
    ctx.kube.delete_configmap(ns, cm["metadata"]["name"])
    note = state.record(step, result)
    if note:
        ctx.logger.info("%s", note)
    raise NotReady(f"{what} done")


def _osds_at_step_start(ctx: RunContext, what: str) -> dict[str, str]:
    """Rook: every OSD's incarnation (all of them: the pool spans every OSD), once each
    runs one Ready pod; NotReady before. External clusters: nothing to watch."""
    rook = ctx.spec.target.rook
    if rook is None:
        return {}
    pods = ctx.kube.list_osd_pods(rook.namespace)
    ids = sorted({p.osd_id for p in pods} | {int(k) for k in ctx.get("osdPlacement") or {}})
    reason = decide.osds_at_rest(ids, pods)
    if reason:
        raise NotReady(f"{what} waits for the OSDs: {reason}")
    return decide.osd_incarnations(ids, pods)


def _osd_disturbance(ctx: RunContext, namespace: str, job: str) -> str:
    """'' unless an OSD recorded at the step's start restarted or is down now."""
    rook = ctx.spec.target.rook
    recorded = ctx.kube.job_annotations(namespace, job).get(OSD_INCARNATIONS)
    if rook is None or not recorded:
        return ""
    return decide.osd_disturbance(json.loads(recorded), ctx.kube.list_osd_pods(rook.namespace))


def _run_again(ctx: RunContext, step: Step, what: str, ns: str, job: str, why: str) -> None:
    """Drop the step's Job (its result is not stored) so the step runs again; raises
    NotReady, or ExecutionError once the step has been retried MAX_STEP_RETRIES times."""
    retries: dict[str, list[str]] = json.loads(ctx.annotation(STEP_RETRIES) or "{}")
    reasons = retries.setdefault(step.id, [])
    if len(reasons) >= MAX_STEP_RETRIES:
        raise ExecutionError(f"{what} failed {len(reasons) + 1} times; last: {why}")
    reasons.append(why[:1000])
    ctx.annotate(STEP_RETRIES, json.dumps(retries, sort_keys=True))
    ctx.kube.delete_job(ns, job)
    message = f"{what} runs again ({len(reasons)}/{MAX_STEP_RETRIES}): {why}"
    ctx.condition("StepRetried", True, "OsdRestarted", message)
    ctx.logger.warning("%s", message)
    raise NotReady(message)


def _step_result(
    ctx: RunContext,
    plan: RunPlan,
    step: Step,
    log: str,
    servers: dict[str, str],
    wall_seconds: float,
) -> StepResult:
    sections = step_log.parse_sections(log)
    jobs = _fio_jobs(sections, servers)
    check_job_counts(step, jobs, plan.fio_numjobs)
    resources, source = summarize(ctx)
    ctx.set(stepSamples=[])  # the next step starts its own samples
    # wall time: the Job's start -> completion, as local mode's wall time of a step
    extra = {"metrics_source": source, "wall_seconds": round(wall_seconds, 3)}
    return step_result(step, jobs, step_log.iops_logs(sections), resources, extra)


def _fio_jobs(sections: dict[str, str], servers: dict[str, str]) -> dict[str, list[JobStats]]:
    """fio's jobs per client, by the server (host:port) that ran each."""
    by_addr = {addr: client for client, addr in servers.items()}
    out: dict[str, list[JobStats]] = {}
    for job in parse_fio_json(step_log.fio_output(sections)):
        client = by_addr.get(job.host)
        if client is None:
            raise ExecutionError(f"fio reported a job from unknown server {job.host}")
        out.setdefault(client, []).append(job)
    return out
