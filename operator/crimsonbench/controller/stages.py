"""The reconcile state machine. One tick runs the current stage once; a stage returns the
next stage, or raises NotReady to be called again on the next tick. All state is in the
API (the run's status, record.RunRecord; named ConfigMaps/Jobs/Leases), so a restarted
operator resumes where it was.

    lease -> observe -> patch -> rollout -> prepare -> steps -> restore -> (Completed|Failed)

observe records what the run depends on once (client nodes, where each OSD runs, each
node's CPUs, the option names the mons know, the spec as planned) in the status, so every
later tick and every restarted operator makes the very same plan from it (plans.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from crimsonbench.controller import bounded, external, lease, rook, rook_pool, room
from crimsonbench.controller.decisions import decide
from crimsonbench.controller.fio_setup import (
    admin_access,
    ensure_client_user,
    ensure_driver,
    ensure_images,
    ensure_servers,
)
from crimsonbench.controller.jobs import job_log
from crimsonbench.controller.plans import layout_of, plan_for
from crimsonbench.controller.record import now_iso
from crimsonbench.controller.restore import restore_cluster
from crimsonbench.controller.run_context import RunBase, RunContext
from crimsonbench.controller.step_loop import run_prefill, run_steps
from crimsonbench.errors import (
    CrimsonBenchError,
    ExecutionError,
    InvalidSpec,
    NotReady,
    ParseError,
    TargetMissing,
)
from crimsonbench.manifests import fio_driver
from crimsonbench.manifests.cephcluster import cephcluster_sections
from crimsonbench.manifests.maintenance import (
    ROLE_CEPH_CLEANUP,
    ROLE_RBD_CLEANUP,
    cluster_facts_job,
)
from crimsonbench.manifests.naming import LABEL_ROLE
from crimsonbench.manifests.results import run_configmap
from crimsonbench.plan.build import pool_name
from crimsonbench.plan.hosts import plan_hosts
from crimsonbench.plan.summary import plan_summary
from crimsonbench.plan.types import RunPlan
from crimsonbench.results import step_log
from crimsonbench.results.types import RunInfo
from crimsonbench.spec.status import MonChange, Phase

ORDER = ("lease", "observe", "patch", "rollout", "prepare", "steps", "restore")


def stage_lease(ctx: RunContext) -> str:
    lease.record_target(ctx)  # where the run acts, before it asks for anything
    holder = lease.take(ctx)
    status = ctx.record.status
    if holder != ctx.holder:
        status.phase = Phase.PENDING
        ctx.record.condition(
            "ClusterFree",
            False,
            "ClusterBusy",
            f"another run uses this Ceph cluster: {holder.rsplit('/', 1)[0]}; "
            "this run starts when it finishes",
        )
        raise NotReady("cluster busy")
    rook.check_not_patched(ctx)  # a run before left it patched: that is not an original
    ctx.record.condition("ClusterFree", True, "LeaseAcquired", "this run has the cluster to itself")
    status.phase, status.started_at = Phase.PREPARING, status.started_at or now_iso()
    return "observe"


def stage_observe(ctx: RunContext) -> str:
    status = ctx.record.status
    if not status.client_nodes:
        status.client_nodes = list(decide.select_client_nodes(ctx.spec.client,
                                                              ctx.kube.list_nodes()))  # fmt: skip
    rook_ns, selection = ctx.target.rook_namespace, ctx.spec.target.rook  # osdNodes, osdIds
    if rook_ns is not None and selection is not None and not status.osd_placement:
        placement = decide.select_osds(ctx.kube.list_osd_pods(rook_ns), selection)
        status.osd_placement = {str(k): v for k, v in placement.items()}
    layout = layout_of(ctx)  # NotReady until every node's topology is probed
    # CPU layout first, and consent where the cephConfig shows a deployed crimson layout:
    # a spec that cannot run on these nodes fails here, before any Job reads the cluster
    hosts, _ = plan_hosts(ctx.spec, layout)
    rook.check_consent_now(ctx, hosts, early=True)
    if not status.option_family:
        job = cluster_facts_job(ctx.child, admin_access(ctx), ctx.settings.pod_options())
        facts_log = job_log(ctx.kube, job, "reading the cluster")
        facts = decide.ClusterFacts.from_sections(step_log.parse_sections(facts_log))
        family = decide.preflight(ctx.spec, facts, ctx.record.placement,
                                  pool_name(ctx.spec, ctx.owner))  # fmt: skip
        ctx.kube.delete_job(job["metadata"]["namespace"], job["metadata"]["name"])
        status.option_family = family or "none"
        _record_owned(ctx, plan_for(ctx), facts)  # with the facts, in the same tick
    rook.check_consent_now(ctx, hosts)  # the OSDs are what the spec says: may it re-provision?
    plan = plan_for(ctx)  # InvalidSpec here names the field (e.g. cpuSet vs a node)
    fio_driver.check_fits_one_exec(plan)  # a step's job files travel in one exec
    room.check_room(ctx, plan)  # the resized OSD pods and the fio pods fit their nodes
    _record_run_info(ctx, plan)
    ctx.record.book.planned_spec = json.dumps(_spec_json(ctx), sort_keys=True)
    status.steps_total, status.progress = len(plan.steps), f"0/{len(plan.steps)}"
    where = ", ".join(f"{h.node}: osd {list(h.osd_ids)}" for h in plan.hosts) or "none"
    clients = ", ".join(f"{c.name} cpus {c.cpuset}" for c in plan.clients)
    ctx.record.condition("Planned", True, "CpuPlanned", f"OSDs {where}; fio {clients}")
    return "patch"


def _record_owned(ctx: RunContext, plan: RunPlan, facts: decide.ClusterFacts) -> None:
    """The undo record of what the run will create (its pool, cephx user, images: all
    named from its uid) and of the mon database's values it will make Rook change, before
    any of it exists: cleanup and the restore read this, never the spec."""
    undo = ctx.record.book.undo
    rook_target = ctx.target.rook_namespace is not None
    undo.fsid = undo.fsid or facts.fsid
    undo.pool, undo.user = plan.pool.name, plan.pool.user
    undo.pool_object = plan.pool.name if rook_target else ""
    undo.client_object = plan.pool.user if rook_target else ""
    undo.images, undo.keep_images = list(plan.pool.images), plan.pool.keep_images
    undo.mon_changes = [
        MonChange(who=who, key=key, value=str(value), before=facts.mon_config.get((who, key)))
        for who, options in cephcluster_sections(plan).items()
        for key, value in options.items()
    ] if rook_target else []  # fmt: skip


def _spec_json(ctx: RunContext) -> dict[str, object]:
    return ctx.spec.model_dump(mode="json", by_alias=True)


def _record_run_info(ctx: RunContext, plan: RunPlan) -> None:
    """What ran, for `crimsonbench fetch` (a results directory like a local run's)."""
    info = RunInfo.from_spec(
        ctx.name,
        ctx.spec,
        ceph_version=rook.ceph_version(ctx) or "",
        host=",".join(c.node or "" for c in plan.clients),
        started=ctx.record.status.started_at or now_iso(),
    )
    cm = run_configmap(ctx.name, info, plan_summary(plan), namespace=ctx.namespace)
    cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]
    ctx.kube.write_configmap(ctx.namespace, cm)  # another's of that name: refused, kept


