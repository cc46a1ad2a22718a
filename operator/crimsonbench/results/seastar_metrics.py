"""Seastar's own view of a crimson OSD's reactors (`dump_metrics reactor_utilization`).

A reactor busy-polls, so the OSD's CPU time from /proc says how long its threads ran, not
how much of that was work; Seastar's reactor_utilization (% of the recent period spent
running tasks, per shard) is the figure crimson engineers read. Both are recorded.
"""

from __future__ import annotations

import json
from typing import Any

from crimsonbench.errors import ParseError


def parse_reactor_utilization(text: str) -> dict[int, float]:
    """shard -> utilization %, from the admin socket's or `ceph tell`'s JSON:
    {"metrics": [{"reactor_utilization": {"shard": "0", "value": 90.8}}, ...]}"""
    try:
        doc: Any = json.loads(text)
        out: dict[int, float] = {}
        for entry in doc["metrics"]:
            metric = entry.get("reactor_utilization")
            if metric is not None:
                out[int(metric["shard"])] = float(metric["value"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ParseError(
            f"not dump_metrics reactor_utilization output ({exc}): {text[:200]!r}"
        ) from None
    if not out:
        raise ParseError(f"dump_metrics named no reactor_utilization: {text[:200]!r}")
    return out
