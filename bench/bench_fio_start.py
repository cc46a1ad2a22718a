"""fio's start cost at the reference shape, stock fio against ours, on one real cluster.

Stock fio 3.33's rbd engine connects and opens every job's image in fio's main thread, one
job after another, before any job starts; ours (images/fio/, patch 0002) connects every job
at once and lets them go together. Same spec, same cluster, the two fios interleaved in pairs
(A/B/A/B) so the machine's noise hits both alike. Per step: wall time beyond ramp +
runtime (goal < 2 s at 32 images x 4 processes), the spread of the jobs' starts from fio's
own IOPS logs (goal <= 1 s), and the step's IOPS (must agree within run-to-run noise).

    .venv/bin/python bench/bench_fio_start.py [--pairs 3] [--images 32] [--processes 4]
        [--stock /usr/bin/fio] [--ours .venv/bin/fio]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from local_step import StepShape, prefilled_step

from crimsonbench.local.fio_program import FIO_ENV, host_fio
from crimsonbench.local.step_exec import run_step
from crimsonbench.plan.fio_jobs import IOPS_LOG_MSEC
from crimsonbench.results.iops_log import job_start_ms
from crimsonbench.results.store import ResultStore


def start_spread_ms(step_dir: Path) -> tuple[int, float]:
    """(jobs with an IOPS log, latest minus earliest job start), from fio's logs."""
    starts = [job_start_ms(p.read_text(), IOPS_LOG_MSEC) for p in step_dir.glob("*_iops.*.log")]
    known = [s for s in starts if s is not None]
    return len(known), float(max(known) - min(known)) if known else float("nan")


def version(fio: str) -> str:
    return subprocess.run([fio, "--version"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--processes", type=int, default=4, help="fio jobs per image")
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--ramp", type=int, default=1)
    ap.add_argument("--iodepth", type=int, default=4)
    ap.add_argument("--image-size", default="64Mi")
    ap.add_argument("--stock", default="/usr/bin/fio")
    ap.add_argument("--ours", default=str(Path(sys.executable).parent / "fio"))
    args = ap.parse_args()
    fios = {"stock": args.stock, "ours": args.ours}
    for name, path in fios.items():
        os.environ[FIO_ENV] = path
        print(f"{name}: {host_fio()} ({version(path)})")
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in fios}
    shape = StepShape(args.images, args.processes, args.image_size, args.iodepth,
                      args.runtime, args.ramp)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, prefilled_step(shape) as (_, step, ctx):
        for i in range(args.pairs):
            order = list(fios) if i % 2 == 0 else list(reversed(fios))
            for name in order:
                os.environ[FIO_ENV] = fios[name]
                store = ResultStore(Path(tmp) / f"{name}-{i}")
                t0 = time.monotonic()
                result = run_step(step, store, ctx)
                overhead = time.monotonic() - t0 - args.runtime - args.ramp
                jobs, spread = start_spread_ms(store.step_dir(step.id))
                rows[name].append((overhead, spread, result.fio.iops))
                print(f"pair {i} {name:5}: overhead {overhead:5.2f} s  start spread "
                      f"{spread:6.0f} ms over {jobs} jobs  {result.fio.iops:9,.0f} IOPS  "
                      f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    shape_text = f"{args.images} images x {args.processes} processes"
    print(f"\n| fio ({shape_text}, {args.pairs} steps each) | overhead beyond ramp + runtime "
          "| start spread of the jobs | IOPS |")  # fmt: skip
    print("|---|---|---|---|")
    for name, got in rows.items():
        o, s, r = zip(*got, strict=True)
        print(f"| {name} | median {statistics.median(o):.2f} s ({min(o):.2f}-{max(o):.2f}) "
              f"| median {statistics.median(s):.0f} ms ({min(s):.0f}-{max(s):.0f}) "
              f"| median {statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f}) |")  # fmt: skip


if __name__ == "__main__":
    main()
