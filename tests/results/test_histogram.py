"""Exact merged percentiles from fio's json+ histograms, checked against fio itself.

Every fixture is real fio 3.33 output (tests/fixtures/fio/jsonplus/capture.py). The
oracles are fio's own merges of the very same samples:
- unified_rw_reporting=both: each job (or group) prints read, write and "mixed", which
  fio builds with sum_thread_stats over the read and write arrays and then runs its
  percentile code on; our merge of the read and write bins must give the same bins and
  the same percentiles, number for number;
- client/server with 3 fio servers: the client's "All clients" entry is fio's merge of
  the three processes. fio 3.33 prints its N/min/max/mean/stddev only; fio 3.39 (Debian
  trixie, run in a chroot by the capture script) also its bins and percentiles, which
  our merge of the three processes' bins must reproduce exactly.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crimsonbench.errors import ParseError
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.histogram import (
    PLAT_NR,
    LatencyHistogram,
    bin_index,
    bin_value,
    percentile_rank,
)
from crimsonbench.results.histogram_docs import (
    approximate_latency,
    document_histograms,
    has_bins,
    merge_directions,
    pooled,
    step_histograms,
    step_latency,
)

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
JP = FIO / "jsonplus"
JSONPLUS = sorted(JP.glob("**/*.json"))
MIXED_ORACLES = [
    "file-randrw-3jobs.json",
    "file-randrw-3jobs-group.json",
    "rbd-randrw-3images.json",
    "rbd-randrw-3images-group.json",
]


def doc(name: str | Path) -> dict[str, Any]:
    path = name if isinstance(name, Path) else JP / name
    found = find_json_document(path.read_text())
    assert found is not None, path
    return found


def fio_percentiles(clat: dict[str, Any]) -> dict[float, int]:
    return {float(k): int(v) for k, v in clat["percentile"].items()}


def test_fixtures_were_captured() -> None:
    names = {p.name for p in JSONPLUS}
    assert set(MIXED_ORACLES) <= names
    assert len(list((JP / "sweep").glob("*.json"))) >= 14
    assert (JP / "file-clients-3.txt").exists()
    assert (JP / "fio339-clients-3.txt").exists()


# ---------------------------------------------------------------- fio's bucket mapping


def test_bucket_values_invert_and_increase() -> None:
    values = [bin_value(i) for i in range(PLAT_NR)]
    assert values[:128] == list(range(128))  # the first two groups are exact
    assert all(a < b for a, b in zip(values, values[1:], strict=False))
    assert [bin_index(v) for v in values] == list(range(PLAT_NR))
    # group 2 (128..255 ns): buckets of 2 ns, represented by their middle
    assert values[128:131] == [129, 131, 133]
    with pytest.raises(ValueError):
        bin_value(PLAT_NR)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**34))
def test_a_sample_lands_in_the_bucket_whose_range_holds_it(value: int) -> None:
    i = bin_index(value)
    rep = bin_value(i)
    if value < 128:
        assert rep == value
    else:
        width = 1 << (value.bit_length() - 7)  # error bits: msb - PLAT_BITS
        low = rep - width // 2
        assert low <= value < low + width
        assert abs(rep - value) <= rep / 64  # at most 1/128 each way of the bucket


def test_huge_latencies_fall_into_the_last_bucket() -> None:
    assert bin_index(2**62) == PLAT_NR - 1


# ---------------------------------------------------------------- percentiles as fio


def _sections(d: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    jobs = d.get("jobs") or d.get("client_stats") or []
    return [
        (j["jobname"], k, j[k]["clat_ns"])
        for j in jobs
        for k in ("read", "write", "trim", "mixed")
        if isinstance(j.get(k), dict) and "bins" in j[k]["clat_ns"]
    ]


@pytest.mark.parametrize("path", JSONPLUS, ids=lambda p: str(p.relative_to(JP)))
def test_percentiles_from_bins_are_fios_own(path: Path) -> None:
    checked = 0
    for job, direction, clat in _sections(doc(path)):
        hist = LatencyHistogram.from_clat(clat)
        want = fio_percentiles(clat)
        assert hist.percentiles(list(want)) == want, (job, direction)
        assert hist.samples == clat["N"] == sum(clat["bins"].values())
        checked += len(want)
    assert checked >= 5


def test_default_list_of_17_percentiles_too() -> None:
    (job,) = doc("file-default-percentiles.json")["jobs"]
    clat = job["read"]["clat_ns"]
    assert len(clat["percentile"]) == 17  # incl. 30, 60, 99.95: long-double ties matter
    assert LatencyHistogram.from_clat(clat).percentiles(list(fio_percentiles(clat))) == (
        fio_percentiles(clat)
    )


@pytest.mark.parametrize("name", ["file-clients-3.txt", "fio339-clients-3.txt"])
def test_client_output_per_process_percentiles_too(name: str) -> None:
    d = doc(name)
    per = [j for j in d["client_stats"] if j["jobname"] != "All clients"]
    assert len(per) == 3
    for _, _, clat in _sections({"jobs": per}):
        assert LatencyHistogram.from_clat(clat).percentiles(list(fio_percentiles(clat))) == (
            fio_percentiles(clat)
        )


# ---------------------------------------------------------------- the oracles


@pytest.mark.parametrize("name", MIXED_ORACLES)
def test_merge_of_read_and_write_is_fios_own_merge(name: str) -> None:
    """Same samples, fio's merge vs ours: identical bins and percentiles."""
    jobs = doc(name)["jobs"]
    assert jobs and all("mixed" in j for j in jobs)
    for job in jobs:
        read, write, mixed = (LatencyHistogram.from_clat(job[k]["clat_ns"]) for k in
                              ("read", "write", "mixed"))  # fmt: skip
        assert read.samples and write.samples  # both directions did I/O
        ours = LatencyHistogram.merge([read, write])
        fio_mixed = job["mixed"]["clat_ns"]
        assert ours.bins == mixed.bins
        assert ours.percentiles(list(fio_percentiles(fio_mixed))) == fio_percentiles(fio_mixed)
        assert (ours.samples, ours.min_ns, ours.max_ns) == (
            fio_mixed["N"],
            fio_mixed["min"],
            fio_mixed["max"],
        )
        # fio prints mean/stddev with 6 decimals
        assert ours.mean_ns == pytest.approx(fio_mixed["mean"], abs=1e-6, rel=1e-12)
        assert ours.stddev_ns == pytest.approx(fio_mixed["stddev"], abs=1e-6, rel=1e-12)
        # the document-level API pools the directions the same way
        assert pooled(document_histograms({"jobs": [job]})).bins == mixed.bins


