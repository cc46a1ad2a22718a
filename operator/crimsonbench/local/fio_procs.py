"""Start the fio processes of one step, pinned to the client CPU set, and wait for them."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from crimsonbench.errors import ExecutionError
from crimsonbench.plan.types import FioJob

log = logging.getLogger(__name__)


@dataclass
class FioProcess:
    job: FioJob
    output: Path
    stderr: Path
    popen: subprocess.Popen[bytes]

    @property
    def eta(self) -> Path:
        return self.output.with_suffix(".eta")


# fio's status line: "Jobs: 1 (f=1): [r(1)][45.5%][r=10.5MiB/s][r=2690 IOPS][eta 00m:06s]"
_ETA_IOPS = re.compile(
    r"\[(?:r=(?P<r>[\d.]+)(?P<rk>[kM]?))?,?(?:w=(?P<w>[\d.]+)(?P<wk>[kM]?))? IOPS\]"
)
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6}


def live_iops(eta_text: str) -> float:
    """IOPS from the last status line fio printed (0 before the first one)."""
    for line in reversed(eta_text.splitlines()):
        m = _ETA_IOPS.search(line)
        if m:
            r = float(m["r"] or 0) * _SCALE[m["rk"] or ""]
            w = float(m["w"] or 0) * _SCALE[m["wk"] or ""]
            return r + w
    return 0.0


def eta_files_iops(paths: Iterable[Path]) -> float:
    """Live IOPS summed over fio processes, from the tail of each one's status-line file."""
    total = 0.0
    for path in paths:
        try:
            with path.open("rb") as fh:
                fh.seek(max(path.stat().st_size - 4096, 0))
                total += live_iops(fh.read().decode(errors="replace").replace("\r", "\n"))
        except OSError:
            continue
    return total


def _pin(cpus: frozenset[int]):  # type: ignore[no-untyped-def]
    def preexec() -> None:
        # Pin before exec so fio and every thread/child it makes start inside the set;
        # cpus_allowed in the job file then pins the I/O workers again (belt and braces).
        os.sched_setaffinity(0, cpus)
        os.setpgrp()  # own process group: a stop signal reaches fio's workers too

    return preexec


class FioGroup:
    """All fio processes of a step. Use as a context manager: leaving it kills leftovers."""

    def __init__(
        self, jobs: Sequence[FioJob], step_dir: Path, cpus: frozenset[int], env: dict[str, str]
    ) -> None:
        self._jobs = jobs
        self._dir = step_dir
        self._cpus = cpus
        self._env = env
        self.procs: list[FioProcess] = []

    def __enter__(self) -> FioGroup:
        self._dir.mkdir(parents=True, exist_ok=True)
        for job in self._jobs:
            job_path = self._dir / f"{job.name}.fio"
            job_path.write_text(job.job_file)
            out = self._dir / f"fio-{job.name}.json"
            err = self._dir / f"fio-{job.name}.stderr"
            eta = self._dir / f"fio-{job.name}.eta"
            # The eta line each second is our live IOPS readout; the JSON goes to --output.
            args = ["fio", "--output-format=json", f"--output={out}", "--eta=always",
                    "--eta-newline=1", str(job_path)]  # fmt: skip
            with err.open("wb") as err_fh, eta.open("wb") as eta_fh:
                popen = subprocess.Popen(
                    args,
                    stdout=eta_fh,
                    stderr=err_fh,
                    env=self._env,
                    preexec_fn=_pin(self._cpus),  # noqa: PLW1509 - no threads hold locks here
                )
            self.procs.append(FioProcess(job, out, err, popen))
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def pids(self) -> list[int]:
        """fio's main processes and their workers (fio forks a process per job)."""
        out: list[int] = []
        for p in self.procs:
            if p.popen.poll() is not None:
                continue
            out.append(p.popen.pid)
            with contextlib.suppress(psutil.NoSuchProcess):
                out.extend(c.pid for c in psutil.Process(p.popen.pid).children(recursive=True))
        return out

    def live_iops(self) -> float:
        return eta_files_iops(p.eta for p in self.procs)

    def wait(self, deadline_s: float, tick: Callable[[], None] | None = None) -> None:
        """Wait for every fio; raise ExecutionError naming the job that failed or hung."""
        end = time.monotonic() + deadline_s
        while any(p.popen.poll() is None for p in self.procs):
            if time.monotonic() > end:
                hung = next(p for p in self.procs if p.popen.poll() is None)
                raise ExecutionError(
                    f"fio {hung.job.name} still running {deadline_s:.0f}s after start; killed it"
                )
            if tick is not None:
                tick()  # e.g. a health check or the live progress line
            time.sleep(0.5)
        for p in self.procs:
            rc = p.popen.returncode
            if rc != 0:
                tail = p.stderr.read_text(errors="replace")[-800:]
                raise ExecutionError(f"fio {p.job.name} exited with {rc}: {tail.strip()}")

    def kill(self) -> None:
        for p in self.procs:
            if p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGKILL)
                p.popen.wait(timeout=10)


def thread_affinities(pids: Sequence[int]) -> dict[int, list[int]]:
    """tid -> CPUs, for every thread of the given processes, read from /proc."""
    out: dict[int, list[int]] = {}
    for pid in pids:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                out[tid] = sorted(os.sched_getaffinity(tid))
            except (ProcessLookupError, OSError):
                continue
    return out
