"""The Rook side of a run: record what the patch will change, patch the CephCluster for
the plan, wait for Rook to roll OSDs out (restore.py puts back what the run changed).

Write-ahead: one tick records, value by value, what the patch will set and what the
cluster has there (the run's undo record, spec.status.UndoRecord; kept in the run's status
when the tick ends); a later tick patches, only while the CephCluster's spec is still the
one recorded from (its generation). The patch that changes the spec also puts the run's
name and the record's sha256 on the CephCluster; the restore applies the record only
when it matches (restore_steps.trusted_changes)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from crimsonbench.controller import osd_restarts
from crimsonbench.controller.decisions import restore_steps
from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
from crimsonbench.controller.decisions.rollout import rollout, rollout_done
from crimsonbench.controller.fio_setup import admin_access
from crimsonbench.controller.jobs import job_log
from crimsonbench.controller.kube_errors import Conflict
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady, TargetMissing
from crimsonbench.manifests.cephcluster import (
    cephcluster_patch,
    has_crimson_layout,
    merge_patch,
    needs_reprovision,
)
from crimsonbench.manifests.cephcluster_undo import (
    Change,
    apply_changes,
    changes_digest,
    spec_changes,
)
from crimsonbench.manifests.maintenance import ceph_commands_job
from crimsonbench.plan.types import HostPlan, RunPlan
from crimsonbench.spec.models import Flavor
from crimsonbench.spec.status import SpecChange

_TAG_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


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
    """Record what the patch changes (NotReady: the record is kept when this tick ends),
    then, on a later tick, patch exactly that."""
    ns, cluster_name = rook_cluster(ctx)
    cluster = _cluster(ctx)
    annotations, where = cluster_annotations(cluster), ctx.target.where
    if annotations.get(PATCHED_BY) == ctx.holder:  # an earlier tick patched, then stopped
        _patched(ctx, plan)
        return
    foreign = restore_steps.foreign_patch(annotations, ctx.holder, where)
    if foreign:
        raise ExecutionError(foreign)
    meta = cluster.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    undo = ctx.record.book.undo
    if not undo.spec_digest or undo.recorded_generation != generation:
        _record_changes(ctx, plan, cluster, generation)
        raise NotReady(f"recorded the {len(undo.spec_changes)} values the patch of {where} "
                       "changes; it is patched next")  # fmt: skip
    spec = cluster.get("spec") or {}
    patch = merge_patch(spec, apply_changes(spec, as_changes(undo.spec_changes)))
    book = ctx.record.book
    if ctx.spec.osd.flavor == Flavor.CRIMSON and book.osd_incarnations is None:
        planned = {o.osd_id for o in plan.osds}
        book.osd_incarnations = {str(p.osd_id): p.incarnation for p in ctx.kube.list_osd_pods(ns)
                                 if p.osd_id in planned and not p.terminating}  # fmt: skip
    # One patch: the spec changes only together with the marks that let the restore check
    # the record, and only if the CephCluster is still the one just read.
    marks = {PATCHED_BY: ctx.holder, UNDO_DIGEST: undo.spec_digest}
    body: dict[str, Any] = {"metadata": {"annotations": marks}}
    version = meta.get("resourceVersion")
    if version:  # a precondition: 409 if anyone changed it since it was read
        body["metadata"]["resourceVersion"] = version
    if patch:
        body["spec"] = patch
    try:
        ctx.kube.merge_patch_cephcluster(ns, cluster_name, body)
    except Conflict as exc:  # its resourceVersion moved on since it was read
        raise NotReady(f"{where} changed while it was patched; again") from exc
    _patched(ctx, plan)


def _record_changes(
    ctx: RunContext, plan: RunPlan, cluster: dict[str, Any], generation: int
) -> None:
    """The run's undo record of the CephCluster: every value the patch sets, with what the
    cluster has there now, and its sha256."""
    spec = cluster.get("spec") or {}
    check_consent(ctx, plan.hosts, spec.get("cephConfig"))
    changes = spec_changes(spec, cephcluster_patch(cluster, plan))
    undo = ctx.record.book.undo
    undo.spec_changes = [SpecChange(path=list(c.path), before=c.before, after=c.after)
                         for c in changes]  # fmt: skip
    undo.spec_digest = changes_digest(as_changes(undo.spec_changes))
    undo.recorded_generation = generation
    undo.cluster_uid = str((cluster.get("metadata") or {}).get("uid") or "")
    if ctx.spec.osd.flavor == Flavor.CRIMSON:
        undo.crimson_osds = sorted(o.osd_id for o in plan.osds)


def as_changes(recorded: Sequence[SpecChange]) -> list[Change]:
    """The record's changes as manifests.cephcluster_undo reads them."""
    return [Change(tuple(c.path), c.before, c.after, 0) for c in recorded]


def _patched(ctx: RunContext, plan: RunPlan) -> None:
    cluster = _cluster(ctx)
    generation = int(cluster["metadata"].get("generation", 0))
    ctx.record.status.patched_generation = generation
    if ctx.record.book.waits.rollout is None:
        ctx.record.book.waits.rollout = round(time.time(), 1)  # the rollout from now
    ctx.record.condition(
        "ClusterPatched",
        True,
        "CephClusterPatched",
        f"cephConfig and resources set for {len(plan.osds)} OSDs (generation {generation})",
    )


def crimson_setup(ctx: RunContext, plan: RunPlan) -> None:
    """Run plan.ceph.commands (`osd set-allow-crimson`) in a Job; NotReady until done.

    Rook cannot start crimson OSDs without the flag, so on a cluster whose crimson OSDs run
    it is set already and this Job only confirms it (the command is idempotent)."""
    if not plan.ceph.commands:
        return
    job = ceph_commands_job(
        ctx.child, "setup", plan.ceph.commands, admin_access(ctx), ctx.settings.pod_options()
    )
    job_log(ctx.kube, job, "crimson setup")  # NotReady while it runs; ExecutionError: failed


def wait_rollout(ctx: RunContext, plan: RunPlan) -> None:
    """Crimson prerequisites done; Rook reconciled our generation; every planned OSD runs
    again, on its own node, with the planned resources, and is Ready."""
    if ctx.target.kind != "rook":
        return
    ns, _ = rook_cluster(ctx)
    try:
        crimson_setup(ctx, plan)
        setup = None
    except NotReady as running:
        setup = running
    placement = ctx.record.placement
    pods = ctx.kube.list_osd_pods(ns)
    progress = rollout(plan, placement, pods, _cluster(ctx).get("status") or {},
                       ctx.record.status.patched_generation)  # fmt: skip
    if not isinstance(progress, NotReady) and ctx.spec.osd.flavor == Flavor.CRIMSON:
        try:  # Rook restarts only what it changed: crimson's layout is read at start
            progress = osd_restarts.started_after_patch(ctx, placement, pods)
        except NotReady as restarting:
            progress = restarting
    waited = ctx.record.waited("rollout", time.time())
    done = rollout_done(plan, placement, pods, progress, setup, waited,
                        ctx.settings.rollout_timeout_seconds)  # fmt: skip
    ctx.record.condition("RolledOut", *done.condition)
    if isinstance(done.outcome, Exception):
        raise done.outcome
