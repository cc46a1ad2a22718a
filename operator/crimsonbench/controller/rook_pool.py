"""The run's own Rook objects: a size-1 CephBlockPool and a pool-limited CephClient,
created for the run and removed after it (only objects this run made), each wait bounded:
Rook retries a pool it cannot create or delete for ever."""

from __future__ import annotations

import time

from crimsonbench.controller.decisions.waits import bounded_wait
from crimsonbench.controller.fio_setup import ensure_owned
from crimsonbench.controller.run_context import RunBase, RunContext
from crimsonbench.errors import NotReady
from crimsonbench.manifests.naming import LABEL_RUN, label_value
from crimsonbench.manifests.rook_objects import cephblockpool
from crimsonbench.plan.types import RunPlan


def ensure_pool(ctx: RunContext, plan: RunPlan) -> None:
    """A CephBlockPool (size 1, fixed PGs) made by Rook; NotReady until Rook says Ready."""
    ns = ctx.target.rook_namespace
    if ns is None:
        return  # external clusters: the pool must exist (preflight checked it)
    pool = cephblockpool(ctx.child, plan.pool, namespace=ns)
    found = ensure_owned(ctx, ns, "cephblockpools", pool)
    phase = (found.get("status") or {}).get("phase", "")
    if phase == "Ready":
        return
    # Rook retries a failed pool for ever (seen here: its `rbd pool init` timing out
    # behind an OSD's stuck ops): the run gives up in time and restores the cluster.
    waited = ctx.record.waited("pool", time.time())
    message = (f"waiting {waited:.0f} s for Rook to create pool {plan.pool.name} "
               f"(CephBlockPool phase {phase or 'unknown'})")  # fmt: skip
    raise bounded_wait(message, waited, ctx.settings.rollout_timeout_seconds,
                       "see Rook's operator log and `ceph health detail` (slow ops, PGs not "
                       "active)")  # fmt: skip


def remove_pool_and_user(ctx: RunBase) -> None:
    """Deleting the CephBlockPool deletes the pool and its images (force-deletion); the
    run's CephClient goes with its cephx user. Only the objects the undo record names, and
    only while they carry this run's label. NotReady until Rook has removed them (its
    finalizers delete the Ceph pool and user)."""
    undo = ctx.record.book.undo
    ns = undo.rook_namespace
    if undo.target != "rook" or not ns:
        return
    owned = [("cephblockpools", undo.pool_object)] if not undo.keep_images else []
    owned.append(("cephclients", undo.client_object))
    waiting = []
    for plural, name in owned:
        found = ctx.kube.get_custom(ns, plural, name) if name else None
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        if found is None or labels.get(LABEL_RUN) != label_value(ctx.child):
            continue
        if not (found.get("metadata") or {}).get("deletionTimestamp"):
            ctx.kube.delete_custom(ns, plural, name)
        waiting.append(f"{plural}/{name}")
    if not waiting:
        return
    # Rook retries a pool it cannot delete for ever (seen here: its image listing stuck
    # behind an OSD's delayed op): the run stops waiting in time, says what is left, and
    # releases the cluster.
    waited = ctx.record.waited("removal", time.time())
    message = f"waiting {waited:.0f} s for Rook to remove {', '.join(waiting)}"
    if waited <= ctx.settings.rollout_timeout_seconds:
        raise NotReady(message)
    left = (
        f"{message}; gave up (rolloutTimeoutSeconds): they stay marked for deletion and "
        f"Rook keeps trying (see Rook's operator log and `ceph health detail`: slow ops); "
        f"pool {undo.pool} may still hold the run's images"
    )
    ctx.record.condition("RookObjectsRemoved", False, "RemovalTimeout", left)
    ctx.logger.warning("%s", left)
