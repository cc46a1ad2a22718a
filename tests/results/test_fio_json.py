"""fio JSON parsing and combining, checked against numbers read straight from the real
fio output (tests/fixtures/fio, captured by capture.sh) and against numpy."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crimsonbench.errors import ParseError
from crimsonbench.results.fio_json import DirectionStats, JobStats, combine, parse_fio_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
# rbd/ holds fixtures from a real Ceph cluster once someone captures them
ALL_FIXTURES = sorted(FIXTURES.glob("**/*.json"))
RW_DIRS = {
    "read": ["read"],
    "randread": ["read"],
    "write": ["write"],
    "randwrite": ["write"],
    "randrw": ["read", "write"],
    "rw": ["read", "write"],
    "readwrite": ["read", "write"],
}


def raw(name: str) -> dict[str, Any]:
    """The JSON document as plain json reads it, after fio's leading lines (if any)."""
    text = (FIXTURES / name).read_text()
    return json.loads(text if text.startswith("{") else text[text.index("\n{") + 1 :])


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_fixtures_were_captured() -> None:
    names = {p.name for p in ALL_FIXTURES}
    assert {"randread4k.json", "numjobs2.json", "randrw.json", "error-setup.json"} <= names


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_combines_to_the_sum_of_its_jobs(path: Path) -> None:
    doc = raw(str(path.relative_to(FIXTURES)))
    rw_default = (doc.get("global options") or {}).get("rw", "read")
    sections = [
        job[d]
        for job in doc["jobs"]
        for d in RW_DIRS[(job.get("job options") or {}).get("rw", rw_default).split(":")[0]]
    ]
    summary = combine(parse_fio_json(path.read_text()))
    assert summary.jobs == len(doc["jobs"])
    assert summary.iops == pytest.approx(sum(s["iops"] for s in sections))
    assert summary.bw_mib_s == pytest.approx(sum(s["bw"] for s in sections) / 1024)
    assert summary.total_ios == sum(s["total_ios"] for s in sections)
    n = sum(s["clat_ns"]["N"] for s in sections)
    if n:
        mean = sum(s["clat_ns"]["N"] * s["clat_ns"]["mean"] for s in sections) / n
        assert summary.clat_mean_ms == pytest.approx(mean / 1e6)
    assert summary.runtime_s == pytest.approx(max(s["runtime"] for s in sections) / 1000)
    assert summary.errors == sum(1 for j in doc["jobs"] if j["error"])


@pytest.mark.parametrize(
    "name", ["randread4k.json", "randwrite4k.json", "seqread64k.json", "seqwrite64k.json"]
)
def test_single_job_fixtures_convert_units(name: str) -> None:
    job = raw(name)["jobs"][0]
    sec = job["read"] if "read" in job["job options"]["rw"] else job["write"]
    s = combine(parse_fio_json(text(name)))
    assert s.iops == sec["iops"]
    assert s.bw_mib_s == sec["bw"] / 1024
    assert s.total_ios == sec["total_ios"]
    assert s.clat_mean_ms == pytest.approx(sec["clat_ns"]["mean"] / 1e6, rel=1e-12)
    assert s.clat_stdev_ms == pytest.approx(sec["clat_ns"]["stddev"] / 1e6, rel=1e-9)
    pct = sec["clat_ns"]["percentile"]
    assert s.clat_p50_ms == pct["50.000000"] / 1e6
    assert s.clat_p99_ms == pct["99.000000"] / 1e6
    assert s.clat_p999_ms == pct["99.900000"] / 1e6
    assert (s.usr_cpu, s.sys_cpu) == (job["usr_cpu"], job["sys_cpu"])
    assert s.runtime_s == sec["runtime"] / 1000
    assert (s.jobs, s.errors) == (1, 0)


