"""The Rook side of a run: record the CephCluster exactly, patch it for the plan, wait for
Rook to roll OSDs out, and put it back byte for byte afterwards.

The recorded original lives in the operator's own namespace (a ConfigMap named by the
run's uid), never beside the run: whoever may write ConfigMaps in a run's namespace must
not decide what the restore writes into a CephCluster. The patch that changes the spec
also puts the run's name and the original's sha256 on the CephCluster; the restore applies
the saved copy only when it matches (restore_steps.trusted_original)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from crimsonbench.controller import decide, osd_restarts, restore_steps
from crimsonbench.controller.restore_steps import ORIGINAL_DIGEST, PATCHED_BY
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady
from crimsonbench.manifests.cephcluster import (
    apply_merge_patch,
    cephcluster_patch,
    has_crimson_layout,
    merge_patch,
    needs_reprovision,
    restore_cleanup_commands,
)
from crimsonbench.manifests.maintenance import ceph_commands_job
from crimsonbench.manifests.naming import APP, GROUP, LABEL_NAME, LABEL_RUN, label_value
from crimsonbench.plan.types import HostPlan, RunPlan
from crimsonbench.spec.models import Flavor

ORIGINAL_KEY = "cephcluster-spec.json"
LABEL_RUN_NAMESPACE = f"{GROUP}/run-namespace"
_TAG_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


def original_name(ctx: RunContext) -> str:
    """The saved original's ConfigMap, in the operator's namespace: named by the run's uid
    (runs of one name in two namespaces never share it)."""
    return f"crimsonbench-original-{ctx.uid}"[:253]


def _annotations(cluster: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in
            ((cluster.get("metadata") or {}).get("annotations") or {}).items()}  # fmt: skip


def _rook(ctx: RunContext) -> tuple[str, str]:
    """Rook's namespace and the CephCluster's name; InvalidSpec for any other target."""
    t = ctx.target
    if t.rook_namespace is None or t.cluster_name is None:
        raise InvalidSpec("spec.target.rook", "this step needs a Rook target")
    return t.rook_namespace, t.cluster_name


def _cluster(ctx: RunContext) -> dict[str, Any]:
    found = ctx.kube.get_cephcluster(*_rook(ctx))
    if found is None:
        raise NotReady(f"{ctx.target.where} not found; create it or fix spec.target.rook")
    return found


def ceph_version(ctx: RunContext) -> str | None:
    """From Rook's status (what runs), else the image tag (what was asked for)."""
    if ctx.target.kind != "rook":
        return ctx.spec.osd.ceph_version
    cluster = _cluster(ctx)
    running = ((cluster.get("status") or {}).get("version") or {}).get("version")
    if running:
        return str(running).split("-")[0]
    image = ((cluster.get("spec") or {}).get("cephVersion") or {}).get("image", "")
    m = _TAG_VERSION.search(image)
    return m.group(1) if m else None


