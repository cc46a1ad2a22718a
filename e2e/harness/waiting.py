"""Polling helpers the harness shares."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from harness.processes import NotReadyError

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float, what: str,
             explain: Callable[[], str] = lambda: "", interval: float = 2.0) -> T:  # fmt: skip
    """Poll `probe` until it returns something truthy (returned); NotReadyError otherwise,
    with `explain()` appended. Exceptions from the probe count as 'not yet', but for an
    AssertionError: a verdict (e.g. the awaited process crashed), raised at once."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            value = probe()
            if value:
                return value
        except AssertionError:
            raise
        except Exception as exc:  # not ready yet: the API or Ceph may not answer yet
            last = f"{type(exc).__name__}: {exc}"[:500]
        if time.monotonic() > deadline:
            raise NotReadyError(f"{what}: not after {timeout:.0f}s {last}\n{explain()}")
        time.sleep(interval)


def pod_ready(pod: dict[str, Any]) -> bool:
    """The pod's (its JSON's) Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
