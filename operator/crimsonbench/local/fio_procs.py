"""Start the fio processes of one step, pinned to the client CPU set, and wait for them."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from crimsonbench.errors import ExecutionError
from crimsonbench.plan.types import FioJob
from crimsonbench.results.store import FioPaths

log = logging.getLogger(__name__)


@dataclass
class FioProcess:
    job: FioJob
    output: Path
    stderr: Path
    popen: subprocess.Popen[bytes]

    eta: Path


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
        self,
        jobs: Sequence[FioJob],
        paths: Callable[[str], FioPaths],
        cpus: frozenset[int],
        env: dict[str, str],
    ) -> None:
        self._jobs = jobs
        self._paths = paths  # job name -> where its files go (the results store decides)
        self._cpus = cpus
        self._env = env
        self.procs: list[FioProcess] = []

    def __enter__(self) -> FioGroup:
        for job in self._jobs:
            paths = self._paths(job.name)
            paths.job_file.write_text(job.job_file)
            out, err, eta = paths.output, paths.stderr, paths.eta
            # The eta line each second is our live IOPS readout; the JSON goes to --output.
            args = ["fio", "--output-format=json", f"--output={out}", "--eta=always",
                    "--eta-newline=1", str(paths.job_file)]  # fmt: skip
            with err.open("wb") as err_fh, eta.open("wb") as eta_fh:
                popen = subprocess.Popen(
                    args,
                    stdout=eta_fh,
                    stderr=err_fh,
                    env=self._env,
                    preexec_fn=_pin(self._cpus),  # noqa: PLW1509 - no threads hold locks here
                )
            self.procs.append(FioProcess(job, out, err, popen, eta))
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
