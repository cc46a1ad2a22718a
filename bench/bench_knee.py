"""Knee search vs the full sweep, on real response curves.

Curves: the published per-iodepth tables (iodepth, IOPS or MiB/s, mean clat ms) of the
Ceph blog "Performance comparison Classic vs. Crimson OSD with Seastore" (the seed
document /work/shared/seeds/001_*.txt; --seed-file to point elsewhere), and the captured
rbd sweep in tests/fixtures/fio/jsonplus/sweep (3 repeats, 2 fio processes per step:
IOPS summed, latency from the merged histograms).

For every curve and a ladder of latency limits (one between each pair of neighbouring
latencies, one under all, one over all) the search runs against the table and its knee
is compared with what the full sweep concludes (most throughput under the limit). Then
the same with multiplicative noise on every measurement (lognormal, --noise), where the
search and the full sweep see the same noisy values. Prints figures; asserts nothing.

    python bench/bench_knee.py [--min-gain 5] [--noise 0.05] [--trials 200] [-v]
"""

from __future__ import annotations

import argparse
import glob
import math
import re
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from crimsonbench.plan.knee_search import Observation, full_sweep_knee, search
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.histogram_docs import step_latency

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "tests" / "fixtures" / "fio" / "jsonplus" / "sweep"
SEED_GLOB = "/work/shared/seeds/001_*.txt"

Curve = dict[int, Observation]

_ROW = re.compile(r"^\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")


def seed_curves(path: Path) -> dict[str, Curve]:
    """'### <OSD> - <workload> - detailed stats' headings, then markdown rows."""
    curves: dict[str, Curve] = {}
    name = ""
    for line in path.read_text().splitlines():
        if line.startswith("### "):
            name = re.sub(r"\s+", " ", line[4:].replace("- detailed stats", "")).strip(" -")
            continue
        m = _ROW.match(line)
        if m and name:
            qd, thr, _total, lat = m.groups()
            curves.setdefault(name, {})[int(qd)] = Observation(float(thr), float(lat))
    return curves


def fixture_curves() -> dict[str, Curve]:
    curves: dict[str, Curve] = {}
    for path in sorted(SWEEP.glob("randread-r*-qd*-p0.json")):
        m = re.match(r"randread-r(\d+)-qd(\d+)-p0", path.stem)
        if not m:
            continue
        rep, qd = m.groups()
        docs = [p.read_text() for p in sorted(SWEEP.glob(f"randread-r{rep}-qd{qd}-p*.json"))]
        iops = combine([j for d in docs for j in parse_fio_json(d)]).iops
        lat = step_latency(docs).mean_ms
        curves.setdefault(f"rbd memstore randread (captured) r{rep}", {})[int(qd)] = Observation(
            iops, lat
        )
    return curves


def limits_for(curve: Mapping[int, Observation]) -> list[float]:
    lats = sorted({o.latency_ms for o in curve.values()})
    mids = [math.sqrt(a * b) for a, b in zip(lats, lats[1:], strict=False)]
    return [lats[0] * 0.5, *mids, lats[-1] * 2.0]


def classify(curve: Curve, got: int | None, want: int | None, min_gain: float) -> str:
    """How close knee `got` is to `want` on this curve."""
    depths = sorted(curve)
    if got == want:
        return "exact"
    if got is None or want is None:
        return "miss"
    if abs(depths.index(got) - depths.index(want)) <= 1:
        return "one step"
    if curve[got].throughput >= curve[want].throughput * (1 - min_gain / 100):
        return f"within {min_gain:g}%"
    return "miss"


def judge(curve: Curve, limit: float, min_gain: float) -> tuple[int, int | None, int | None, str]:
    ran, decision = search(sorted(curve), curve, limit, min_gain)
    full = full_sweep_knee(curve, limit)
    got = decision.knee_iodepth
    return len(ran), got, full, classify(curve, got, full, min_gain)


def noisy(curve: Curve, sigma: float, rng: np.random.Generator) -> Curve:
    return {
        d: Observation(
            o.throughput * float(rng.lognormal(0, sigma)),
            o.latency_ms * float(rng.lognormal(0, sigma)),
        )
        for d, o in curve.items()
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-gain", type=float, default=5.0, help="saturation: %% gain (0 = off)")
    ap.add_argument("--noise", type=float, default=0.05, help="lognormal sigma per measurement")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed-file", default=None)
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per curve and limit")
    args = ap.parse_args()

    seeds = [Path(args.seed_file)] if args.seed_file else [Path(p) for p in glob.glob(SEED_GLOB)]
    curves: dict[str, Curve] = {}
    for p in seeds:
        curves.update(seed_curves(p))
    curves.update(fixture_curves())
    if not curves:
        print("no curves found", file=sys.stderr)
        return 1
    print(f"{len(curves)} curves; saturation rule: gain <= {args.min_gain:g}%")

    print("\n== the tables as published / captured ==")
    totals: dict[str, int] = {}
    steps_search = steps_full = 0
    per_curve: list[tuple[str, float, int, int]] = []
    for name, curve in curves.items():
        c_search = c_full = 0
        bad = 0
        for limit in limits_for(curve):
            n, got, full, match = judge(curve, limit, args.min_gain)
            c_search += n
            c_full += len(curve)
            totals[match] = totals.get(match, 0) + 1
            bad += match == "miss"
            if args.verbose or match == "miss":
                print(
                    f"  {name:45s} limit {limit:8.3f} ms: {n:2d}/{len(curve)} steps, "
                    f"knee qd{got} vs full qd{full}: {match}"
                )
        steps_search += c_search
        steps_full += c_full
        per_curve.append((name, 100 * (1 - c_search / c_full), len(limits_for(curve)), bad))
    for name, pct_saved, n_limits, bad in per_curve:
        print(f"  {name:45s} {n_limits:2d} limits, steps saved {pct_saved:5.1f}%, misses {bad}")
    n_cases = sum(totals.values())
    print(
        f"  ALL: {n_cases} cases, steps {steps_search}/{steps_full} "
        f"-> time saved {100 * (1 - steps_search / steps_full):.1f}% (goal >= 40%); "
        + ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
    )

    print(
        f"\n== with noise: lognormal sigma {args.noise:g} on every value, {args.trials} trials =="
    )
    rng = np.random.default_rng(20261123)
    vs_full: dict[str, int] = {}
    search_vs_true: dict[str, int] = {}
    full_vs_true: dict[str, int] = {}
    saved_frac: list[float] = []
    for curve in curves.values():
        for limit in limits_for(curve):
            truth = full_sweep_knee(curve, limit)
            for _ in range(args.trials):
                seen = noisy(curve, args.noise, rng)
                n, got, full, match = judge(seen, limit, args.min_gain)
                vs_full[match] = vs_full.get(match, 0) + 1
                a = classify(curve, got, truth, args.min_gain)
                b = classify(curve, full, truth, args.min_gain)
                search_vs_true[a] = search_vs_true.get(a, 0) + 1
                full_vs_true[b] = full_vs_true.get(b, 0) + 1
                saved_frac.append(1 - n / len(curve))
    print(f"  time saved mean {100 * statistics.fmean(saved_frac):.1f}%")
    for what, counts in (
        ("search vs full sweep, same noisy values", vs_full),
        ("search (noisy) vs the noiseless knee", search_vs_true),
        ("full sweep (noisy) vs the noiseless knee", full_vs_true),
    ):
        n_cases = sum(counts.values())
        ok = n_cases - counts.get("miss", 0)
        print(
            f"  {what:42s}: {100 * ok / n_cases:5.1f}% exact/one step/within gain ("
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            + ")"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
