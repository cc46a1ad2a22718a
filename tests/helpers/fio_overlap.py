"""Did the jobs of a step run at the same time? Read from fio's own files only: its JSON
(json.loads, not the product's parser) and its per-job IOPS logs (write_iops_log,
log_avg_msec=1000, log_unix_epoch=1: each line is "epoch ms at the end of a 1 s window,
IOPS, direction, ...", the first window starting when the job's I/O starts, after the
ramp).

fio writes a window's entry only if an I/O completed in it (3.33 stat.c __add_samples:
"No entries for interval"). A job whose first I/Os all took longer than a window (a loaded
machine: 1.2 s seen here under two CPU hogs) logs its first entry a window (or more) late,
and "first entry minus one window" reads its start that much late. Such a job's start is
one of first - k windows, k at most 1 + its longest I/O / window; the one nearest the
starts known exactly (jobs whose every I/O took less than a window) is taken.

A step whose jobs ran one after another (fio stonewalls job files given on one command
line) has job starts a whole runtime apart and no common interval; summing such jobs'
rates reports a rate no moment of the run saw.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

WINDOW_MS = 1000
_LOG = re.compile(r"^(?P<job>.+)_iops\.\d+\.log(\..+)?$")


@dataclass(frozen=True)
class JobSpan:
    job: str  # the write_iops_log name
    first_ms: int  # first sample (end of the first window)
    last_ms: int  # last sample
    start_ms: int  # first sample - one window: its I/O started then, or a window earlier
    # when no I/O completed in its first window (see above)


def fio_documents(texts: Iterable[str]) -> list[dict[str, Any]]:
    """fio's JSON documents, from the first brace (fio may print notes before it)."""
    return [json.loads(t[t.index("{") :]) for t in texts]


