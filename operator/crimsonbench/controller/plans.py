"""A run's plan, made from what observe recorded (client nodes, where each OSD runs, each
node's CPUs, the option names the mons know): the planner is pure, so every tick and
every restarted operator makes the very same plan (kept in plan_cache.PlanCache)."""

from __future__ import annotations

import json

from crimsonbench.controller import rook
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.topology import node_topologies
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.types import RunPlan, Topology


def plan_for(ctx: RunContext) -> RunPlan:
    """The run's plan (made once per tick; from the cache when its inputs are the same)."""
    if ctx.plan is not None:
        return ctx.plan
    status = ctx.record.status
    version, family = rook.ceph_version(ctx), _family(status.option_family)
    key = (
        ctx.uid,
        ctx.spec.model_dump_json(),
        json.dumps([status.client_nodes, status.osd_placement], sort_keys=True),
        str(version),
        str(family),
        str(ctx.settings.step_grace_seconds),
    )
    plan = ctx.plans.get(key)
    if plan is None:
        grace = ctx.settings.step_grace_seconds
        plan = build_plan(ctx.child, ctx.spec, layout_of(ctx), ceph_version=version,
                          option_family=family, grace_s=grace, owner=ctx.owner)  # fmt: skip
        ctx.plans.remember(key, plan)
    ctx.plan = plan
    return plan


def _family(recorded: str) -> str | None:
    """The crimson option family preflight read from the mons (None: not crimson, or not
    read yet, and the planner falls back to the Ceph version)."""
    return recorded if recorded in ("legacy", "current") else None


def layout_of(ctx: RunContext) -> ClusterLayout:
    """NotReady until every node's topology is probed (topology.node_topologies)."""
    clients = tuple(ctx.record.status.client_nodes)
    placement = ctx.record.placement
    nodes = sorted(set(clients) | set(placement.values()))
    topologies: dict[str | None, Topology] = {}
    topologies.update(node_topologies(ctx, nodes))
    return ClusterLayout(
        topologies=topologies,
        placement=placement,
        client_nodes=clients,
        osd_field="spec.osd.count",
        plan_osds=ctx.target.kind == "rook",
    )
