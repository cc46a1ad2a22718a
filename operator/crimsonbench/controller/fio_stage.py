"""fio on Kubernetes: the run's cephx user and images, one pinned fio server per client
node and the run's fio driver, then the prefill and every step as one `fio --client` run
in the driver (by exec). Results are kept in ConfigMaps (the source of truth for resume:
a stored step is never run again)."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from crimsonbench.controller import decide, driver
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.sampling import sample_step, summarize
from crimsonbench.errors import ExecutionError, NotReady, ParseError
from crimsonbench.manifests import fio, fio_driver, maintenance, rook_objects
from crimsonbench.manifests.ceph_access import CephAccess, ceph_access_for, rook_client_access
from crimsonbench.manifests.fio_driver import StepReport
from crimsonbench.manifests.naming import GROUP, LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.manifests.results import read_results_configmaps, results_configmaps
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results import step_log
from crimsonbench.results.ceph_client_errors import explain_ceph_client_error
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.fio_json import JobStats, parse_fio_json
from crimsonbench.results.resources import with_reactor_log
from crimsonbench.results.status_summary import status_summary
from crimsonbench.results.step_result import check_job_counts, step_result
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import StepResult


def jobs_namespace(ctx: RunContext) -> str:
    """Rook's secrets can only be mounted in their own namespace, so Jobs run there."""
    return ctx.target.jobs_namespace


def admin_access(ctx: RunContext) -> CephAccess:
    """For cluster-wide reads and commands (facts, crimson setup, config cleanup)."""
    return ceph_access_for(ctx.target)


def fio_access(ctx: RunContext, plan: RunPlan) -> CephAccess:
    """What fio and the image Jobs use: on Rook the run's CephClient, limited to the run's
    pool; on external clusters the user and keyring the spec names."""
    rook_ns = ctx.target.rook_namespace
    if rook_ns is not None:
        return rook_client_access(rook_ns, plan.pool.user)
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
        text = ctx.kube.failed_job_text(ns, name, tail_chars=1 << 20)
        hint = explain_ceph_client_error(text)
        hint = f": {hint}" if hint else ""
        raise ExecutionError(f"{what}: Job {ns}/{name} failed{hint}; log tail:\n{text[-1500:]}")
    return ctx.kube.job_log(ns, name)


def _failure_text(sections: dict[str, str], report: StepReport) -> str:
    """What a failed step said: fio's own messages when it printed some (a fio client's
    JSON says nothing about why), else the output's tail."""
    said = sections.get(step_log.FIO_MESSAGES, "").strip()
    doc = find_json_document(sections.get(step_log.FIO_OUTPUT, "")) or {}
    errors = [
        f"{j.get('jobname')} on {j.get('hostname')}: error {j.get('error')}"
        for j in doc.get("client_stats", doc.get("jobs", []))
        if j.get("error")
    ]
    if said or errors:
        return "fio said: " + "; ".join(errors) + (f"\n{said[-1500:]}" if said else "")
    return f"output tail:\n{report.output[-1500:] or '(empty)'}"


# ---------------------------------------------------------------- before the first step


def ensure_client_user(ctx: RunContext, plan: RunPlan) -> None:
    """Rook: the run's CephClient (caps on the run's pool only); NotReady until Rook made
    its key. External clusters use the keyring the spec names."""
    rook_ns = ctx.target.rook_namespace
    if rook_ns is None:
        return
    body = rook_objects.ceph_client(ctx.name, plan.pool, namespace=rook_ns)
    ctx.kube.ensure_custom(rook_ns, "cephclients", body)
    found = ctx.kube.get_custom(rook_ns, "cephclients", plan.pool.user) or {}
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


def ensure_driver(ctx: RunContext, plan: RunPlan) -> str:
    """The run's fio driver pod (steps run in it by exec); NotReady until it runs."""
    access = fio_access(ctx, plan) if plan.flavor == "crimson" else None
    return driver.ensure_driver(ctx, plan, jobs_namespace(ctx), access)


