"""fio on Kubernetes before the first step: where the run's Jobs run and as which Ceph user,
the run's cephx user (Rook) and images, one pinned fio server per client node and the
run's fio driver pod (the steps then run in it: step_loop.py)."""

from __future__ import annotations

import time
from typing import Any

from crimsonbench.controller.decisions.fio_servers import server_addresses
from crimsonbench.controller.decisions.observed import PodState
from crimsonbench.controller.decisions.waits import bounded_wait
from crimsonbench.controller.jobs import job_log, serving_pod
from crimsonbench.controller.run_context import RunBase, RunContext
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests import fio, fio_driver, maintenance, network, rook_objects
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
    if phase == "Ready":
        return
    # Rook retries a CephClient it cannot make for ever (a Failure phase, or none at all
    # when its operator is down): the run gives up in time and restores the cluster.
    waited = ctx.record.waited("client", time.time())
    message = (f"waiting {waited:.0f} s for Rook to create cephx user client.{plan.pool.user} "
               f"(CephClient {rook_ns}/{plan.pool.user} phase {phase or 'unknown'})")  # fmt: skip
    raise bounded_wait(message, waited, ctx.settings.rollout_timeout_seconds,
                       "see Rook's operator log and the CephClient's status")  # fmt: skip


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


NETWORK_CONDITION = "NetworkIsolated"


def isolate_fio_pods(ctx: RunContext) -> None:
    """The run's NetworkPolicies (manifests/network.py), made once, before its first fio
    server: only its driver reaches its servers, only its servers reach the driver's start
    barrier. Host-network pods are beyond any NetworkPolicy: then none is made and the
    condition says what stays open."""
    if NETWORK_CONDITION in ctx.record.conditions():
        return
    s = ctx.settings
    if s.host_network:
        open_ = (
            "the run's pods use their nodes' network (the chart's jobs.hostNetwork), which no "
            f"NetworkPolicy can protect: its fio servers (TCP {s.fio_port}, no authentication; "
            f"fio job files run shell) and its start barrier (TCP {s.barrier_port}) take "
            "connections from anything that reaches the nodes' addresses; firewall those "
            "ports on the nodes, or run without jobs.hostNetwork"
        )
        ctx.record.condition(NETWORK_CONDITION, False, "HostNetwork", open_)
        return
    ns = jobs_namespace(ctx)
    bodies = network.fio_network_policies(ctx.child, ns, fio_port=s.fio_port,
                                          barrier_port=s.barrier_port)  # fmt: skip
    for body in bodies:
        ctx.kube.ensure_network_policy(ns, body)
    names = ", ".join(f"{ns}/{b['metadata']['name']}" for b in bodies)
    message = (
        f"only the run's fio driver may connect to its fio servers (TCP {s.fio_port}), only "
        f"its fio servers to its start barrier (TCP {s.barrier_port}): NetworkPolicies "
        f"{names}, enforced where the cluster's network plugin enforces NetworkPolicy"
    )
    ctx.record.condition(NETWORK_CONDITION, True, "NetworkPolicy", message)


def server_jobs(ctx: RunContext, plan: RunPlan) -> dict[str, dict[str, Any]]:
    """client name -> its fio server's Job."""
    access, opts, port = fio_access(ctx), ctx.settings.pod_options(), ctx.settings.fio_port
    return {
        c.name: fio.fio_server_job(ctx.child, c, plan, access, opts, port=port)
        for c in plan.clients
    }


def driver_job(ctx: RunContext, plan: RunPlan) -> dict[str, Any]:
    """The run's fio driver's Job: on the first client's node, beside that client's fio
    server; crimson runs give it the run's fio user, to sample the reactors."""
    access = fio_access(ctx) if plan.flavor == "crimson" else None
    return fio_driver.fio_driver_job(
        ctx.child, jobs_namespace(ctx), ctx.settings.pod_options(),
        node=plan.clients[0].node, lifetime_s=fio.run_deadline_s(plan), access=access,
    )  # fmt: skip


def ensure_servers(ctx: RunContext, plan: RunPlan) -> dict[str, str]:
    """One fio server Job per client node; client -> "ip:port" once all are Ready."""
    isolate_fio_pods(ctx)
    pods = {}
    for client, body in server_jobs(ctx, plan).items():
        pods[client] = serving_pod(ctx.kube, body, f"the fio server of {client}")
    found = server_addresses(plan, pods, ctx.settings.fio_port)
    if isinstance(found, NotReady | ExecutionError):
        raise found
    ctx.record.status.fio_servers = found
    return found


def ensure_driver(ctx: RunContext, plan: RunPlan) -> PodState:
    """The run's fio driver pod (steps run in it by exec, a step's start barrier listens
    on its address); NotReady until it runs with an address."""
    body = driver_job(ctx, plan)
    name = body["metadata"]["name"]
    pod = serving_pod(ctx.kube, body, "the fio driver")
    if pod.phase != "Running" or not pod.ip:
        why = f" ({pod.reason})" if pod.reason else ""
        raise NotReady(f"waiting for the fio driver pod of {name}: {pod.phase}{why}")
    return pod