def stage_patch(ctx: RunContext) -> str:
    if ctx.target.kind == "rook":
        rook.patch_cluster(ctx, plan_for(ctx))
    return "rollout"


def stage_rollout(ctx: RunContext) -> str:
    if ctx.target.kind == "rook":
        rook.wait_rollout(ctx, plan_for(ctx))
    return "prepare"


def stage_prepare(ctx: RunContext) -> str:
    plan = plan_for(ctx)
    rook_pool.ensure_pool(ctx, plan)
    ensure_client_user(ctx, plan)
    ensure_images(ctx, plan)
    servers = ensure_servers(ctx, plan)
    run_prefill(ctx, plan, servers, ensure_driver(ctx, plan))
    ctx.record.status.phase = Phase.RUNNING
    return "steps"


def stage_steps(ctx: RunContext) -> str:
    plan = plan_for(ctx)
    ctx.record.status.steps_total = len(plan.steps)  # the spec may have gained steps
    servers = ensure_servers(ctx, plan)
    run_steps(ctx, plan, servers, ensure_driver(ctx, plan))  # NotReady while steps remain
    return "restore"


def stage_restore(ctx: RunBase) -> str:
    status = ctx.record.status
    status.phase = Phase.RESTORING
    cleanup(ctx)
    failure = status.failure
    status.phase = Phase.FAILED if failure else Phase.COMPLETED
    status.message, status.finished_at = failure or "all steps done", now_iso()
    status.current_step = ""
    return "done"


