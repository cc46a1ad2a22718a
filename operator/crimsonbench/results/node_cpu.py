"""A fio server pod's CPU log (manifests/cpu-sampler.sh: a line a second in its container's
log, the node's planned CPUs' busy and steal ticks and the pod's own) read into what ran
on those CPUs during a step: the CpuSetLoad results/validity judges, as local mode
measures it from /proc/stat itself (local/interference.py).

The log comes from a pod on a node we share with others: every line is checked, a line
that does not parse is skipped, never trusted."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from crimsonbench.results.validity import CpuSetLoad

# One sample a second: a window needs two inside it, a second apart at least, to say
# anything (a 3 s step has two or three).
MIN_SPAN_S = 0.9


@dataclass(frozen=True)
class CpuSample:
    t: float  # epoch seconds, the node's clock
    hz: int
    own: int  # ticks of the pod's processes since they started
    cpus: dict[int, tuple[int, int]]  # cpu -> (busy ticks, steal ticks) since boot


MARK = "cpu-sample"  # what starts a sampler's line among fio's own output


def parse_line(line: str) -> CpuSample | None:
    parts = line.split()
    if len(parts) < 4 or parts[0] != MARK:
        return None
    parts = parts[1:]
    try:
        t, hz, own = float(parts[0]), int(parts[1]), int(float(parts[2]))
        cpus = {}
        for field in parts[3:]:
            cpu, busy, steal = (int(x) for x in field.split(":"))
            cpus[cpu] = (busy, steal)
    except ValueError:
        return None
    if not math.isfinite(t) or hz <= 0 or own < 0:
        return None
    return CpuSample(t, hz, own, cpus)


def samples(text: str) -> list[CpuSample]:
    """The log's well-formed lines, in time order (a rotated log read after its new one
    comes back ordered)."""
    found = (parse_line(ln) for ln in text.splitlines())
    return sorted((s for s in found if s is not None), key=lambda s: s.t)


def load_in_window(
    name: str, cpus: Iterable[int], text: str, start: float, end: float
) -> CpuSetLoad | str:
    """What ran on `cpus` between the first and last sample inside [start, end], or why
    it cannot be said (a sentence for the verdict's unjudged notes)."""
    want = tuple(sorted(set(cpus)))
    inside = [s for s in samples(text) if start <= s.t <= end]
    if len(inside) < 2 or inside[-1].t - inside[0].t < MIN_SPAN_S:
        return f"{name}: fewer than two CPU samples of its node inside the step's window"
    first, last = inside[0], inside[-1]
    missing = [c for c in want if c not in first.cpus or c not in last.cpus]
    if missing or first.hz != last.hz:
        return f"{name}: its node's CPU log does not cover CPU {','.join(map(str, missing))}"
    busy = sum(last.cpus[c][0] - first.cpus[c][0] for c in want)
    steal = sum(last.cpus[c][1] - first.cpus[c][1] for c in want)
    own = last.own - first.own
    if busy < 0 or steal < 0 or own < 0:  # the node rebooted or the pod restarted
        return f"{name}: its node's CPU counters went back during the step"
    hz = first.hz
    return CpuSetLoad(
        name,
        want,
        round(last.t - first.t, 3),
        round(max(0.0, (busy - own) / hz), 3),
        round(steal / hz, 3),
    )