def test_merge_across_fio_processes_matches_fios_all_clients() -> None:
    d = doc("file-clients-3.txt")
    per = [j for j in d["client_stats"] if j["jobname"] != "All clients"]
    (everyone,) = [j for j in d["client_stats"] if j["jobname"] == "All clients"]
    assert "percentile" not in everyone["read"]["clat_ns"]  # fio 3.33: moments only
    merged = step_histograms([{"jobs": [j]} for j in per])
    for direction in ("read", "write"):
        want = everyone[direction]["clat_ns"]
        got = merged[direction]
        assert (got.samples, got.min_ns, got.max_ns) == (want["N"], want["min"], want["max"])
        assert got.mean_ns == pytest.approx(want["mean"], abs=1e-6, rel=1e-12)
        assert got.stddev_ns == pytest.approx(want["stddev"], abs=1e-6, rel=1e-12)
    want = everyone["mixed"]["clat_ns"]
    got = pooled(merged)
    assert (got.samples, got.min_ns, got.max_ns) == (want["N"], want["min"], want["max"])
    assert got.mean_ns == pytest.approx(want["mean"], abs=1e-6, rel=1e-12)


def test_merge_across_fio_processes_is_fio_339s_all_clients() -> None:
    """Three fio processes (iodepth 1/4/16), one set of samples: fio's percentiles of
    all of them vs ours from the per-process bins."""
    d = doc("fio339-clients-3.txt")
    assert d["fio version"] == "fio-3.39"
    per = [j for j in d["client_stats"] if j["jobname"] != "All clients"]
    (everyone,) = [j for j in d["client_stats"] if j["jobname"] == "All clients"]
    assert len(per) == 3
    merged = step_histograms([{"jobs": [j]} for j in per])
    checked = 0
    for direction, ours in (*merged.items(), ("mixed", pooled(merged))):
        want = everyone[direction]["clat_ns"]
        assert ours.bins == LatencyHistogram.from_clat(want).bins, direction
        assert ours.percentiles(list(fio_percentiles(want))) == fio_percentiles(want)
        assert (ours.samples, ours.min_ns, ours.max_ns) == (want["N"], want["min"], want["max"])
        assert ours.mean_ns == pytest.approx(want["mean"], abs=1e-6, rel=1e-12)
        checked += len(want["percentile"])
    assert checked == 15  # read, write, mixed x p50/p90/p99/p99.9/p99.99


