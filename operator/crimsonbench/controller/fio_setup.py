"""fio on Kubernetes before the first step: where the run's Jobs run and as which Ceph user,
the run's cephx user (Rook) and images, one pinned fio server per client node and the
run's fio driver pod (the steps then run in it: step_loop.py)."""

from __future__ import annotations

from typing import Any

from crimsonbench.controller.jobs import job_log, serving_pod
from crimsonbench.controller.observed import PodState
from crimsonbench.controller.run_context import RunBase, RunContext
from crimsonbench.controller.step_decide import server_addresses
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests import fio, fio_driver, maintenance, rook_objects
from crimsonbench.manifests.ceph_access import CephAccess, rook_access, rook_client_access
from crimsonbench.manifests.naming import LABEL_RUN
from crimsonbench.plan.types import RunPlan


def jobs_namespace(ctx: RunBase) -> str:
    """Rook's secrets can only be mounted in their own namespace, so Jobs run there (as
    the undo record says: recorded before the run's first Job)."""
    return ctx.record.book.undo.jobs_namespace


def admin_access(ctx: RunBase) -> CephAccess:
    """For cluster-wide reads and commands (fsid, facts, crimson setup, the mon database's
    restore), from the undo record (lease.record_target), never from the current spec."""
    undo = ctx.record.book.undo
    if undo.target == "rook":
        return rook_access(undo.rook_namespace)
    if undo.target == "external" and len(undo.keyring_secret) == 2:
        return CephAccess(namespace=undo.jobs_namespace, secret_name=undo.keyring_secret[0],
                          secret_key=undo.keyring_secret[1], secret_is_keyring=True,
                          username=undo.ceph_user, mon_host=undo.mon_host)  # fmt: skip
    raise ExecutionError("the run recorded no Ceph target to act on (a bug: say so)")


def fio_access(ctx: RunBase) -> CephAccess:
    """What fio and the image Jobs use: on Rook the run's CephClient, limited to the run's
    pool; on external clusters the user and keyring the spec named."""
    undo = ctx.record.book.undo
    if undo.target == "rook":
        return rook_client_access(undo.rook_namespace, undo.user)
    return admin_access(ctx)


def ensure_owned(ctx: RunBase, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    """The Rook object `body` as the API has it once created: ExecutionError, naming it,
    when one of that name is there already and is not this run's (its run label): never
    adopted (Rook would adopt the Ceph pool behind a CephBlockPool of that name)."""
    name = body["metadata"]["name"]
    ctx.kube.ensure_custom(namespace, plural, body)
    found = ctx.kube.get_custom(namespace, plural, name) or {}
    ours = body["metadata"]["labels"][LABEL_RUN]
    theirs = ((found.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN)
    if found and theirs != ours:
        raise ExecutionError(
            f"{plural}/{name} in {namespace} exists and is not this run's (its "
            f"{LABEL_RUN} label: {theirs or 'none'}); it is left alone: nothing of it is used "
            "or removed"
        )
    return found


def ensure_client_user(ctx: RunContext, plan: RunPlan) -> None:
    """Rook: the run's CephClient (caps on the run's pool only); NotReady until Rook made
    its key. External clusters use the keyring the spec names."""
    rook_ns = ctx.target.rook_namespace
    if rook_ns is None:
        return
    body = rook_objects.ceph_client(ctx.child, plan.pool, namespace=rook_ns)
    found = ensure_owned(ctx, rook_ns, "cephclients", body)
    phase = (found.get("status") or {}).get("phase", "")
    if phase != "Ready":
        raise NotReady(f"waiting for Rook to create cephx user client.{plan.pool.user} ({phase})")


def ensure_images(ctx: RunContext, plan: RunPlan) -> None:
    status = ctx.record.status
    if status.images_created:
        return
    access = fio_access(ctx)
    body = maintenance.create_images_job(
        ctx.child, plan.pool.name, plan.pool.images, plan.pool.image_size_bytes, ctx.uid,
        access, ctx.settings.pod_options(),
    )  # fmt: skip
    job_log(ctx.kube, body, f"creating {len(plan.pool.images)} RBD images")
    ctx.kube.delete_job(access.namespace, body["metadata"]["name"])
    status.images_created = True


def ensure_servers(ctx: RunContext, plan: RunPlan) -> dict[str, str]:
    """One fio server Job per client node; client -> "ip:port" once all are Ready."""
    access = fio_access(ctx)
    opts = ctx.settings.pod_options()
    pods = {}
    for client in plan.clients:
        body = fio.fio_server_job(ctx.child, client, plan, access, opts, port=ctx.settings.fio_port)
        pods[client.name] = serving_pod(ctx.kube, body, f"the fio server of {client.name}")
    found = server_addresses(plan, pods, ctx.settings.fio_port)
    if isinstance(found, NotReady):
        raise found
    ctx.record.status.fio_servers = found
    return found


def ensure_driver(ctx: RunContext, plan: RunPlan) -> PodState:
    """The run's fio driver pod (steps run in it by exec, a step's start barrier listens
    on its address); NotReady until it runs with an address. It sits
    on the first client's node, beside that client's fio server; crimson runs give it the
    run's fio user, to sample the reactors."""
    access = fio_access(ctx) if plan.flavor == "crimson" else None
    body = fio_driver.fio_driver_job(
        ctx.child, jobs_namespace(ctx), ctx.settings.pod_options(),
        node=plan.clients[0].node, lifetime_s=fio.run_deadline_s(plan), access=access,
    )  # fmt: skip
    name = body["metadata"]["name"]
    pod = serving_pod(ctx.kube, body, "the fio driver")
    if pod.phase != "Running" or not pod.ip:
        why = f" ({pod.reason})" if pod.reason else ""
        raise NotReady(f"waiting for the fio driver pod of {name}: {pod.phase}{why}")
    return pod
