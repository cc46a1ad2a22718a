"""Shared inputs of the manifest tests: the reference specs and plans, the original
CephCluster, and the YAML form of the golden files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import BenchmarkRunSpec, validate_spec

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
XEON = parse_lscpu_json((FIXTURES / "lscpu" / "xeon-8276m-2s.json").read_text())
NODE = "ceph-node-1"

# (a) the published seastore configuration: 1 OSD x 56 reactors on socket 0, dual reactor
SEASTORE_56: dict[str, Any] = {
    "target": {"rook": {"clusterName": "rook-ceph"}},
    "osd": {
        "flavor": "crimson",
        "objectStore": "seastore",
        "count": 1,
        "reactors": 56,
        "cpuPolicy": "osd",
        "cpuSet": "0-27,56-83",
        "hyperThreads": "dual",
        "cephVersion": "19.2.1",
    },
    "client": {"cpuSet": "28-55,84-111", "images": 32, "imageSize": "2Gi", "node": NODE},
}


# (b) "balance CPU": 8 OSDs x 5 reactors, crimson bluestore, 160 alien threads
def bluestore_8x5(policy: str) -> dict[str, Any]:
    return {
        "target": {"rook": {"clusterName": "rook-ceph"}},
        "osd": {
            "flavor": "crimson",
            "objectStore": "bluestore",
            "count": 8,
            "reactors": 5,
            "cpuPolicy": policy,
            "cpuSet": "0-23,56-79,28-51,84-107",
            "cephVersion": "20.2.4",
        },
        "client": {
            "cpuSet": "24-27,52-55,80-83,108-111",
            "images": 8,
            "imageSize": "10Gi",
            "node": NODE,
        },
    }


def layout(spec: BenchmarkRunSpec, nodes: tuple[str, ...] = (NODE,)) -> ClusterLayout:
    """OSDs spread over `nodes` in id order (as Rook made them), every node an XEON, fio
    on the spec's client nodes (else the first node)."""
    placement = {i: nodes[i * len(nodes) // spec.osd.count] for i in range(spec.osd.count)}
    clients = spec.client.named_nodes or (nodes[0],)
    return ClusterLayout({n: XEON for n in {*nodes, *clients}}, placement, clients)


def plan_of(
    name: str, doc: dict[str, Any], nodes: tuple[str, ...] = (NODE,)
) -> tuple[BenchmarkRunSpec, RunPlan]:
    spec = validate_spec(doc)
    return spec, build_plan(name, spec, layout(spec, nodes))


def original_cephcluster() -> dict[str, Any]:
    doc = yaml.safe_load((HERE / "cephcluster-original.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (scripts, fio job files) as literal blocks, readable in diffs."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(docs: list[Any]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, explicit_start=True, width=100)
