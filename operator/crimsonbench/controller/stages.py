"""The reconcile state machine. One tick runs the current stage once; a stage returns the
next stage, or raises NotReady to be called again on the next tick. All state is in the
API (status, named ConfigMaps/Jobs/Leases), so a restarted operator resumes where it was.

    lease -> observe -> patch -> rollout -> prepare -> steps -> restore -> (Completed|Failed)

observe records what the run depends on once (client nodes, where each OSD runs, each
node's CPUs, the option names the mons know) in the status, so every later tick and every
restarted operator makes the very same plan from it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

from crimsonbench.controller import decide, external, rook, rook_pool
from crimsonbench.controller.fio_stage import (
    admin_access,
    await_job,
    ensure_client_user,
    ensure_driver,
    ensure_images,
    ensure_servers,
    jobs_namespace,
    run_prefill,
    run_steps,
)
from crimsonbench.controller.run_context import RunContext, now
from crimsonbench.controller.topology import node_topologies
from crimsonbench.errors import (
    CrimsonBenchError,
    ExecutionError,
    InvalidSpec,
    NotReady,
    ParseError,
)
from crimsonbench.manifests import fio_driver
from crimsonbench.manifests.maintenance import (
    ROLE_CEPH_CLEANUP,
    ROLE_RBD_CLEANUP,
    cluster_facts_job,
)
from crimsonbench.manifests.naming import LABEL_ROLE
from crimsonbench.manifests.results import run_configmap
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout, plan_hosts
from crimsonbench.plan.summary import plan_summary
from crimsonbench.plan.types import RunPlan, Topology
from crimsonbench.results import step_log
from crimsonbench.results.types import RunInfo
from crimsonbench.spec.status import Phase

ORDER = ("lease", "observe", "patch", "rollout", "prepare", "steps", "restore")


# A run's plan is the same every tick (its inputs are recorded in status); the largest
# take ~0.25 s to plan and read a topology ConfigMap per node, so the operator keeps a few:
# up to 16 plans, and at most _PLAN_ITEMS_KEPT steps + jobs among them (the largest specs
# admitted hold 40,960 steps or 65,536 jobs, ~4 MiB each: bench/bench_spec_bounds.py).
_PLANS: OrderedDict[tuple[str, ...], RunPlan] = OrderedDict()
_PLANS_KEPT = 16
_PLAN_ITEMS_KEPT = 200_000


def _plan_items(plan: RunPlan) -> int:
    return len(plan.steps) + len(plan.fio.jobs)


def remember_plan(key: tuple[str, ...], plan: RunPlan) -> None:
    """Into the cache, the oldest out while it holds too many plans or items."""
    _PLANS[key] = plan
    while len(_PLANS) > 1 and (
        len(_PLANS) > _PLANS_KEPT or sum(map(_plan_items, _PLANS.values())) > _PLAN_ITEMS_KEPT
    ):
        _PLANS.popitem(last=False)


def plan_for(ctx: RunContext) -> RunPlan:
    """Made from what observe recorded; the planner is pure, so every tick (and every
    restarted operator) gets the same plan."""
    if ctx.plan is not None:
        return ctx.plan
    version, family = rook.ceph_version(ctx), _family(ctx)
    key = (
        ctx.uid,
        ctx.spec.model_dump_json(),
        json.dumps([ctx.get("clientNodes"), ctx.get("osdPlacement")], sort_keys=True),
        str(version),
        str(family),
        str(ctx.settings.step_grace_seconds),
    )
    plan = _PLANS.get(key)
    if plan is None:
        plan = build_plan(
            ctx.name,
            ctx.spec,
            layout_of(ctx),
            ceph_version=version,
            option_family=family,
            grace_s=ctx.settings.step_grace_seconds,
        )
        remember_plan(key, plan)
    _PLANS.move_to_end(key)
    ctx.plan = plan
    return plan


def _family(ctx: RunContext) -> str | None:
    """The crimson option family preflight read from the mons (None: not crimson, or
    not read yet, and the planner falls back to the Ceph version)."""
    family = str(ctx.get("optionFamily") or "")
    return family if family in ("legacy", "current") else None


def layout_of(ctx: RunContext) -> ClusterLayout:
    clients = tuple(ctx.get("clientNodes") or ())
    placement = {int(k): str(v) for k, v in (ctx.get("osdPlacement") or {}).items()}
    nodes = sorted(set(clients) | set(placement.values()))
    topologies: dict[str | None, Topology] = {}
    topologies.update(node_topologies(ctx, nodes))
    return ClusterLayout(
        topologies=topologies,
        placement=placement,
        client_nodes=clients,
        osd_field="spec.osd.count",
        plan_osds=ctx.target.kind == "rook",
    )


def stage_lease(ctx: RunContext) -> str:
    holder = ctx.kube.acquire_lease(
        ctx.settings.operator_namespace, ctx.target.lease_name, ctx.holder
    )
    if holder != ctx.holder:
        ctx.set(phase=Phase.PENDING.value)
        ctx.condition(
            "ClusterFree",
            False,
            "ClusterBusy",
            f"another run uses this Ceph cluster: {holder.rsplit('/', 1)[0]}; "
            "this run starts when it finishes",
        )
        raise NotReady("cluster busy")
    rook.check_not_patched(ctx)  # a run before left it patched: that is not an original
    ctx.condition("ClusterFree", True, "LeaseAcquired", "this run has the cluster to itself")
    ctx.set(phase=Phase.PREPARING.value, startedAt=ctx.get("startedAt") or now())
    return "observe"


def stage_observe(ctx: RunContext) -> str:
    if not ctx.get("clientNodes"):
        nodes = decide.select_client_nodes(ctx.spec.client, ctx.kube.list_nodes())
        ctx.set(clientNodes=list(nodes))
    rook_ns, selection = ctx.target.rook_namespace, ctx.spec.target.rook  # osdNodes, osdIds
    if rook_ns is not None and selection is not None and not ctx.get("osdPlacement"):
        placement = decide.select_osds(ctx.kube.list_osd_pods(rook_ns), selection)
        ctx.set(osdPlacement={str(k): v for k, v in placement.items()})
    layout = layout_of(ctx)  # NotReady until every node's topology is probed
    # CPU layout first, and consent where the cephConfig shows a deployed crimson layout:
    # a spec that cannot run on these nodes fails here, before any Job reads the cluster
    hosts, _ = plan_hosts(ctx.spec, layout)
    rook.check_consent_now(ctx, hosts, early=True)
    if not ctx.get("optionFamily"):
        job = cluster_facts_job(ctx.name, admin_access(ctx), ctx.settings.pod_options())
        facts_log = await_job(ctx, job, "reading the cluster")
        facts = decide.ClusterFacts.from_sections(step_log.parse_sections(facts_log))
        placement = {int(k): str(v) for k, v in (ctx.get("osdPlacement") or {}).items()}
        family = decide.preflight(ctx.spec, facts, placement)
        ctx.kube.delete_job(job["metadata"]["namespace"], job["metadata"]["name"])
        ctx.set(optionFamily=family or "none")
    rook.check_consent_now(ctx, hosts)  # the OSDs are what the spec says: may it re-provision?
    plan = plan_for(ctx)  # InvalidSpec here names the field (e.g. cpuSet vs a node)
    fio_driver.check_fits_one_exec(plan)  # a step's job files travel in one exec
    _record_run_info(ctx, plan)
    ctx.set(stepsTotal=len(plan.steps), progress=f"0/{len(plan.steps)}")
    where = ", ".join(f"{h.node}: osd {list(h.osd_ids)}" for h in plan.hosts) or "none"
    clients = ", ".join(f"{c.name} cpus {c.cpuset}" for c in plan.clients)
    ctx.condition("Planned", True, "CpuPlanned", f"OSDs {where}; fio {clients}")
    return "patch"


def _record_run_info(ctx: RunContext, plan: RunPlan) -> None:
    """What ran, for `crimsonbench fetch` (a results directory like a local run's)."""
    info = RunInfo.from_spec(
        ctx.name,
        ctx.spec,
        ceph_version=rook.ceph_version(ctx) or "",
        host=",".join(c.node or "" for c in plan.clients),
        started=str(ctx.get("startedAt") or now()),
    )
    cm = run_configmap(ctx.name, info, plan_summary(plan), namespace=ctx.namespace)
    cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]
    ctx.kube.replace_configmap(ctx.namespace, cm)


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
    ctx.set(phase=Phase.RUNNING.value)
    return "steps"


