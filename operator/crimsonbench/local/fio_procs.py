"""Start the fio of every client of a step, each pinned to its client CPUs, and wait."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import psutil

from crimsonbench.errors import ExecutionError
from crimsonbench.local.signals import deferred
from crimsonbench.local.userland import Userland
from crimsonbench.plan.types import ClientPlan
from crimsonbench.results.store import FioPaths, ResultStore

log = logging.getLogger(__name__)


@dataclass
class FioProcess:
    """The fio of one client in a step: the client's one job file (a section per job, all
    run together), one fio."""

    client: ClientPlan
    paths: FioPaths
    popen: subprocess.Popen[bytes]


def _pin(cpus: frozenset[int]):  # type: ignore[no-untyped-def]
    def preexec() -> None:
        # Pin before exec so fio and every thread/child it makes start inside the set;
        # cpus_allowed in the job file then pins the I/O workers again (belt and braces).
        os.sched_setaffinity(0, cpus)
        os.setpgrp()  # own process group: a stop signal reaches fio's workers too

    return preexec


class FioGroup:
    """The fio of every client of a step, started together. Use as a context manager:
    leaving it kills leftovers."""

    def __init__(
        self,
        step_id: str,
        job_files: Mapping[str, str],
        clients: Sequence[ClientPlan],
        store: ResultStore,
        env: dict[str, str],
        userland: Userland | None = None,
    ) -> None:
        """job_files: client name -> its job file for this step (plan/fio_jobs.py), for
        every client with jobs; env: what fio needs beyond the usual environment."""
        self._userland = userland or Userland()
        self._step_id = step_id
        self._job_files = job_files
        self._clients = clients
        self._store = store
        self._env = env
        self.procs: list[FioProcess] = []

    def __enter__(self) -> FioGroup:
        argvs = []
        for client in self._clients:
            text = self._job_files.get(client.name)
            if text is None:
                continue
            job_file = self._store.write_job_file(self._step_id, client.name, text)
            paths = self._store.fio_paths(self._step_id, client.name)
            # The eta line each second is our live IOPS readout; the JSON goes to --output.
            args = [self._userland.fio(), "--output-format=json+", f"--output={paths.output}",
                    "--eta=always", "--eta-newline=1", str(job_file)]  # fmt: skip
            argvs.append((client, paths, args))
        # Every client's files are written first, so the starts are as close as Popen allows.
        # A stop signal waits until every fio started is known (deferred), so leaving the
        # step kills them all; a failure to start one kills those already started.
        try:
            with deferred():
                for client, paths, args in argvs:
                    self.procs.append(FioProcess(client, paths, self._start(client, paths, args)))
        except BaseException:
            self.kill()
            raise
        return self

    def _start(
        self, client: ClientPlan, paths: FioPaths, args: list[str]
    ) -> subprocess.Popen[bytes]:
        # the IOPS logs land next to the output (fio's working directory)
        full, env, cwd = self._userland.wrap(args, self._env, paths.output.parent)
        with paths.stderr.open("wb") as err_fh, paths.eta.open("wb") as eta_fh:
            return subprocess.Popen(
                full,
                stdout=eta_fh,
                stderr=err_fh,
                env=env,
                cwd=cwd,
                preexec_fn=_pin(frozenset(client.cpus)),  # noqa: PLW1509 - no threads hold locks
            )

    def __exit__(self, *exc: object) -> None:
        self.kill()
        # exec_prerun (a step's start barrier) leaves <job>.prerun.txt, its empty output,
        # in fio's working directory: not a result
        for p in self.procs:
            for left in p.paths.output.parent.glob("*.prerun.txt"):
                left.unlink(missing_ok=True)

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

    def pids_by_client(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for p in self.procs:
            if p.popen.poll() is not None:
                continue
            pids = [p.popen.pid]
            with contextlib.suppress(psutil.NoSuchProcess):
                pids.extend(c.pid for c in psutil.Process(p.popen.pid).children(recursive=True))
            out[p.client.name] = pids
        return out

    def wait(self, deadline_s: float, tick: Callable[[], None] | None = None) -> None:
        """Wait for every fio; raise ExecutionError naming the client that failed or hung."""
        end = time.monotonic() + deadline_s
        while any(p.popen.poll() is None for p in self.procs):
            if time.monotonic() > end:
                hung = next(p for p in self.procs if p.popen.poll() is None)
                raise ExecutionError(
                    f"fio of {hung.client.name} still running {deadline_s:.0f}s after start; "
                    "killed it"
                )
            if tick is not None:
                tick()  # e.g. a health check or the live progress line
            time.sleep(0.5)
        for p in self.procs:
            rc = p.popen.returncode
            if rc != 0:
                tail = p.paths.stderr.read_text(errors="replace")[-800:]
                raise ExecutionError(f"fio of {p.client.name} exited with {rc}: {tail.strip()}")

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
