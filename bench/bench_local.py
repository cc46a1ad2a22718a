"""Local mode fidelity and overhead, on one real throwaway cluster.

Fidelity: the same jobs run by hand (`taskset -c <client> fio job.fio &` once per job,
every fio started at once, as an engineer or CBT launches one fio per volume) and through
our step executor (one pinned fio per client, a section per job in one file), interleaved
A/B/A/B so machine noise hits both alike; prints the IOPS ratio ours/hand per pair (goal
>= 0.98). Both run every job at the same time; the rate is the sum of the jobs'.
Overhead: wall time of a step beyond runtime + ramp (goal < 1 s; the reference shape,
32 images x 4 processes: < 2 s).

    .venv/bin/python bench/bench_local.py [--pairs 4] [--runtime 5]
    .venv/bin/python bench/bench_local.py --images 32 --processes 4 --image-size 64Mi
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from local_step import StepShape, prefilled_step

from crimsonbench.local.step_exec import run_step
from crimsonbench.plan.fio_jobs import step_job_file
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.store import ResultStore


def one_file_per_job(job_file: str) -> dict[str, str]:
    """The client's step file cut into one file per job: [global] + that job's section."""
    head, *sections = job_file.split("\n[")
    return {s.split("]", 1)[0]: f"{head}\n[{s}" for s in sections}


def by_hand(job_file: str, work: Path, client_cpus: str, env: dict[str, str]) -> float:
    """What an engineer types: one pinned fio per job, all at once, JSON to a file."""
    procs = []
    for name, text in one_file_per_job(job_file).items():
        jf = work / f"{name}.fio"
        jf.write_text(text)
        out = work / f"{name}.json"
        argv = [
            "taskset",
            "-c",
            client_cpus,
            "fio",
            "--output-format=json",
            f"--output={out}",
            str(jf),
        ]
        procs.append((subprocess.Popen(argv, env=env, cwd=work), out))  # its logs land there
    jobs = []
    for p, out in procs:
        if p.wait() != 0:
            raise SystemExit(f"fio by hand failed: {out}")
        jobs.extend(parse_fio_json(out.read_text()))
    return combine(jobs).iops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--iodepth", type=int, default=8)
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--processes", type=int, default=1, help="fio processes per image")
    ap.add_argument("--image-size", default="128Mi")
    args = ap.parse_args()
    ratios, overheads = [], []
    shape = StepShape(args.images, args.processes, args.image_size, args.iodepth, args.runtime, 1)
    with tempfile.TemporaryDirectory() as tmp, prefilled_step(shape) as (plan, step, ctx):
        env = ctx.env
        for i in range(args.pairs):
            text = step_job_file(plan, step, plan.clients[0])
            hand = by_hand(text, Path(tmp), plan.clients[0].cpuset, env)
            t0 = time.monotonic()
            ours = run_step(step, ResultStore(Path(tmp) / f"ours-{i}"), ctx)
            wall = time.monotonic() - t0
            overhead = wall - args.runtime - 1
            ratios.append(ours.fio.iops / hand)
            overheads.append(overhead)
            print(
                f"pair {i}: hand {hand:,.0f} IOPS  ours {ours.fio.iops:,.0f} IOPS  "
                f"ratio {ratios[-1]:.3f}  step overhead {overhead:.2f} s"
            )
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, {platform.platform()}")
    print(
        f"fidelity ours/hand: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {args.pairs} pairs; goal >= 0.98"
    )
    print(
        f"overhead per step beyond runtime+ramp ({args.images} images x {args.processes} "
        f"processes): median {statistics.median(overheads):.2f} s "
        f"(max {max(overheads):.2f} s); goal < 1 s (32 x 4: < 2 s)"
    )


if __name__ == "__main__":
    main()
