"""The Rook side of a run: record the CephCluster exactly, patch it for the plan, wait for
Rook to roll OSDs out, and put it back byte for byte afterwards."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady
from crimsonbench.manifests.cephcluster import (
    cephcluster_patch,
    merge_patch,
    needs_reprovision,
    restore_patch,
)
from crimsonbench.plan.types import RunPlan

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
            "labels": {"bench.crimson.ceph.io/run": ctx.name},
            "annotations": {"bench.crimson.ceph.io/cephcluster": where},
            "ownerReferences": [ctx.owner_reference()],
        },
        "data": {ORIGINAL_KEY: json.dumps(cluster.get("spec") or {})},
    }
    data = ctx.kube.ensure_configmap(ctx.namespace, body)
    return dict(json.loads(data[ORIGINAL_KEY]))


def patch_cluster(ctx: RunContext, plan: RunPlan) -> None:
    t = ctx.spec.target.rook
    cluster = _cluster(ctx)
    original = recorded_original(ctx, cluster)
    if needs_reprovision(original.get("cephConfig") or {}, plan) and not (
        t and t.allow_reprovision
    ):
        raise InvalidSpec(
            "spec.target.rook.allowReprovision",
            "the crimson reactor layout differs from the one the OSDs were deployed with, and "
            "crimson cannot change it without purging and re-creating the OSDs; set "
            "allowReprovision: true to allow that, or match the deployed layout",
        )
    osd_node = (t.osd_node if t else None) or ctx.spec.client.node
    nodes = dict.fromkeys(range(ctx.spec.osd.count), osd_node) if osd_node else None
    desired = cephcluster_patch({**cluster, "spec": original}, plan, ctx.spec, nodes)
    patch = merge_patch(cluster.get("spec") or {}, desired)
    if patch and t is not None:
        ctx.kube.merge_patch_cephcluster(t.namespace, t.cluster_name, {"spec": patch})
    generation = int(_cluster(ctx)["metadata"].get("generation", 0))
    ctx.set(patchedGeneration=generation, rolloutSince=time.time())
    ctx.condition(
        "ClusterPatched",
        True,
        "CephClusterPatched",
        f"cephConfig/resources/placement set for {len(plan.cpu.osds)} OSDs "
        f"(generation {generation})",
    )


def wait_rollout(ctx: RunContext) -> None:
    """Rook has reconciled our generation and reports the cluster Ready."""
    cluster = _cluster(ctx)
    status = cluster.get("status") or {}
    want = int(ctx.get("patchedGeneration") or 0)
    seen = int(status.get("observedGeneration") or 0)
    phase = status.get("phase", "")
    if seen >= want and phase == "Ready":
        ctx.condition("RolledOut", True, "OsdsReady", "Rook reports the patched cluster Ready")
        return
    waited = time.time() - float(ctx.get("rolloutSince") or time.time())
    message = (
        f"waiting for Rook to roll out generation {want} (observed {seen}, phase "
        f"{phase or 'unknown'}) for {waited:.0f} s"
    )
    ctx.condition("RolledOut", False, "RollingOut", message)
    if waited > ctx.settings.rollout_timeout_seconds:
        raise ExecutionError(message + "; gave up (rolloutTimeoutSeconds)")
    raise NotReady(message)


def restore_cluster(ctx: RunContext) -> None:
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


def prefill(ctx: RunContext, plan: RunPlan) -> None:
    """Pool, images and prefill run from a Job with the cluster's client credentials."""
    from crimsonbench.controller.steps_stage import run_prefill

    run_prefill(ctx, plan)


def remove_client(ctx: RunContext) -> None:
    t = ctx.spec.target.rook
    if t is not None:
        ctx.kube.delete_custom(t.namespace, "cephclients", ctx.name)
