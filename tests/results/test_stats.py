"""Statistics checked against closed forms, published tables and worked examples, plus
properties; the bootstrap on fio's real per-second IOPS logs.

References used below:
- Student t with 1 degree of freedom is the Cauchy distribution: F(t) = 1/2 + atan(t)/pi,
  quantile tan(pi (p - 1/2)). With 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)), quantile
  (2p - 1) / sqrt(2 p (1 - p)). With infinitely many: the normal distribution.
- NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2 "Critical Values of the
  Student's t Distribution" (3 decimals).
- Wikipedia, "Welch's t-test", worked example A1/A2 (t = -2.46, nu = 24.99, p = 0.021).
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crimsonbench.errors import ParseError
from crimsonbench.results.iops_log import parse_iops_log, per_second_series
from crimsonbench.results.stats import (
    betainc,
    block_length,
    bootstrap_compare,
    confidence_interval,
    mean,
    stdev,
    t_cdf,
    t_quantile,
    t_sf2,
    welch,
)

JP = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "jsonplus"


# ---------------------------------------------------------------- the t distribution


@pytest.mark.parametrize("p", [0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.25, 0.01])
def test_quantile_closed_forms(p: float) -> None:
    assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-10)
    assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-10)
    assert t_quantile(p, math.inf) == pytest.approx(NormalDist().inv_cdf(p), rel=1e-12)


@pytest.mark.parametrize("t", [-30.0, -3.0, -0.5, 0.0, 0.7, 2.0, 12.7, 500.0])
def test_cdf_closed_forms(t: float) -> None:
    assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, rel=1e-12, abs=1e-15)
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), rel=1e-12)


# NIST e-Handbook 1.3.6.7.2, upper critical values for alpha = 0.025 and 0.005
NIST = {
    1: (12.706, 63.657),
    2: (4.303, 9.925),
    5: (2.571, 4.032),
    10: (2.228, 3.169),
    20: (2.086, 2.845),
    30: (2.042, 2.750),
    60: (2.000, 2.660),
    100: (1.984, 2.626),
}


@pytest.mark.parametrize("df", sorted(NIST))
def test_quantiles_match_the_nist_table(df: int) -> None:
    q975, q995 = NIST[df]
    assert round(t_quantile(0.975, df), 3) == q975
    assert round(t_quantile(0.995, df), 3) == q995


def test_large_df_tends_to_the_normal() -> None:
    assert t_quantile(0.975, 1e7) == pytest.approx(NormalDist().inv_cdf(0.975), rel=1e-6)


def test_betainc_symmetric_case_and_endpoints() -> None:
    # I_x(1, 1) = x; I_x(a, b) = 1 - I_(1-x)(b, a)
    assert betainc(1.0, 1.0, 0.3) == pytest.approx(0.3, rel=1e-14)
    assert betainc(2.5, 0.5, 0.8) == pytest.approx(1 - betainc(0.5, 2.5, 0.2), rel=1e-12)
    assert (betainc(3.0, 2.0, 0.0), betainc(3.0, 2.0, 1.0)) == (0.0, 1.0)
    # I_x(a, 1) = x^a
    assert betainc(3.7, 1.0, 0.6) == pytest.approx(0.6**3.7, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.floats(0.001, 0.999), st.floats(1.0, 500.0))
def test_quantile_inverts_the_cdf(p: float, df: float) -> None:
    assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-10)


# ---------------------------------------------------------------- intervals


def test_interval_of_a_hand_checkable_sample() -> None:
    # mean 3, s = sqrt(2.5), n = 5: half width = t(0.975, 4) * s / sqrt(5)
    ci = confidence_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = t_quantile(0.975, 4) * math.sqrt(2.5) / math.sqrt(5)
    assert (ci.mean, ci.n) == (3.0, 5)
    assert ci.half_width == pytest.approx(half)
    assert ci.half_width == pytest.approx(2.776 * 0.7071, rel=1e-3)  # NIST t, by hand


def test_single_value_has_no_interval() -> None:
    ci = confidence_interval([42.0])
    assert ci.mean == 42.0 and math.isnan(ci.low) and "single" in ci.method
    assert stdev([42.0]) == 0.0
    with pytest.raises(ValueError):
        mean([])


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 40), st.integers(0, 2**32 - 1))
def test_interval_narrows_with_more_repeats(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    xs = rng.normal(100.0, 5.0, size=4 * n)
    small = confidence_interval(list(xs[:n]))
    # the same spread over 4x the values: the interval shrinks (t falls, sqrt(n) grows)
    same_spread = list(np.concatenate([xs[:n]] * 4))
    big = confidence_interval(same_spread)
    assert big.half_width < small.half_width


def test_interval_covers_the_mean_about_95_percent() -> None:
    rng = np.random.default_rng(1)
    covered = 0
    trials = 2000
    for _ in range(trials):
        ci = confidence_interval(list(rng.normal(10.0, 2.0, size=5)))
        covered += ci.low <= 10.0 <= ci.high
    assert 0.93 < covered / trials < 0.97


# ---------------------------------------------------------------- Welch


def test_welch_closed_form_with_two_degrees_of_freedom() -> None:
    # n = 2 per side, equal variances (2): t = 3 / sqrt(2), df = 2 exactly, and with
    # df = 2 the two-sided p is 1 - t / sqrt(2 + t^2)
    r = welch([0.0, 2.0], [3.0, 5.0])
    t = 3 / math.sqrt(2)
    assert r.statistic == pytest.approx(t)
    assert r.df == pytest.approx(2.0)
    assert r.p_value == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-12)
    assert r.diff == 3.0 and r.base_mean == 1.0
    q = (2 * 0.975 - 1) / math.sqrt(2 * 0.975 * 0.025)
    assert (r.diff_low, r.diff_high) == pytest.approx((3 - q * math.sqrt(2), 3 + q * math.sqrt(2)))


def test_welch_wikipedia_example() -> None:
    a1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    a2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    r = welch(a2, a1)  # new = A1, base = A2: t as published, A1 - A2
    assert round(r.statistic, 2) == -2.46
    assert round(r.df, 2) == 24.99
    assert round(r.p_value, 3) == 0.021


def test_welch_by_hand_unequal_sizes() -> None:
    base, new = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    vb, vn = 2.5 / 5, stdev(new) ** 2 / 6  # 14 / 6
    df = (vb + vn) ** 2 / (vb**2 / 4 + vn**2 / 5)
    r = welch(base, new)
    assert r.statistic == pytest.approx(4.0 / math.sqrt(vb + vn))
    assert r.df == pytest.approx(df)
    assert r.p_value == pytest.approx(t_sf2(r.statistic, df))


def test_welch_without_spread_and_too_few_values() -> None:
    assert welch([5.0, 5.0], [5.0, 5.0]).p_value == 1.0
    r = welch([5.0, 5.0], [6.0, 6.0])
    assert r.p_value == 0.0 and r.statistic == math.inf
    with pytest.raises(ValueError, match="2\\+ values"):
        welch([1.0], [1.0, 2.0])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.2, 0.5))
def test_welch_detects_a_clear_shift(seed: int, shift: float) -> None:
    rng = np.random.default_rng(seed)
    base = list(rng.normal(100.0, 2.0, size=5))
    new = [x * (1 - shift) for x in base]  # 20-50 % slower, same noise
    r = welch(base, new)
    assert r.p_value < 0.001 and r.diff < 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1.0, 1e6), min_size=2, max_size=10), st.floats(0.01, 100.0))
def test_welch_is_scale_free_and_antisymmetric(xs: list[float], k: float) -> None:
    ys = [x * 1.1 + 3 for x in xs]
    a, b = welch(xs, ys), welch([x * k for x in xs], [y * k for y in ys])
    assert b.p_value == pytest.approx(a.p_value, rel=1e-6, abs=1e-12)
    assert welch(ys, xs).statistic == pytest.approx(-a.statistic)


# ---------------------------------------------------------------- fio's per-second logs


def test_parse_a_real_iops_log() -> None:
    text = (JP / "long-qd4-a_iops.1.log").read_text()
    rows = parse_iops_log(text)
    assert len(rows) >= 15  # 20 s, one line a second (the last, partial one may be missing)
    assert all(d == 0 for _, _, d in rows)  # randread
    times = [t for t, _, _ in rows]
    assert all(990 <= b - a <= 1010 for a, b in zip(times, times[1:], strict=False))
    assert per_second_series([text]) == tuple(v for _, v, _ in rows)


def test_a_step_sums_its_processes_per_second() -> None:
    logs = [(JP / "sweep" / f"randread-r1-qd8-p{p}_iops.1.log").read_text() for p in (0, 1)]
    a, b = (per_second_series([t]) for t in logs)
    both = per_second_series(logs)
    n = min(len(a), len(b))
    assert both == tuple(x + y for x, y in zip(a[:n], b[:n], strict=True))


def test_broken_log_line_is_named() -> None:
    with pytest.raises(ParseError, match="line 2"):
        parse_iops_log("1000, 5, 0, 0, 0\nnonsense\n")


# ---------------------------------------------------------------- bootstrap


def _series(name: str) -> list[float]:
    return list(per_second_series([(JP / f"{name}_iops.1.log").read_text()]))


def test_bootstrap_is_seeded() -> None:
    a, b = _series("long-qd4-a"), _series("long-qd4-b")
    assert bootstrap_compare([a], [b], seed=7) == bootstrap_compare([a], [b], seed=7)


def test_bootstrap_of_a_series_against_itself_finds_nothing() -> None:
    a = _series("long-qd4-a")
    r = bootstrap_compare([a], [a])
    assert r.diff == 0.0 and r.p_value == 1.0
    assert r.diff_low < 0 < r.diff_high


def test_bootstrap_detects_a_real_difference() -> None:
    """qd1 vs qd4 on the same memstore OSD: one outstanding I/O does far fewer IOPS."""
    qd1, qd4 = _series("long-qd1"), _series("long-qd4-a")
    r = bootstrap_compare([qd4], [qd1])
    assert mean(qd1) < mean(qd4)
    assert r.p_value < 0.01 and r.diff_high < 0
    # and the other way round
    assert bootstrap_compare([qd1], [qd4]).diff_low > 0


def test_block_length_grows_with_the_series() -> None:
    assert [block_length(n) for n in (1, 8, 27, 300)] == [1, 2, 3, 7]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bootstrap_detects_a_shifted_series(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = list(rng.normal(1000.0, 50.0, size=30))
    new = [x - 200.0 for x in base]
    r = bootstrap_compare([base], [new], resamples=1000, seed=seed)
    assert r.p_value < 0.01 and r.diff == pytest.approx(-200.0)
