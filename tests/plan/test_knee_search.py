"""Knee search against the full sweep (real curves and a queueing model), and fio's
steady-state options and output (checked with the real fio)."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crimsonbench.errors import ParseError
from crimsonbench.plan.knee_search import (
    KneeDecision,
    Observation,
    full_sweep_knee,
    next_iodepth,
    search,
)
from crimsonbench.plan.steady_state import steady_state_options
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.steady_state import parse_steady_state
from crimsonbench.spec.models import SteadyStateSpec

ROOT = Path(__file__).resolve().parents[2]
JP = ROOT / "tests" / "fixtures" / "fio" / "jsonplus"
SEEDS = sorted((ROOT.parent / "shared" / "seeds").glob("001_*.txt"))
DEPTHS = [1, 2, 4, 8, 16, 24, 32, 40, 52, 64]  # the spec's default list


def captured_curve(rep: int) -> dict[int, Observation]:
    """The rbd sweep fixture: IOPS and mean clat of each step (2 fio processes)."""
    out: dict[int, Observation] = {}
    for p0 in (JP / "sweep").glob(f"randread-r{rep}-qd*-p0.json"):
        m = re.search(r"-qd(\d+)-", p0.name)
        assert m
        qd = int(m.group(1))
        docs = (JP / "sweep").glob(f"randread-r{rep}-qd{qd}-p*.json")
        s = combine([j for d in docs for j in parse_fio_json(d.read_text())])
        out[qd] = Observation(s.iops, s.clat_mean_ms)
    return out


def limits(curve: dict[int, Observation]) -> list[float]:
    lats = sorted({o.latency_ms for o in curve.values()})
    return [
        lats[0] / 2,
        *(math.sqrt(a * b) for a, b in zip(lats, lats[1:], strict=False)),
        lats[-1] * 2,
    ]


def model(c: float, k: float, base_ms: float) -> dict[int, Observation]:
    """A saturating server: IOPS = C d / (d + K); latency by Little's law + a floor."""
    out = {}
    for d in DEPTHS:
        iops = c * d / (d + k)
        out[d] = Observation(iops, base_ms + d / iops * 1000.0)
    return out


# ---------------------------------------------------------------- the search


def test_first_step_is_the_shallowest() -> None:
    assert next_iodepth([8, 1, 4], {}, 1.0) == KneeDecision(
        1, None, "start at the shallowest iodepth"
    )


def test_hand_traced_search_on_the_classic_randread_shape() -> None:
    # Classic OSD randread 4k as published (IOPS, mean clat ms), limit 1 ms
    table = {
        1: (108365.87, 0.29),
        2: (124779.61, 0.51),
        4: (130072.33, 0.98),
        8: (130657.61, 1.96),
        16: (131217.62, 3.90),
        24: (132017.46, 5.81),
        32: (131567.99, 6.81),
        40: (134032.49, 6.22),
        52: (135246.36, 5.34),
        64: (136637.79, 4.85),
    }
    curve = {d: Observation(*v) for d, v in table.items()}
    ran, decision = search(DEPTHS, curve, 1.0)
    assert ran == [1, 24, 4, 8]  # bisect 1..end -> 24 too slow -> 4 ok -> 8 too slow
    assert decision.knee_iodepth == 4 == full_sweep_knee(curve, 1.0)
    assert "qd8 latency 1.96 ms > 1 ms" in decision.reason
    # a generous limit: saturation closes the bracket (qd24 -> qd40, qd24 -> qd32: gain
    # < 5 % while latency rose); the full sweep picks qd64 (1.9 % more IOPS than qd40,
    # on a curve whose latency falls again past qd32), which the search never runs
    ran, decision = search(DEPTHS, curve, 50.0)
    assert ran == [1, 24, 40, 32]
    assert decision.knee_iodepth == 40 and "saturated: qd24 -> qd32" in decision.reason
    assert full_sweep_knee(curve, 50.0) == 64
    assert curve[40].throughput >= 0.95 * curve[64].throughput


def test_nothing_meets_the_limit() -> None:
    d = next_iodepth(DEPTHS, {1: Observation(1000.0, 2.0)}, 1.0)
    assert d.done and d.knee_iodepth is None and "no iodepth meets the limit" in d.reason