def run_prefill(ctx: RunContext, plan: RunPlan, servers: dict[str, str], pod: str) -> None:
    if ctx.get("prefilled") or not plan.prefill.jobs:
        ctx.set(prefilled=True)
        return
    ns = jobs_namespace(ctx)
    report = driver.poll(ctx, ns, pod, PREFILL)
    if report.state == "missing":
        driver.start(ctx, ns, pod, PREFILL, fio.client_job_files(plan, None), servers,
                     deadline_s=plan.prefill.deadline_s)  # fmt: skip
        raise NotReady("prefill started")
    if report.state == "running":
        _check_alive(report, plan.prefill.deadline_s, "prefill")
        raise NotReady(f"prefill running ({report.age_s:.0f} s)")
    sections = _finished_sections(report, "prefill")
    check_job_counts("prefill", plan.prefill.jobs, _fio_jobs(sections, servers), 1)
    driver.end(ctx, ns, pod, PREFILL, stored=True)
    ctx.set(prefilled=True)


PREFILL = "prefill"  # the prefill's key on the driver (step ids never are)
# A step the driver still calls running this long past its deadline lost its fio client
# (the driver's container restarted): it can only be failed.
LOST_AFTER_S = 60


def _check_alive(report: StepReport, deadline_s: int, what: str) -> None:
    if report.age_s > deadline_s + LOST_AFTER_S:
        raise ExecutionError(
            f"{what}: no result {report.age_s:.0f} s after it started (deadline {deadline_s} s); "
            "its fio client is gone"
        )


def _finished_sections(report: StepReport, what: str) -> dict[str, str]:
    """The step's output sections; ExecutionError with fio's own words when it failed."""
    try:
        sections = step_log.parse_sections(report.output)
    except ParseError:
        sections = {}
    if report.rc != 0:
        raise ExecutionError(f"{what}: fio exited {report.rc}; {_failure_text(sections, report)}")
    if not sections:
        step_log.parse_sections(report.output)  # raises, naming what came instead
    return sections


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


# On the run: {step id: [why it ran again, ...]} (the status schema has no field for it).
STEP_RETRIES = f"{GROUP}/step-retries"
MAX_STEP_RETRIES = 2


def run_steps(ctx: RunContext, plan: RunPlan, servers: dict[str, str], pod: str) -> None:
    """The sweep, on the fio driver: NotReady while steps remain. A step that ends within
    this tick is stored and the next one starts in the same call (no tick between steps).
    A step during which an OSD restarted (Rook target) measured a cluster in recovery: its
    result is dropped and the step runs again once every OSD is back (at most
    MAX_STEP_RETRIES times)."""
    results = load_results(ctx)  # resume: what is stored is done, whatever status says
    state = SweepState(plan.sweep, results, plan.bandwidth_workloads)
    ns = jobs_namespace(ctx)
    stored_here = False  # a step ended in this call: the next one is new, start it at once
    while (step := state.next_step(plan.steps)) is not None:
        what = f"step {plan.steps.index(step) + 1}/{len(plan.steps)} {step.id}"
        ctx.set(currentStep=step.id)
        report = None if stored_here else driver.poll(ctx, ns, pod, step.id)
        if report is None or report.state == "missing":
            osds = _osds_at_step_start(ctx, what)  # NotReady while an OSD is not back
            files = {fio_driver.OSDS_FILE: json.dumps(osds), **_reactor_sampling(plan)}
            job_files = fio.client_job_files(plan, step)
            started = driver.start(ctx, ns, pod, step.id, job_files, servers,
                                   deadline_s=plan.timing.deadline_s,
                                   extra_files=files)  # fmt: skip
            if started:
                raise NotReady(f"{what} started")
            report = driver.poll(ctx, ns, pod, step.id)  # it was there already
        if report.state == "running":
            _check_alive(report, plan.timing.deadline_s, what)
            sample_step(ctx, fio_access(ctx, plan).namespace, plan)
            wait = decide.wait_for_step_end(report, plan.timing.fio_s, ctx.settings.tick_seconds)
            if wait:
                report = driver.poll(ctx, ns, pod, step.id, wait_s=wait)
            if report.state != "done":
                raise NotReady(f"{what} running ({report.age_s:.0f} s)")
        result = _finished_step(ctx, plan, step, what, report, servers, pod)
        results[step.id] = result
        _store(ctx, plan, results)  # stored before its directory goes: never run twice
        driver.end(ctx, ns, pod, step.id, stored=True)
        stored_here = True
        note = state.record(step, result)
        if note:
            ctx.logger.info("%s", note)
    ctx.set(currentStep="")