def cleanup(ctx: RunBase) -> None:
    """Leave the cluster as it was found, from the run's undo record alone (never the
    spec, which may have been edited or may no longer validate): the run's images and
    pool removed, then the cluster restored, the run's children deleted, the lease
    released. Raises NotReady until done (the images' removal Job, Rook removing the pool
    and the cephx user, Rook rolling the OSDs back, the mon database's restore Job, the
    pods gone); each call goes on where the last one stopped.

    A run that never held the cluster (it was waiting for the lease) touched nothing: the
    lease is let go if it holds it, and that is all."""
    undo = ctx.record.book.undo
    if ctx.record.status.stage in ("", "lease") or not undo.jobs_namespace:
        lease.release(ctx)
        return
    ns = undo.jobs_namespace
    # every Job but the cleanup ones, which must outlive the fio servers they wait for
    keep = f"{LABEL_ROLE}!={ROLE_RBD_CLEANUP},{LABEL_ROLE}!={ROLE_CEPH_CLEANUP}"
    ctx.kube.delete_jobs(ns, f"{ctx.selector},{keep}")
    # The run's images and pool go before the restore restarts any OSD: an OSD restarted
    # under them can lose their PGs (crimson 20.2.4 on cyanstore keeps only what its last
    # clean stop wrote, and its stop does not always finish), and `rbd rm` then waits on
    # them until the Job fails (seen on kind). Both waits are bounded: the restore follows.
    external.remove_images(ctx)  # as the run's user: before it goes
    rook_pool.remove_pool_and_user(ctx)
    restored = restore_cluster(ctx)
    # nothing of the run left in the Jobs' namespace: Jobs and their pods
    ctx.kube.delete_jobs(ns, ctx.selector)
    pods = ctx.kube.pod_names(ns, ctx.selector)
    if pods:
        raise NotReady(f"waiting for {len(pods)} pod(s) of the run to go: {', '.join(pods[:5])}")
    ctx.kube.delete_network_policies(ns, ctx.selector)  # its fio pods are gone: nothing to guard
    lease.release(ctx)
    if restored:
        ctx.record.condition("ClusterRestored", True, "Restored", "cluster left as it was found")
        return
    refused = ctx.record.conditions()["ClusterRestored"]
    failure = ctx.record.status.failure
    ctx.record.status.failure = (f"{failure}; " if failure else "") + (
        f"not restored: {refused.message}"
    )


STAGES: dict[str, Callable[[RunContext], str]] = {
    "lease": stage_lease,
    "observe": stage_observe,
    "patch": stage_patch,
    "rollout": stage_rollout,
    "prepare": stage_prepare,
    "steps": stage_steps,
    "restore": stage_restore,
}


def refuse_target(ctx: RunContext) -> None:
    """A target the chart does not allow this run's namespace: failed at once, naming the
    field and the chart value, with nothing touched (InvalidSpec). Checked every tick, so a
    target removed from the chart mid-run is left alone from then on (the CephCluster
    keeps the run's patch and the annotations naming it)."""
    refused = ctx.refusal
    if refused is None:
        return
    status = ctx.record.status
    touched = ORDER.index(status.stage or "lease") >= ORDER.index("patch")
    message = str(refused) + (
        "; the operator no longer acts on it: what the run changed stays" if touched else ""
    )
    lease.release(ctx)
    status.phase, status.message, status.stage = Phase.FAILED, message, "done"
    status.finished_at = now_iso()
    ctx.record.condition("Succeeded", False, "TargetNotAllowed", message)
    ctx.warn("TargetNotAllowed", message)
    raise refused


def let_go(ctx: RunBase, exc: Exception, reason: str) -> None:
    """A run that changed nothing of the cluster yet fails at once: its probe/facts Jobs
    removed, the lease let go. (At the lease it made none: Jobs of its name would be
    another run's.)"""
    status = ctx.record.status
    if status.stage not in ("", "lease"):
        for ns in {ctx.record.book.undo.jobs_namespace, ctx.settings.operator_namespace} - {""}:
            ctx.kube.delete_jobs(ns, ctx.selector)
    lease.release(ctx)
    status.phase, status.message, status.stage = Phase.FAILED, str(exc), "done"
    status.finished_at = now_iso()
    ctx.record.condition("Succeeded", False, reason, str(exc))


def refuse_edit(ctx: RunBase, exc: InvalidSpec) -> None:
    """A spec edit refused after planning (plan.meaning.effective_spec): the run stops;
    what it changed is put back (the restore reads only its undo record)."""
    status = ctx.record.status
    if status.stage in ("done", "restore"):
        return  # stopping already: the restore goes on
    if not ctx.record.book.planned_spec:  # never planned: an invalid spec, not an edit
        let_go(ctx, exc, "InvalidSpec")
        raise exc
    ctx.warn("SpecEditRefused", str(exc))
    if ORDER.index(status.stage or "lease") < ORDER.index("patch"):
        let_go(ctx, exc, "SpecEditRefused")
        raise exc
    status.failure = status.failure or str(exc)
    ctx.record.condition("Succeeded", False, "SpecEditRefused", str(exc))
    status.stage = "restore"


