"""Node topology for the planner: `lscpu -e --json` from a probe Job on each node, cached
per node in a ConfigMap (topology does not change between runs; a pod start does cost).
A cache counts only for the node its annotation names: node names may be 253 characters,
a ConfigMap's name is made unique (a hash where it had to be cut or changed), and one an
older operator cut short may hold another node's topology."""

from __future__ import annotations

from crimsonbench.controller.jobs import job_log
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import NotReady
from crimsonbench.manifests.maintenance import topology_probe_job
from crimsonbench.manifests.topology_cache import (
    CACHE_KEY,
    NODE_ANNOTATION,
    cache_configmap,
    cache_name,
)
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import Topology


def node_topologies(ctx: RunContext, nodes: list[str]) -> dict[str, Topology]:
    """Topology per node; starts probe Jobs for nodes not cached yet and raises NotReady."""
    ns = ctx.settings.operator_namespace
    out: dict[str, Topology] = {}
    waiting: list[str] = []
    for node in nodes:
        cached = ctx.kube.get_configmap(ns, cache_name(node))
        ours = (ctx.kube.configmap_annotations(ns, cache_name(node)) or {}).get(NODE_ANNOTATION)
        if cached and CACHE_KEY in cached and ours == node:
            out[node] = parse_lscpu_json(cached[CACHE_KEY])
            continue
        probe = topology_probe_job(ctx.child, node, ns, ctx.settings.pod_options())
        try:  # cached below: the Job is done with once read
            text = job_log(ctx.kube, probe, f"topology probe on node {node}", delete=True)
        except NotReady:  # every node's probe runs at once
            waiting.append(node)
            continue
        out[node] = parse_lscpu_json(text)  # ParseError names the command to run
        ctx.kube.replace_configmap(ns, cache_configmap(node, text))  # or another's
    if waiting:
        raise NotReady("waiting for the topology probe on node(s) " + ", ".join(waiting))
    return out