def test_default_percentile_list_is_searched_by_value() -> None:
    # seqread64k ran with fio's default list of 17 percentiles
    pct = raw("seqread64k.json")["jobs"][0]["read"]["clat_ns"]["percentile"]
    assert len(pct) > 3
    (job,) = parse_fio_json(text("seqread64k.json"))
    assert job.directions[0].clat_p999_ns == pct["99.900000"]


def test_two_jobs_without_group_reporting_match_a_hand_computation() -> None:
    a, b = (j["read"] for j in raw("numjobs2.json")["jobs"])
    ja, jb = raw("numjobs2.json")["jobs"]
    na, nb = a["clat_ns"]["N"], b["clat_ns"]["N"]
    ma, mb = a["clat_ns"]["mean"], b["clat_ns"]["mean"]
    sa, sb = a["clat_ns"]["stddev"], b["clat_ns"]["stddev"]
    mean = (na * ma + nb * mb) / (na + nb)
    stdev = math.sqrt((na * (sa**2 + ma**2) + nb * (sb**2 + mb**2)) / (na + nb) - mean**2)
    p99 = (
        na * a["clat_ns"]["percentile"]["99.000000"] + nb * b["clat_ns"]["percentile"]["99.000000"]
    ) / (na + nb)

    s = combine(parse_fio_json(text("numjobs2.json")))

    assert s.jobs == 2
    assert s.iops == pytest.approx(a["iops"] + b["iops"])
    assert s.bw_mib_s == pytest.approx((a["bw"] + b["bw"]) / 1024)
    assert s.total_ios == a["total_ios"] + b["total_ios"]
    assert s.clat_mean_ms == pytest.approx(mean / 1e6)
    assert s.clat_stdev_ms == pytest.approx(stdev / 1e6, rel=1e-9)
    assert s.clat_p99_ms == pytest.approx(p99 / 1e6)
    assert s.usr_cpu == pytest.approx((ja["usr_cpu"] + jb["usr_cpu"]) / 2)
    assert s.sys_cpu == pytest.approx((ja["sys_cpu"] + jb["sys_cpu"]) / 2)
    assert s.runtime_s == max(a["runtime"], b["runtime"]) / 1000


def test_group_reporting_is_one_job_and_not_its_summed_job_runtime() -> None:
    job = raw("group-reporting.json")["jobs"][0]
    assert job["job_runtime"] > job["read"]["runtime"]  # fio sums it over the group
    s = combine(parse_fio_json(text("group-reporting.json")))
    assert s.jobs == 1
    assert s.iops == job["read"]["iops"]
    assert s.runtime_s == job["read"]["runtime"] / 1000


def test_mixed_workload_pools_both_directions() -> None:
    job = raw("randrw.json")["jobs"][0]
    r, w = job["read"], job["write"]
    assert r["total_ios"] > 0 and w["total_ios"] > 0
    (parsed,) = parse_fio_json(text("randrw.json"))
    assert [d.direction for d in parsed.directions] == ["read", "write"]
    s = combine([parsed])
    n = r["clat_ns"]["N"] + w["clat_ns"]["N"]
    assert s.iops == pytest.approx(r["iops"] + w["iops"])
    assert s.total_ios == r["total_ios"] + w["total_ios"]
    mean = (r["clat_ns"]["N"] * r["clat_ns"]["mean"] + w["clat_ns"]["N"] * w["clat_ns"]["mean"]) / n
    assert s.clat_mean_ms == pytest.approx(mean / 1e6)
    assert s.jobs == 1  # cpu is a job figure: not counted twice for two directions
    assert s.usr_cpu == job["usr_cpu"]


def test_rw_from_global_options_of_a_job_file() -> None:
    doc = raw("jobfile-global.json")
    assert doc["global options"]["rw"] == "randwrite"
    assert all("job options" not in j for j in doc["jobs"])
    jobs = parse_fio_json(text("jobfile-global.json"))
    assert [j.name for j in jobs] == ["image-a", "image-b"]
    assert all(j.rw == "randwrite" for j in jobs)
    assert all([d.direction for d in j.directions] == ["write"] for j in jobs)
    assert combine(jobs).iops == pytest.approx(sum(j["write"]["iops"] for j in doc["jobs"]))


