"""Restarting crimson OSDs on Rook: crimson reads its reactor and alien CPU sets only when
it starts, and Rook restarts an OSD only when its Deployment changes. So a run makes sure
each planned crimson OSD started after its patch (rollout) and again after the restore.
Restarting = deleting the pod; Rook's Deployment recreates it on its node."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from crimsonbench.controller import decide
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests.naming import GROUP

OSDS_RESTARTED = f"{GROUP}/crimson-osds-restarted"  # {"since": epoch, "uids": [...]} (JSON)


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
        False, f"restarting {_osd_list([p.osd_id for p in stale])}: Rook did not (their "
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
                    f"restarting osd.{pod.osd_id} (pod {pod.name}) {why} was refused: add "
                    f"{ns} to the chart's rbac.fioNamespaces (a Role granting pods "
                    "delete there), or restart it by hand"
                ) from exc
            raise


def restart_after_restore(ctx: RunContext, cm_name: str, marks: dict[str, str]) -> None:
    """Crimson reads its reactor and alien CPU sets only when it starts, and Rook rolled the
    OSDs back before `config rm` removed the run's (seen on kind: osd.0 kept the run's
    reactor CPU after the restore). So the planned OSDs are restarted once more: their pods
    deleted, Rook's Deployments recreate them on the same nodes. NotReady until each runs
    in a new pod and is Ready; gives up (a condition says so) after rolloutTimeoutSeconds."""
    ns = ctx.target.rook_namespace
    assert ns is not None  # Rook targets only
    ids = sorted(int(k) for k in ctx.get("osdPlacement") or {})
    pods = [p for p in ctx.kube.list_osd_pods(ns) if p.osd_id in ids]
    if OSDS_RESTARTED not in marks:
        old = [p for p in pods if not p.terminating]
        delete_osd_pods(ctx, old, "after the restore, so it runs without the run's layout")
        record = json.dumps({"since": round(time.time(), 1), "uids": [p.uid for p in old]})
        ctx.kube.annotate_configmap(ctx.namespace, cm_name, {OSDS_RESTARTED: record})
        marks[OSDS_RESTARTED] = record
        raise NotReady(f"restarting {_osd_list(ids)} to start without the run's reactor layout")
    done = json.loads(marks[OSDS_RESTARTED])
    fresh = {p.osd_id for p in pods if p.ready and not p.terminating and p.uid not in done["uids"]}
    waiting = [i for i in ids if i not in fresh]
    waited = time.time() - float(done["since"])
    if not waiting:
        ctx.condition("OsdsRestarted", True, "CrimsonOsdsRestarted",
                      f"{_osd_list(ids)} restarted without the run's reactor layout after "
                      f"{waited:.0f} s")  # fmt: skip
        return
    message = f"waiting {waited:.0f} s for {_osd_list(waiting)} to restart"
    if waited > ctx.settings.rollout_timeout_seconds:
        ctx.condition("OsdsRestarted", False, "RestartTimeout",
                      f"{message}; gave up: until they restart they keep the run's reactor "
                      "layout")  # fmt: skip
        return
    raise NotReady(message)


def _osd_list(ids: Sequence[int]) -> str:
    return ", ".join(f"osd.{i}" for i in ids)
