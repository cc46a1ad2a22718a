"""The reconcile state machine. One tick runs the current stage once; a stage returns the
next stage, or raises NotReady to be called again on the next tick. All state is in the
API (status, named ConfigMaps/Jobs/Leases), so a restarted operator resumes where it was.

    lease -> topology -> patch -> rollout -> prefill -> steps -> restore -> (Completed|Failed)
"""

from __future__ import annotations

from collections.abc import Callable

from crimsonbench.controller import external, rook
from crimsonbench.controller.run_context import RunContext, now, target_key
from crimsonbench.controller.steps_stage import jobs_namespace, run_prefill, run_steps
from crimsonbench.controller.topology import node_topologies
from crimsonbench.errors import (
    CrimsonBenchError,
    ExecutionError,
    InvalidSpec,
    NotReady,
    ParseError,
)
from crimsonbench.manifests.jobs import ROLE_RBD_CLEANUP
from crimsonbench.manifests.naming import LABEL_ROLE
from crimsonbench.manifests.results import run_configmap
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.summary import plan_summary
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.types import RunInfo
from crimsonbench.spec.status import Phase

ORDER = ("lease", "topology", "patch", "rollout", "prefill", "steps", "restore")


def plan_for(ctx: RunContext) -> RunPlan:
    """Made once per tick from the spec and the cached topology; the planner is pure, so
    every tick (and every restarted operator) gets the same plan.

    The CPU plan uses the OSD node's topology; with fio on another node, client.cpuSet is
    checked against the OSD node too (the reference method runs both on one node)."""
    if ctx.plan is None:
        osd_node, _client_node = nodes_of(ctx)
        topo = node_topologies(ctx, [osd_node])[osd_node]
        ctx.plan = build_plan(ctx.name, ctx.spec, topo, rook.ceph_version(ctx))
    return ctx.plan


def nodes_of(ctx: RunContext) -> tuple[str, str]:
    client_node = ctx.spec.client.node
    if client_node is None:
        raise InvalidSpec("spec.client.node", "name the node fio runs on (kubectl get nodes)")
    rook_target = ctx.spec.target.rook
    osd_node = (rook_target.osd_node if rook_target else None) or client_node
    return osd_node, client_node


def stage_lease(ctx: RunContext) -> str:
    holder = ctx.kube.acquire_lease(
        ctx.settings.operator_namespace, target_key(ctx.spec), ctx.holder
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
    ctx.condition("ClusterFree", True, "LeaseAcquired", "this run has the cluster to itself")
    ctx.set(phase=Phase.PREPARING.value, startedAt=ctx.get("startedAt") or now())
    return "topology"


def stage_topology(ctx: RunContext) -> str:
    node_topologies(ctx, list(dict.fromkeys(nodes_of(ctx))))  # NotReady until probed
    plan = plan_for(ctx)  # InvalidSpec here names the field (e.g. cpuSet vs this node)
    _record_run_info(ctx, plan)
    ctx.set(stepsTotal=len(plan.steps), progress=f"0/{len(plan.steps)}")
    ctx.condition(
        "Planned",
        True,
        "CpuPlanned",
        f"{len(plan.cpu.osds)} OSDs planned, fio on {plan.cpu.client_cpuset}",
    )
    return "patch"


def _record_run_info(ctx: RunContext, plan: RunPlan) -> None:
    """What ran, for `crimsonbench fetch` (a results directory like a local run's)."""
    info = RunInfo.from_spec(
        ctx.name,
        ctx.spec,
        ceph_version=rook.ceph_version(ctx) or "",
        host=ctx.spec.client.node or "",
        started=str(ctx.get("startedAt") or now()),
    )
    cm = run_configmap(ctx.name, info, plan_summary(plan), namespace=ctx.namespace)
    cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]
    ctx.kube.replace_configmap(ctx.namespace, cm)


def stage_patch(ctx: RunContext) -> str:
    if ctx.spec.target.rook is not None:
        rook.patch_cluster(ctx, plan_for(ctx))
    return "rollout"


def stage_rollout(ctx: RunContext) -> str:
    if ctx.spec.target.rook is not None:
        rook.wait_rollout(ctx, plan_for(ctx))
    return "prefill"


def stage_prefill(ctx: RunContext) -> str:
    rook.ensure_pool(ctx)
    run_prefill(ctx, plan_for(ctx))
    ctx.set(phase=Phase.RUNNING.value)
    return "steps"


def stage_steps(ctx: RunContext) -> str:
    run_steps(ctx, plan_for(ctx))  # NotReady while steps remain
    return "restore"


def stage_restore(ctx: RunContext) -> str:
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
    Raises NotReady while the external images are being removed (called again later)."""
    # every Job but the image removal, which must outlive the fio pods it waits for
    ctx.kube.delete_jobs(jobs_namespace(ctx), f"{ctx.selector},{LABEL_ROLE}!={ROLE_RBD_CLEANUP}")
    if ctx.spec.target.rook is not None:
        rook.restore_cluster(ctx, _plan_or_none(ctx))
        rook.remove_pool(ctx)
    external.remove_images(ctx)
    ctx.kube.release_lease(ctx.settings.operator_namespace, target_key(ctx.spec), ctx.holder)
    ctx.condition("ClusterRestored", True, "Restored", "cluster left as it was found")


def _plan_or_none(ctx: RunContext) -> RunPlan | None:
    """The plan, if it can still be made (cleanup must work for runs that never planned)."""
    try:
        return plan_for(ctx)
    except (CrimsonBenchError, ValueError):
        return None


STAGES: dict[str, Callable[[RunContext], str]] = {
    "lease": stage_lease,
    "topology": stage_topology,
    "patch": stage_patch,
    "rollout": stage_rollout,
    "prefill": stage_prefill,
    "steps": stage_steps,
    "restore": stage_restore,
}


def tick(ctx: RunContext) -> None:
    """Advance as far as possible in one tick; stop at the first stage that must wait."""
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
                # Nothing touched yet: fail at once and let go of the cluster.
                ctx.kube.release_lease(
                    ctx.settings.operator_namespace, target_key(ctx.spec), ctx.holder
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
