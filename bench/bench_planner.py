"""How long planning takes: per node at fleet scale, and the largest run end to end.

    python bench/bench_planner.py [--nodes 1000]

Every node is the reference machine (2 x Xeon Platinum 8276M, 112 CPUs; the lscpu output
captured in tests/fixtures/lscpu) with 8 crimson BlueStore OSDs x 5 reactors, cpuPolicy
socket.

- fleet: `nodes` nodes, each node's lscpu JSON parsed and planned alone (what the operator
  does per OSD node, its topology probe's output arriving as text). Goal < 1 s for 1000.
- largest run: build_plan for the biggest spec the CRD admits (128 OSDs = 16 nodes x 8,
  16 client nodes, 32 images each, 4 workloads x 10 iodepths x 3 repeats), each node from
  its own parsed topology. Goal < 1 s (the operator plans once per run, in a handler).
Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.ceph_options import ceph_setup
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.spec.models import (
    BenchmarkRunSpec,
    ClientSpec,
    CpuPolicy,
    ObjectStore,
    OsdSpec,
    validate_spec,
)

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/lscpu/xeon-8276m-2s.json"
GOAL_SECONDS = 1.0
OSD_NODES = 16
OSDS_PER_NODE = 8


def fleet(nodes: int) -> tuple[float, float]:
    """(seconds parsing + planning + ceph options, seconds planning alone) for `nodes`."""
    text = FIXTURE.read_text()
    osd = OsdSpec(
        count=8, reactors=5, cpu_policy=CpuPolicy.SOCKET, object_store=ObjectStore.BLUESTORE
    )
    client = ClientSpec(cpu_set="52-55,108-111")
    start = time.perf_counter()
    for _ in range(nodes):
        plan = plan_cpus(parse_lscpu_json(text), osd, client)
        ceph_setup(plan, osd, "legacy")
    total = time.perf_counter() - start
    topology = parse_lscpu_json(text)
    start = time.perf_counter()
    for _ in range(nodes):
        plan_cpus(topology, osd, client)
    return total, time.perf_counter() - start


def largest_spec() -> BenchmarkRunSpec:
    return validate_spec(
        {
            "target": {"rook": {"clusterName": "rook-ceph"}},
            "osd": {
                "flavor": "crimson",
                "objectStore": "bluestore",
                "count": OSD_NODES * OSDS_PER_NODE,
                "reactors": 5,
                "cpuPolicy": "socket",
                "cpuSet": "0-23,56-79,28-51,84-107",
            },
            "client": {
                "nodes": [f"client-{i}" for i in range(OSD_NODES)],
                "cpuSet": "24-27,52-55,80-83,108-111",
                "images": 32 * OSD_NODES,
                "imageSize": "2Gi",
            },
            "sweep": {"repeats": 3},
        }
    )


def largest_run() -> float:
    """Seconds for one build_plan of the largest spec, topologies parsed per node."""
    text = FIXTURE.read_text()
    spec = largest_spec()
    start = time.perf_counter()
    osd_nodes = [f"osd-{i}" for i in range(OSD_NODES)]
    client_nodes = tuple(f"client-{i}" for i in range(OSD_NODES))
    layout = ClusterLayout(
        topologies={n: parse_lscpu_json(text) for n in (*osd_nodes, *client_nodes)},
        placement={i: osd_nodes[i // OSDS_PER_NODE] for i in range(spec.osd.count)},
        client_nodes=client_nodes,
    )
    plan = build_plan("largest", spec, layout, option_family="legacy")
    elapsed = time.perf_counter() - start
    assert len(plan.hosts) == OSD_NODES and len(plan.clients) == OSD_NODES, plan
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    fleet(10)  # warm up imports and caches
    largest_run()
    total, plan_only = fleet(args.nodes)
    runs = [largest_run() for _ in range(args.rounds)]
    spec = largest_spec()
    steps = len(spec.workloads) * len(spec.sweep.iodepths) * spec.sweep.repeats
    worst = max(total, max(runs))
    print(f"machine: {platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()})")
    print(f"fleet: {args.nodes} nodes x 8 OSDs x 5 reactors, socket policy, 112-CPU topology")
    print(f"  parse + plan + ceph options: {total:.3f} s ({total / args.nodes * 1e3:.3f} ms/node)")
    print(f"  plan only:                   {plan_only:.3f} s")
    print(
        f"largest run: {spec.osd.count} OSDs on {OSD_NODES} nodes, {OSD_NODES} clients, "
        f"{spec.client.images} images, {steps} steps"
    )
    print(
        f"  build_plan: median {statistics.median(runs):.3f} s "
        f"(max {max(runs):.3f} s, {args.rounds} rounds)"
    )
    verdict = "meets" if worst < GOAL_SECONDS else "MISSES"
    print(f"goal: < {GOAL_SECONDS:.1f} s each -> {verdict} the goal")


if __name__ == "__main__":
    main()
