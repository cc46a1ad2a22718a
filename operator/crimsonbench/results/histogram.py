"""Exact step latency percentiles from fio's own histograms (`--output-format=json+`).

fio keeps every completion latency (ns) in a log-linear histogram, the "plat" array of
FIO_IO_U_PLAT_NR = 29 groups x 64 buckets (stat.h, FIO_IO_U_PLAT_BITS = 6): values below
128 ns have a bucket each; above, a group per power of two, cut into 64 equal buckets, so a
bucket is at most 1/128 of its value wide. json+ prints the non-zero buckets as
`clat_ns.bins`: {representative value: count}. fio computes every percentile from that
array (stat.c calc_clat_percentiles) and reports the bucket's representative value, and it
merges jobs (group_reporting, unified_rw_reporting=both, client/server) by adding arrays.

So merging the bins of every job, process and client of a step and applying fio's
percentile rule gives exactly what one fio process running all of them would report; a
sample-weighted mean of per-job percentiles (what plain JSON allows) does not. The merged
histogram is what a step should store (LatencyHistogram.to_dict: compact, clat_ns-shaped),
so later merges, e.g. across clients, stay exact.

Plain JSON (no bins) is still read by step_latency, marked approximate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from crimsonbench.errors import ParseError

PLAT_BITS = 6  # FIO_IO_U_PLAT_BITS
PLAT_VAL = 1 << PLAT_BITS  # buckets per group
PLAT_GROUP_NR = 29  # FIO_IO_U_PLAT_GROUP_NR since fio 3.0 (nanosecond latencies)
PLAT_NR = PLAT_GROUP_NR * PLAT_VAL  # 1856 buckets

DIRECTIONS = ("read", "write", "trim")
DEFAULT_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)

# fio compares the running count with `(long double) p / 100.0 * nr`: on x86-64 that is
# the x87 80-bit format, a 64-bit significand. The rounding decides ties such as
# nr = 100 * k at p99, so it is emulated exactly (set 113 for aarch64's IEEE quad).
LONG_DOUBLE_BITS = 64

NS_PER_MS = 1_000_000.0


def bin_value(index: int) -> int:
    """fio's plat_idx_to_val: the representative value (ns) of bucket `index`: the
    middle of its range, or the value itself in the first two (exact) groups."""
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"bucket index {index} outside 0..{PLAT_NR - 1}")
    if index < (PLAT_VAL << 1):
        return index
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = index % PLAT_VAL
    # fio: base + ((k + 0.5) * (1 << error_bits)), truncated to an integer
    return base + k * (1 << error_bits) + (1 << error_bits) // 2


def bin_index(value_ns: int) -> int:
    """fio's plat_val_to_idx: the bucket a latency sample (ns) is counted in."""
    if value_ns < 0:
        raise ValueError(f"latency {value_ns} ns is negative")
    msb = value_ns.bit_length() - 1 if value_ns else 0
    if msb <= PLAT_BITS:
        return value_ns
    error_bits = msb - PLAT_BITS
    base = (error_bits + 1) << PLAT_BITS
    offset = (PLAT_VAL - 1) & (value_ns >> error_bits)
    return min(base + offset, PLAT_NR - 1)


_BIN_VALUES = np.array([bin_value(i) for i in range(PLAT_NR)], dtype=np.int64)
# json+ keys are the representative values printed with %llu: look the strings up directly
_KEYS: list[str] = [str(int(v)) for v in _BIN_VALUES]
_KEY_INDEX: dict[str, int] = {k: i for i, k in enumerate(_KEYS)}


def _round_int(m: int, exp: int, bits: int) -> tuple[int, int]:
    """m * 2**exp (m > 0) rounded to `bits` significant bits, ties to even, as
    (significand, exponent)."""
    extra = m.bit_length() - bits
    if extra <= 0:
        return m, exp
    q, rest = m >> extra, m & ((1 << extra) - 1)
    half = 1 << (extra - 1)
    if rest > half or (rest == half and q & 1):
        q += 1  # may carry to 2**bits: still the right value
    return q, exp + extra


@lru_cache(maxsize=256)
def _fraction_of(percentile: float, bits: int) -> tuple[int, int]:
    """(long double) percentile / 100.0 as (significand, exponent)."""
    x = Fraction(percentile) / 100
    # scale so the integer part has bits + 2 bits, keep the rest as a sticky bit
    shift = bits + 2 - (x.numerator.bit_length() - x.denominator.bit_length())
    scaled, rest = divmod(x.numerator << shift, x.denominator)
    # the sticky bit keeps ties apart from "just above a tie"
    q, exp = _round_int((scaled << 1) | (rest != 0), -shift - 1, bits)
    return q, exp


def percentile_rank(percentile: float, samples: int, bits: int = LONG_DOUBLE_BITS) -> int:
    """The running count at which fio's loop stops for this percentile: the smallest
    integer c with c >= (long double) percentile / 100.0 * samples."""
    if not 0.0 < percentile <= 100.0:
        raise ValueError(f"percentile {percentile!r} outside (0, 100]")
    if samples <= 0:
        raise ValueError("no samples")
    m, exp = _fraction_of(percentile, bits)
    m, exp = _round_int(m * samples, exp, bits)  # an integer nr is exact in long double
    if exp >= 0:
        return m << exp
    return -((-m) >> -exp)  # ceil(m / 2**-exp)


