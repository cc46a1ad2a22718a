"""The Rook side of a run: record the CephCluster exactly, patch it for the plan, wait for
Rook to roll OSDs out (restore.py puts it back byte for byte afterwards).

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
from typing import Any

from crimsonbench.controller import osd_restarts, restore_steps
from crimsonbench.controller.fio_setup import admin_access
from crimsonbench.controller.jobs import job_outcome
from crimsonbench.controller.restore_steps import ORIGINAL_DIGEST, PATCHED_BY
from crimsonbench.controller.rollout import osds_running_with, rollout
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady, TargetMissing
from crimsonbench.manifests.cephcluster import (
    cephcluster_patch,
    has_crimson_layout,
    merge_patch,
    needs_reprovision,
)
from crimsonbench.manifests.maintenance import ceph_commands_job
from crimsonbench.manifests.naming import APP, GROUP, LABEL_NAME, LABEL_RUN, label_value
from crimsonbench.plan.types import HostPlan, RunPlan
from crimsonbench.spec.models import Flavor

ORIGINAL_KEY = "cephcluster-spec.json"
LABEL_RUN_NAMESPACE = f"{GROUP}/run-namespace"
_TAG_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


def original_name(uid: str) -> str:
    """The saved original's ConfigMap, in the operator's namespace: named by the run's uid
    (runs of one name in two namespaces never share it)."""
    return f"crimsonbench-original-{uid}"[:253]


def cluster_annotations(cluster: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in
            ((cluster.get("metadata") or {}).get("annotations") or {}).items()}  # fmt: skip


def rook_cluster(ctx: RunContext) -> tuple[str, str]:
    """Rook's namespace and the CephCluster's name; InvalidSpec for any other target."""
    t = ctx.target
    if t.rook_namespace is None or t.cluster_name is None:
        raise InvalidSpec("spec.target.rook", "this step needs a Rook target")
    return t.rook_namespace, t.cluster_name


def _cluster(ctx: RunContext) -> dict[str, Any]:
    found = ctx.kube.get_cephcluster(*rook_cluster(ctx))
    if found is None:
        raise TargetMissing(f"{ctx.target.where} not found; create it or fix spec.target.rook")
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
    annotations, where = cluster_annotations(cluster), ctx.target.where
    foreign = restore_steps.foreign_patch(annotations, ctx.holder, where)
    if foreign:
        raise ExecutionError(foreign)
    ns, name = ctx.settings.operator_namespace, original_name(ctx.uid)
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
    foreign = restore_steps.foreign_patch(cluster_annotations(_cluster(ctx)), ctx.holder,
                                          ctx.target.where)  # fmt: skip
    if foreign:
        raise ExecutionError(foreign)


def patch_cluster(ctx: RunContext, plan: RunPlan) -> None:
    ns, cluster_name = rook_cluster(ctx)
    cluster = _cluster(ctx)
    original, saved = record_original(ctx, cluster)
    check_consent(ctx, plan.hosts, original.get("cephConfig"))
    desired = cephcluster_patch({**cluster, "spec": original}, plan)
    book = ctx.record.book
    if ctx.spec.osd.flavor == Flavor.CRIMSON and book.osd_incarnations is None:
        planned = {o.osd_id for o in plan.osds}
        book.osd_incarnations = {str(p.osd_id): p.incarnation for p in ctx.kube.list_osd_pods(ns)
                                 if p.osd_id in planned and not p.terminating}  # fmt: skip
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
    ctx.record.status.patched_generation = generation
    book.waits.rollout = round(time.time(), 1)  # Rook's rollout is awaited from now
    ctx.record.condition(
        "ClusterPatched",
        True,
        "CephClusterPatched",
        f"cephConfig and resources set for {len(plan.osds)} OSDs (generation {generation})",
    )


def crimson_setup(ctx: RunContext, plan: RunPlan) -> NotReady | None:
    """Run plan.ceph.commands (`osd set-allow-crimson`) in a Job; None when done.

    Rook cannot start crimson OSDs without the flag, so on a cluster whose crimson OSDs run
    it is set already and this Job only confirms it (the command is idempotent)."""
    if not plan.ceph.commands:
        return None
    job = ceph_commands_job(
        ctx.name, "setup", plan.ceph.commands, admin_access(ctx), ctx.settings.pod_options()
    )
    out = job_outcome(ctx.kube, job)
    if out.state == "failed":
        raise ExecutionError(f"crimson setup {out.where} failed: {out.text[-1000:]}")
    return NotReady(f"crimson setup {out.where} {out.text}") if out.state == "pending" else None


def wait_rollout(ctx: RunContext, plan: RunPlan) -> None:
    """Crimson prerequisites done; Rook reconciled our generation; every planned OSD runs
    again, on its own node, with the planned resources, and is Ready."""
    if ctx.target.kind != "rook":
        return
    ns, _ = rook_cluster(ctx)
    setup = crimson_setup(ctx, plan)
    cluster = _cluster(ctx)
    placement = ctx.record.placement
    pods = ctx.kube.list_osd_pods(ns)
    progress = rollout(
        plan, placement, pods, cluster.get("status") or {}, ctx.record.status.patched_generation
    )  # ExecutionError: an OSD moved
    if not isinstance(progress, NotReady) and ctx.spec.osd.flavor == Flavor.CRIMSON:
        progress = osd_restarts.started_after_patch(ctx, placement, pods)
    others = sorted({p.osd_id for p in pods} - set(placement))
    if not isinstance(progress, NotReady) and others:  # Rook rolls the others too
        limits = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
        progress = osds_running_with(others, pods, limits)
    if not isinstance(progress, NotReady) and setup is None:
        ctx.record.condition("RolledOut", True, "OsdsReady", progress)
        return
    waited = ctx.record.waited("rollout", time.time())
    message = f"waiting for Rook to roll out for {waited:.0f} s: {progress}" + (
        f"; {setup}" if setup else ""
    )
    ctx.record.condition("RolledOut", False, "RollingOut", message)
    if waited > ctx.settings.rollout_timeout_seconds:
        raise ExecutionError(message + "; gave up (rolloutTimeoutSeconds)")
    raise NotReady(message)
