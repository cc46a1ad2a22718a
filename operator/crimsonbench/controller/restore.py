"""Putting a Rook cluster back: restore_steps decides, this carries it out, from the run's
undo record alone (spec.status.UndoRecord: which CephCluster, what the patch set, what
the mon database had), never from the spec, which may have been edited since. The run's
values go back where the cluster still holds them, Rook is awaited until the OSDs run
as before, a Job puts the mon database's options back, crimson OSDs restart once more;
how far it got is kept in the run's record, so a restarted operator goes on where it
stopped."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from crimsonbench.controller import osd_restarts
from crimsonbench.controller.carry_out import Again, Finished, carry_out
from crimsonbench.controller.decisions import restore_steps
from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
from crimsonbench.controller.fio_setup import admin_access
from crimsonbench.controller.jobs import job_ended
from crimsonbench.controller.rook import as_changes, cluster_annotations
from crimsonbench.controller.run_context import RunBase
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests.cephcluster import apply_merge_patch
from crimsonbench.manifests.maintenance import mon_restore_job
from crimsonbench.spec.status import UndoRecord

Step = restore_steps.RestoreView | Again[restore_steps.RestoreView] | Finished[bool]


def restore_cluster(ctx: RunBase) -> bool:
    """Undo the run's patch value by value, wait for Rook to roll the OSDs back, then put
    the mon database's options back, then (crimson) restart the planned OSDs so they start
    without the run's layout (restore_steps decides, in that order; this carries it out).
    NotReady until all is done. False when the record was refused (nothing applied; the
    ClusterRestored condition and a Warning event say why), True otherwise."""
    seen = _observe(ctx)
    return seen if isinstance(seen, bool) else _carry_out(ctx, seen)


def _observe(ctx: RunBase) -> restore_steps.RestoreView | bool:
    """What the restore decides from (the CephCluster as it is, the OSD pods, the marks),
    or its answer already: True when nothing of the run is on the cluster, False when the
    run's record was refused (said in a condition and an event)."""
    undo = ctx.record.book.undo
    if undo.target != "rook" or not undo.spec_digest:
        return True  # nothing of a CephCluster was recorded: nothing was patched
    ns, name = undo.rook_namespace, undo.cluster_name
    cluster = ctx.kube.get_cephcluster(ns, name)
    uid = str(((cluster or {}).get("metadata") or {}).get("uid") or "")
    if cluster is None or (undo.cluster_uid and uid != undo.cluster_uid):
        return True  # deleted (or deleted and made again) meanwhile: nothing to put back
    found = restore_steps.trusted_changes(as_changes(undo.spec_changes), undo.spec_digest,
                                          cluster_annotations(cluster), ctx.holder,
                                          undo.where)  # fmt: skip
    if found is None:  # the run's patch is not on it: never patched, or restored already
        return True
    if isinstance(found, restore_steps.Refuse):
        ctx.record.condition("ClusterRestored", False, found.reason, found.message)
        ctx.warn(found.reason, found.message)
        return False
    return restore_steps.RestoreView(
        changes=found,
        cluster_spec=cluster.get("spec") or {},
        marks=ctx.record.book.restore,
        placement=sorted(ctx.record.placement),
        pods=ctx.kube.list_osd_pods(ns),
        now=time.time(),
        timeout_s=ctx.settings.rollout_timeout_seconds,
        crimson=bool(undo.crimson_osds),
    )


def _carry_out(ctx: RunBase, view: restore_steps.RestoreView) -> bool:
    undo = ctx.record.book.undo
    ns, name = undo.rook_namespace, undo.cluster_name

    def act(action: restore_steps.Action, view: restore_steps.RestoreView) -> Step:
        match action:
            case restore_steps.PatchSpec(patch=patch):
                ctx.kube.merge_patch_cephcluster(ns, name, {"spec": patch})
                return replace(view, cluster_spec=apply_merge_patch(view.cluster_spec, patch))
            case restore_steps.Mark(marks=marks):
                ctx.record.book.restore = marks
                return replace(view, marks=marks)
            case restore_steps.Condition(type=type_, ok=ok, reason=reason, message=message):
                ctx.record.condition(type_, ok, reason, message)
                return view
            case restore_steps.RestartOsds(pods=pods, why=why):
                osd_restarts.delete_osd_pods(ctx, pods, why)
                return view
            case restore_steps.CleanConfig():
                result = _mon_cleanup(ctx, undo, view.cluster_spec or {})
                marks = view.marks.model_copy(update={"config_cleaned": result})
                ctx.record.book.restore = marks
                # asked again with the cleanup's outcome: the crimson restarts, the last mark
                return Again(replace(view, marks=marks))
            case restore_steps.Release():
                unmark = {"metadata": {"annotations": {PATCHED_BY: None, UNDO_DIGEST: None}}}
                ctx.kube.merge_patch_cephcluster(ns, name, unmark)
                return Finished(True)
            case NotReady():
                raise action
        raise ExecutionError(f"restoring {undo.where}: an action it does not know: {action!r}")

    # an answer carried out to its end without Release: nothing more to do now
    unsettled = f"restoring {undo.where}: the steps do not settle; again"
    return carry_out(restore_steps.next_actions, act, view, most=4, settled=lambda _: True,
                     contradiction=unsettled)  # fmt: skip


def _mon_cleanup(ctx: RunBase, undo: UndoRecord, restored_spec: Mapping[str, Any]) -> str:
    """Rook never unsets cephConfig keys it applied: a Job puts each option the run made it
    set back to the mon database's value before the run, where it still holds the run's.
    Options the restored spec sets itself are Rook's to apply again. NotReady while it
    runs; returns "done" or "failed: ..." (then a condition says what to do by hand). The
    Job is deleted once it ended."""
    cephconfig = restored_spec.get("cephConfig") or {}
    changes = [c.model_dump() for c in undo.mon_changes
               if c.key not in (cephconfig.get(c.who) or {})]  # fmt: skip
    if not changes:
        return "done"
    job = mon_restore_job(ctx.child, changes, admin_access(ctx), ctx.settings.pod_options())
    out = job_ended(ctx.kube, job, f"putting {len(changes)} mon database options back",
                    delete=True)  # fmt: skip
    by_hand = "; ".join(
        f"ceph config rm {c['who']} {c['key']}"
        if c["before"] is None
        else f"ceph config set {c['who']} {c['key']} {c['before']}"
        for c in changes
    )
    if out.state == "failed":
        ctx.record.condition("ConfigRestored", False, "ConfigRestoreFailed",
                             f"{out.where} failed; run by hand where the value is still the "
                             f"run's: {by_hand}; log: {out.text[-500:]}")  # fmt: skip
        result = f"failed: {by_hand}"
    else:
        ctx.record.condition("ConfigRestored", True, "ConfigRestored", _summary(out.text))
        result = "done"
    return result


def _summary(log: str) -> str:
    """What the Job did, from its JSON lines (anything else in the log is ignored)."""
    did: dict[str, list[str]] = {}
    for line in log.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and {"who", "key", "did"} <= row.keys():
            did.setdefault(str(row["did"]), []).append(f"{row['who']} {row['key']}")
    words = {"rm": "removed", "set": "set back", "kept": "kept (changed by someone else)",
             "gone": "already gone"}  # fmt: skip
    parts = [f"{words.get(k, k)}: {', '.join(v[:20])}" for k, v in sorted(did.items())]
    return "mon database options " + ("; ".join(parts) or "(none reported)")