def test_everything_meets_the_limit_and_keeps_rising() -> None:
    curve = {d: Observation(1000.0 * d, 0.1) for d in DEPTHS}
    ran, decision = search(DEPTHS, curve, 1.0)
    assert decision.knee_iodepth == 64 and len(ran) <= 5


def test_missing_latency_or_throughput_never_qualifies() -> None:
    curve = {d: Observation(1000.0 * d, 0.1) for d in DEPTHS}
    curve[64] = Observation(64000.0, math.nan)
    curve[52] = Observation(0.0, 0.1)
    assert search(DEPTHS, curve, 1.0)[1].knee_iodepth == 40


def test_the_decision_depends_only_on_what_was_observed() -> None:
    """A runner may restart, or know more steps than the search asked for."""
    curve = model(100_000.0, 6.0, 0.2)
    for limit in limits(curve):
        everything = next_iodepth(DEPTHS, curve, limit, min_gain_pct=0)
        assert everything.done
        assert everything.knee_iodepth == full_sweep_knee(curve, limit)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="repeats"):
        next_iodepth([1, 1, 2], {}, 1.0)
    with pytest.raises(ValueError, match="no iodepths"):
        next_iodepth([], {}, 1.0)
    with pytest.raises(ValueError, match="positive"):
        next_iodepth([1], {}, 0.0)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e3, 1e6), st.floats(0.1, 100.0), st.floats(0.01, 5.0), st.floats(0.01, 500.0))
def test_model_curves_exact_without_saturation_rule(
    c: float, k: float, base_ms: float, limit: float
) -> None:
    """Monotone curves: bisection on the latency limit finds the full sweep's knee
    exactly, in at most 1 + ceil(log2(n)) steps instead of n."""
    curve = model(c, k, base_ms)
    ran, decision = search(DEPTHS, curve, limit, min_gain_pct=0)
    assert decision.knee_iodepth == full_sweep_knee(curve, limit)
    assert len(ran) <= 1 + math.ceil(math.log2(len(DEPTHS)))
    assert len(set(ran)) == len(ran)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(1.0, 1e6), st.floats(0.01, 100.0)), min_size=10, max_size=10),
    st.floats(0.01, 100.0),
    st.floats(0.0, 20.0),
)
def test_any_curve_terminates_with_an_answer_that_meets_the_limit(
    points: list[tuple[float, float]], limit: float, gain: float
) -> None:
    curve = {d: Observation(*p) for d, p in zip(DEPTHS, points, strict=True)}
    ran, decision = search(DEPTHS, curve, limit, gain)
    assert len(ran) <= len(DEPTHS)
    knee = decision.knee_iodepth
    if knee is None:
        assert curve[1].latency_ms > limit
    else:
        assert curve[knee].latency_ms <= limit
        # the answer is the best of what was run
        assert all(
            curve[knee].throughput >= curve[d].throughput
            for d in ran
            if curve[d].latency_ms <= limit
        )


def test_a_step_that_did_less_than_the_one_before_is_confirmed() -> None:
    """Repeat 1 of the captured sweep: qd2 did 27 % less than qd1 at 3x its latency (the
    machine was busy), qd4 did twice qd1 at 0.72 ms. With a 0.83 ms limit qd2 looks past
    the knee; the step after it shows it was noise and the search goes on."""
    curve = captured_curve(1)
    assert curve[2].throughput < 0.8 * curve[1].throughput and curve[2].latency_ms > 0.83
    ran, decision = search(sorted(curve), curve, 0.83)
    assert decision.knee_iodepth == 4 == full_sweep_knee(curve, 0.83), (ran, decision)
    first = next_iodepth(sorted(curve), {d: curve[d] for d in (1, 2)}, 0.83)
    assert first.next_iodepth == 4 and first.reason.startswith("confirm: qd2 did less than qd1")
    # a step past the knee that did more than lo is not second-guessed
    ran, _ = search(DEPTHS, {d: Observation(1000.0 * d, 0.1 * d) for d in DEPTHS}, 0.35)
    assert ran == [1, 24, 4, 2]