def test_notes_before_the_json_are_skipped() -> None:
    assert text("psync-note.json").startswith("note: both iodepth")
    s = combine(parse_fio_json(text("psync-note.json")))
    assert s.iops == raw("psync-note.json")["jobs"][0]["read"]["iops"]


def test_a_line_that_only_looks_like_json_is_skipped_too() -> None:
    # not captured output: a real document behind a made-up line that opens a brace
    doc = "note: x\n{weird message\n" + text("randread4k.json")
    assert combine(parse_fio_json(doc)).iops == raw("randread4k.json")["jobs"][0]["read"]["iops"]


def test_a_failed_job_counts_as_one_error_and_has_no_latency() -> None:
    assert text("error-einval.json").startswith("fio: first direct IO errored")
    job = raw("error-einval.json")["jobs"][0]
    assert job["error"] == 22 and job["read"]["clat_ns"]["N"] == 0
    (parsed,) = parse_fio_json(text("error-einval.json"))
    assert parsed.error == 22
    s = combine([parsed])
    assert s.errors == 1  # jobs that failed, not the errno
    assert s.total_ios == job["read"]["total_ios"]
    assert (s.iops, s.clat_mean_ms, s.clat_stdev_ms, s.clat_p99_ms) == (0, 0, 0, 0)


def test_zero_ios_do_not_divide_by_zero() -> None:
    job = raw("error-setup.json")["jobs"][0]
    assert job["read"]["total_ios"] == 0 and job["error"] == 1
    s = combine(parse_fio_json(text("error-setup.json")))
    assert (s.total_ios, s.clat_mean_ms, s.clat_stdev_ms, s.clat_p50_ms) == (0, 0, 0, 0)
    assert s.errors == 1


def test_combining_processes_of_one_step() -> None:
    jobs = parse_fio_json(text("randread4k.json")) + parse_fio_json(text("numjobs2.json"))
    s = combine(jobs)
    expected = raw("randread4k.json")["jobs"][0]["read"]["iops"] + sum(
        j["read"]["iops"] for j in raw("numjobs2.json")["jobs"]
    )
    assert s.jobs == 3
    assert s.iops == pytest.approx(expected)


def test_rbd_step_of_two_fio_processes() -> None:
    paths = sorted((FIXTURES / "rbd").glob("two-procs-*.json"))
    if len(paths) < 2:
        pytest.skip("no rbd fixtures of a two-process step captured yet")
    docs = [raw(str(p.relative_to(FIXTURES))) for p in paths]
    assert all(d["global options"]["ioengine"] == "rbd" for d in docs)
    reads = [j["read"] for d in docs for j in d["jobs"]]
    s = combine([j for p in paths for j in parse_fio_json(p.read_text())])
    assert s.jobs == len(reads)
    assert s.iops == pytest.approx(sum(r["iops"] for r in reads))
    assert s.total_ios == sum(r["total_ios"] for r in reads)
    n = sum(r["clat_ns"]["N"] for r in reads)
    assert s.clat_p99_ms == pytest.approx(
        sum(r["clat_ns"]["N"] * r["clat_ns"]["percentile"]["99.000000"] for r in reads) / n / 1e6
    )


