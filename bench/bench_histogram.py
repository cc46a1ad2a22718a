"""Time parse + merge + percentiles over 10,000 fio json+ documents read from disk.

The documents are copies of the real captured ones (tests/fixtures/fio/jsonplus, fio
3.33), replayed round-robin, in two sets: `all` (every fixture: 1-3 jobs, file and rbd
engines, incl. the 3-job randrw oracles with read+write+mixed sections, ~22 KiB average)
and `steps` (the rbd sweep's per-process documents, the shape a sweep step writes: one
randread job, ~20 KiB). Wall and CPU time are printed: the machine is shared, so CPU
time is the steadier figure. Prints figures only; asserts nothing about time.

    python bench/bench_histogram.py [--docs N] [--set all|steps|both]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import orjson

from crimsonbench.results.histogram import LatencyHistogram
from crimsonbench.results.histogram_docs import (
    document_histograms,
    merge_directions,
    pooled,
)

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fio" / "jsonplus"
T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run(name: str, sources: list[Path], n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="crimsonbench-bench-hist-") as tmp:
        paths = []
        for i, src in zip(range(n), itertools.cycle(sources), strict=False):
            dst = Path(tmp) / f"{i:05d}-{src.name}"
            shutil.copyfile(src, dst)
            paths.append(dst)
        size = sum(p.stat().st_size for p in paths)

        # each document dropped once read: keeping 10,000 parsed documents alive makes the
        # cyclic GC walk them over and over, and that would be timed instead of the parser
        _, w_json, c_json = timed(lambda: sum(len(json.loads(p.read_text())) for p in paths))
        _, w_orjson, c_orjson = timed(lambda: sum(len(orjson.loads(p.read_text())) for p in paths))
        parts, w_parse, c_parse = timed(lambda: [document_histograms(p.read_text()) for p in paths])

        def merge_all() -> LatencyHistogram:
            everything = pooled(merge_directions(parts))
            everything.summary()
            return everything

        everything, w_merge, c_merge = timed(merge_all)
        _, w_each, c_each = timed(lambda: [pooled(p).summary() for p in parts])
        stored, w_store, c_store = timed(
            lambda: [json.dumps({d: h.to_dict() for d, h in p.items()}) for p in parts]
        )

        def reload() -> LatencyHistogram:
            back = [
                {d: LatencyHistogram.from_dict(h) for d, h in json.loads(s).items()} for s in stored
            ]
            return pooled(merge_directions(back))

        again, w_reload, c_reload = timed(reload)
        assert again.bins == everything.bins
        assert again.percentiles() == everything.percentiles()
        summary = everything.summary()
    buckets = sum(len(h.index) for p in parts for h in p.values())
    print(
        f"\n[{name}] {len(paths)} json+ documents ({len(sources)} distinct real ones), "
        f"{size / 2**20:.0f} MiB, {buckets} non-zero buckets          wall      CPU"
    )
    rows = [
        ("json.loads alone (reference)", w_json, c_json),
        ("orjson.loads alone (what the product reads with)", w_orjson, c_orjson),
        ("read + parse + histograms", w_parse, c_parse),
        ("merge all + percentiles", w_merge, c_merge),
        ("TOTAL parse+merge+percentiles (goal < 3 s)", w_parse + w_merge, c_parse + c_merge),
        ("a summary per document (p50..p99.99, moments)", w_each, c_each),
        (
            f"store as JSON ({sum(map(len, stored)) / len(stored) / 1024:.1f} KiB each)",
            w_store,
            c_store,
        ),
        ("reload stored + re-merge (identical result)", w_reload, c_reload),
    ]
    for label, w, c in rows:
        print(f"  {label:52s} {w:6.2f} s {c:6.2f} s")
    print(
        f"  merged: N={summary.samples}, p50={summary.p50_ms:.3f} p99={summary.p99_ms:.3f} "
        f"p99.9={summary.p999_ms:.3f} p99.99={summary.p9999_ms:.3f} max={summary.max_ms:.3f} ms"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--set", choices=("all", "steps", "both"), default="both")
    args = ap.parse_args()
    sets = {
        "all": sorted(FIXTURES.glob("**/*.json")),
        "steps": sorted((FIXTURES / "sweep").glob("*.json")),
    }
    if not sets["all"]:
        print(f"no json+ fixtures under {FIXTURES}", file=sys.stderr)
        return 1
    print(
        f"{platform.node()} {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    for name in ("all", "steps") if args.set == "both" else (args.set,):
        run(name, sets[name], args.docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