def test_the_old_weighted_mean_of_percentiles_is_not_the_merged_percentile() -> None:
    """Three jobs at iodepth 1/4/16: their p99.99 averaged is not the p99.99 of all."""
    jobs = doc("rbd-randrw-3images.json")["jobs"]
    exact = LatencyHistogram.merge(LatencyHistogram.from_clat(j["read"]["clat_ns"]) for j in jobs)
    approx = approximate_latency([{"jobs": jobs}], ["read"])
    assert not approx.exact and "approximate" in approx.note
    p9999 = exact.percentile(99.99) / 1e6
    assert approx.p9999_ms != pytest.approx(p9999, rel=1e-3)
    # the moments are exact either way
    assert approx.samples == exact.samples
    assert approx.mean_ms == pytest.approx(exact.mean_ns / 1e6, rel=1e-12)


# ---------------------------------------------------------------- steps and storage


def _sweep_step(rep: int, qd: int) -> list[str]:
    return [p.read_text() for p in sorted((JP / "sweep").glob(f"randread-r{rep}-qd{qd}-p*.json"))]


def test_step_of_two_rbd_processes() -> None:
    docs = _sweep_step(1, 8)
    assert len(docs) == 2
    summary = step_latency(docs)
    assert summary.exact
    per = [document_histograms(d)["read"] for d in docs]
    assert summary.samples == sum(h.samples for h in per)
    assert summary.max_ms == max(h.max_ns for h in per) / 1e6
    assert summary.p50_ms <= summary.p90_ms <= summary.p99_ms <= summary.p999_ms
    assert summary.p999_ms <= summary.p9999_ms <= summary.max_ms * (1 + 1 / 64)
    # the same moments as the existing combine() computes from plain figures
    s = combine([j for d in docs for j in parse_fio_json(d)])
    assert summary.mean_ms == pytest.approx(s.clat_mean_ms, rel=1e-9)
    assert summary.stddev_ms == pytest.approx(s.clat_stdev_ms, rel=1e-3)  # fio: n-1
    # bucket representatives reproduce the mean within the bucket resolution
    assert summary.hist_mean_ms == pytest.approx(summary.mean_ms, rel=1 / 128)


def test_plain_json_is_read_but_flagged_approximate() -> None:
    docs = [(FIO / "numjobs2.json").read_text()]
    assert not has_bins(docs[0])
    summary = step_latency(docs)
    assert not summary.exact and "json+" in summary.note
    s = combine(parse_fio_json(docs[0]))
    assert summary.p99_ms == pytest.approx(s.clat_p99_ms)  # the same approximation
    assert summary.mean_ms == pytest.approx(s.clat_mean_ms)
    assert math.isnan(summary.p90_ms)  # fio was not asked for p90 there


def test_a_step_with_one_plain_document_is_approximate() -> None:
    docs = [*_sweep_step(1, 4)[:1], (FIO / "rbd" / "randread4k.json").read_text()]
    assert not step_latency(docs).exact


def test_stored_histograms_merge_exactly_later() -> None:
    """Per client: store the merged histogram; merge the stored ones later."""
    clients = [step_histograms(_sweep_step(rep, 16)) for rep in (1, 2, 3)]
    stored = [json.loads(json.dumps({d: h.to_dict() for d, h in c.items()})) for c in clients]
    back = [{d: LatencyHistogram.from_dict(h) for d, h in s.items()} for s in stored]
    assert back == clients
    later = merge_directions(back)
    at_once = step_histograms([d for rep in (1, 2, 3) for d in _sweep_step(rep, 16)])
    assert later["read"].bins == at_once["read"].bins
    assert later["read"].percentiles() == at_once["read"].percentiles()
    assert later["read"].samples == at_once["read"].samples
    # compact: only non-zero buckets are kept
    assert all(c > 0 for _, c in later["read"].bins)
    assert len(stored[0]["read"]["bins"]) < PLAT_NR // 2


