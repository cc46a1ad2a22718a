"""Shared helpers for tests that bring up real local clusters."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.procs import processes_mentioning

# test name -> timings of its clusters; printed at the end of the run (no -s needed)
TIMINGS: list[tuple[str, dict[str, float]]] = []


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Callable[[LocalCluster], None]:
    def _record(cluster: LocalCluster) -> None:
        TIMINGS.append((request.node.name, dict(cluster.timings)))

    return _record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS:
        return
    terminalreporter.section("local cluster timings (s)")
    for name, t in TIMINGS:
        cols = "  ".join(f"{k}={v:.1f}" for k, v in sorted(t.items()))
        terminalreporter.write_line(f"{name}: {cols}")


@pytest.fixture
def nothing_left() -> Callable[[Path, dict[str, int]], None]:
    return assert_nothing_left


def assert_nothing_left(root: Path, pids: dict[str, int]) -> None:
    """No daemon alive, no process naming the dir, no loop device on it, no dir."""
    alive = [name for name, pid in pids.items() if Path(f"/proc/{pid}").exists() and _ours(pid)]
    assert not alive, f"still running after teardown: {alive}"
    assert processes_mentioning(str(root)) == []
    loops = subprocess.run(["losetup", "--list", "--noheadings"], capture_output=True, text=True)
    assert str(root) not in loops.stdout, loops.stdout
    assert not root.exists(), f"{root} still exists: {list(root.iterdir())}"


def _ours(pid: int) -> bool:
    """A reused pid would belong to something else: only count Ceph daemons."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return "ceph-" in exe or "crimson-osd" in exe
