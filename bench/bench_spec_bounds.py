"""The largest specs the bounds admit: how long the operator takes to load and plan them,
and how much memory it holds for them (issue 26: no admitted spec may exhaust it).

    .venv/bin/python bench/bench_spec_bounds.py [--rounds 3]

Shapes, each at the edge of what the CRD and the planner admit:
- max-steps: 32 workloads x 20 repeats x 64 iodepths = 40,960 steps, 24 images (the
  sweep bound: steps x images x processes <= 1,000,000);
- max-jobs: 1 step, 1024 images x 64 processes = 65,536 jobs over 16 client nodes (4,096
  each: fio's own limit per process);
- reference: the published sweep, 4 workloads x 10 iodepths, 32 images x 4 processes.
For each: the spec file read through load_spec (size cap, no aliases, strict types), the
plan built (16 Rook nodes with the reference machine's lscpu), one step's job files
rendered (what the operator does when a step starts), and, in a fresh process that imports
the operator as its image runs it, the peak RSS after 16 runs of that shape went through
the operator's plan cache (stages.remember_plan: at most 16 plans and 200,000 steps +
jobs). Goals: plan < 1 s, peak RSS < 150 MiB (the chart gives the operator 256 MiB).
Prints, never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml

from crimsonbench.manifests.fio import client_job_files
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import BarrierAddress, RunPlan
from crimsonbench.spec.models import load_spec

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/lscpu/xeon-8276m-2s.json"
NODES = 16
GOAL_PLAN_S, GOAL_RSS_MIB = 1.0, 150


def shapes() -> dict[str, dict[str, Any]]:
    clients = [f"client-{i}" for i in range(NODES)]
    base = {
        "target": {"rook": {"clusterName": "rook-ceph", "namespace": "rook-ceph"}},
        "osd": {"flavor": "crimson", "objectStore": "bluestore", "count": 8 * NODES,
                "reactors": 5, "cpuPolicy": "socket", "cpuSet": "0-23,56-79,28-51,84-107"},
    }  # fmt: skip
    custom = [{"name": f"w{i}", "rw": "randread", "bs": "4k"} for i in range(32)]
    return {
        "max-steps": {
            **base,
            "client": {"nodes": clients, "cpuSet": "24-27,52-55,80-83,108-111", "images": 24,
                       "imageSize": "1Gi"},
            "workloads": custom,
            "sweep": {"repeats": 20, "iodepths": list(range(1, 65)), "runtimeSeconds": 10},
        },
        "max-jobs": {
            **base,
            "client": {"nodes": clients, "cpuSet": "24-27,52-55,80-83,108-111",
                       "images": 1024, "processesPerImage": 64, "imageSize": "1Gi"},
            "workloads": [{"preset": "randread4k"}],
            "sweep": {"iodepths": [16]},
        },
        "reference": {
            **base,
            "client": {"nodes": clients, "cpuSet": "24-27,52-55,80-83,108-111", "images": 32,
                       "processesPerImage": 4, "imageSize": "2Gi"},
        },
    }  # fmt: skip


def manifest(name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
                           "metadata": {"name": name}, "spec": spec})  # fmt: skip


def layout() -> ClusterLayout:
    topo = parse_lscpu_json(FIXTURE.read_text())
    osd_nodes = [f"osd-{i}" for i in range(NODES)]
    clients = tuple(f"client-{i}" for i in range(NODES))
    return ClusterLayout(
        topologies={n: topo for n in (*osd_nodes, *clients)},
        placement={i: osd_nodes[i // 8] for i in range(8 * NODES)},
        client_nodes=clients,
    )


def plan_file(path: Path) -> tuple[RunPlan, float, float]:
    """(plan, seconds to load the file, seconds to plan)."""
    t0 = time.perf_counter()
    name, spec = load_spec(path)
    t1 = time.perf_counter()
    plan = build_plan(name, spec, layout(), option_family="legacy")
    return plan, t1 - t0, time.perf_counter() - t1


def child(path: str) -> None:
    """In a fresh process: the operator's imports, then its plan cache full of this shape
    and one step's job files rendered. Prints JSON."""
    import resource

    import crimsonbench.controller.main  # noqa: F401  (kopf, kubernetes: the operator)
    from crimsonbench.controller.plan_cache import PLANS_KEPT, PlanCache

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cache = PlanCache()  # as the operator keeps it (in kopf's memo)
    for i in range(PLANS_KEPT):  # 16 runs of this shape, through the real cache
        cache.remember((str(i),), plan_file(Path(path))[0])
    plan = next(reversed(cache.plans.values()))
    files = client_job_files(plan, plan.steps[0], _meet(plan))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"base_mib": base, "peak_mib": peak, "cached": len(cache.plans),
                      "files_bytes": sum(len(t) for t in files.values())}))  # fmt: skip


def _meet(plan: Any) -> BarrierAddress | None:
    """A rendezvous for a step with several clients (its address does not matter here)."""
    return BarrierAddress("10.0.0.1", 8766, "0" * 16) if plan.timing.barrier_jobs else None


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()})")
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in shapes().items():
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(manifest(name, spec))
            loads, plans = [], []
            for _ in range(args.rounds):
                plan, load_s, plan_s = plan_file(path)
                loads.append(load_s)
                plans.append(plan_s)
            tracemalloc.start()
            plan, _, _ = plan_file(path)
            held = tracemalloc.get_traced_memory()[0] / 2**20
            tracemalloc.stop()
            t0 = time.perf_counter()
            files = client_job_files(plan, plan.steps[0], _meet(plan))
            render = time.perf_counter() - t0
            out = subprocess.run([sys.executable, __file__, "--child", str(path)],
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
            rss = json.loads(out.strip().splitlines()[-1])
            print(f"{name}: {len(plan.steps):,} steps x {len(plan.fio.jobs):,} jobs, spec file "
                  f"{path.stat().st_size / 1024:.0f} KiB")  # fmt: skip
            print(f"  load_spec median {statistics.median(loads):.3f} s, build_plan median "
                  f"{statistics.median(plans):.3f} s (goal < {GOAL_PLAN_S:g} s), plan holds "
                  f"{held:.1f} MiB")  # fmt: skip
            print(f"  one step's job files: {sum(len(t) for t in files.values()) / 1024:.0f} KiB "
                  f"in {len(files)} files, rendered in {render:.3f} s")  # fmt: skip
            print(f"  operator process: {rss['base_mib']:.0f} MiB after imports, peak "
                  f"{rss['peak_mib']:.0f} MiB after 16 runs' plans (the cache kept "
                  f"{rss['cached']}) and a step rendered (goal < {GOAL_RSS_MIB} MiB)")  # fmt: skip


if __name__ == "__main__":
    main()