def test_idle_direction_and_empty_merge() -> None:
    hists = document_histograms(_sweep_step(1, 1)[0])
    assert set(hists) == {"read"}  # randread: the write section has N=0 and no bins
    empty = LatencyHistogram.merge([])
    assert empty.samples == 0
    assert step_latency([]).samples == 0
    with pytest.raises(ValueError):
        empty.percentile(99)


# ---------------------------------------------------------------- errors


def test_missing_bins_say_json_plus() -> None:
    clat = doc(JP / "sweep" / "randread-r1-qd1-p0.json")["jobs"][0]["read"]["clat_ns"]
    del clat["bins"]
    with pytest.raises(ParseError, match="json\\+"):
        LatencyHistogram.from_clat(clat)


def test_bins_that_do_not_add_up_are_refused() -> None:
    clat = doc(JP / "sweep" / "randread-r1-qd1-p0.json")["jobs"][0]["read"]["clat_ns"]
    clat["N"] += 1
    with pytest.raises(ParseError, match="holds .* samples but N is"):
        LatencyHistogram.from_clat(clat)


def test_a_key_that_is_no_bucket_value_is_refused() -> None:
    clat = doc(JP / "sweep" / "randread-r1-qd1-p0.json")["jobs"][0]["read"]["clat_ns"]
    key, count = next((k, v) for k, v in clat["bins"].items() if int(k) > 1000)
    del clat["bins"][key]
    clat["bins"][str(int(key) + 1)] = count
    with pytest.raises(ParseError, match="not the value of a fio bucket"):
        LatencyHistogram.from_clat(clat)


# ---------------------------------------------------------------- fio's long-double rule


@pytest.mark.skipif(
    np.finfo(np.longdouble).nmant != 63, reason="numpy's long double is not x87 80-bit here"
)
@pytest.mark.parametrize("p", [1.0, 30.0, 50.0, 60.0, 90.0, 99.0, 99.5, 99.9, 99.95, 99.99])
def test_rank_is_fios_long_double_comparison(p: float) -> None:
    """numpy's longdouble on x86-64 is the x87 format fio computes in."""
    n = np.arange(1, 50_001, dtype=np.int64)
    want = np.ceil(np.longdouble(p) / np.longdouble(100.0) * n.astype(np.longdouble))
    got = [percentile_rank(p, int(k)) for k in n]
    assert got == want.astype(np.int64).tolist()


def test_long_double_rounding_is_what_decides_ties() -> None:
    # p30 of 50 samples: 0.3 in long double is a hair above 3/10, so fio needs the 16th
    # sample, where exact arithmetic (or double) says the 15th
    assert math.ceil(Fraction(30) / 100 * 50) == 15 == math.ceil(30.0 / 100.0 * 50)
    assert percentile_rank(30.0, 50) == 16
    # p99.9 of 33,000: double rounding lands on 32,967 exactly, long double just above
    assert math.ceil(99.9 / 100.0 * 33_000) == 32_967
    assert percentile_rank(99.9, 33_000) == 32_968


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.integers(0, PLAT_NR - 1), st.integers(1, 60), min_size=1, max_size=30),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([50.0, 90.0, 99.0, 99.9, 99.99, 100.0, 30.0]),
)
def test_merged_percentile_is_the_ranked_sample(parts: list[dict[int, int]], p: float) -> None:
    """Against the definition: sort every sample's bucket value, take the rank-th."""
    hists = [LatencyHistogram.from_buckets(b) for b in parts]
    merged = LatencyHistogram.merge(hists)
    values = sorted(bin_value(i) for b in parts for i, c in b.items() for _ in range(c))
    assert merged.samples == len(values)
    assert merged.percentile(p) == values[percentile_rank(p, len(values)) - 1]