def stage_steps(ctx: RunContext) -> str:
    plan = plan_for(ctx)
    servers = ensure_servers(ctx, plan)
    run_steps(ctx, plan, servers, ensure_driver(ctx, plan))  # NotReady while steps remain
    return "restore"


def stage_restore(ctx: RunContext) -> str:
    if ctx.get("phase") != Phase.RESTORING.value:
        ctx.set(phase=Phase.RESTORING.value)
    cleanup(ctx)
    failure = ctx.get("failure")
    ctx.set(
        phase=Phase.FAILED.value if failure else Phase.COMPLETED.value,
        message=failure or "all steps done",
        finishedAt=now(),
        currentStep="",
    )
    return "done"


def cleanup(ctx: RunContext) -> None:
    """Leave the cluster as it was found: restore, delete children, release the lease.
    Raises NotReady until done (Rook rolling the OSDs back, the config cleanup Job, Rook
    removing the pool and the cephx user, external images removed, the pods gone); each
    call goes on where the last one stopped.

    A run whose target the chart does not allow, or that never held the cluster (it was
    waiting for the lease), touches nothing outside the operator's namespace: the Jobs
    and objects there named after it belong to another run of the same name."""
    if ctx.refusal is not None or ctx.get("stage") in (None, "lease"):
        ctx.kube.release_lease(ctx.settings.operator_namespace, ctx.target.lease_name,
                               ctx.holder)  # fmt: skip
        return
    ns = jobs_namespace(ctx)
    # every Job but the cleanup ones, which must outlive the fio servers they wait for
    keep = f"{LABEL_ROLE}!={ROLE_RBD_CLEANUP},{LABEL_ROLE}!={ROLE_CEPH_CLEANUP}"
    ctx.kube.delete_jobs(ns, f"{ctx.selector},{keep}")
    restored = rook.restore_cluster(ctx, _plan_or_none(ctx))
    external.remove_images(ctx, _plan_or_none(ctx))  # as the run's user: before it goes
    rook_pool.remove_pool_and_user(ctx, _plan_or_none(ctx))
    # nothing of the run left in the Jobs' namespace: Jobs and their pods
    ctx.kube.delete_jobs(ns, ctx.selector)
    pods = ctx.kube.pod_names(ns, ctx.selector)
    if pods:
        raise NotReady(f"waiting for {len(pods)} pod(s) of the run to go: {', '.join(pods[:5])}")
    ctx.kube.release_lease(ctx.settings.operator_namespace, ctx.target.lease_name, ctx.holder)
    if restored:
        ctx.condition("ClusterRestored", True, "Restored", "cluster left as it was found")
        return
    refused = next(c for c in ctx.get("conditions") if c["type"] == "ClusterRestored")
    failure = ctx.get("failure")
    ctx.set(failure=(f"{failure}; " if failure else "") + f"not restored: {refused['message']}")


