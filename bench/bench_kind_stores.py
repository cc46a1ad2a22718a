"""Seastore vs classic on Kubernetes: the seeds' headline (crimson's own store against the
classic OSD) as a table from Rook in kind, fetched and compared with the product's own
commands (`crimsonbench fetch`, `crimsonbench compare`).

Both backends run on ONE Ceph build (the crimson build's 20.2.4 daemons: crimson-osd for
crimson, its ceph-osd for classic), on the same two kind nodes' shape, each in a kind stack
of its own (Rook with one OSD per worker on a loop device, our operator): a BenchmarkRun
plans the OSD of crimsonbench-worker on CPU 0 (crimson: one reactor), fio on
crimsonbench-worker2's CPU 1, two images; randread4k and randwrite4k over IODEPTHS. The
other worker's OSD serves its share of the size-1 pool unplanned, in both.

    .venv/bin/python bench/bench_kind_stores.py [--runtime 10] [--out DIR]
        [--backends classic-bluestore crimson-seastore]

Prints, per backend, the stack's bring-up, the run (apply -> Completed) and its restore
(last step stored -> Completed), each step's figures, and compare's verdict table (the
first backend is the base). Needs the crimson Ceph root (e2e/build-crimson.sh); the
machine's 2 vCPUs and file-backed devices are the caveats (bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "e2e"))

from harness.kind_bench import RUN_NS, BenchStack, kind_bench_stack  # noqa: E402
from harness.kind_rook import CLUSTER, NAMESPACE  # noqa: E402

from crimsonbench.reports.report import read_run  # noqa: E402
from crimsonbench.spec.api import GROUP, VERSION  # noqa: E402

IODEPTHS = (1, 8, 32)
OSD_NODE, CLIENT_NODE = "crimsonbench-worker", "crimsonbench-worker2"
CRIMSONBENCH = str(ROOT / ".venv" / "bin" / "crimsonbench")


def manifest(name: str, flavor: str, store: str, runtime: int) -> dict[str, Any]:
    osd: dict[str, Any] = {"flavor": flavor, "objectStore": store, "count": 1, "cpuSet": "0"}
    rook: dict[str, Any] = {"clusterName": CLUSTER, "namespace": NAMESPACE,
                            "osdNodes": [OSD_NODE]}  # fmt: skip
    if flavor == "crimson":
        osd["reactors"] = 1
        rook["allowReprovision"] = True  # the reactor pinned to CPU 0: a new layout
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": RUN_NS},
        "spec": {
            "target": {"rook": rook},
            "osd": osd,
            "client": {
                "nodes": [CLIENT_NODE],
                "nodeCpuSets": {CLIENT_NODE: "1"},
                "pool": f"pool-{name}",
                "images": 2,
                "imageSize": "128Mi",
            },
            "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
            "sweep": {"iodepths": list(IODEPTHS), "runtimeSeconds": runtime, "rampSeconds": 2},
        },
    }


def one_run(s: BenchStack, name: str, body: dict[str, Any], out: Path) -> dict[str, float]:
    """Apply BODY, wait for Completed, fetch its results into OUT; the run's timings."""
    s.kind.apply(body)
    t0, stored, done = time.monotonic(), 0.0, 0
    status: dict[str, Any] = {}
    while status.get("phase") not in ("Completed", "Failed"):
        if time.monotonic() - t0 > 3600:
            raise RuntimeError(f"{name}: not finished after an hour: {status}")
        time.sleep(0.5)
        status = s.kind.kubectl_json("-n", RUN_NS, "get", "benchmarkrun", name).get("status") or {}
        if int(status.get("stepsDone") or 0) > done:
            done, stored = int(status["stepsDone"]), time.monotonic()
    ended = time.monotonic()
    if status["phase"] != "Completed":
        raise RuntimeError(f"{name}: {status['phase']}: {status.get('message')}\n"
                           f"{s.operator_logs(80)}")  # fmt: skip
    subprocess.run([CRIMSONBENCH, "fetch", name, "-n", RUN_NS, "--results", str(out),
                    "--kubeconfig", str(s.kind.kubeconfig)], check=True)  # fmt: skip
    s.kind.kubectl("-n", RUN_NS, "delete", "benchmarkrun", name, "--wait=true")
    return {"run_s": ended - t0, "restore_s": ended - stored}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("/tmp/crimsonbench-kind-stores"))
    ap.add_argument("--backends", nargs="+", default=["classic-bluestore", "crimson-seastore"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dirs = []
    for backend in args.backends:
        flavor, store = backend.split("-", 1)
        crimson = flavor == "crimson"
        name = f"kind-{backend}"
        with kind_bench_stack(flavor=flavor, crimson_store=store if crimson else "bluestore",
                              crimson_ceph=not crimson) as s:  # fmt: skip
            up = sum(v for k, v in s.timings.items() if k.endswith("_s"))
            got = one_run(s, name, manifest(name, flavor, store, args.runtime), args.out / name)
        print(f"{backend}: stack up {up:.0f} s, run {got['run_s']:.0f} s (restore "
              f"{got['restore_s']:.0f} s), kind delete {s.timings.get('delete_s', 0):.0f} s",
              flush=True)  # fmt: skip
        dirs.append(args.out / name)

    print(
        "\n| workload | iodepth | backend | IOPS | clat ms | p99 ms | OSD CPU % | reactor util % |"
    )
    print("|---|---|---|---|---|---|---|---|")
    runs = {backend: {(r.workload, r.iodepth): r for r in read_run(d)[1]}
            for backend, d in zip(args.backends, dirs, strict=True)}  # fmt: skip
    for key in sorted(next(iter(runs.values()))):
        for backend, steps in runs.items():
            r = steps[key]
            util = r.resources.reactor_util
            # no samples: the metrics API is not served (kind here has no metrics-server)
            cpu = f"{r.resources.osd_cpu:.0f}" if r.resources.samples else "n/a"
            print(
                f"| {key[0]} | {key[1]} | {backend} | {r.fio.iops:,.0f} | "
                f"{r.fio.clat_mean_ms:.3f} | {r.fio.clat_p99_ms:.3f} | "
                f"{cpu} | {'-' if util is None else f'{util:.0f}'} |"
            )
    print()
    subprocess.run([CRIMSONBENCH, "compare", *map(str, dirs), "--out",
                    str(args.out / "comparison")], check=False)  # fmt: skip


if __name__ == "__main__":
    main()