@pytest.mark.parametrize("rep", [1, 2, 3])
def test_captured_rbd_curves_within_one_step(rep: int) -> None:
    curve = captured_curve(rep)
    depths = sorted(curve)
    assert len(depths) == 7
    total = 0
    for limit in limits(curve):
        ran, decision = search(depths, curve, limit)
        full = full_sweep_knee(curve, limit)
        got = decision.knee_iodepth
        assert (got is None) == (full is None), limit
        if got is not None and full is not None:
            assert abs(depths.index(got) - depths.index(full)) <= 1, (limit, ran, decision)
        total += len(ran)
    assert total <= 0.6 * len(depths) * len(limits(curve))


_ROW = re.compile(r"^\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*[\d.]+\s*\|\s*([\d.]+)\s*\|")


@pytest.mark.skipif(
    not SEEDS, reason="the published tables (shared/seeds/001_*) are not beside the repo"
)
def test_published_curves_match_the_full_sweep() -> None:
    """The blog's 8 tables: within one step, or (past saturation) within 5 % IOPS."""
    curves: dict[str, dict[int, Observation]] = {}
    name = ""
    for line in SEEDS[0].read_text().splitlines():
        if line.startswith("### "):
            name = line
        elif (m := _ROW.match(line)) and name:
            curves.setdefault(name, {})[int(m[1])] = Observation(float(m[2]), float(m[3]))
    assert len(curves) == 8
    steps = full = 0
    for curve in curves.values():
        depths = sorted(curve)
        for limit in limits(curve):
            ran, decision = search(depths, curve, limit)
            want = full_sweep_knee(curve, limit)
            got = decision.knee_iodepth
            steps, full = steps + len(ran), full + len(depths)
            if got is None or want is None:
                assert got == want
                continue
            close = abs(depths.index(got) - depths.index(want)) <= 1
            assert close or curve[got].throughput >= 0.95 * curve[want].throughput
    assert steps <= 0.6 * full  # >= 40 % of the steps saved


# ---------------------------------------------------------------- steady state


def test_steady_state_options() -> None:
    assert steady_state_options(SteadyStateSpec(limit=0.1), runtime_s=300) == {
        "steadystate": "iops_slope:0.1%",
        "ss_dur": "30s",
        "ss_ramp": "10s",
    }
    bw = SteadyStateSpec(
        criterion="bw", limit=2000.0, percent=False, duration_seconds=20, ramp_seconds=0
    )
    assert steady_state_options(bw, runtime_s=20)["steadystate"] == "bw:2000"
    with pytest.raises(ValueError, match="could never be attained"):
        steady_state_options(SteadyStateSpec(), runtime_s=30)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_accepts_the_steady_state_options(tmp_path: Path) -> None:
    opts = steady_state_options(SteadyStateSpec(), runtime_s=60)
    job = tmp_path / "ss.fio"
    body = {"ioengine": "null", "size": "1M", "time_based": 1, "runtime": 60, **opts}
    job.write_text("[ss]\n" + "".join(f"{k}={v}\n" for k, v in body.items()))
    run = subprocess.run(
        ["fio", "--parse-only", str(job)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    bad = tmp_path / "bad.fio"
    bad.write_text(job.read_text().replace("iops_slope", "iops_slop"))
    rejected = subprocess.run(
        ["fio", "--parse-only", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert rejected.returncode != 0  # fio does check the criterion name


def _job(name: str) -> dict[str, object]:
    return json.loads((JP / name).read_text())["jobs"][0]  # type: ignore[no-any-return]


def test_parse_attained_steady_state() -> None:
    job = _job("ss-loose.json")
    ss = parse_steady_state(job)
    assert ss is not None and ss.attained
    assert ss.setting == "iops_slope:5.000000%" and ss.observed.endswith("%")
    assert ss.duration_s == 4 and len(ss.window_iops) == 4
    assert ss.iops_mean == job["steadystate"]["data"]["iops_mean"]  # type: ignore[index]
    # fio ended the job once attained, well before runtime=40 s
    assert 5_000 <= ss.stopped_after_ms < 40_000


def test_parse_missed_steady_state() -> None:
    ss = parse_steady_state(_job("ss-strict.json"))
    assert ss is not None and not ss.attained
    assert ss.stopped_after_ms >= 7_900  # ran the whole runtime=8 s


def test_no_steady_state_section() -> None:
    assert parse_steady_state(_job("long-qd1.json")) is None
    with pytest.raises(ParseError):
        parse_steady_state({"steadystate": {"ss": "iops"}})