def _plan_or_none(ctx: RunContext) -> RunPlan | None:
    """The plan, if it can still be made (cleanup must work for runs that never planned)."""
    try:
        return plan_for(ctx)
    except (CrimsonBenchError, ValueError):
        return None


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
    touched = ORDER.index(ctx.get("stage") or "lease") >= ORDER.index("patch")
    message = str(refused) + (
        "; the operator no longer acts on it: what the run changed stays" if touched else ""
    )
    ctx.kube.release_lease(ctx.settings.operator_namespace, ctx.target.lease_name, ctx.holder)
    ctx.set(phase=Phase.FAILED.value, message=message, stage="done", finishedAt=now())
    ctx.condition("Succeeded", False, "TargetNotAllowed", message)
    ctx.warn("TargetNotAllowed", message)
    raise refused


def tick(ctx: RunContext) -> None:
    """Advance as far as possible in one tick; stop at the first stage that must wait."""
    if ctx.get("stage") == "done":
        return
    refuse_target(ctx)
    stage = ctx.get("stage") or "lease"
    while stage in STAGES:
        try:
            nxt = STAGES[stage](ctx)
        except NotReady as exc:
            ctx.set(message=str(exc))
            return
        except (InvalidSpec, ExecutionError, ParseError) as exc:
            if stage == "restore":
                raise  # cannot restore: the handler retries and reports it
            if ORDER.index(stage) < ORDER.index("patch"):
                # Nothing touched yet: remove the probe/facts Jobs, let go, fail at once.
                # (At the lease it made none: Jobs of its name are another run's.)
                for ns in {jobs_namespace(ctx), ctx.settings.operator_namespace}:
                    if stage != "lease":
                        ctx.kube.delete_jobs(ns, ctx.selector)
                ctx.kube.release_lease(
                    ctx.settings.operator_namespace, ctx.target.lease_name, ctx.holder
                )
                ctx.set(phase=Phase.FAILED.value, message=str(exc), stage="done", finishedAt=now())
                reason = "InvalidSpec" if isinstance(exc, InvalidSpec) else "PreflightFailed"
                ctx.condition("Succeeded", False, reason, str(exc))
                raise
            ctx.set(failure=str(exc))
            reason = "InvalidSpec" if isinstance(exc, InvalidSpec) else "StepFailed"
            ctx.condition("Succeeded", False, reason, str(exc))
            nxt = "restore"  # something was changed: put it back before failing
        ctx.set(stage=nxt)
        stage = nxt
