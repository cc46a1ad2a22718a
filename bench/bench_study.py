"""A real two-variant local study (examples/studies/memstore-vs-bluestore.yaml, its
runtime cut to --runtime, its repeats to --repeats): what running runs as a study costs.

Prints the study's wall time against the sum of its runs' own (study.json's wallSeconds:
each LocalRun from its start to its end), the overhead in seconds and % (goal < 5 %:
the study's own work is the preflight of every variant, between-run bookkeeping and the
comparison), the comparison's size and its render time in Debian's chromium at 1280 px.

    .venv/bin/python bench/bench_study.py [--runtime 10] [--repeats 2]

Run it on a quiet machine: the runs themselves are what the overhead is measured against.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "crimsonbench.cli"]
EXAMPLE = ROOT / "operator/crimsonbench/examples/studies/memstore-vs-bluestore.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["base"]["sweep"]["runtimeSeconds"] = args.runtime
    doc["spec"]["repeats"] = args.repeats
    with tempfile.TemporaryDirectory(prefix="bench-study-") as tmp:
        spec, root = Path(tmp) / "study.yaml", Path(tmp) / "study"
        spec.write_text(yaml.safe_dump(doc))
        t0 = time.monotonic()
        done = subprocess.run([*CLI, "study", str(spec), "--results", str(root)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        wall = time.monotonic() - t0
        if done.returncode != 0:
            sys.exit(f"the study failed ({done.returncode}):\n{done.stderr[-4000:]}")
        record = json.loads((root / "study.json").read_text())
        own = sum(r["wallSeconds"] for r in record["runs"])
        html = root / "comparison" / "comparison.html"
        print(f"study {record['name']}: {len(record['runs'])} runs, runtime {args.runtime} s")
        for r in record["runs"]:
            print(f"  {r['name']}: {r['wallSeconds']:.1f} s ({r['phase']})")
        print(f"wall {wall:.1f} s, runs' own {own:.1f} s: overhead {wall - own:.1f} s "
              f"({(wall - own) / own:.1%})")  # fmt: skip
        print(
            f"comparison.html {html.stat().st_size / 1024:.0f} KiB, comparison.md "
            f"{(root / 'comparison' / 'comparison.md').stat().st_size / 1024:.0f} KiB"
        )
        sys.path.insert(0, str(ROOT / "tests" / "helpers"))
        from browser import chromium, render

        binary = chromium()
        if binary is None:
            print("no chromium: render time not measured")
            return
        r = render(html, Path(tmp) / "render", binary)
        print(
            f"chromium at 1280 px: {r.seconds:.1f} s, ink {r.ink():.1%}, "
            f"scroll width {r.scroll_width} px, console lines {len(r.console)}"
        )


if __name__ == "__main__":
    main()