def test_output_without_json_is_a_parse_error() -> None:
    out = text("bad-option.txt")
    assert "unrecognized option" in out
    with pytest.raises(ParseError, match="no fio JSON document.*unrecognized option"):
        parse_fio_json(out)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(jobs=[]), "no jobs"),
        (
            lambda d: d["jobs"][0]["read"].pop("iops"),
            r"'randread4k' \(jobs\[0\]\)\.read: missing 'iops'",
        ),
        (lambda d: d["jobs"][0]["read"].update(total_ios="many"), "'total_ios' is 'many'"),
        (lambda d: d["jobs"][0].pop("read"), "no 'read' section"),
        (lambda d: d["jobs"][0]["job options"].update(rw="sideways"), "unknown rw mode 'sideways'"),
    ],
)
def test_broken_documents_name_the_problem(mutate: Any, message: str) -> None:
    doc = raw("randread4k.json")
    mutate(doc)
    with pytest.raises(ParseError, match=message):
        parse_fio_json(json.dumps(doc))


def test_truncated_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_fio_json(text("randread4k.json")[:500])
    with pytest.raises(ParseError, match="empty"):
        parse_fio_json("")


def test_directions_can_be_chosen() -> None:
    (job,) = parse_fio_json(text("randrw.json"), directions=["write"])
    assert [d.direction for d in job.directions] == ["write"]
    assert combine([job]).iops == raw("randrw.json")["jobs"][0]["write"]["iops"]


def test_combine_of_nothing_is_an_error() -> None:
    with pytest.raises(ParseError):
        combine([])


# ------------------------------------------------------------ the math, on synthetic jobs


def job_from_samples(samples: np.ndarray, p99: float = math.nan) -> JobStats:
    n = len(samples)
    d = DirectionStats(
        direction="read",
        iops=float(n),
        bw_kib_s=4.0 * n,
        bw_bytes=4096 * n,
        total_ios=n,
        clat_samples=n,
        clat_mean_ns=float(samples.mean()) if n else 0.0,
        clat_stddev_ns=float(samples.std()) if n else 0.0,  # ddof=0: the formula's sigma
        clat_p50_ns=math.nan,
        clat_p99_ns=p99,
        clat_p999_ns=math.nan,
        runtime_ms=1000,
    )
    return JobStats("synthetic", "randread", 1.0, 2.0, 0, 1000, (d,))


def test_pooled_stddev_equals_numpy_over_all_samples() -> None:
    rng = np.random.default_rng(7)
    groups = [rng.lognormal(11, s, size=n) for s, n in ((0.2, 5000), (1.5, 300), (0.7, 1))]
    s = combine([job_from_samples(g) for g in groups])
    everything = np.concatenate(groups)
    assert s.clat_mean_ms == pytest.approx(everything.mean() / 1e6, rel=1e-12)
    assert s.clat_stdev_ms == pytest.approx(everything.std() / 1e6, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(1e3, 1e9, allow_nan=False), min_size=1, max_size=40),
        min_size=1,
        max_size=5,
    )
)
def test_pooled_stddev_property(groups: list[list[float]]) -> None:
    arrays = [np.array(g) for g in groups]
    s = combine([job_from_samples(a) for a in arrays])
    everything = np.concatenate(arrays)
    assert s.clat_mean_ms == pytest.approx(everything.mean() / 1e6, rel=1e-9)
    assert s.clat_stdev_ms == pytest.approx(everything.std() / 1e6, rel=1e-6, abs=1e-9)


def test_percentiles_are_sample_weighted_and_skip_missing_ones() -> None:
    jobs = [
        job_from_samples(np.full(300, 1e6), p99=2e6),
        job_from_samples(np.full(100, 1e6), p99=6e6),
        job_from_samples(np.full(50, 1e6)),  # percentiles not reported
    ]
    assert combine(jobs).clat_p99_ms == pytest.approx((300 * 2 + 100 * 6) / 400)
    assert math.isnan(combine(jobs[2:]).clat_p99_ms)


def test_idle_jobs_do_not_dilute_latency() -> None:
    busy = job_from_samples(np.array([1e6, 3e6]))
    idle = job_from_samples(np.array([]))
    s = combine([busy, idle])
    assert s.clat_mean_ms == 2.0
    assert s.clat_stdev_ms == 1.0
    assert s.jobs == 2 and s.total_ios == 2
