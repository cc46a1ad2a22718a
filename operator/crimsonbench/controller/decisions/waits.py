"""How long the operator waits for what it cannot hurry (Rook making a pool or a cephx
user, a CephCluster to appear): a wait is bounded, and the decision to give up is taken
here, from the time waited alone (the run's record keeps when each wait began)."""

from __future__ import annotations

from crimsonbench.errors import ExecutionError, NotReady


def bounded_wait(
    message: str, waited_s: float, bound_s: float, gave_up: str = ""
) -> NotReady | ExecutionError:
    """NotReady(message) while the wait has lasted at most bound_s, then ExecutionError
    saying it gave up and where to look (gave_up)."""
    if waited_s > bound_s:
        return ExecutionError(f"{message}; gave up (rolloutTimeoutSeconds)"
                              + (f": {gave_up}" if gave_up else ""))  # fmt: skip
    return NotReady(message)
