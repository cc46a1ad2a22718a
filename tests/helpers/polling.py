"""Waiting in the end-to-end tests: poll until something holds, or fail saying what."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def poll_until(what: str, probe: Callable[[], Any], timeout: float,
               explain: Callable[[], str], interval: float = 0.5) -> Any:  # fmt: skip
    """probe() until it returns something truthy (returned). AssertionError otherwise, with
    explain() (the run's status, logs, ...). An exception from probe is a failure, raised."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what}: not after {timeout:.0f}s\n{explain()}")
