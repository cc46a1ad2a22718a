"""A quiet machine for the tests that measure interference: `make test` builds what the
later tiers need in the background (scripts/test_tiers.py's prefetch, at idle priority,
which still fills every idle cycle of the CPUs a run pins), so a test that asserts a step
was left alone pauses that build meanwhile (SIGSTOP to its process group, SIGCONT after,
whatever happens). Anything else running on the machine is the test's finding, not noise:
the verdicts it reads name it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

PREFETCH_PGID = "CB_PREFETCH_PGID"


@contextlib.contextmanager
def prefetch_paused() -> Iterator[bool]:
    """Yields whether a prefetch was paused."""
    raw = os.environ.get(PREFETCH_PGID, "")
    pgid = int(raw) if raw.isdigit() else 0
    paused = False
    if pgid > 1:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGSTOP)
            paused = True
    try:
        yield paused
    finally:
        if paused:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGCONT)
