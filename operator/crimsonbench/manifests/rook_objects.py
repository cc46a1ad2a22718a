"""The Rook objects a run creates: the benchmark pool and the pool-limited cephx user fio
runs as."""

from __future__ import annotations

import re
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests.naming import labels, metadata
from crimsonbench.plan.types import PoolPlan


def ceph_client(run: str, pool: PoolPlan, *, namespace: str | None = None) -> dict[str, Any]:
    """A Rook CephClient named pool.user (the plan's fio user) that can use RBD images in
    the benchmark pool and nothing else. Rook stores its key in Secret
    rook-ceph-client-<name> (ceph_access.rook_client_access)."""
    return {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephClient",
        "metadata": metadata(pool.user, namespace, labels(run, "client"), None),
        "spec": {"caps": {"mon": "profile rbd", "osd": f"profile rbd pool={pool.name}"}},
    }


# Why a CephBlockPool and not `ceph osd pool create` from a Job:
# - the pool is created by Rook with its own admin key; our pods never need rights to
#   create or delete pools, so fio can run as the pool-limited CephClient above;
# - it is declarative: Rook creates the CRUSH rule for failureDomain osd, applies size 1
#   (`--yes-i-really-mean-it` included) and the parameters, and keeps them;
# - deleting the CR deletes the pool (with images when rook.io/force-deletion is set),
#   so cleanup is one API call that survives an operator restart.
# The costs: Rook adopts an existing Ceph pool of the same name and sets it to size 1, so
# preflight refuses a pool that exists already (`ceph osd pool ls`); and the Ceph pool is
# named after the CR (Rook's CRD allows spec.name only for .mgr, .nfs and .rgw.root), so
# the pool name must be a valid object name (lower case, no `_`) on Rook.
FORCE_DELETION = "rook.io/force-deletion"
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def cephblockpool(run: str, pool: PoolPlan, *, namespace: str | None = None) -> dict[str, Any]:
    """A size-1 replicated pool named like the run's pool with a fixed PG count (autoscaler
    off), like local mode's pool, labelled with the run. Unless keepImages, deleting the
    CR also deletes the images in it."""
    if not _OBJECT_NAME.match(pool.name) or len(pool.name) > 253:
        raise InvalidSpec(
            "spec.client.pool",
            f"{pool.name!r}: on Rook the pool is a CephBlockPool named like the pool, so use "
            "lower case letters, digits, '-' and '.' only (e.g. rbd-bench)",
        )
    pg = str(pool.pg_num)
    annotations = None if pool.keep_images else {FORCE_DELETION: "true"}
    return {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephBlockPool",
        "metadata": metadata(pool.name, namespace, labels(run, "pool"), annotations),
        "spec": {
            "failureDomain": "osd",
            "replicated": {"size": 1, "requireSafeReplicaSize": False},
            "parameters": {"pg_autoscale_mode": "off", "pg_num": pg, "pgp_num": pg},
        },
    }
