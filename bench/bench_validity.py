"""How far a step's verdict can be trusted (results/validity.py), on real local runs.

1. False positives: --quiet-runs runs of the quick spec (examples/quick.yaml, its runtime
   cut to --runtime) on a machine left alone: how many steps are flagged, and by what
   reason and figure (goal: none, or each with a true reason the figures show).
2. What interference does to the figure: one step (randread4k qd16, 2 images, memstore
   OSD on CPU 0, fio on CPU 1: the issue's spec), quiet and with a busy loop pinned to the
   OSD's CPU for the whole run, interleaved --pairs times: IOPS and verdict of each.
3. The detector's own cost: CPU time per call of the interference meter's sample (at
   every sampling interval) and of its result (two scans of every process), measured in
   this process against this machine's /proc; per 10 s step at 1 s sampling. Goal: < 1 %
   of one CPU and < 50 ms per step.

    .venv/bin/python bench/bench_validity.py [--quiet-runs 10] [--runtime 5] [--pairs 2]

Run it on a quiet machine (no build beside it): that is what part 1 measures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from crimsonbench.local.interference import InterferenceMeter

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "crimsonbench.cli"]
QUICK = ROOT / "operator" / "crimsonbench" / "examples" / "quick.yaml"


def run(spec: dict[str, Any], work: Path, name: str) -> list[dict[str, Any]]:
    doc = {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
           "metadata": {"name": name}, "spec": spec}  # fmt: skip
    spec_file = work / f"{name}.yaml"
    spec_file.write_text(yaml.safe_dump(doc))
    res = work / name
    out = subprocess.run([*CLI, "run", str(spec_file), "--results", str(res), "--fresh"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(
            f"{name} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
        )
    steps = []
    for f in sorted((res / "steps").glob("*/result.json")):
        d = json.loads(f.read_text())
        steps.append({"step": f.parent.name, "iops": d["fio"]["iops"], **d["extra"]["validity"]})
    return steps


def quiet_runs(n: int, runtime: int, work: Path) -> None:
    spec = yaml.safe_load(QUICK.read_text())["spec"]
    spec["sweep"]["runtimeSeconds"] = runtime
    flagged: Counter[str] = Counter()
    total = 0
    print(f"\n## 1. {n} runs of the quick spec ({runtime} s steps), machine left alone\n")
    for i in range(n):
        steps = run(spec, work, f"quiet-{i}")
        total += len(steps)
        for s in steps:
            if s["verdict"] == "suspect":
                for r in s["reasons"]:
                    flagged[r["code"]] += 1
                    print(f"- run {i} {s['step']}: {r['code']}: {r['detail']}")
        worst = max(c["others_pct"] for s in steps for c in s["interference"])
        print(f"run {i}: {sum(s['verdict'] == 'suspect' for s in steps)} of {len(steps)} "
              f"steps suspect; highest interference share {worst:.1f} %", flush=True)  # fmt: skip
    print(f"\n{sum(flagged.values())} reason(s) over {total} steps: {dict(flagged) or 'none'}")


def hog_pairs(pairs: int, work: Path) -> None:
    spec = yaml.safe_load(QUICK.read_text())["spec"]
    spec["workloads"] = [{"preset": "randread4k"}]
    spec["sweep"].update(iodepths=[16], runtimeSeconds=10)
    print("\n## 2. randread4k qd16, quiet vs a busy loop on the OSD's CPU, interleaved\n")
    print("| run | IOPS | verdict | osd.0 others % | reasons |")
    print("|---|---|---|---|---|")
    figures: dict[str, list[float]] = {"quiet": [], "hog": []}
    for i in range(pairs):
        for kind in ("quiet", "hog"):
            hog = None
            if kind == "hog":
                hog = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c",
                                        "while True: pass"])  # fmt: skip
            try:
                (s,) = run(spec, work, f"{kind}-{i}")
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
            osd = next(c for c in s["interference"] if c["name"] == "osd.0")
            codes = ", ".join(r["code"] for r in s["reasons"]) or "-"
            figures[kind].append(s["iops"])
            print(f"| {kind} {i} | {s['iops']:,.0f} | {s['verdict']} | "
                  f"{osd['others_pct']:.1f} | {codes} |", flush=True)  # fmt: skip
    q, h = statistics.mean(figures["quiet"]), statistics.mean(figures["hog"])
    print(f"\nmean IOPS quiet {q:,.0f}, hog {h:,.0f}: {100 * (h / q - 1):+.0f} %")


def detector_cost() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    sets = {"osd.0": cpus[:1], "client client-0": cpus[1:] or cpus[:1]}
    me = os.getpid()
    meter = InterferenceMeter(sets, lambda: {"osd.0": [me]}, lambda: [me])
    t0 = time.process_time()
    meter.sample(time.monotonic())  # the first one also notes every process's CPU time
    first = time.process_time() - t0
    n = 200
    t0 = time.process_time()
    for i in range(1, n + 1):
        meter.sample(time.monotonic() + i)
    per_sample = (time.process_time() - t0) / n
    t0 = time.process_time()
    meter.result()
    result = time.process_time() - t0
    step = first + 10 * per_sample + result
    procs = sum(name.isdigit() for name in os.listdir("/proc"))
    print("\n## 3. the detector's own cost (CPU time, this process)\n")
    print(
        f"- first sample (every process's CPU time noted): {first * 1000:.1f} ms "
        f"({procs} processes)"
    )
    print(f"- each later sample: {per_sample * 1000:.2f} ms ({n} calls)")
    print(f"- result (every process again, the busiest others named): {result * 1000:.1f} ms")
    print(
        f"- per 10 s step at 1 s sampling: {step * 1000:.1f} ms, {100 * step / 10:.2f} % of one CPU"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet-runs", type=int, default=10)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    detector_cost()
    with tempfile.TemporaryDirectory(prefix="crimsonbench-validity-") as tmp:
        work = Path(tmp)
        if args.pairs:
            hog_pairs(args.pairs, work)
        if args.quiet_runs:
            quiet_runs(args.quiet_runs, args.runtime, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
