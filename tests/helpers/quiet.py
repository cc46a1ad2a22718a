"""A quiet machine for the tests that measure interference: `make test` builds what the
later tiers need in the background (scripts/test_tiers.py's prefetch, at idle priority,
which still fills every idle cycle of the CPUs a run pins), so a test that asserts a step
was left alone pauses that build meanwhile: SIGSTOP to every process of the prefetch's
session (its builds make process groups of their own: `timeout`, podman), SIGCONT after,
whatever happens. Anything else running on the machine is the test's finding, not noise:
the verdicts it reads name it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

PREFETCH_PGID = "CB_PREFETCH_PGID"  # the prefetch's pid: it leads its own session


def _session(sid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(name)) == sid:
                    pids.append(int(name))
    return pids


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
