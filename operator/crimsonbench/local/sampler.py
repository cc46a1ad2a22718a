"""Sample OSD and fio CPU/RSS from /proc (via psutil) while a step runs.

Why not `top -H`: procps 4 reports the whole process's CPU on the main thread's row, so
summing rows double counts (see ENVIRONMENT.md). CPU here is the delta of the process's
user+system time over wall time, in % of one core, summed over processes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import psutil

from crimsonbench.errors import CrimsonBenchError
from crimsonbench.results.resources import reactor_fields
from crimsonbench.spec.status import StepSample

log = logging.getLogger(__name__)


class _CpuMeter:
    """Per-pid cumulative CPU seconds, tolerant of processes that exit between samples."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}
        self._last: dict[int, float] = {}

    def cpu_seconds_delta(self, pids: Iterable[int]) -> tuple[float, float]:
        """(CPU seconds used since the previous call, RSS MiB) summed over pids."""
        used = 0.0
        rss = 0.0
        for pid in pids:
            try:
                proc = self._procs.setdefault(pid, psutil.Process(pid))
                with proc.oneshot():
                    t = proc.cpu_times()
                    total = t.user + t.system
                    rss += proc.memory_info().rss / 2**20
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                self._procs.pop(pid, None)
                continue
            used += total - self._last.get(pid, total)
            self._last[pid] = total
        return used, rss


class ResourceSampler:
    """Background thread: one StepSample per interval until stop()."""

    def __init__(
        self,
        osd_pids: Callable[[], Iterable[int]],
        fio_pids: Callable[[], Iterable[int]],
        interval: float = 1.0,
        reactor_util: Callable[[], dict[int, list[float]]] | None = None,
        on_sample: Callable[[float], None] | None = None,
    ) -> None:
        """reactor_util: osd id -> its reactors' Seastar utilization % now (crimson);
        on_sample: called with the monotonic time at the start and at every sample, in
        the sampler's thread (the interference meter reads /proc/stat there)."""
        self._reactor_util = reactor_util
        self._on_sample = on_sample or (lambda now: None)
        self._osd_pids = osd_pids
        self._fio_pids = fio_pids
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)
        self.samples: list[StepSample] = []

    def __enter__(self) -> ResourceSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._interval * 3 + 5)

    def _run(self) -> None:
        osd, fio = _CpuMeter(), _CpuMeter()
        start = last = time.monotonic()
        osd.cpu_seconds_delta(self._osd_pids())  # prime: the first delta starts here
        fio.cpu_seconds_delta(self._fio_pids())
        self._on_sample(start)
        while not self._stop.wait(self._interval):
            now = time.monotonic()
            self._on_sample(now)
            wall = max(now - last, 1e-6)
            last = now
            osd_cpu, osd_rss = osd.cpu_seconds_delta(self._osd_pids())
            fio_cpu, _ = fio.cpu_seconds_delta(self._fio_pids())
            self.samples.append(
                StepSample(
                    t=round(now - start, 3),
                    osd_cpu=100.0 * osd_cpu / wall,
                    osd_mem_mib=osd_rss,
                    fio_cpu=100.0 * fio_cpu / wall,
                    **reactor_fields(self._reactors()),
                )
            )

    def _reactors(self) -> dict[int, list[float]]:
        if self._reactor_util is None:
            return {}
        try:
            return self._reactor_util()
        except CrimsonBenchError as exc:  # an OSD restarting: the health check reports it
            log.debug("no reactor utilization this sample: %s", exc)
            return {}