@dataclass(frozen=True)
class LatencySummary:
    """A step's completion latency (one direction or all pooled), in ms.

    exact: percentiles come from the merged fio histogram (what fio itself would report
    for all the step's I/O); False: a sample-weighted mean of per-job percentiles, an
    approximation (`note` says why). mean/stddev/min/max are exact either way (fio's own
    moments, merged as fio merges them). hist_mean/hist_stddev are recomputed from the
    bins (bucket representatives), a cross-check within the 1/128 bucket resolution.
    """

    exact: bool
    note: str
    samples: int
    mean_ms: float
    stddev_ms: float
    min_ms: float
    max_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    p9999_ms: float
    hist_mean_ms: float = math.nan
    hist_stddev_ms: float = math.nan


SUMMARY_FIELDS = {
    50.0: "p50_ms",
    90.0: "p90_ms",
    99.0: "p99_ms",
    99.9: "p999_ms",
    99.99: "p9999_ms",
}


@dataclass(frozen=True)
class LatencyHistogram:
    """One direction's completion latencies: fio's non-zero buckets plus its moments.

    index/counts: the non-zero buckets (bucket index, count), index ascending.
    samples/min/max/mean/stddev are fio's exact figures (clat_ns N, min, max, mean,
    stddev), which the buckets only approximate. Build one with from_clat, merge or
    from_buckets (which sorts and checks).
    """

    index: tuple[int, ...]
    counts: tuple[int, ...]
    samples: int
    min_ns: int
    max_ns: int
    mean_ns: float
    stddev_ns: float

    def __post_init__(self) -> None:
        if len(self.index) != len(self.counts):
            raise ValueError("index and counts differ in length")
        try:
            total = sum(self.counts)
        except TypeError:
            raise ParseError(f"bucket counts are not numbers: {self.counts[:5]}...") from None
        if total != self.samples:
            # fio's percentile loop would run off the end: its figures are undefined then
            raise ParseError(f"histogram holds {total} samples but N is {self.samples}")

    @property
    def bins(self) -> tuple[tuple[int, int], ...]:
        """(bucket index, count) pairs, ascending."""
        return tuple(zip(self.index, self.counts, strict=True))

    @classmethod
    def from_buckets(
        cls,
        buckets: Mapping[int, int],
        min_ns: int = 0,
        max_ns: int = 0,
        mean_ns: float = 0.0,
        stddev_ns: float = 0.0,
    ) -> LatencyHistogram:
        """From {bucket index: count}; N is their sum."""
        pairs = sorted((i, c) for i, c in buckets.items() if c)
        if any(not 0 <= i < PLAT_NR or c < 0 for i, c in pairs):
            raise ValueError(f"bucket indexes must be in 0..{PLAT_NR - 1}, counts >= 0")
        return cls(
            index=tuple(i for i, _ in pairs),
            counts=tuple(c for _, c in pairs),
            samples=sum(c for _, c in pairs),
            min_ns=min_ns,
            max_ns=max_ns,
            mean_ns=mean_ns,
            stddev_ns=stddev_ns,
        )

    # ------------------------------------------------------------ reading

    @classmethod
    def from_clat(cls, section: Mapping[str, Any], where: str = "clat_ns") -> LatencyHistogram:
        """From a json+ `clat_ns` object, or from what to_dict wrote (the same shape)."""
        n = _int(section, "N", where)
        if n == 0:
            return EMPTY
        raw = section.get("bins")
        if not isinstance(raw, dict):
            raise ParseError(f"{where}: no bins; was fio run with --output-format=json+?")
        try:
            # fast path: every key a known bucket value, in fio's (ascending) order
            index = tuple(map(_KEY_INDEX.__getitem__, raw))
            counts = tuple(raw.values())
        except KeyError:
            index, counts = (), ()
        if not index or index != tuple(sorted(index)) or 0 in counts or len(index) != len(raw):
            try:
                pairs = sorted((_key_index(k), int(v)) for k, v in raw.items())
            except (TypeError, ValueError) as exc:
                raise ParseError(f"{where}.bins: {exc}") from None
            index = tuple(i for i, c in pairs if c)
            counts = tuple(c for _, c in pairs if c)
        return cls(
            index=index,
            counts=counts,
            samples=n,
            min_ns=_int(section, "min", where),
            max_ns=_int(section, "max", where),
            mean_ns=_float(section, "mean", where),
            stddev_ns=_float(section, "stddev", where),
        )

    from_dict = from_clat

    def to_dict(self) -> dict[str, Any]:
        """clat_ns-shaped, non-zero bins only, keys as fio prints them."""
        return {
            "N": self.samples,
            "min": self.min_ns,
            "max": self.max_ns,
            "mean": self.mean_ns,
            "stddev": self.stddev_ns,
            "bins": dict(zip(map(_KEYS.__getitem__, self.index), self.counts, strict=True)),
        }

    # ------------------------------------------------------------ merging

    @classmethod
    def merge(cls, histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
        """All samples of all inputs, as fio's sum_thread_stats adds them: counts added
        bucket by bucket; mean and S (sum of squared deviations) by the parallel formula,
        in input order; min of mins, max of maxes."""
        hists = [h for h in histograms if h.samples]
        if not hists:
            return EMPTY
        if len(hists) == 1:
            return hists[0]
        n, mean, s = 0, 0.0, 0.0
        for h in hists:
            n, mean, s = sum_stat(n, mean, s, h.samples, h.mean_ns, h.stddev_ns)
        idx = np.fromiter(itertools.chain.from_iterable(h.index for h in hists), np.int64)
        cnt = np.fromiter(itertools.chain.from_iterable(h.counts for h in hists), np.int64)
        if n < 2**53:  # float weights add integers exactly below 2**53
            dense = np.bincount(idx, weights=cnt, minlength=PLAT_NR).astype(np.int64)
        else:
            dense = np.zeros(PLAT_NR, dtype=np.int64)
            np.add.at(dense, idx, cnt)
        nz = np.flatnonzero(dense)
        return cls(
            index=tuple(nz.tolist()),
            counts=tuple(dense[nz].tolist()),
            samples=n,
            min_ns=min(h.min_ns for h in hists),
            max_ns=max(h.max_ns for h in hists),
            mean_ns=mean,
            stddev_ns=math.sqrt(s / (n - 1)) if n > 1 else 0.0,
        )

    # ------------------------------------------------------------ figures

    def percentile(self, percentile: float) -> int:
        """The value (ns) fio reports for this percentile of these samples."""
        return self.percentiles([percentile])[percentile]

    def percentiles(self, percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> dict[float, int]:
        if not self.samples:
            raise ValueError("no samples: fio reports no percentiles then")
        cum = np.cumsum(np.array(self.counts, dtype=np.int64))
        ranks = [percentile_rank(p, self.samples) for p in percentiles]
        # first bucket whose running count reaches the rank (ranks <= N = cum[-1])
        pos = np.searchsorted(cum, ranks, side="left").tolist()
        return {p: int(_BIN_VALUES[self.index[k]]) for p, k in zip(percentiles, pos, strict=True)}

    def histogram_moments(self) -> tuple[float, float]:
        """(mean, sample stddev) in ns from the bucket representatives."""
        if not self.samples:
            return math.nan, math.nan
        values = _BIN_VALUES[np.array(self.index, dtype=np.int64)].astype(np.float64)
        cnt = np.array(self.counts, dtype=np.float64)
        mean = float(np.dot(values, cnt)) / self.samples
        if self.samples < 2:
            return mean, 0.0
        var = float(np.dot((values - mean) ** 2, cnt)) / (self.samples - 1)
        return mean, math.sqrt(var)

    def summary(self, note: str = "merged fio histogram (json+)") -> LatencySummary:
        if not self.samples:
            return empty_summary(True, "no I/O completed")
        pct = self.percentiles(tuple(SUMMARY_FIELDS))
        hmean, hstd = self.histogram_moments()
        return LatencySummary(
            exact=True,
            note=note,
            samples=self.samples,
            mean_ms=self.mean_ns / NS_PER_MS,
            stddev_ms=self.stddev_ns / NS_PER_MS,
            min_ms=self.min_ns / NS_PER_MS,
            max_ms=self.max_ns / NS_PER_MS,
            hist_mean_ms=hmean / NS_PER_MS,
            hist_stddev_ms=hstd / NS_PER_MS,
            **{attr: pct[p] / NS_PER_MS for p, attr in SUMMARY_FIELDS.items()},
        )


EMPTY = LatencyHistogram((), (), samples=0, min_ns=0, max_ns=0, mean_ns=0.0, stddev_ns=0.0)


def sum_stat(
    n: int, mean: float, s: float, src_n: int, src_mean: float, src_stddev: float
) -> tuple[int, float, float]:
    """fio's __sum_stat: (N, mean, S) of the union; S (the sum of squared deviations) is
    rebuilt from the reported stddev as stddev^2 (N - 1)."""
    src_s = src_stddev**2 * (src_n - 1)
    if n == 0:
        return src_n, src_mean, src_s
    delta = src_mean - mean
    total = n + src_n
    new_mean = (src_mean * src_n + mean * n) / total
    return total, new_mean, src_s + s + delta**2 * (n * src_n) / total


def _key_index(key: str) -> int:
    idx = _KEY_INDEX.get(key)
    if idx is None:
        value = int(key)
        idx = bin_index(value)
        if bin_value(idx) != value:
            raise ValueError(
                f"{key} is not the value of a fio bucket (FIO_IO_U_PLAT_BITS={PLAT_BITS}); "
                "was this fio built with other histogram constants?"
            )
    return idx


def _int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: {key!r} is {value!r}, not a number")
    return int(value)


def _float(obj: Mapping[str, Any], key: str, where: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: {key!r} is {value!r}, not a number")
    return float(value)


# ---------------------------------------------------------------- fio documents


def empty_summary(exact: bool, note: str) -> LatencySummary:
    return LatencySummary(exact, note, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
