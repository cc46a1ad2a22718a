"""Daemon processes: start in their own process group, stop with a deadline, CPU affinity."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from crimsonbench.results.crimson_threads import Thread
from crimsonbench.spec.cpuset import format_cpuset

log = logging.getLogger(__name__)


@dataclass
class Daemon:
    """One foreground Ceph daemon we started; its stdout/stderr go to `out`."""

    name: str  # "mon.a", "mgr.x", "osd.3"
    proc: subprocess.Popen[bytes]
    out: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exit_status(self) -> str | None:
        """None while running, else how it ended ("exit 1", "killed by SIGKILL")."""
        rc = self.proc.poll()
        if rc is None:
            return None
        return f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}"

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.out.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def spawn(name: str, argv: Sequence[str], out: Path, cpus: Iterable[int] = ()) -> Daemon:
    """Start a daemon as our child in a new session (own process group).

    CPUs are applied by `taskset`, which execs the daemon: the PID stays the daemon's and
    every thread it creates inherits the mask (no preexec_fn, which is unsafe with threads).
    """
    cpu_list = sorted(set(cpus))
    full = ["taskset", "-c", format_cpuset(cpu_list), *argv] if cpu_list else list(argv)
    with open(out, "ab") as fh:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    log.debug("started %s pid %d: %s", name, proc.pid, " ".join(full))
    return Daemon(name, proc, out)


def _signal_group(d: Daemon, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(d.pid, sig)  # pgid == pid thanks to start_new_session


def stop(daemons: Sequence[Daemon], grace: float) -> list[str]:
    """SIGTERM every daemon's group, SIGKILL what is still there after `grace` seconds.

    grace <= 0 sends SIGKILL at once. Returns the names of daemons that ignored SIGTERM.
    """
    first = signal.SIGTERM if grace > 0 else signal.SIGKILL
    for d in daemons:
        if d.proc.poll() is None:
            _signal_group(d, first)
    deadline = time.monotonic() + grace
    killed: list[str] = []
    for d in daemons:
        try:
            d.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            if grace > 0:
                log.warning("%s (pid %d) ignored SIGTERM for %.0f s; SIGKILL", d.name, d.pid, grace)
                killed.append(d.name)
            _signal_group(d, signal.SIGKILL)
            try:
                d.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.error("%s (pid %d) survived SIGKILL", d.name, d.pid)
        # A daemon that forked helpers leaves them in its group; sweep the group.
        _signal_group(d, signal.SIGKILL)
    return killed


def set_thread_affinity(pid: int, cpus: Iterable[int]) -> int:
    """Pin every current thread of `pid`; threads created later inherit from their creator.

    Returns the number of threads pinned (threads that exit meanwhile are skipped).
    """
    mask = set(cpus)
    done = 0
    for tid in _tids(pid):
        try:
            os.sched_setaffinity(tid, mask)
            done += 1
        except ProcessLookupError:
            continue
    return done


def thread_affinity(pid: int) -> dict[int, list[int]]:
    """tid -> sorted CPUs, read from the kernel for every thread of `pid`."""
    out: dict[int, list[int]] = {}
    for tid in _tids(pid):
        try:
            out[tid] = sorted(os.sched_getaffinity(tid))
        except ProcessLookupError:
            continue
    return out


def threads(pid: int) -> list[Thread]:
    """Every thread of `pid` with its name and CPUs, as the kernel reports them now."""
    out = []
    for tid in _tids(pid):
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            out.append(Thread(tid, comm, frozenset(os.sched_getaffinity(tid))))
        except (ProcessLookupError, FileNotFoundError):
            continue
    return out


def _tids(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return []


def program(pid: int) -> str:
    """The process's name (/proc/PID/comm), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def processes_mentioning(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (our cluster dir): leftovers after stop."""
    needle = marker.encode()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(entry))
    return found
