"""CPU time on the planned CPUs taken by anything that is not the run, while a step runs.

Per planned CPU set (each OSD's, each fio client's): the set's task time from /proc/stat
(user+nice+system, ticks) minus the CPU time of the run's processes pinned to that set
(psutil: every thread's) minus the run's unpinned processes (mon, mgr, crimsonbench
itself: wherever they ran, counted against every set, so the figure is a lower bound and
never blames the run on itself). irq/softirq are left out: the run's own network traffic
is handled there. Steal comes from the same /proc/stat line.

Why not run-queue delay (schedstat): a classic OSD's dozens of threads share few CPUs and
wait for each other; their delay does not separate a hog from the OSD's own contention.

An interval in which one of the set's processes went away is not counted (its last CPU
time is lost with it, which would read as someone else's).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from crimsonbench.results.checked_json import one_line
from crimsonbench.results.validity import CpuSetLoad

PROC_STAT = Path("/proc/stat")
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
TOP_OTHERS = 3


def cpu_times_by_cpu(text: str) -> dict[int, tuple[float, float]]:
    """/proc/stat -> cpu -> (task seconds: user+nice+system, steal seconds)."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        cols = line.split()
        v = [int(c) for c in cols[1:9]]  # user nice system idle iowait irq softirq steal
        out[int(cols[0][3:])] = ((v[0] + v[1] + v[2]) * TICK_S, v[7] * TICK_S)
    return out


def _cpu_seconds(pid: int) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return t.user + t.system


def _all_processes() -> dict[int, tuple[str, float, int]]:
    """pid -> (name, CPU seconds incl. reaped children's: a build's short-lived compilers
    land on the make or go process that waits for them, parent pid)."""
    out = {}
    for p in psutil.process_iter(["name", "cpu_times", "ppid"]):
        t = p.info["cpu_times"]
        if t is not None:
            secs = t.user + t.system + t.children_user + t.children_system
            # anyone's process name, written into result.json: one line, as read back
            out[p.pid] = (one_line(p.info["name"] or "?"), secs, p.info["ppid"] or 0)
    return out


@dataclass
class _SetTotals:
    cpus: tuple[int, ...]
    wall_s: float = 0.0
    others_s: float = 0.0
    steal_s: float = 0.0
    last_pids: frozenset[int] = field(default_factory=frozenset)


class InterferenceMeter:
    """sample() when fio runs and every interval after, result() once sampling stopped.

    sets: name -> its planned CPUs; pinned: name -> pids of the run pinned to that set,
    now; unpinned: the run's other pids (counted against every set)."""

    def __init__(
        self,
        sets: Mapping[str, Iterable[int]],
        pinned: Callable[[], Mapping[str, Iterable[int]]],
        unpinned: Callable[[], Iterable[int]],
        proc_stat: Path = PROC_STAT,
    ) -> None:
        self._sets = {n: _SetTotals(tuple(sorted(c))) for n, c in sets.items()}
        self._pinned = pinned
        self._unpinned = unpinned
        self._proc_stat = proc_stat
        self._cpu_last: dict[int, tuple[float, float]] = {}
        self._pid_last: dict[int, float] = {}
        self._t_last = 0.0
        self._procs_start: dict[int, tuple[str, float, int]] = {}
        self._run_pids: set[int] = set()

    def sample(self, now: float) -> None:
        if not self._cpu_last:
            self._procs_start = _all_processes()
        self._read(now)

    def _read(self, now: float) -> None:
        cpus = cpu_times_by_cpu(self._proc_stat.read_text())
        pinned = {n: frozenset(p) for n, p in self._pinned().items()}
        unpinned = frozenset(self._unpinned())
        run = unpinned.union(*pinned.values())
        self._run_pids |= run
        times = {pid: _cpu_seconds(pid) for pid in run}
        first = not self._cpu_last
        wall = now - self._t_last
        un_delta = sum(self._delta(pid, times) for pid in unpinned)
        for name, tot in self._sets.items():
            pids = pinned.get(name, frozenset())
            own = sum(self._delta(pid, times) for pid in pids)
            gone = any(times.get(pid) is None for pid in tot.last_pids)
            if not first and not gone and wall > 0:
                task = sum(cpus[c][0] - self._cpu_last[c][0] for c in tot.cpus if c in cpus)
                steal = sum(cpus[c][1] - self._cpu_last[c][1] for c in tot.cpus if c in cpus)
                tot.wall_s += wall
                tot.others_s += task - own - un_delta
                tot.steal_s += steal
            tot.last_pids = frozenset(p for p in pids if times.get(p) is not None)
        self._pid_last = {p: t for p, t in times.items() if t is not None}
        self._cpu_last = cpus
        self._t_last = now

    def _delta(self, pid: int, times: Mapping[int, float | None]) -> float:
        now = times.get(pid)
        if now is None:
            return 0.0
        # a pid first seen after start() was born since the last read (fio's workers):
        # all its time is this interval's
        return now - self._pid_last.get(pid, 0.0 if self._cpu_last else now)

    def result(self) -> tuple[CpuSetLoad, ...]:
        """One load per set; the busiest other processes named where others took time."""
        top = self._top_others()
        return tuple(
            CpuSetLoad(
                name,
                t.cpus,
                round(t.wall_s, 3),
                round(max(0.0, t.others_s), 3),
                round(t.steal_s, 3),
                top if t.others_s > 0 else (),
            )  # fmt: skip
            for name, t in self._sets.items()
        )

    def _top_others(self) -> tuple[str, ...]:
        end = _all_processes()
        mine = self._run_pids | {os.getpid()}
        used = []
        for pid, (name, secs, _) in end.items():
            if _is_ours(pid, mine, end):
                continue
            before = self._procs_start.get(pid, (name, 0.0, 0))[1]
            if secs - before >= 0.1:
                used.append((secs - before, f"{name}[{pid}] {secs - before:.1f} s"))
        return tuple(s for _, s in sorted(used, reverse=True)[:TOP_OTHERS])


def _is_ours(pid: int, mine: set[int], procs: Mapping[int, tuple[str, float, int]]) -> bool:
    """One of the run's processes or their descendants (fio's workers, a ceph CLI of ours)."""
    seen = set()
    while pid > 1 and pid not in seen:
        if pid in mine:
            return True
        seen.add(pid)
        pid = procs.get(pid, ("", 0.0, 0))[2]
    return False
