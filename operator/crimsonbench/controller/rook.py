"""The Rook side of a run: record the CephCluster exactly, patch it for the plan, wait for
Rook to roll OSDs out, and put it back byte for byte afterwards."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from crimsonbench.controller import decide
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady
from crimsonbench.manifests.cephcluster import (
    cephcluster_patch,
    merge_patch,
    needs_reprovision,
    restore_cleanup_commands,
    restore_patch,
)
from crimsonbench.manifests.maintenance import ceph_commands_job
from crimsonbench.manifests.naming import GROUP, LABEL_RUN, label_value
from crimsonbench.manifests.rook_objects import cephblockpool
from crimsonbench.plan.types import HostPlan, RunPlan
from crimsonbench.spec.models import Flavor

ORIGINAL_KEY = "cephcluster-spec.json"
_TAG_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


def original_name(ctx: RunContext) -> str:
    return f"{ctx.name}-original-cephcluster"[:253]


def _cluster(ctx: RunContext) -> dict[str, Any]:
    t = ctx.spec.target.rook
    if t is None:
        raise InvalidSpec("spec.target.rook", "this step needs a Rook target")
    found = ctx.kube.get_cephcluster(t.namespace, t.cluster_name)
    if found is None:
        raise NotReady(
            f"CephCluster {t.namespace}/{t.cluster_name} not found; "
            "create it or fix spec.target.rook"
        )
    return found


def ceph_version(ctx: RunContext) -> str | None:
    """From Rook's status (what runs), else the image tag (what was asked for)."""
    if ctx.spec.target.rook is None:
        return ctx.spec.osd.ceph_version
    cluster = _cluster(ctx)
    running = ((cluster.get("status") or {}).get("version") or {}).get("version")
    if running:
        return str(running).split("-")[0]
    image = ((cluster.get("spec") or {}).get("cephVersion") or {}).get("image", "")
    m = _TAG_VERSION.search(image)
    return m.group(1) if m else None


def recorded_original(ctx: RunContext, cluster: dict[str, Any]) -> dict[str, Any]:
    """The spec as found before our first patch. First write wins, so a restarted operator
    never records its own patched spec as 'original'."""
    t = ctx.spec.target.rook
    where = f"{t.namespace}/{t.cluster_name}" if t else ""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": original_name(ctx),
            "namespace": ctx.namespace,
            "labels": {LABEL_RUN: label_value(ctx.name)},
            "annotations": {f"{GROUP}/cephcluster": where},
            "ownerReferences": [ctx.owner_reference()],
        },
        "data": {ORIGINAL_KEY: json.dumps(cluster.get("spec") or {})},
    }
    data = ctx.kube.ensure_configmap(ctx.namespace, body)
    return dict(json.loads(data[ORIGINAL_KEY]))


def check_consent(ctx: RunContext, hosts: Sequence[HostPlan], cephconfig: Any) -> None:
    """Refuse a new crimson reactor layout unless allowReprovision says yes."""
    t = ctx.spec.target.rook
    crimson = (
        [o for h in hosts for o in h.cpu.osds] if ctx.spec.osd.flavor == Flavor.CRIMSON else []
    )
    if needs_reprovision(cephconfig or {}, crimson) and not (t and t.allow_reprovision):
        raise InvalidSpec(
            "spec.target.rook.allowReprovision",
            "the crimson reactor layout differs from the one the OSDs were deployed with, and "
            "crimson cannot change it without purging and re-creating the OSDs; set "
            "allowReprovision: true to allow that, or match the deployed layout",
        )


def check_consent_now(ctx: RunContext, hosts: Sequence[HostPlan]) -> None:
    """check_consent against the CephCluster as it is (observe, before anything runs)."""
    if ctx.spec.target.rook is not None:
        check_consent(ctx, hosts, (_cluster(ctx).get("spec") or {}).get("cephConfig"))


