"""Restarting crimson OSDs on Rook: crimson reads its reactor and alien CPU sets only when
it starts, and Rook restarts an OSD only when its Deployment changes. So a run makes sure
each planned crimson OSD started after its patch (rollout) and again after the restore.
Restarting = deleting the pod; Rook's Deployment recreates it on its node. (The restart
after the restore is decided in restore_steps.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crimsonbench.controller.decisions.observed import OsdPod
from crimsonbench.controller.decisions.restore_steps import osd_list
from crimsonbench.controller.decisions.rollout import stale_after_patch
from crimsonbench.controller.kube_errors import Forbidden
from crimsonbench.controller.run_context import RunBase, RunContext
from crimsonbench.errors import ExecutionError, NotReady


def started_after_patch(
    ctx: RunContext, placement: Mapping[int, str], pods: Sequence[OsdPod]
) -> str:
    """Every planned crimson OSD runs in a pod started after the patch (NotReady while the
    ones restarted here come back). Rook restarts an
    OSD only when its Deployment changes (resources): when they were already as planned (a
    second run with the same reactor count and another policy, say) a crimson OSD would
    keep its old reactor layout, read only at start, and the run would measure that. Any
    still in the pod it had then is restarted here (Rook has applied the cephConfig by now:
    rollout saw our generation reconciled)."""
    stale = stale_after_patch(ctx.record.book.osd_incarnations or {}, placement, pods)
    if not stale:
        return f"{len(placement)} crimson OSDs started with the run's layout"
    delete_osd_pods(ctx, stale, "so it starts with the run's reactor layout")
    raise NotReady(
        f"restarting {osd_list([p.osd_id for p in stale])}: Rook did not (their resources "
        "were already as planned) and crimson reads its reactor layout only at start"
    )


def delete_osd_pods(ctx: RunBase, pods: Sequence[OsdPod], why: str) -> None:
    """Restart OSDs by deleting their pods (Rook's Deployments recreate them on their
    nodes, in Rook's namespace as the undo record names it); a refusal names the chart
    value that grants it."""
    ns = ctx.record.book.undo.rook_namespace
    if not ns:
        raise ExecutionError("restarting OSDs needs a Rook target; the run recorded none")
    for pod in pods:
        try:
            ctx.kube.delete_pod(ns, pod.name)
        except Forbidden as exc:
            if exc.by_policy:
                raise ExecutionError(
                    f"restarting osd.{pod.osd_id} (pod {pod.name}) {why} was refused by the "
                    f"operator's admission policy (the chart's rbac.reachPolicy): "
                    f"{exc.message}"
                ) from exc
            raise ExecutionError(
                f"restarting osd.{pod.osd_id} (pod {pod.name}) {why} was refused: the "
                f"chart's targets.rook must name the CephCluster in {ns} (its Role "
                "there grants pods delete), or restart it by hand"
            ) from exc
