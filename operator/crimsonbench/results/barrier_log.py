"""What a step's start barrier says (manifests/start_barrier.py writes it, one JSON object
per line): how far apart the clients' jobs became ready, how long the first waited, and
whether any client never came. Untrusted text: a line that is not the barrier's is
ignored; no release line means no barrier ran (None)."""

from __future__ import annotations

import json
import math
from typing import Any

_FIELDS = ("first", "last", "released", "expected", "arrived")


def _numbers(record: dict[str, Any]) -> list[float] | None:
    """The release record's numbers in _FIELDS order, or None if one is not a number."""
    out = []
    for key in _FIELDS:
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        out.append(float(value))
    return out


def barrier_summary(text: str) -> dict[str, Any] | None:
    """{expected, arrived, setup_spread_s, first_wait_s, timed_out, late} or None."""
    released: dict[str, Any] | None = None
    late = 0
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("event") == "released" and released is None:
            released = record
        elif record.get("event") == "late":
            late += 1
    numbers = None if released is None else _numbers(released)
    if released is None or numbers is None:
        return None
    first, last, at, expected, arrived = numbers
    return {
        "expected": int(expected),
        "arrived": int(arrived),
        # how far apart the clients' jobs became ready (their setups' difference)
        "setup_spread_s": round(last - first, 3),
        # how long the first job to be ready waited for the last
        "first_wait_s": round(at - first, 3),
        "timed_out": bool(released.get("timed_out")),
        "late": late,
    }
