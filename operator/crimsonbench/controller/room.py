"""Preflight's capacity check (node_room.py decides): what the run's nodes offer and what
their pods request, read from the API, against what the run will add there: every OSD pod
of the cluster resized to the plan's Guaranteed size (Rook's resources.osd), the run's fio
servers and driver. Before anything is touched; InvalidSpec names the node and the sizes.
"""

from __future__ import annotations

from typing import Any

from crimsonbench.controller.decisions.node_room import Growth, osd_growth, room_refusal
from crimsonbench.controller.decisions.observed import Size, quantity
from crimsonbench.controller.decisions.pod_requests import size_of
from crimsonbench.controller.fio_setup import driver_job, server_jobs
from crimsonbench.controller.run_context import RunContext
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import Flavor


def _job_size(job: dict[str, Any]) -> Size:
    pod = job["spec"]["template"]["spec"]
    return sum((size_of(c["resources"]["requests"]) for c in pod["containers"]), Size())


def fio_growth(ctx: RunContext, plan: RunPlan) -> list[Growth]:
    """The run's fio servers and driver, each on its node (the Jobs as they will be made)."""
    out = []
    nodes = {c.name: c.node for c in plan.clients}
    for client, job in server_jobs(ctx, plan).items():
        if nodes[client] is not None:
            out.append(Growth(str(nodes[client]), f"fio server {client}", _job_size(job)))
    if plan.clients[0].node is not None:
        out.append(Growth(plan.clients[0].node, "fio driver", _job_size(driver_job(ctx, plan))))
    return out


def check_room(ctx: RunContext, plan: RunPlan) -> None:
    """InvalidSpec when a node lacks the room the run adds there (node_room.room_refusal)."""
    growth = fio_growth(ctx, plan)
    rook_ns = ctx.target.rook_namespace
    osd_nodes = set()
    if rook_ns is not None:
        osd_nodes = {
            p.node for p in ctx.kube.list_osd_pods(rook_ns) if p.node and not p.terminating
        }
    on_nodes = {n: ctx.kube.pods_on_node(n) for n in sorted(osd_nodes | {g.node for g in growth})}
    if rook_ns is not None:
        planned = Size(float(plan.osd_resources.cpu), quantity(plan.osd_resources.memory))
        growth = osd_growth(on_nodes, rook_ns, planned) + growth
    crimson = ctx.spec.osd.flavor == Flavor.CRIMSON
    field = "spec.osd.reactors" if crimson else "spec.osd.cpusPerOsd"
    nodes = {n.name: n for n in ctx.kube.list_nodes()}
    refusal = room_refusal(nodes, on_nodes, growth, field)
    if refusal is not None:
        raise refusal
