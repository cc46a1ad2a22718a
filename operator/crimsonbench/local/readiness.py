"""What a cluster still lacks before a benchmark may start, from `ceph status` + `osd dump`.

HEALTH_OK is not enough: it appears before the mgr's grace period ends and before PGs peer.
Ready means: an active mgr, every expected OSD up and in, and every PG of every pool
reported active+clean by the mgr (its PG count must match the pools' pg_num, because the
mgr learns of new PGs with a delay and would otherwise report "all clean" too early).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from crimsonbench.errors import NotReady

log = logging.getLogger(__name__)
POLL_S = 1.0


def missing(status: dict[str, Any], osd_dump: dict[str, Any], expected_osds: int) -> list[str]:
    """Human-readable list of what is not ready yet; empty when ready."""
    out: list[str] = []
    if not status.get("mgrmap", {}).get("available", False):
        out.append("no active mgr")
    out.extend(_osd_gaps(osd_dump, expected_osds))
    out.extend(_pg_gaps(status.get("pgmap", {}), osd_dump))
    return out


def _osd_gaps(osd_dump: dict[str, Any], expected: int) -> list[str]:
    osds = osd_dump.get("osds", [])
    out: list[str] = []
    if len(osds) < expected:
        out.append(f"{len(osds)} of {expected} OSDs registered")
    down = [f"osd.{o['osd']}" for o in osds if not o.get("up")]
    out_ = [f"osd.{o['osd']}" for o in osds if not o.get("in")]
    if down:
        out.append("down: " + ", ".join(down))
    if out_:
        out.append("out: " + ", ".join(out_))
    return out


def _pg_gaps(pgmap: dict[str, Any], osd_dump: dict[str, Any]) -> list[str]:
    expected = sum(int(p.get("pg_num", 0)) for p in osd_dump.get("pools", []))
    seen = int(pgmap.get("num_pgs", 0))
    if seen != expected:
        return [f"mgr reports {seen} PGs, pools have {expected}"]
    bad = {
        s["state_name"]: int(s["count"])
        for s in pgmap.get("pgs_by_state", [])
        if s.get("state_name") != "active+clean"
    }
    if not bad:
        return []
    states = ", ".join(f"{n} {name}" for name, n in sorted(bad.items()))
    return [f"{sum(bad.values())} of {expected} PGs not active+clean ({states})"]


def poll_until(
    probe: Callable[[], list[str]], timeout: float, interval: float = POLL_S
) -> list[str]:
    """The package's one bounded wait (local mode blocks; the operator's waits span ticks:
    controller/record.RunRecord.waited): call `probe` (what is still missing) until it
    returns nothing or `timeout` seconds passed; what was still missing then ([]: reached)."""
    deadline = time.monotonic() + timeout
    gaps = probe()
    while gaps and time.monotonic() <= deadline:
        time.sleep(interval)
        gaps = probe()
    return gaps


def wait_until(what: str, probe: Callable[[], list[str]], timeout: float, where: str) -> None:
    """poll_until, NotReady listing what was still missing when the deadline passed."""
    last: list[str] = []

    def logged() -> list[str]:
        nonlocal last
        gaps = probe()
        if gaps != last:
            log.debug("%s: waiting for %s", what, "; ".join(gaps) or "nothing")
        last = gaps
        return gaps

    gaps = poll_until(logged, timeout)
    if gaps:
        raise NotReady(
            f"{what} not reached within {timeout:.0f} s ({where}); still missing: "
            + "; ".join(gaps)
        )
