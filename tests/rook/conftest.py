"""A real Rook-managed Ceph cluster (e2e/harness/rook_cluster.py): Rook's operator v1.17 from
its own chart and a Ceph reef CephCluster (1 mon, 1 mgr, 2 bluestore OSDs on loop devices)
on the real control plane and kubelet, once per session.

Skipped, with the reason printed, only where the machine cannot run it (not root, no
containerd/Go/ceph CLI, package mirrors or the module proxy unreachable); a build of our own
files that fails, or a cluster that does not come up, fails.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
from harness.rook import RookUnavailable
from harness.rook_cluster import RookStack, open_rook_stack

TIMINGS: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "rook: runs Rook's real operator and a real Ceph cluster on the real node (slow)"
    )


@pytest.fixture(scope="session")
def rook_stack() -> Iterator[RookStack]:
    try:
        stack = open_rook_stack()
    except RookUnavailable as exc:
        print(f"\ntests/rook skipped: {exc}", file=sys.stderr)
        pytest.skip(str(exc))
    try:
        yield stack
    finally:
        if not stack.closed:
            stack.close()
        TIMINGS.update(stack.timings)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("Rook on the real node")
        terminalreporter.write_line(json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
