"""A real Rook-managed Ceph cluster (e2e/harness/rook_cluster.py): Rook's operator v1.17 from
its own chart and a Ceph reef CephCluster (1 mon, 1 mgr, 2 bluestore OSDs on loop devices)
on the real control plane and kubelet, shared by every test of the session.

The node advertises NODE_CPUS CPUs (node_shape.CpuAdvertiser): the operator's pods are
Guaranteed whole CPUs (two 1-CPU OSD pods, a 1-CPU fio server, 1-CPU ceph Jobs), which a
2-CPU VM cannot schedule next to Rook otherwise; they run on its 2 real CPUs. Where
Debian's CNI plugins are installed the node also gets a pod network (node_shape.PodNetwork)
and turns Ready: Rook creates some pods without the host network (version detection after
an operator restart, pool cleanup).

Skipped, with the reason printed, only where the machine cannot run it (not root, no
containerd/Go/ceph CLI, package mirrors or the module proxy unreachable); a build of our own
files that fails, or a cluster that does not come up, fails. The operator tests
(test_operator_rook.py, first in file order) leave the cluster as they found it; the
bring-up tests' last test tears the stack down (a later test would open a new one).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
from harness.node_shape import cni_available
from harness.rook import RookUnavailable
from harness.rook_cluster import RookStack, open_rook_stack

TIMINGS: dict[str, float] = {}
NODE_CPUS = 8


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "rook: runs Rook's real operator and a real Ceph cluster on the real node (slow)"
    )


class SharedRook:
    """The session's Rook stack, opened on first use and again after a test closed it."""

    def __init__(self) -> None:
        self.stack: RookStack | None = None
        self.cni_missing = cni_available()

    def get(self) -> RookStack:
        if self.stack is None or self.stack.closed:
            if self.stack is not None:
                TIMINGS.update(self.stack.timings)
            try:
                self.stack = open_rook_stack(node_cpus=NODE_CPUS, cni=not self.cni_missing)
            except RookUnavailable as exc:
                print(f"\ntests/rook skipped: {exc}", file=sys.stderr)
                pytest.skip(str(exc))
        return self.stack

    def close(self) -> None:
        if self.stack is not None:
            try:
                if not self.stack.closed:
                    self.stack.close()
            finally:
                TIMINGS.update(self.stack.timings)


@pytest.fixture(scope="session")
def shared_rook() -> Iterator[SharedRook]:
    shared = SharedRook()
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def rook_stack(shared_rook: SharedRook) -> RookStack:
    return shared_rook.get()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("Rook on the real node")
        terminalreporter.write_line(json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
