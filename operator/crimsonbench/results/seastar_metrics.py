"""Seastar's own view of a crimson OSD's reactors (`dump_metrics reactor_utilization`).

A reactor busy-polls, so the OSD's CPU time from /proc says how long its threads ran, not
how much of that was work; Seastar's reactor_utilization (% of the recent period spent
running tasks, per shard) is the figure crimson engineers read. Both are recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ReactorRounds:
    """The fio driver's reactor.log (manifests/fio-driver.sh, run_step): per round,
    osd id -> its reactors' utilization %, in shard order; and what `ceph tell` said when
    it failed (one line per distinct answer)."""

    rounds: list[dict[int, list[float]]]
    problems: list[str]


def parse_reactor_log(text: str) -> ReactorRounds:
    """Each entry: a "# EPOCH osd.N rc=RC" line, then `ceph tell`'s answer."""
    by_round: dict[str, dict[int, list[float]]] = {}
    problems: list[str] = []
    for header, answer in _entries(text):
        try:
            epoch, who, rc_word = header.split()
            osd = int(who.removeprefix("osd."))
            rc = int(rc_word.removeprefix("rc="))
        except ValueError:
            raise ParseError(f"not a reactor.log entry: {header[:200]!r}") from None
        per_round = by_round.setdefault(epoch, {})
        try:
            if rc != 0:
                raise ParseError(f"exit {rc}")
            shards = parse_reactor_utilization(answer)
            per_round[osd] = [shards[s] for s in sorted(shards)]
        except ParseError as exc:
            errors = [ln for ln in answer.splitlines() if ln.startswith("Error")]
            said = " ".join(" ".join(errors or [answer]).split())[:300] or str(exc)
            problem = f"ceph tell osd.{osd} dump_metrics reactor_utilization: {said}"
            if problem not in problems:
                problems.append(problem)
    rounds = [by_round[e] for e in sorted(by_round, key=float) if by_round[e]]
    return ReactorRounds(rounds, problems)


def _entries(text: str) -> list[tuple[str, str]]:
    entries: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith("# "):
            entries.append((line[2:], ""))
        elif entries:
            header, answer = entries[-1]
            entries[-1] = (header, f"{answer}{line}\n")
    return entries