def fio_jobs(docs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every job of every document: `jobs` (plain fio) or `client_stats` less fio's own
    "All clients" sum (client/server mode)."""
    out: list[Mapping[str, Any]] = []
    for d in docs:
        out += [
            j for j in d.get("client_stats", d.get("jobs", [])) if j["jobname"] != "All clients"
        ]
    return out


def job_spans(logs: Mapping[str, str]) -> dict[str, JobSpan]:
    """file name (<job>_iops.N.log[.<host>]) -> text  =>  job -> its span, per fio's log."""
    spans: dict[str, JobSpan] = {}
    for name, text in logs.items():
        m = _LOG.match(name)
        assert m, f"not an IOPS log: {name}"
        times = [int(line.split(",")[0]) for line in text.splitlines() if line.strip()]
        assert times, f"{name} is empty: the job never completed a 1 s window"
        spans[m["job"]] = JobSpan(m["job"], times[0], times[-1], times[0] - WINDOW_MS)
    return spans


@dataclass(frozen=True)
class Overlap:
    start_spread_ms: int  # latest job start - earliest
    end_spread_ms: int  # latest job end - earliest (end: start + fio's runtime of the job)
    common_s: float  # seconds every job ran: earliest end - latest start
    total_ios: int  # every job's, every direction, from fio's JSON
    runtimes_ms: tuple[int, ...]  # each job's own runtime (fio's JSON)
    # each job's longest I/O (fio's JSON, lat_ns max): a time-based job stops issuing at
    # its runtime and then waits for what is in flight, which its runtime includes
    drains_ms: tuple[float, ...] = ()

    @property
    def rate(self) -> float:
        """I/Os per second over the interval every job ran."""
        return self.total_ios / self.common_s if self.common_s > 0 else float("inf")


def _runtime_ms(job: Mapping[str, Any]) -> int:
    return max(int(job[d]["runtime"]) for d in ("read", "write", "trim") if d in job)


def _longest_io_ms(job: Mapping[str, Any]) -> float:
    return max(
        (job[d]["lat_ns"]["max"] / 1e6 for d in ("read", "write", "trim") if d in job),
        default=0.0,
    )


# below this longest I/O, the job's first window surely completed one (fio's sample slack
# and the helper thread's lateness: a few ms; margin for a loaded machine)
_EXACT_BELOW_MS = WINDOW_MS - 50


def _starts(spans: Mapping[str, JobSpan], longest_io_ms: Mapping[str, float]) -> dict[str, int]:
    """job -> its start: exact where its longest I/O was shorter than a window, else the
    candidate (first entry - k windows) nearest the exact ones' median."""
    exact = [s.start_ms for n, s in spans.items() if longest_io_ms[n] < _EXACT_BELOW_MS]
    if not exact:
        return {n: s.start_ms for n, s in spans.items()}  # upper bounds only
    anchor = statistics.median(exact)
    starts = {}
    for n, s in spans.items():
        late_windows = range(int(longest_io_ms[n] // WINDOW_MS) + 1)
        starts[n] = min((s.start_ms - k * WINDOW_MS for k in late_windows),
                        key=lambda c: abs(c - anchor))  # fmt: skip
    return starts


def overlap(docs: list[dict[str, Any]], logs: Mapping[str, str]) -> Overlap:
    """numjobs 1: a job's section is named "...-<its log name>" (plan/fio_jobs.py)."""
    jobs = fio_jobs(docs)
    spans = job_spans(logs)
    assert len(spans) == len(jobs), f"{len(jobs)} jobs in fio's JSON, {len(spans)} IOPS logs"
    runtime_of, drain_of = {}, {}
    for name in spans:
        (job,) = [j for j in jobs if j["jobname"].endswith(f"-{name}")]
        runtime_of[name] = _runtime_ms(job)
        drain_of[name] = _longest_io_ms(job)
    starts = _starts(spans, drain_of)
    # a job's end: its start + the runtime fio reports (its last partial window is not
    # always logged, so the last sample may be up to one window early)
    ends = [starts[n] + runtime_of[n] for n in spans]
    common = min(ends) - max(starts.values())
    runtimes = tuple(runtime_of.values())
    return Overlap(
        start_spread_ms=max(starts.values()) - min(starts.values()),
        end_spread_ms=max(ends) - min(ends),
        common_s=common / 1000,
        total_ios=sum(j[d]["total_ios"] for j in jobs for d in ("read", "write", "trim") if d in j),
        runtimes_ms=runtimes,
        drains_ms=tuple(drain_of[n] for n in runtime_of),
    )


def assert_ran_together(
    o: Overlap, *, runtime_s: int, step_rate: float, rate_rel: float = 0.01
) -> None:
    """Every job started and ended within a window (1 s) of the others; each ran the
    step's runtime (within 2 %, plus the wait for its last I/Os: at most its longest one);
    the product's rate for the step is fio's I/Os over the seconds they all ran (within
    rate_rel, plus the jobs' start and end spread over those seconds)."""
    assert o.start_spread_ms <= WINDOW_MS, f"job starts {o.start_spread_ms} ms apart: {o}"
    assert o.end_spread_ms <= WINDOW_MS, f"job ends {o.end_spread_ms} ms apart: {o}"
    drains = o.drains_ms or (0.0,) * len(o.runtimes_ms)
    for r, drain in zip(o.runtimes_ms, drains, strict=True):
        assert -runtime_s * 20 <= r - runtime_s * 1000 <= runtime_s * 20 + drain, (
            f"a job ran {r} ms (its longest I/O {drain:.1f} ms): {o}"
        )
    assert o.common_s > 0, f"no second in which every job ran: {o}"
    # the step's rate sums each job's own rate; over the interval all ran, the two differ by
    # up to the starts' and ends' spread over that interval (cold run: 64 + 53 ms of a
    # loaded machine's 4.9 s = 2.4 %, the rates 1.2 % apart)
    allowed = rate_rel + (o.start_spread_ms + o.end_spread_ms) / 1000 / o.common_s
    assert abs(step_rate / o.rate - 1) <= allowed, (
        f"step rate {step_rate:.1f} vs fio's {o.total_ios} I/Os over the {o.common_s:.3f} s "
        f"every job ran = {o.rate:.1f}: {o}"
    )
