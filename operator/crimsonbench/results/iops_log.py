"""fio's per-job IOPS logs (write_iops_log, log_avg_msec, log_unix_epoch=1).

Lines are "time_ms, value, direction, block size, offset[, priority]". With averaging,
an entry is written at the end of each window, and windows start when the job starts, so
the first entry minus one window is the job's start: comparing starts across clients
gives the start skew of a step to the millisecond, whatever the window.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from crimsonbench.errors import ParseError

# <write_iops_log>_iops.<job number>.log, plus .<server host> when fio ran as a client
_LOG_NAME = re.compile(r"^(?P<job>.+)_iops\.\d+\.log(\..+)?$")


def iops_log_job(file_name: str) -> str | None:
    """The write_iops_log name (our job name) in a log's file name, or None."""
    m = _LOG_NAME.match(file_name)
    return m["job"] if m else None


def parse_iops_log(text: str) -> list[tuple[int, float]]:
    """(time in ms, IOPS of the window ending then), in file order."""
    out: list[tuple[int, float]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            out.append((int(parts[0]), float(parts[1])))
        except (IndexError, ValueError):
            raise ParseError(
                f"fio IOPS log line {n} is not 'time, value, ...': {line[:80]!r}"
            ) from None
    return out


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
