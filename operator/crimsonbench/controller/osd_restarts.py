"""Restarting crimson OSDs on Rook: crimson reads its reactor and alien CPU sets only when
it starts, and Rook restarts an OSD only when its Deployment changes. So a run makes sure
each planned crimson OSD started after its patch (rollout) and again after the restore.
Restarting = deleting the pod; Rook's Deployment recreates it on its node. (The restart
after the restore is decided in restore_steps.)"""

from __future__ import annotations

import json
from collections.abc import Sequence

from crimsonbench.controller import decide
from crimsonbench.controller.restore_steps import osd_list
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError
from crimsonbench.manifests.naming import GROUP

# The planned crimson OSDs' incarnations (pod uid/restarts) when the run patched the cluster.
OSD_INCARNATIONS = f"{GROUP}/osd-incarnations"


def started_after_patch(
    ctx: RunContext, placement: dict[int, str], pods: Sequence[decide.OsdPod]
) -> decide.Progress:
    """Every planned crimson OSD runs in a pod started after the patch. Rook restarts an
    OSD only when its Deployment changes (resources): when they were already as planned (a
    second run with the same reactor count and another policy, say) a crimson OSD would
    keep its old reactor layout, read only at start, and the run would measure that. Any
    still in the pod it had then is restarted here (Rook has applied the cephConfig by now:
    decide.rollout saw our generation reconciled)."""
    before = json.loads(ctx.annotation(OSD_INCARNATIONS) or "{}")
    stale = [p for p in pods if not p.terminating and p.osd_id in placement
             and before.get(str(p.osd_id)) == p.incarnation]  # fmt: skip
    if not stale:
        return decide.Progress(True, f"{len(placement)} crimson OSDs started with the run's layout")
    delete_osd_pods(ctx, stale, "so it starts with the run's reactor layout")
    return decide.Progress(
        False, f"restarting {osd_list([p.osd_id for p in stale])}: Rook did not (their "
        "resources were already as planned) and crimson reads its reactor layout only at start",
    )  # fmt: skip


def delete_osd_pods(ctx: RunContext, pods: Sequence[decide.OsdPod], why: str) -> None:
    """Restart OSDs by deleting their pods (Rook's Deployments recreate them on their
    nodes); a refusal names the chart value that grants it."""
    ns = ctx.target.rook_namespace
    assert ns is not None  # Rook targets only
    for pod in pods:
        try:
            ctx.kube.delete_pod(ns, pod.name)
        except Exception as exc:
            if getattr(exc, "status", None) == 403:
                raise ExecutionError(
                    f"restarting osd.{pod.osd_id} (pod {pod.name}) {why} was refused: the "
                    f"chart's targets.rook must name the CephCluster in {ns} (its Role "
                    "there grants pods delete), or restart it by hand"
                ) from exc
            raise
