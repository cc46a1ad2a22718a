"""Classic vs crimson on this machine, the seeds' comparison in miniature: the same Ceph
20.2.4 build (the Ceph root of e2e/crimson/build-ceph-root.sh), one OSD on CPU 0 (one
reactor for crimson), fio on CPU 1, the same sweep. Variants run interleaved, round after
round, so the machine's noise hits each alike; prints per workload and iodepth the median
IOPS, mean latency, OSD CPU and (crimson) Seastar's reactor utilization.

    .venv/bin/python bench/bench_crimson.py [--rounds 2] [--runtime 10] [--out DIR]

As root, with the Ceph root built. Every run's results directory is kept under --out, so
`crimsonbench compare` can draw them.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from crimsonbench.local.runner import LocalRun
from crimsonbench.progress import QuietEvents
from crimsonbench.results.types import StepResult
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import Phase

CACHE = Path(os.environ.get("CRIMSONBENCH_CACHE", Path.home() / ".cache/crimsonbench"))
ROOT = CACHE / "ceph-root/20.2.4/rootfs"
VARIANTS = {  # name -> (flavor, object store): in memory, then on a file
    "classic-memstore": ("classic", "memstore"),
    "crimson-cyanstore": ("crimson", "cyanstore"),
    "classic-bluestore": ("classic", "bluestore"),
    "crimson-seastore": ("crimson", "seastore"),
}


def spec(flavor: str, store: str, runtime: int, iodepths: list[int]) -> dict[str, Any]:
    osd: dict[str, Any] = {"flavor": flavor, "objectStore": store, "count": 1, "cpuSet": "0"}
    if flavor == "crimson":
        osd["reactors"] = 1
    return {
        "target": {"local": {"cephRoot": str(ROOT), "bluestoreSize": "4Gi"}},
        "osd": osd,
        "client": {"cpuSet": "1", "images": 2, "imageSize": "512Mi"},
        "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
        "sweep": {
            "iodepths": iodepths,
            "runtimeSeconds": runtime,
            "rampSeconds": 2,
            "earlyExit": {"enabled": False},
        },  # fmt: skip
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--iodepths", default="1,8,32")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if not (ROOT / "usr/bin/crimson-osd").is_file():
        raise SystemExit(f"no Ceph root at {ROOT}: build it with e2e/build-crimson.sh "
                         "&& e2e/crimson/build-ceph-root.sh")  # fmt: skip
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-crimson-"))
    iodepths = [int(x) for x in args.iodepths.split(",")]
    rows: dict[tuple[str, str, int], list[StepResult]] = defaultdict(list)
    bring_up: dict[str, list[float]] = defaultdict(list)
    for rnd in range(1, args.rounds + 1):
        for name, (flavor, store) in VARIANTS.items():
            data = spec(flavor, store, args.runtime, iodepths)
            t0 = time.monotonic()
            done = LocalRun(
                name, validate_spec(data), out / f"{name}-r{rnd}", QuietEvents()
            ).execute()
            if done.phase != Phase.COMPLETED:
                raise SystemExit(f"{name} round {rnd}: {done.message}")
            fio_s = len(done.results) * (args.runtime + 2)
            bring_up[name].append(time.monotonic() - t0 - fio_s)
            for r in done.results:
                rows[name, r.workload, r.iodepth].append(r)
            print(f"round {rnd} {name}: done in {time.monotonic() - t0:.0f} s", flush=True)
    print(
        f"\nmachine: {platform.node()} ({os.cpu_count()} CPUs), Ceph 20.2.4, {args.rounds} "
        f"rounds interleaved, {args.runtime} s per step; results in {out}"
    )
    print("| workload | iodepth | variant | IOPS (median) | clat ms | OSD CPU % | reactor util % |")
    print("|---|---|---|---|---|---|---|")
    for workload in ("randread4k", "randwrite4k"):
        for qd in iodepths:
            for name in VARIANTS:
                rs = rows[name, workload, qd]
                util = [r.resources.reactor_util for r in rs if r.resources.reactor_util]
                util_s = f"{statistics.median(util):.0f}" if util else "-"
                print(
                    f"| {workload} | {qd} | {name} "
                    f"| {statistics.median(r.fio.iops for r in rs):,.0f} "
                    f"| {statistics.median(r.fio.clat_mean_ms for r in rs):.3f} "
                    f"| {statistics.median(r.resources.osd_cpu for r in rs):.0f} | {util_s} |"
                )
    print("\nrun overhead beyond fio (bring-up, prefill, teardown), median s:")
    for name, secs in bring_up.items():
        print(f"  {name}: {statistics.median(secs):.1f}")


if __name__ == "__main__":
    main()
