"""Node topology for the planner: `lscpu -e --json` from a probe Job on each node, cached
per node in a ConfigMap (topology does not change between runs; a pod start does cost).
A cache counts only for the node its annotation names: node names may be 253 characters,
a ConfigMap's name is made unique (a hash where it had to be cut or changed), and one an
older operator cut short may hold another node's topology."""

from __future__ import annotations

from crimsonbench.controller.jobs import job_outcome
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests.maintenance import topology_probe_job
from crimsonbench.manifests.naming import GROUP, dns_name
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import Topology

CACHE_KEY = "lscpu.json"
LABEL_TOPOLOGY = f"{GROUP}/topology"
NODE_ANNOTATION = f"{GROUP}/node"


def cache_name(node: str) -> str:
    return dns_name("crimsonbench-topology", node)


def cache_configmap(node: str, lscpu_json: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": cache_name(node),
            "labels": {"app.kubernetes.io/name": "crimsonbench", LABEL_TOPOLOGY: "lscpu"},
            "annotations": {NODE_ANNOTATION: node},
        },
        "data": {CACHE_KEY: lscpu_json},
    }


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
        probe = job_outcome(ctx.kube, topology_probe_job(ctx.child, node, ns,
                                                         ctx.settings.pod_options()))  # fmt: skip
        if probe.state == "failed":
            raise ExecutionError(f"topology probe on node {node} failed ({probe.where}): "
                                 f"{probe.text[-500:]}")  # fmt: skip
        if probe.state == "succeeded":
            out[node] = parse_lscpu_json(probe.text)  # ParseError names the command to run
            ctx.kube.replace_configmap(ns, cache_configmap(node, probe.text))  # or another's
            ctx.kube.delete_job(ns, probe.name)  # cached: the Job is done with
            continue
        waiting.append(node)
    if waiting:
        raise NotReady("waiting for the topology probe on node(s) " + ", ".join(waiting))
    return out
