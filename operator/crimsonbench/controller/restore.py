"""Putting a Rook cluster back: restore_steps decides, this carries it out. The CephCluster
spec goes back exactly (only from a saved copy matching the digest the run's patch put on
the cluster), Rook is awaited until the OSDs run the original again, a Job `ceph config
rm`s what Rook leaves in the mon database, crimson OSDs restart once more; how far it got
is kept in the run's record, so a restarted operator goes on where it stopped."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from crimsonbench.controller import osd_restarts, restore_steps
from crimsonbench.controller.fio_setup import admin_access
from crimsonbench.controller.jobs import job_outcome
from crimsonbench.controller.restore_steps import ORIGINAL_DIGEST, PATCHED_BY
from crimsonbench.controller.rook import (
    ORIGINAL_KEY,
    cluster_annotations,
    original_name,
    rook_cluster,
)
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import NotReady
from crimsonbench.manifests.cephcluster import apply_merge_patch, restore_cleanup_commands
from crimsonbench.manifests.maintenance import ceph_commands_job
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import Flavor

LEGACY_ORIGINAL = "{run}-original-cephcluster"  # beside the run: operators before 8323010


def restore_cluster(ctx: RunContext, plan: RunPlan | None) -> bool:
    """Put the CephCluster spec back exactly, wait for Rook to roll the OSDs back, then
    `ceph config rm` what Rook leaves in the mon database, then (crimson) restart the
    planned OSDs so they start without the run's layout (restore_steps decides, in that
    order; this carries it out). NotReady until all is done. False when the saved
    original was refused (nothing applied; the ClusterRestored condition and a Warning
    event say why), True otherwise."""
    if ctx.target.kind != "rook":
        return True
    ns, cluster_name = rook_cluster(ctx)
    op_ns, name = ctx.settings.operator_namespace, original_name(ctx.uid)
    saved = ctx.kube.get_configmap(op_ns, name)
    cluster = ctx.kube.get_cephcluster(ns, cluster_name)
    if cluster is None:  # deleted meanwhile: nothing to put back
        ctx.kube.delete_configmap(op_ns, name)
        return True
    found = restore_steps.trusted_original(
        None if saved is None else saved.get(ORIGINAL_KEY),
        cluster_annotations(cluster), ctx.holder, ctx.target.where,
    )  # fmt: skip
    if found is None:  # the run's patch is not on it: never patched, or restored already
        if saved is not None:
            ctx.kube.delete_configmap(op_ns, name)
        elif ctx.record.status.patched_generation:
            return _patched_by_an_older_operator(ctx)
        return True
    if isinstance(found, restore_steps.Refuse):
        ctx.record.condition("ClusterRestored", False, found.reason, found.message)
        ctx.warn(found.reason, found.message)
        return False
    original = dict(found)
    view = restore_steps.RestoreView(
        original=original,
        cluster_spec=cluster.get("spec") or {},
        marks=ctx.record.book.restore,
        placement=sorted(ctx.record.placement),
        pods=ctx.kube.list_osd_pods(ns),
        now=time.time(),
        timeout_s=ctx.settings.rollout_timeout_seconds,
        crimson=ctx.spec.osd.flavor == Flavor.CRIMSON,
    )
    while True:
        actions = restore_steps.next_actions(view)
        for action in actions:
            match action:
                case restore_steps.PatchSpec(patch=patch):
                    ctx.kube.merge_patch_cephcluster(ns, cluster_name, {"spec": patch})
                    view = replace(view, cluster_spec=apply_merge_patch(view.cluster_spec, patch))
                case restore_steps.Mark(marks=marks):
                    ctx.record.book.restore = marks
                    view = replace(view, marks=marks)
                case restore_steps.Condition(type=type_, ok=ok, reason=reason, message=message):
                    ctx.record.condition(type_, ok, reason, message)
                case restore_steps.RestartOsds(pods=pods, why=why):
                    osd_restarts.delete_osd_pods(ctx, pods, why)
                case NotReady():
                    raise action
                case restore_steps.CleanConfig():
                    result = _config_cleanup(ctx, plan, original.get("cephConfig") or {})
                    marks = view.marks.model_copy(update={"config_cleaned": result})
                    ctx.record.book.restore = marks
                    view = replace(view, marks=marks)
                case restore_steps.Release():
                    unmark = {
                        "metadata": {"annotations": {PATCHED_BY: None, ORIGINAL_DIGEST: None}}
                    }
                    ctx.kube.merge_patch_cephcluster(ns, cluster_name, unmark)
                    ctx.kube.delete_configmap(op_ns, name)
                    return True
        if not actions or not isinstance(actions[-1], restore_steps.CleanConfig):
            return True  # nothing to do (NotReady raised above)
        # asked again with the cleanup's outcome: the crimson restarts and the last mark


def _patched_by_an_older_operator(ctx: RunContext) -> bool:
    """A run patched by an operator from before the saved-original check keeps its original
    beside the run, where whoever writes ConfigMaps there could have changed it: it is
    not applied. False (with the condition and an event) when such a record is there."""
    legacy = LEGACY_ORIGINAL.format(run=ctx.name)
    if ctx.kube.get_configmap(ctx.namespace, legacy) is None:
        return True  # restored already (the saved copy goes last)
    message = (
        f"this run patched {ctx.target.where} under an operator older than the saved-original "
        f"check, which kept the original beside the run (ConfigMap {ctx.namespace}/{legacy}) "
        "where it cannot be trusted; nothing was applied: compare it with what the cluster "
        "had and put cephConfig and resources back by hand"
    )
    ctx.record.condition("ClusterRestored", False, "OriginalUntrusted", message)
    ctx.warn("OriginalUntrusted", message)
    return False


def _config_cleanup(ctx: RunContext, plan: RunPlan | None, original_cephconfig: Any) -> str:
    """Rook never unsets cephConfig keys it applied: a Job removes ours from the mon db.
    NotReady while it runs; returns "done" or "failed: ..." (then a condition names the
    commands to run by hand). The Job is deleted once it ended."""
    commands = restore_cleanup_commands(plan, original_cephconfig) if plan is not None else []
    if not commands:
        return "done"
    job = ceph_commands_job(ctx.name, "cleanup", commands, admin_access(ctx),
                            ctx.settings.pod_options())  # fmt: skip
    out = job_outcome(ctx.kube, job)
    if out.state == "pending":
        raise NotReady(f"removing {len(commands)} run options from the mon database "
                       f"({out.where} {out.text})")  # fmt: skip
    by_hand = "; ".join("ceph " + " ".join(c) for c in commands)
    if out.state == "failed":
        ctx.record.condition("ConfigRestored", False, "ConfigRmFailed",
                             f"{out.where} failed; run by hand: {by_hand}; log: "
                             f"{out.text[-500:]}")  # fmt: skip
        result = f"failed: {by_hand}"
    else:
        ctx.record.condition("ConfigRestored", True, "ConfigRemoved",
                             f"removed from the mon database: {by_hand}")  # fmt: skip
        result = "done"
    ctx.kube.delete_job(out.namespace, out.name)
    return result
