"""How long the CPU planner takes for a fleet: 1000 nodes x 8 OSDs, each node planned alone.

    python bench/bench_planner.py [--nodes 1000]

Every node is the reference machine (2 x Xeon Platinum 8276M, 112 CPUs; the lscpu output
captured in tests/fixtures/lscpu) with 8 crimson BlueStore OSDs x 5 reactors, cpuPolicy
socket. Each node's lscpu JSON is parsed and planned from scratch, as the operator would do
per node, and the mon config is derived. Goal: < 1 s for 1000 nodes. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from crimsonbench.plan.ceph_options import ceph_setup
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.spec.models import ClientSpec, CpuPolicy, ObjectStore, OsdSpec

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/lscpu/xeon-8276m-2s.json"
GOAL_SECONDS = 1.0


def run(nodes: int) -> tuple[float, float]:
    """(seconds parsing + planning + ceph options, seconds planning alone) for `nodes`."""
    text = FIXTURE.read_text()
    osd = OsdSpec(
        count=8, reactors=5, cpu_policy=CpuPolicy.SOCKET, object_store=ObjectStore.BLUESTORE
    )
    client = ClientSpec(cpu_set="52-55,108-111")
    start = time.perf_counter()
    for _ in range(nodes):
        plan = plan_cpus(parse_lscpu_json(text), osd, client)
        ceph_setup(plan, osd, "current")
    total = time.perf_counter() - start
    topology = parse_lscpu_json(text)
    start = time.perf_counter()
    for _ in range(nodes):
        plan_cpus(topology, osd, client)
    return total, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    nodes = parser.parse_args().nodes
    run(10)  # warm up imports and caches
    total, plan_only = run(nodes)
    verdict = "meets" if total < GOAL_SECONDS else "MISSES"
    print(f"machine: {platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()})")
    print(f"workload: {nodes} nodes x 8 OSDs x 5 reactors, socket policy, 112-CPU topology")
    print(f"parse + plan + ceph options: {total:.3f} s ({total / nodes * 1e3:.3f} ms/node)")
    print(f"plan only:                   {plan_only:.3f} s ({plan_only / nodes * 1e3:.3f} ms/node)")
    print(f"goal: < {GOAL_SECONDS:.1f} s for 1000 nodes -> {verdict} the goal")


if __name__ == "__main__":
    main()
