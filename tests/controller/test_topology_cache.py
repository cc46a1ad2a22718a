"""The operator's per-node topology cache has one ConfigMap per node, whatever the node
names (issue 36, class 11): names cut at 40 characters, or '.' read as '-', gave two
nodes one ConfigMap, and the second node was planned on the first one's lscpu."""

from __future__ import annotations

import re

import pytest

from crimsonbench.manifests.topology_cache import NODE_ANNOTATION, cache_configmap, cache_name

LONG = "worker-" + "a" * 60  # the same first 40 characters, then different
PAIRS = [
    (LONG + "-rack1.dc1.example.com", LONG + "-rack2.dc1.example.com"),
    ("node.a", "node-a"),
    ("x" * 253, "x" * 252 + "y"),
    ("ip-10-0-0-1.ec2.internal", "ip-10-0-0-1-ec2-internal"),
]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=["long-prefix", "dot-dash", "253", "ec2"])
def test_two_nodes_never_share_a_cache(a: str, b: str) -> None:
    assert cache_name(a) != cache_name(b)
    for node in (a, b):
        name = cache_name(node)
        assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name), name
        assert cache_configmap(node, "{}")["metadata"]["annotations"] == {NODE_ANNOTATION: node}


def test_a_short_node_name_keeps_its_old_cache_name() -> None:
    """Caches written by older operators for ordinary names are still found."""
    assert cache_name("kind-worker2") == "crimsonbench-topology-kind-worker2"