def record_original(ctx: RunContext, cluster: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The spec as found before the run's patch and its saved text, kept in the operator's
    namespace. Until the run's patch is on the cluster (PATCHED_BY), the spec as it is now
    is the original and is saved again; after it, the saved copy is read back and checked
    against the digest the patch put on the cluster, so a restarted operator never records
    its own patched spec as 'original'."""
    annotations, where = _annotations(cluster), ctx.target.where
    foreign = restore_steps.foreign_patch(annotations, ctx.holder, where)
    if foreign:
        raise ExecutionError(foreign)
    ns, name = ctx.settings.operator_namespace, original_name(ctx)
    if annotations.get(PATCHED_BY) == ctx.holder:  # an earlier tick patched, then stopped
        text = (ctx.kube.get_configmap(ns, name) or {}).get(ORIGINAL_KEY)
        found = restore_steps.trusted_original(text, annotations, ctx.holder, where)
        if not isinstance(found, dict) or text is None:
            raise ExecutionError(getattr(found, "message", f"no saved original of {where}"))
        return found, text
    text = json.dumps(cluster.get("spec") or {})
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                LABEL_NAME: APP,
                LABEL_RUN: label_value(ctx.name),
                LABEL_RUN_NAMESPACE: label_value(ctx.namespace),
            },
            "annotations": {f"{GROUP}/cephcluster": where, f"{GROUP}/run": ctx.holder},
        },
        "data": {ORIGINAL_KEY: text},
    }
    ctx.kube.replace_configmap(ns, body)
    return dict(json.loads(text)), text


def check_consent(ctx: RunContext, hosts: Sequence[HostPlan], cephconfig: Any) -> None:
    """Refuse a new crimson reactor layout unless allowReprovision says yes."""
    crimson = (
        [o for h in hosts for o in h.cpu.osds] if ctx.spec.osd.flavor == Flavor.CRIMSON else []
    )
    if needs_reprovision(cephconfig or {}, crimson) and not ctx.target.allow_reprovision:
        raise InvalidSpec(
            "spec.target.rook.allowReprovision",
            "the crimson reactor layout differs from the one the OSDs were deployed with, and "
            "crimson cannot change it without purging and re-creating the OSDs; set "
            "allowReprovision: true to allow that, or match the deployed layout",
        )


def check_consent_now(ctx: RunContext, hosts: Sequence[HostPlan], *, early: bool = False) -> None:
    """check_consent against the CephCluster as it is (observe, before anything runs).

    early (before preflight has read the OSDs' metadata): only when the cephConfig shows
    the OSDs were deployed crimson. A cephConfig without any crimson layout may belong to
    a classic cluster, and telling its user to allow re-provisioning would be wrong: the
    OSDs' metadata decides first (preflight says they are not crimson)."""
    if ctx.target.kind != "rook":
        return
    cephconfig = (_cluster(ctx).get("spec") or {}).get("cephConfig") or {}
    planned = [o.osd_id for h in hosts for o in h.cpu.osds]
    if early and not has_crimson_layout(cephconfig, planned):
        return
    check_consent(ctx, hosts, cephconfig)


def check_not_patched(ctx: RunContext) -> None:
    """Before anything runs: the CephCluster carries no other run's patch."""
    if ctx.target.kind != "rook":
        return
    foreign = restore_steps.foreign_patch(_annotations(_cluster(ctx)), ctx.holder,
                                          ctx.target.where)  # fmt: skip
    if foreign:
        raise ExecutionError(foreign)


def patch_cluster(ctx: RunContext, plan: RunPlan) -> None:
    ns, cluster_name = _rook(ctx)
    cluster = _cluster(ctx)
    original, saved = record_original(ctx, cluster)
    check_consent(ctx, plan.hosts, original.get("cephConfig"))
    desired = cephcluster_patch({**cluster, "spec": original}, plan)
    if (
        ctx.spec.osd.flavor == Flavor.CRIMSON
        and ctx.annotation(osd_restarts.OSD_INCARNATIONS) is None
    ):
        planned = {o.osd_id for o in plan.osds}
        pods = ctx.kube.list_osd_pods(ns)
        ctx.annotate(osd_restarts.OSD_INCARNATIONS, json.dumps(
            {str(p.osd_id): p.incarnation for p in pods
             if p.osd_id in planned and not p.terminating}))  # fmt: skip
    patch = merge_patch(cluster.get("spec") or {}, desired)
    # One patch: the spec changes only together with the marks that let the restore check
    # the saved copy, and only if the CephCluster is still the one just recorded.
    marks = {PATCHED_BY: ctx.holder, ORIGINAL_DIGEST: restore_steps.digest(saved)}
    body: dict[str, Any] = {"metadata": {"annotations": marks}}
    version = (cluster.get("metadata") or {}).get("resourceVersion")
    if version:  # a precondition: 409 if anyone changed it since it was read
        body["metadata"]["resourceVersion"] = version
    if patch:
        body["spec"] = patch
    try:
        ctx.kube.merge_patch_cephcluster(ns, cluster_name, body)
    except Exception as exc:
        if getattr(exc, "status", None) == 409:
            raise NotReady(f"{ctx.target.where} changed while it was patched; again") from exc
        raise
    generation = int(_cluster(ctx)["metadata"].get("generation", 0))
    ctx.set(patchedGeneration=generation, rolloutSince=time.time())
    ctx.condition(
        "ClusterPatched",
        True,
        "CephClusterPatched",
        f"cephConfig and resources set for {len(plan.osds)} OSDs (generation {generation})",
    )


def crimson_setup_done(ctx: RunContext, plan: RunPlan) -> str:
    """Run plan.ceph.commands (`osd set-allow-crimson`) in a Job; '' when done, else why not.

    Rook cannot start crimson OSDs without the flag, so on a cluster whose crimson OSDs run
    it is set already and this Job only confirms it (the command is idempotent)."""
    if not plan.ceph.commands:
        return ""
    from crimsonbench.controller.fio_stage import admin_access

    job = ceph_commands_job(
        ctx.name, "setup", plan.ceph.commands, admin_access(ctx), ctx.settings.pod_options()
    )
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    state = ctx.kube.job_state(ns, name)
    if state == "missing":
        ctx.kube.ensure_job(ns, job)
        return f"crimson setup Job {ns}/{name} created"
    if state == "failed":
        raise ExecutionError(
            f"crimson setup Job {ns}/{name} failed: " + ctx.kube.failed_job_text(ns, name, 1000)
        )
    return "" if state == "succeeded" else f"crimson setup Job {ns}/{name} running"


def wait_rollout(ctx: RunContext, plan: RunPlan) -> None:
    """Crimson prerequisites done; Rook reconciled our generation; every planned OSD runs
    again, on its own node, with the planned resources, and is Ready."""
    if ctx.target.kind != "rook":
        return
    ns, _ = _rook(ctx)
    setup = crimson_setup_done(ctx, plan)
    cluster = _cluster(ctx)
    placement = {int(k): str(v) for k, v in (ctx.get("osdPlacement") or {}).items()}
    pods = ctx.kube.list_osd_pods(ns)
    progress = decide.rollout(
        plan,
        placement,
        pods,
        cluster.get("status") or {},
        int(ctx.get("patchedGeneration") or 0),
    )  # ExecutionError if an OSD moved
    if progress.done and ctx.spec.osd.flavor == Flavor.CRIMSON:
        progress = osd_restarts.started_after_patch(ctx, placement, pods)
    others = sorted({p.osd_id for p in pods} - set(placement))
    if progress.done and others:  # Rook rolls the OSDs the run does not plan too
        limits = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
        progress = decide.osds_running_with(others, pods, limits)
    if progress.done and not setup:
        ctx.condition("RolledOut", True, "OsdsReady", progress.message)
        return
    waited = time.time() - float(ctx.get("rolloutSince") or time.time())
    message = f"waiting for Rook to roll out for {waited:.0f} s: {progress.message}" + (
        f"; {setup}" if setup else ""
    )
    ctx.condition("RolledOut", False, "RollingOut", message)
    if waited > ctx.settings.rollout_timeout_seconds:
        raise ExecutionError(message + "; gave up (rolloutTimeoutSeconds)")
    raise NotReady(message)


def restore_cluster(ctx: RunContext, plan: RunPlan | None) -> bool:
    """Put the CephCluster spec back exactly, wait for Rook to roll the OSDs back, then
    `ceph config rm` what Rook leaves in the mon database, then (crimson) restart the
    planned OSDs so they start without the run's layout (restore_steps decides, in that
    order; this carries it out). NotReady until all is done. False when the saved
    original was refused (nothing applied; the ClusterRestored condition and a Warning
    event say why), True otherwise."""
    if ctx.target.kind != "rook":
        return True
    ns, cluster_name = _rook(ctx)
    op_ns, name = ctx.settings.operator_namespace, original_name(ctx)
    saved = ctx.kube.get_configmap(op_ns, name)
    cluster = ctx.kube.get_cephcluster(ns, cluster_name)
    if cluster is None:  # deleted meanwhile: nothing to put back
        ctx.kube.delete_configmap(op_ns, name)
        return True
    found = restore_steps.trusted_original(
        None if saved is None else saved.get(ORIGINAL_KEY),
        _annotations(cluster), ctx.holder, ctx.target.where,
    )  # fmt: skip
    if found is None:  # the run's patch is not on it: never patched, or restored already
        if saved is not None:
            ctx.kube.delete_configmap(op_ns, name)
        elif ctx.get("patchedGeneration") is not None:
            return _patched_by_an_older_operator(ctx)
        return True
    if isinstance(found, restore_steps.Refuse):
        ctx.condition("ClusterRestored", False, found.reason, found.message)
        ctx.warn(found.reason, found.message)
        return False
    marks = dict(ctx.kube.configmap_annotations(op_ns, name) or {})
    original = dict(found)
    view = restore_steps.RestoreView(
        original=original,
        cluster_spec=cluster.get("spec") or {},
        marks=marks,
        placement=[int(k) for k in ctx.get("osdPlacement") or {}],
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
                case restore_steps.Mark(key=key, value=value):
                    ctx.kube.annotate_configmap(op_ns, name, {key: value})
                    view = replace(view, marks={**view.marks, key: value})
                case restore_steps.Condition(type=type_, ok=ok, reason=reason, message=message):
                    ctx.condition(type_, ok, reason, message)
                case restore_steps.RestartOsds(pods=pods, why=why):
                    osd_restarts.delete_osd_pods(ctx, pods, why)
                case restore_steps.Wait(message=message):
                    raise NotReady(message)
                case restore_steps.CleanConfig():
                    result = _config_cleanup(ctx, plan, original.get("cephConfig") or {})
                    mark = {restore_steps.CONFIG_CLEANED: result}
                    ctx.kube.annotate_configmap(op_ns, name, mark)
                    view = replace(view, marks={**view.marks, **mark})
                case restore_steps.Release():
                    unmark = {
                        "metadata": {"annotations": {PATCHED_BY: None, ORIGINAL_DIGEST: None}}
                    }
                    ctx.kube.merge_patch_cephcluster(ns, cluster_name, unmark)
                    ctx.kube.delete_configmap(op_ns, name)
                    return True
        if not actions or not isinstance(actions[-1], restore_steps.CleanConfig):
            return True  # nothing to do (Wait raised above)
        # asked again with the cleanup's outcome: the crimson restarts and the last mark


LEGACY_ORIGINAL = "{run}-original-cephcluster"  # beside the run: operators before 8323010


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
    ctx.condition("ClusterRestored", False, "OriginalUntrusted", message)
    ctx.warn("OriginalUntrusted", message)
    return False


def _config_cleanup(ctx: RunContext, plan: RunPlan | None, original_cephconfig: Any) -> str:
    """Rook never unsets cephConfig keys it applied: a Job removes ours from the mon db.
    NotReady while it runs; returns "done" or "failed: ..." (then a condition names the
    commands to run by hand). The Job is deleted once it ended."""
    commands = restore_cleanup_commands(plan, original_cephconfig) if plan is not None else []
    if not commands:
        return "done"
    from crimsonbench.controller.fio_stage import admin_access

    access = admin_access(ctx)
    job = ceph_commands_job(ctx.name, "cleanup", commands, access, ctx.settings.pod_options())
    ns, name = access.namespace, job["metadata"]["name"]
    state = ctx.kube.job_state(ns, name)
    what = f"removing {len(commands)} run options from the mon database (Job {name}"
    if state == "missing":
        ctx.kube.ensure_job(ns, job)
        raise NotReady(f"{what} created)")
    if state == "running":
        raise NotReady(f"{what} running)")
    by_hand = "; ".join("ceph " + " ".join(c) for c in commands)
    if state == "failed":
        log = ctx.kube.failed_job_text(ns, name, 500)
        ctx.condition("ConfigRestored", False, "ConfigRmFailed",
                      f"Job {ns}/{name} failed; run by hand: {by_hand}; log: {log}")  # fmt: skip
        result = f"failed: {by_hand}"
    else:
        ctx.condition("ConfigRestored", True, "ConfigRemoved",
                      f"removed from the mon database: {by_hand}")  # fmt: skip
        result = "done"
    ctx.kube.delete_job(ns, name)
    return result