def tick_base(ctx: RunBase) -> None:
    """A run with no spec to go on with (refuse_edit sent it to its restore): only the
    restore, from its undo record."""
    status = ctx.record.status
    if status.stage != "restore":
        return
    try:
        status.stage = stage_restore(ctx)
    except NotReady as exc:
        status.message = str(exc)
        bounded.restore_wait(ctx, str(exc))  # bounded as any restore
    except Exception as exc:
        status.stage = _error(ctx, "restore", exc)


def tick(ctx: RunContext) -> None:
    """Advance as far as possible in one tick; stop at the first stage that must wait.

    Every run ends (stuck.py): InvalidSpec, ExecutionError and ParseError fail the run at
    once; any other error, and the CephCluster missing, is kept in the record and retried
    (raised to the handler, which writes the record) until it has lasted past
    errorTimeoutSeconds, then fails the run the same way. Before the patch nothing was
    touched and the run fails at once; after it the run is restored first. The restore
    itself ends, done or not, past restoreTimeoutSeconds."""
    status = ctx.record.status
    if status.stage == "done":
        return
    refuse_target(ctx)
    stage = status.stage or "lease"
    while stage in STAGES:
        try:
            # where the run acts, recorded once (a record the API server pruned, under an
            # older CRD, is recorded again: cleanup reads nothing else)
            lease.record_target(ctx)
            nxt = STAGES[stage](ctx)
            bounded.clear_error(ctx)  # got on: a later error starts a new count
        except NotReady as exc:
            status.message = str(exc)
            if stage == "restore":
                bounded.restore_wait(ctx, str(exc))
                return
            if not isinstance(exc, TargetMissing):
                bounded.clear_error(ctx)  # waiting, with no error this tick
                return
            why = bounded.note_error(ctx, stage, exc)
            if why is None:
                return  # not yet past the bound: the status says how long it has lasted
            bounded.clear_error(ctx, "RunFailed", _ENDED)
            nxt = _fail(ctx, stage, ExecutionError(why), "TargetMissing")
        except Exception as exc:
            nxt = _error(ctx, stage, exc)
        status.stage = nxt
        stage = nxt


_ENDED = "the error lasted past errorTimeoutSeconds and ended the run (condition Succeeded)"


def _error(ctx: RunBase, stage: str, exc: Exception) -> str:
    """The next stage after an error in `stage`; raises it when the run goes on as it is
    (the handler writes the record, kopf retries at the next tick)."""
    if stage == "restore":
        return bounded.restore_error(ctx, exc)
    if isinstance(exc, InvalidSpec | ExecutionError | ParseError):
        reason = "InvalidSpec" if isinstance(exc, InvalidSpec) else "StepFailed"
        return _fail(ctx, stage, exc, reason)
    why = bounded.note_error(ctx, stage, exc)
    if why is None:
        raise exc
    failed = ExecutionError(why)
    failed.__cause__ = exc
    bounded.clear_error(ctx, "RunFailed", _ENDED)
    return _fail(ctx, stage, failed, "ErrorTimeout")


def _fail(ctx: RunBase, stage: str, exc: CrimsonBenchError, reason: str) -> str:
    """The run fails: before the patch at once (raises exc), after it once restored."""
    status = ctx.record.status
    if ORDER.index(stage) < ORDER.index("patch"):
        # Nothing touched yet: as let_go, the probe/facts Jobs removed, the lease let go.
        if stage != "lease":  # best effort: the API that failed the run may refuse this too
            for ns in {ctx.record.book.undo.jobs_namespace, ctx.settings.operator_namespace} - {""}:
                bounded.delete_jobs(ctx, ns)
        let_go = bounded.release_lease(ctx)
        status.phase, status.message, status.stage = Phase.FAILED, str(exc) + let_go, "done"
        status.finished_at = now_iso()
        if reason == "StepFailed":
            reason = "PreflightFailed"
        ctx.record.condition("Succeeded", False, reason, str(exc))
        raise exc
    status.failure = str(exc)
    ctx.record.condition("Succeeded", False, reason, str(exc))
    return "restore"  # something was changed: put it back before failing
