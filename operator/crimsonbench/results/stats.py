"""Statistics for numbers to trust: repeat spread, confidence intervals, Welch's t-test
and a seeded block bootstrap over fio's per-second IOPS log.

Only numpy and the standard library (scipy is not a dependency): the Student t
distribution is computed from the regularized incomplete beta function (continued
fraction, modified Lentz), its quantile by safeguarded Newton steps on that CDF.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

_EPS = 1e-15
_TINY = 1e-300


# ---------------------------------------------------------------- basics


def mean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("mean of no values")
    return math.fsum(xs) / len(xs)


def stdev(xs: Sequence[float]) -> float:
    """Sample standard deviation (n - 1 in the denominator); 0.0 for one value."""
    if len(xs) < 2:
        return 0.0 if xs else math.nan
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# ---------------------------------------------------------------- Student t


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x={x} outside [0, 1]")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    # the fraction converges fast for x < (a+1)/(a+b+2); use the symmetry otherwise
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail P(|T| >= |t|) of Student's t with df degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    if math.isinf(df):
        return 2.0 * NormalDist().cdf(-abs(t))
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    half = t_sf2(t, df) / 2.0
    return 1.0 - half if t > 0 else half


def _t_pdf(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p: Newton on t_cdf, kept inside a bisection bracket."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p={p} outside (0, 1)")
    if df <= 0:
        raise ValueError(f"df={df} must be positive")
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, max(1.0, NormalDist().inv_cdf(p))
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    t = hi
    for _ in range(200):
        f = t_cdf(t, df) - p
        if f > 0:
            hi = t
        else:
            lo = t
        step = f / _t_pdf(t, df)
        nxt = t - step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0
        if abs(nxt - t) <= 1e-13 * max(1.0, abs(t)):
            return nxt
        t = nxt
    return t


# ---------------------------------------------------------------- intervals and tests


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval; method says how it was obtained."""

    mean: float
    low: float
    high: float
    n: int
    level: float
    method: str

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0


def confidence_interval(xs: Sequence[float], level: float = 0.95) -> Interval:
    """Student-t interval of the mean; NaN bounds for a single value (no spread known)."""
    n = len(xs)
    m = mean(xs)
    if n < 2:
        return Interval(m, math.nan, math.nan, n, level, "none: single sample")
    half = t_quantile(0.5 + level / 2.0, n - 1) * stdev(xs) / math.sqrt(n)
    return Interval(m, m - half, m + half, n, level, f"student-t, n={n}")


@dataclass(frozen=True)
class TestResult:
    """statistic: t (Welch) or the observed difference (bootstrap), new minus base;
    diff and its interval are in the samples' unit, base_mean is what they compare to."""

    method: str
    statistic: float
    df: float
    p_value: float
    diff: float
    diff_low: float
    diff_high: float
    level: float
    base_mean: float

    def relative(self) -> tuple[float, float, float]:
        """(diff, low, high) in % of the base mean."""
        if self.base_mean == 0:
            return math.nan, math.nan, math.nan
        scale = 100.0 / self.base_mean
        return self.diff * scale, self.diff_low * scale, self.diff_high * scale


_ROUNDING_ULPS = 8  # what a mean and a stdev of equal floats may be off by


def welch(base: Sequence[float], new: Sequence[float], level: float = 0.95) -> TestResult:
    """Welch's unequal-variance t-test of mean(new) - mean(base), two-sided.

    t = (m_new - m_base) / sqrt(s_b^2/n_b + s_n^2/n_n), Welch-Satterthwaite df. When both
    samples have no spread the test degenerates: p = 1 for equal means, else 0. A spread or
    a difference within a few ulps of the means is rounding, not spread: three equal
    values of 0.1 have a mean 1 ulp off 0.1 and a stdev of 1.7e-17, which would otherwise
    make two equal samples differ with p = 0.29."""
    nb, nn = len(base), len(new)
    if nb < 2 or nn < 2:
        raise ValueError(f"Welch's test needs 2+ values per side, got {nb} and {nn}")
    mb, mn = mean(base), mean(new)
    vb, vn = stdev(base) ** 2 / nb, stdev(new) ** 2 / nn
    diff = mn - mb
    se2 = vb + vn
    method = f"welch ({nb} vs {nn} repeats)"
    rounding = _ROUNDING_ULPS * sys.float_info.epsilon * max(abs(mb), abs(mn))
    if math.sqrt(se2) <= rounding:
        same = abs(diff) <= rounding
        diff = 0.0 if same else diff
        p = 1.0 if same else 0.0
        t = 0.0 if diff == 0 else math.copysign(math.inf, diff)
        return TestResult(method, t, nb + nn - 2, p, diff, diff, diff, level, mb)
    df = se2**2 / (vb**2 / (nb - 1) + vn**2 / (nn - 1))
    t = diff / math.sqrt(se2)
    half = t_quantile(0.5 + level / 2.0, df) * math.sqrt(se2)
    return TestResult(method, t, df, t_sf2(t, df), diff, diff - half, diff + half, level, mb)


# ---------------------------------------------------------------- per-second series


def block_length(n: int) -> int:
    """Moving-block length ~ n^(1/3): per-second IOPS are autocorrelated, and whole
    blocks keep that correlation in each resample (Kunsch 1989; Lahiri 2003)."""
    return max(1, round(n ** (1.0 / 3.0)))


def _resampled_means(
    series: Sequence[Sequence[float]], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap means of the pooled series; blocks never cross from one series
    (repeat) to another."""
    total = np.zeros(resamples)
    count = 0
    for s in series:
        x = np.asarray(s, dtype=np.float64)
        n = len(x)
        if n == 0:
            continue
        b = min(block_length(n), n)
        k = -(-n // b)  # blocks per resample
        starts = rng.integers(0, n - b + 1, size=(resamples, k))
        idx = (starts[:, :, None] + np.arange(b)).reshape(resamples, k * b)[:, :n]
        total += x[idx].sum(axis=1)
        count += n
    if count == 0:
        raise ValueError("no values to resample")
    return total / count


def bootstrap_compare(
    base: Sequence[Sequence[float]],
    new: Sequence[Sequence[float]],
    level: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> TestResult:
    """Difference of mean per-second values, new - base, by moving-block bootstrap.

    The p-value is the share of resampled differences at least as far from the observed
    one as the observed one is from zero (the bootstrap distribution shifted to the null;
    Efron & Tibshirani 1993, ch. 16), with the +1 correction so it is never 0. Seeded:
    the same inputs give the same answer. It measures within-run (per-second) noise only:
    with one repeat per side, run-to-run drift is not in it."""
    rng = np.random.default_rng(seed)
    mb = _resampled_means(base, resamples, rng)
    mn = _resampled_means(new, resamples, rng)
    base_mean = mean([v for s in base for v in s])
    observed = mean([v for s in new for v in s]) - base_mean
    diffs = mn - mb
    extreme = int(np.count_nonzero(np.abs(diffs - observed) >= abs(observed)))
    p = (extreme + 1) / (resamples + 1)
    lo, hi = np.quantile(diffs, [0.5 - level / 2.0, 0.5 + level / 2.0])
    nb, nn = sum(len(s) for s in base), sum(len(s) for s in new)
    return TestResult(
        f"bootstrap (per-second, {nb} s vs {nn} s)",
        observed,
        math.nan,
        p,
        observed,
        float(lo),
        float(hi),
        level,
        base_mean,
    )
