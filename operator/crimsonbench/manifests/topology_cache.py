"""The node topology cache: a ConfigMap per node holding `lscpu -e --json` from the
probe Job (controller/topology.py reads and writes it), named uniquely per node and
annotated with the node it is for."""

from __future__ import annotations

from crimsonbench.manifests.naming import GROUP, dns_name

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
