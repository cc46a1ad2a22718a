"""Latency from whole fio documents (json+ or plain JSON): every job and direction of a
step's documents merged into one LatencySummary, exact when every document has bins."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from crimsonbench.errors import ParseError
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.histogram import (
    DIRECTIONS,
    NS_PER_MS,
    SUMMARY_FIELDS,
    LatencyHistogram,
    LatencySummary,
    empty_summary,
    sum_stat,
)


def load_document(doc: str | Mapping[str, Any]) -> Mapping[str, Any]:
    """A fio JSON document from fio's stdout (notes before the JSON are skipped)."""
    if isinstance(doc, Mapping):
        return doc
    found = find_json_document(doc)
    if found is None:
        raise ParseError("no fio JSON document in the output")
    return found


def _jobs(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    # client/server output lists per-client jobs (and "All clients") in client_stats
    jobs = doc.get("jobs")
    if jobs is None:
        jobs = [j for j in doc.get("client_stats") or [] if j.get("jobname") != "All clients"]
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("fio JSON has no jobs")
    return jobs


def _sections(doc: Mapping[str, Any]) -> Iterable[tuple[str, str, Mapping[str, Any]]]:
    """(direction, where, clat_ns) of every job direction that completed I/O. The
    "mixed" section (unified_rw_reporting=both) repeats read+write and is skipped."""
    for i, job in enumerate(_jobs(doc)):
        for d in DIRECTIONS:
            sec = job.get(d)
            if not isinstance(sec, dict):
                continue
            clat = sec.get("clat_ns")
            if isinstance(clat, dict) and clat.get("N"):
                yield d, f"jobs[{i}] {job.get('jobname')!r}.{d}.clat_ns", clat


def has_bins(doc: str | Mapping[str, Any]) -> bool:
    """True when every direction with I/O carries json+ bins."""
    return all("bins" in clat for _, _, clat in _sections(load_document(doc)))


def document_histograms(doc: str | Mapping[str, Any]) -> dict[str, LatencyHistogram]:
    """direction -> histogram merged over every job of one fio json+ document."""
    per: dict[str, list[LatencyHistogram]] = {}
    for d, where, clat in _sections(load_document(doc)):
        per.setdefault(d, []).append(LatencyHistogram.from_clat(clat, where))
    return {d: LatencyHistogram.merge(h) for d, h in per.items()}


def step_histograms(docs: Iterable[str | Mapping[str, Any]]) -> dict[str, LatencyHistogram]:
    """direction -> histogram over every json+ document of a step (every process)."""
    return merge_directions(document_histograms(doc) for doc in docs)


def merge_directions(
    parts: Iterable[Mapping[str, LatencyHistogram]],
) -> dict[str, LatencyHistogram]:
    """Merge {direction: histogram} maps, e.g. the stored histograms of each client of a
    step, direction by direction; exact at any level."""
    per: dict[str, list[LatencyHistogram]] = {}
    for part in parts:
        for d, h in part.items():
            per.setdefault(d, []).append(h)
    return {d: LatencyHistogram.merge(per[d]) for d in DIRECTIONS if d in per}


def pooled(histograms: Mapping[str, LatencyHistogram]) -> LatencyHistogram:
    """Every direction in one histogram (what fio's unified_rw_reporting=both calls
    "mixed"); a mixed workload's table row pools reads and writes the same way."""
    return LatencyHistogram.merge(histograms[d] for d in DIRECTIONS if d in histograms)


def step_latency(
    docs: Sequence[str | Mapping[str, Any]], directions: Sequence[str] | None = None
) -> LatencySummary:
    """The step's latency over the given directions (default: all with I/O), pooled.

    Exact when every document has json+ bins; otherwise the percentiles fall back to
    the sample-weighted mean of each job's reported percentiles and the summary says
    `exact=False` so a report can flag them."""
    loaded = [load_document(d) for d in docs]
    wanted = tuple(directions) if directions is not None else DIRECTIONS
    if all(has_bins(d) for d in loaded):
        hists = step_histograms(loaded)
        return pooled({d: h for d, h in hists.items() if d in wanted}).summary()
    return approximate_latency(loaded, wanted)


def approximate_latency(
    docs: Sequence[str | Mapping[str, Any]], directions: Sequence[str] = DIRECTIONS
) -> LatencySummary:
    """From plain JSON: exact moments, approximate percentiles (NaN where no job
    reported that percentile)."""
    sections = [
        clat for doc in docs for d, _, clat in _sections(load_document(doc)) if d in directions
    ]
    if not sections:
        return empty_summary(False, "no I/O completed")
    n, mean, s = 0, 0.0, 0.0
    for clat in sections:
        n, mean, s = sum_stat(
            n, mean, s, int(clat["N"]), float(clat["mean"]), float(clat["stddev"])
        )
    pct: dict[str, float] = {}
    for p, attr in SUMMARY_FIELDS.items():
        known = [
            (int(c["N"]), float(v))
            for c in sections
            for k, v in (c.get("percentile") or {}).items()
            if math.isclose(float(k), p, abs_tol=1e-6)
        ]
        total = sum(w for w, _ in known)
        pct[attr] = math.fsum(w * v for w, v in known) / total / NS_PER_MS if total else math.nan
    return LatencySummary(
        exact=False,
        note="approximate: plain fio JSON has no histogram bins; percentiles are the "
        "sample-weighted mean of per-job percentiles (run fio with --output-format=json+)",
        samples=n,
        mean_ms=mean / NS_PER_MS,
        stddev_ms=(math.sqrt(s / (n - 1)) if n > 1 else 0.0) / NS_PER_MS,
        min_ms=min(int(c["min"]) for c in sections) / NS_PER_MS,
        max_ms=max(int(c["max"]) for c in sections) / NS_PER_MS,
        **pct,
    )
