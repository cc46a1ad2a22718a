"""One run at a time per Ceph cluster, and the run's undo record begun before it acts.

The lease is named after the cluster's identity, not after how a spec spells the target:
a Rook CephCluster's uid (the Lease sits in Rook's namespace, so every operator install
acting on that cluster sees it), an external cluster's fsid (read by a Job; that Lease sits
in the operator's namespace: installs of other namespaces do not see it, README). Its
holder is the run ("namespace/name/uid"); a lease whose run is gone (force-deleted, or
deleted and made again under its name) is free and taken over.

Before the lease is asked for, the run records where it acts (UndoRecord: the target, its
identity, the lease, the Jobs' namespace); cleanup and the restore read that, not the spec.
"""

from __future__ import annotations

import json
import time

from crimsonbench.controller.decisions.waits import bounded_wait
from crimsonbench.controller.fio_setup import admin_access
from crimsonbench.controller.jobs import job_log
from crimsonbench.controller.run_context import RunBase, RunContext, lease_name
from crimsonbench.errors import ParseError
from crimsonbench.manifests.ceph_access import ceph_access_for
from crimsonbench.manifests.maintenance import cluster_fsid_job
from crimsonbench.spec.api import GROUP, PLURAL, VERSION


def _identity(ctx: RunContext) -> str:
    """The cluster's identity: the CephCluster's uid, or the external cluster's fsid.
    NotReady while it is being read (a missing CephCluster: bounded, then ExecutionError)."""
    t = ctx.target
    if t.kind == "rook":
        found = ctx.kube.get_cephcluster(t.rook_namespace or "", t.cluster_name or "")
        uid = str(((found or {}).get("metadata") or {}).get("uid") or "")
        if uid:
            return uid
        waited = ctx.record.waited("target", time.time())
        message = f"{t.where} not found for {waited:.0f} s; create it or fix spec.target.rook"
        raise bounded_wait(message, waited, ctx.settings.rollout_timeout_seconds)
    job = cluster_fsid_job(ctx.child, admin_access(ctx), ctx.settings.pod_options())
    text = job_log(ctx.kube, job, f"reading the fsid of {t.where}")
    ctx.kube.delete_job(job["metadata"]["namespace"], job["metadata"]["name"])
    try:
        fsid = str(json.loads(text[text.index("{") :])["fsid"])
    except (ValueError, KeyError, TypeError):
        raise ParseError(f"`ceph fsid` of {t.where} printed {text[-200:]!r}") from None
    return fsid


def record_target(ctx: RunContext) -> None:
    """The undo record's where: once, before the run asks for the lease."""
    undo = ctx.record.book.undo
    if undo.lease:
        return
    t = ctx.target
    undo.target, undo.where, undo.jobs_namespace = t.kind, t.where, t.jobs_namespace
    if t.external is not None:  # how its Jobs reach it: the admin access, kept as found
        access = ceph_access_for(t)
        undo.mon_host, undo.ceph_user = access.mon_host or "", access.username or ""
        undo.keyring_secret = [access.secret_name, access.secret_key]
    identity = _identity(ctx)
    if t.kind == "rook":
        undo.rook_namespace, undo.cluster_name = t.rook_namespace or "", t.cluster_name or ""
        undo.cluster_uid = identity
        where = undo.rook_namespace
    else:
        undo.fsid = identity
        where = ctx.settings.operator_namespace
    undo.lease = [where, lease_name(identity)]


def take(ctx: RunContext) -> str:
    """The lease's holder after asking for it (== ctx.holder: the run has the cluster). A
    holder whose run no longer exists gives way."""
    ns, name = ctx.lease
    holder = ctx.kube.acquire_lease(ns, name, ctx.holder)
    if holder == ctx.holder or _alive(ctx, holder):
        return holder
    ctx.logger.warning("lease %s/%s: its holder %s is gone; taken over", ns, name, holder)
    if ctx.kube.take_over_lease(ns, name, holder, ctx.holder):
        return ctx.holder
    return ctx.kube.acquire_lease(ns, name, ctx.holder)  # someone else was faster


def _alive(ctx: RunContext, holder: str) -> bool:
    """Does the BenchmarkRun that holds the lease still exist ("namespace/name/uid")?
    Anything that is not such a holder counts as alive: never taken from an unknown."""
    parts = holder.split("/")
    if len(parts) != 3:
        return True
    namespace, name, uid = parts
    return ctx.kube.run_uid(GROUP, VERSION, PLURAL, namespace, name) == uid


def release(ctx: RunBase) -> None:
    if ctx.record.book.undo.lease:
        ctx.kube.release_lease(*ctx.lease, ctx.holder)
