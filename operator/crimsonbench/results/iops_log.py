"""fio's per-job IOPS logs (write_iops_log, log_avg_msec, log_unix_epoch=1).

Lines are "time_ms, value, direction, block size, offset[, priority]". With averaging,
an entry is written at the end of each window in which an I/O completed, and windows start
when the job starts, so the first entry minus one window is the job's start: comparing
starts across clients gives the start skew of a step to the millisecond, whatever the
window. (A job whose first I/Os all took longer than a window logs nothing for it and
reads a window late; a client's start is its earliest job's, so this shows only when every
job of a client stalled that long at once.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from crimsonbench.errors import ParseError

# StepResult.extra key: the step's IOPS per second, every job summed (for comparisons of
# runs with one repeat: a bootstrap over it)
IOPS_PER_SECOND = "iops_per_second"

# <write_iops_log>_iops.<job number>.log, plus .<server host> when fio ran as a client
_LOG_NAME = re.compile(r"^(?P<job>.+)_iops\.\d+\.log(\..+)?$")


def iops_log_job(file_name: str) -> str | None:
    """The write_iops_log name (our job name) in a log's file name, or None."""
    m = _LOG_NAME.match(file_name)
    return m["job"] if m else None


def parse_iops_log(text: str) -> list[tuple[int, float, int]]:
    """fio's write_iops_log lines: (time ms, IOPS, direction 0=read 1=write 2=trim).

    With log_avg_msec=1000 each line is one second's average IOPS of one direction."""
    out: list[tuple[int, float, int]] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split(",")]
        try:
            out.append((int(cols[0]), float(cols[1]), int(cols[2])))
        except (IndexError, ValueError):
            msg = f"iops log line {no}: {line[:80]!r} is not 'msec, value, ddir, ...'"
            raise ParseError(msg) from None
    return out


def per_second_series(logs: Sequence[str], window_ms: int = 1000) -> tuple[float, ...]:
    """A step's IOPS per window: every direction of every process summed.

    Windows are keyed by round(t / window_ms). Only windows every log has are kept: a
    window missing from one process (it started later or ended sooner) would otherwise
    read as a dip."""
    if not logs:
        return ()
    per_log: list[dict[int, float]] = []
    for text in logs:
        sums: dict[int, float] = {}
        for t, v, _ in parse_iops_log(text):
            w = round(t / window_ms)
            sums[w] = sums.get(w, 0.0) + v
        per_log.append(sums)
    common = set(per_log[0]).intersection(*per_log[1:])
    return tuple(math.fsum(s[w] for s in per_log) for w in sorted(common))


def job_start_ms(text: str, window_ms: int) -> int | None:
    """When the job started (epoch ms), or None for an empty log (no window completed)."""
    entries = parse_iops_log(text)
    return entries[0][0] - window_ms if entries else None


def start_skew_ms(starts_by_client: Mapping[str, Iterable[int | None]]) -> float | None:
    """Latest client start minus earliest (a client starts with its first job), or None
    when fewer than two clients have a known start."""
    firsts = [
        min(known)
        for known in ([s for s in starts if s is not None] for starts in starts_by_client.values())
        if known
    ]
    if len(firsts) < 2:
        return None
    return float(max(firsts) - min(firsts))


def rounded_series(logs: Sequence[str]) -> list[float]:
    """per_second_series, to 0.1 IOPS: what a step result keeps (small, still exact
    enough for any comparison)."""
    return [round(v, 1) for v in per_second_series(logs)]
