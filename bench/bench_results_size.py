"""Results at scale: how big a step of 50 client nodes x 32 images is once aggregated at
the source (a combined row + one row per client, never per job), what its ConfigMap (one
per step, cut in parts over the API server's 1 MiB) takes, and what a step of 1,024 clients
running 24 h (the most client nodes and the longest runtime a spec admits) takes.

    .venv/bin/python bench/bench_results_size.py [--clients 50] [--images 32] [--steps 400]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from crimsonbench.manifests.results import read_stored, step_configmaps
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.status_summary import status_summary
from crimsonbench.results.types import ResourceSummary, StepResult
from crimsonbench.spec.api import GROUP
from crimsonbench.spec.models import validate_spec

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fio" / "rbd"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args()
    # a client's row from real fio output: its images' jobs combined (captured rbd runs)
    jobs = [j for d in sorted(FIXTURES.glob("*.json")) for j in parse_fio_json(d.read_text())]
    client_row = combine((jobs * args.images)[: args.images])
    clients = {f"node-{c:02d}": replace(client_row, iops=client_row.iops + c)
               for c in range(args.clients)}  # fmt: skip
    steps = [
        StepResult(f"randread4k-qd{1 + i % 64:03d}-r{1 + i // 64}", "randread4k", 1 + i % 64,
                   1 + i // 64, combine(jobs), ResourceSummary(0.0, 0.0, 0.0, 0), {}, clients,
                   12.5)
        for i in range(args.steps)
    ]  # fmt: skip
    one = len(json.dumps(steps[0].to_json_dict(), separators=(",", ":")).encode())
    t0 = time.perf_counter()
    cms = [cm for r in steps for cm in step_configmaps("big", r, namespace="bench")]
    build_s = time.perf_counter() - t0
    sizes = [sum(len(k) + len(v.encode()) for k, v in cm["data"].items()) for cm in cms]
    t0 = time.perf_counter()
    back = read_stored(cms).results
    read_s = time.perf_counter() - t0
    assert len(back) == args.steps
    # the widest step a spec admits: 1,024 client nodes, runtimeSeconds 86400 (its per-second
    # IOPS series: a value a second)
    per_second = [round(client_row.iops * 1024 + s % 97, 1) for s in range(86_400)]
    widest = replace(steps[0], clients={f"node-{c:04d}": client_row for c in range(1024)},
                     extra={"iops_per_second": per_second})  # fmt: skip
    parts = step_configmaps("big", widest, namespace="bench")
    wide = len(json.dumps(widest.to_json_dict(), separators=(",", ":")).encode())
    target = {"external": {"monHost": "m", "keyringSecret": {"name": "k"}, "user": "admin"}}
    spec = validate_spec({"target": target, "osd": {"flavor": "classic"},
                          "client": {"node": "n", "pool": "rbd"},
                          "workloads": [{"preset": "randread4k"}]})  # fmt: skip
    status = status_summary(steps, spec)  # the newest STATUS_STEPS steps, peaks: no clients
    print(f"| one step, {args.clients} clients x {args.images} images | {one / 1024:.1f} KiB |")
    print(f"| {args.steps} such steps | {len(cms)} ConfigMaps `{GROUP}/run=<run>` (one per "
          f"step), the largest {max(sizes) / 1024:.0f} KiB (limit 1024 KiB); made in "
          f"{build_s:.2f} s, read back in {read_s:.2f} s |")  # fmt: skip
    print(f"| one step of 1,024 clients, 24 h long | {wide / 1024:.0f} KiB: {len(parts)} "
          f"ConfigMaps (its head and {len(parts) - 1} part(s)) |")  # fmt: skip
    print(
        f"| the run's .status summary ({len(status['steps'])} newest steps + peaks) | "
        f"{len(json.dumps(status)) / 1024:.1f} KiB |"
    )


if __name__ == "__main__":
    main()
