"""A quiet machine for the tests that measure interference: `make test` builds what the
later tiers need in the background (scripts/test_tiers.py's prefetch, at idle priority,
which still fills every idle cycle of the CPUs a run pins), so a test that asserts a step
was left alone pauses that build meanwhile: SIGSTOP to every process of the prefetch's
session (its builds make process groups of their own: `timeout`, podman) and to every
descendant of those that left it (a container's processes: runc gives them a session of
their own; a cold run's hog test failed on `pip` in the prefetch's image build, running
on), SIGCONT after, whatever happens. Anything else running on the machine is the test's
finding, not noise: the verdicts it reads name it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

PREFETCH_PGID = "CB_PREFETCH_PGID"  # the prefetch's pid: it leads its own session


def _parents() -> dict[int, int]:
    """pid -> its parent's pid, for every process now."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = open(f"/proc/{name}/stat").read()  # noqa: SIM115, PTH123
                out[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def _session(sid: int) -> list[int]:
    """The session's processes and every descendant of theirs, wherever its session."""
    parents = _parents()
    found = set()
    for pid in parents:
        with contextlib.suppress(OSError):
            if os.getsid(pid) == sid:
                found.add(pid)
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@contextlib.contextmanager
def prefetch_paused() -> Iterator[int]:
    """Yields how many processes were paused (0: no prefetch running)."""
    raw = os.environ.get(PREFETCH_PGID, "")
    sid = int(raw) if raw.isdigit() else 0
    stopped: set[int] = set()
    if sid > 1:
        for _ in range(3):  # again: a child forked while its parent was being stopped
            pids = [p for p in _session(sid) if p not in stopped]
            _signal(pids, signal.SIGSTOP)
            stopped.update(pids)
    try:
        yield len(stopped)
    finally:
        _signal(sorted(stopped), signal.SIGCONT)