def _finished_step(
    ctx: RunContext,
    plan: RunPlan,
    step: Step,
    what: str,
    report: StepReport,
    servers: dict[str, str],
    pod: str,
) -> StepResult:
    """The step's result, or NotReady when it must run again (an OSD was disturbed)."""
    try:
        sections = _finished_sections(report, what)
    except ExecutionError as exc:
        disturbed = _osd_disturbance(ctx, step_log.parse_sections_or_empty(report.output))
        if not disturbed:
            raise
        _run_again(ctx, step, what, pod, f"{disturbed}; the step failed: {exc}")
    disturbed = _osd_disturbance(ctx, sections)
    if disturbed:
        _run_again(ctx, step, what, pod, disturbed)
    jobs = _fio_jobs(sections, servers)
    check_job_counts(f"step {step.id}", plan.fio.jobs, jobs, plan.fio_numjobs)
    resources, source = summarize(ctx)
    reactor_problem = None
    if fio_driver.REACTOR_LOG in sections:
        resources, reactor_problem = with_reactor_log(resources, sections[fio_driver.REACTOR_LOG])
    ctx.set(stepSamples=[])  # the next step starts its own samples
    # wall time: the fio client's start -> end in the driver, as local mode's of a step
    extra: dict[str, Any] = {"metrics_source": source, "wall_seconds": round(report.wall_s, 3)}
    if reactor_problem:
        ctx.logger.warning("%s: reactor utilization: %s", what, reactor_problem)
        extra["reactor_utilization_error"] = reactor_problem
    return step_result(step, plan.fio.jobs, jobs, step_log.iops_logs(sections), resources, extra)


def _reactor_sampling(plan: RunPlan) -> dict[str, str]:
    """Crimson: the driver samples the planned OSDs' reactors while the step runs."""
    if plan.flavor != "crimson" or not plan.osds:
        return {}
    ids = " ".join(str(o.osd_id) for o in plan.osds)
    return {fio_driver.REACTOR_OSDS_FILE: f"{plan.sample_interval_s:g} {ids}\n"}


def _osds_at_step_start(ctx: RunContext, what: str) -> dict[str, str]:
    """Rook: every OSD's incarnation (all of them: the pool spans every OSD), once each
    runs one Ready pod; NotReady before. External clusters: nothing to watch."""
    rook_ns = ctx.target.rook_namespace
    if rook_ns is None:
        return {}
    pods = ctx.kube.list_osd_pods(rook_ns)
    ids = sorted({p.osd_id for p in pods} | {int(k) for k in ctx.get("osdPlacement") or {}})
    reason = decide.osds_at_rest(ids, pods)
    if reason:
        raise NotReady(f"{what} waits for the OSDs: {reason}")
    return decide.osd_incarnations(ids, pods)


def _osd_disturbance(ctx: RunContext, sections: dict[str, str]) -> str:
    """'' unless an OSD recorded at the step's start restarted or is down now."""
    rook_ns = ctx.target.rook_namespace
    recorded = sections.get(fio_driver.OSDS_FILE, "").strip()
    if rook_ns is None or not recorded:
        return ""
    return decide.osd_disturbance(json.loads(recorded), ctx.kube.list_osd_pods(rook_ns))


def _run_again(ctx: RunContext, step: Step, what: str, pod: str, why: str) -> NoReturn:
    """Drop the step's attempt (its result is not stored) so the step runs again; raises
    NotReady, or ExecutionError once the step has been retried MAX_STEP_RETRIES times."""
    retries: dict[str, list[str]] = json.loads(ctx.annotation(STEP_RETRIES) or "{}")
    reasons = retries.setdefault(step.id, [])
    if len(reasons) >= MAX_STEP_RETRIES:
        raise ExecutionError(f"{what} failed {len(reasons) + 1} times; last: {why}")
    reasons.append(why[:1000])
    ctx.annotate(STEP_RETRIES, json.dumps(retries, sort_keys=True))
    driver.end(ctx, jobs_namespace(ctx), pod, step.id, stored=False)
    message = f"{what} runs again ({len(reasons)}/{MAX_STEP_RETRIES}): {why}"
    ctx.condition("StepRetried", True, "OsdRestarted", message)
    ctx.logger.warning("%s", message)
    raise NotReady(message)


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