def patch_cluster(ctx: RunContext, plan: RunPlan) -> None:
    t = ctx.spec.target.rook
    cluster = _cluster(ctx)
    original = recorded_original(ctx, cluster)
    check_consent(ctx, plan.hosts, original.get("cephConfig"))
    desired = cephcluster_patch({**cluster, "spec": original}, plan)
    patch = merge_patch(cluster.get("spec") or {}, desired)
    if patch and t is not None:
        ctx.kube.merge_patch_cephcluster(t.namespace, t.cluster_name, {"spec": patch})
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
            f"crimson setup Job {ns}/{name} failed: " + ctx.kube.job_log(ns, name)[-1000:]
        )
    return "" if state == "succeeded" else f"crimson setup Job {ns}/{name} running"


def wait_rollout(ctx: RunContext, plan: RunPlan) -> None:
    """Crimson prerequisites done; Rook reconciled our generation; every planned OSD runs
    again, on its own node, with the planned resources, and is Ready."""
    t = ctx.spec.target.rook
    if t is None:
        return
    setup = crimson_setup_done(ctx, plan)
    cluster = _cluster(ctx)
    placement = {int(k): str(v) for k, v in (ctx.get("osdPlacement") or {}).items()}
    progress = decide.rollout(
        plan,
        placement,
        ctx.kube.list_osd_pods(t.namespace),
        cluster.get("status") or {},
        int(ctx.get("patchedGeneration") or 0),
    )  # ExecutionError if an OSD moved
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


def restore_cluster(ctx: RunContext, plan: RunPlan | None) -> None:
    t = ctx.spec.target.rook
    if t is None:
        return
    saved = ctx.kube.get_configmap(ctx.namespace, original_name(ctx))
    if not saved or ORIGINAL_KEY not in saved:
        return  # never patched
    cluster = ctx.kube.get_cephcluster(t.namespace, t.cluster_name)
    if cluster is None:
        return  # deleted meanwhile: nothing to restore
    original = json.loads(saved[ORIGINAL_KEY])
    patch = restore_patch(original, cluster.get("spec") or {})
    if patch:
        ctx.kube.merge_patch_cephcluster(t.namespace, t.cluster_name, {"spec": patch})
    if plan is not None:
        _config_cleanup(ctx, plan, original.get("cephConfig") or {})


def _config_cleanup(ctx: RunContext, plan: RunPlan, original_cephconfig: dict[str, Any]) -> None:
    """Rook never unsets cephConfig keys it applied; a Job removes ours from the mon db.
    Fire and forget: it outlives the run and deletes itself (TTL)."""
    commands = restore_cleanup_commands(plan, original_cephconfig)
    if not commands:
        return
    from crimsonbench.controller.fio_stage import admin_access

    access = admin_access(ctx)
    job = ceph_commands_job(ctx.name, "cleanup", commands, access, ctx.settings.pod_options())
    ctx.kube.ensure_job(access.namespace, job)


def ensure_pool(ctx: RunContext, plan: RunPlan) -> None:
    """A CephBlockPool (size 1, fixed PGs) made by Rook; NotReady until Rook says Ready."""
    t = ctx.spec.target.rook
    if t is None:
        return  # external clusters: the pool must exist (preflight checked it)
    pool = cephblockpool(ctx.name, plan.pool, namespace=t.namespace)
    ctx.kube.ensure_custom(t.namespace, "cephblockpools", pool)
    found = ctx.kube.get_custom(t.namespace, "cephblockpools", pool["metadata"]["name"]) or {}
    phase = (found.get("status") or {}).get("phase", "")
    if phase != "Ready":
        raise NotReady(
            f"waiting for Rook to create pool {plan.pool.name} (CephBlockPool phase "
            f"{phase or 'unknown'})"
        )


def remove_pool_and_user(ctx: RunContext, plan: RunPlan | None) -> None:
    """Deleting the CephBlockPool deletes the pool and its images (force-deletion); the
    run's CephClient goes with its cephx user. Only objects this run made."""
    t = ctx.spec.target.rook
    if t is None:
        return
    pool = plan.pool.name if plan else ctx.spec.client.pool
    user = plan.pool.user if plan else None
    owned = [("cephblockpools", pool)] if not ctx.spec.keep_images else []
    if user is not None:
        owned.append(("cephclients", user))
    for plural, name in owned:
        found = ctx.kube.get_custom(t.namespace, plural, name)
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_RUN) == label_value(ctx.name):
            ctx.kube.delete_custom(t.namespace, plural, name)
