"""Time parse_fio_json + combine over 10,000 fio JSON files read from disk.

The files are copies of the real fio fixtures (tests/fixtures/fio, incl. rbd/ when
present). Prints figures only; it asserts nothing about time.

    python bench/bench_parse.py [--files N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from crimsonbench.errors import ParseError
from crimsonbench.results.fio_json import combine, parse_fio_json

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fio"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=10_000)
    args = ap.parse_args()
    # the error fixtures would log a warning per copy; the timing is what matters here
    logging.disable(logging.WARNING)
    sources = sorted(FIXTURES.glob("**/*.json"))
    if not sources:
        print(f"no fixtures under {FIXTURES}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="crimsonbench-bench-") as tmp:
        paths = []
        for i, src in zip(range(args.files), itertools.cycle(sources), strict=False):
            dst = Path(tmp) / f"{i:05d}-{src.name}"
            shutil.copyfile(src, dst)
            paths.append(dst)
        size = sum(p.stat().st_size for p in paths)

        t0 = time.perf_counter()
        for p in paths:
            json.loads(_strip_notes(p.read_text()))
        t_json = time.perf_counter() - t0

        t0 = time.perf_counter()
        ios = 0
        for p in paths:
            try:
                ios += combine(parse_fio_json(p.read_text())).total_ios
            except ParseError as exc:  # none expected: every fixture is valid fio JSON
                print(f"{p.name}: {exc}", file=sys.stderr)
        t_parse = time.perf_counter() - t0

    n = len(paths)
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"files: {n} ({size / 2**20:.1f} MiB) from {len(sources)} fixtures")
    print(f"read + parse_fio_json + combine: {t_parse:.3f} s, {n / t_parse:,.0f} files/s")
    print(f"read + json.loads only (floor):  {t_json:.3f} s, {n / t_json:,.0f} files/s")
    print(f"total_ios seen: {ios}")
    return 0


def _strip_notes(text: str) -> str:
    return text if text.startswith("{") else text[text.index("\n{") + 1 :]


if __name__ == "__main__":
    sys.exit(main())
