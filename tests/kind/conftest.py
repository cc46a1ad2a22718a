"""kind clusters (1 control plane + 2 workers) from images built here (e2e/harness/kind.py),
one at a time (they share one name): `kind` (the static CPU manager, host /dev in the
workers) for test_kind_cluster.py, then the stacks of e2e/harness/kind_bench.py (Rook with
an OSD on each worker and our operator), each kept up for every module that asks for it
(`OneStack`). The first run builds everything (kind CLI, base image, component images,
node image); later runs reuse the cache.

Skipped, with the reason printed, only where the machine cannot run it (not root, no Go,
package mirror or module proxy unreachable); a build of our own files that fails, or a
cluster that does not come up, fails. The teardown asserts the host is as it was."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from harness.kind import KindCluster, KindUnavailable, kind_cluster
from harness.kind_bench import BenchStack, kind_bench_stack

TIMINGS: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kind: a real kind cluster from our own node image, in our own dockerd (root, slow)",
    )


@pytest.fixture(scope="module")  # gone before the next module's cluster
def kind(one_stack: OneStack) -> Iterator[KindCluster]:
    one_stack.close()  # one cluster at a time
    # host /dev in the workers: loop devices attached later appear in them (Rook's OSDs)
    ctx = kind_cluster(workers=2, cpu_manager=True, host_dev=True)
    try:
        cluster = ctx.__enter__()
    except KindUnavailable as exc:
        print(f"\ntests/kind skipped: {exc}", file=sys.stderr)
        pytest.skip(f"kind cannot run here: {exc}")
    yield cluster
    try:
        ctx.__exit__(None, None, None)  # deletes the cluster, asserts the host is clean
    finally:
        TIMINGS.update(cluster.timings)


class OneStack:
    """The session's kind stack: every kind cluster here has the same name, so one at a
    time. A stack stays up across the modules that ask for the same one (the Rook cluster,
    fault and run modules share one: each bring-up costs minutes) and is deleted when
    another is asked for, and at the end. A stack that cannot run here is skipped, the
    reason printed, once: a later module asking for it skips at once."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.ctx: Any = None
        self.stack: BenchStack | None = None
        self.prefix = ""
        self.unavailable: dict[tuple[object, ...], str] = {}

    def get(self, what: str, prefix: str, **kwargs: Any) -> BenchStack:
        key = tuple(sorted(kwargs.items()))
        if key in self.unavailable:
            pytest.skip(self.unavailable[key])
        if key != self.key:
            self.close()
            ctx = kind_bench_stack(**kwargs)
            try:
                self.stack = ctx.__enter__()
            except KindUnavailable as exc:
                print(f"\ntests/kind ({what}) skipped: {exc}", file=sys.stderr)
                self.unavailable[key] = f"kind + {what} cannot run here: {exc}"
                pytest.skip(self.unavailable[key])
            self.key, self.ctx, self.prefix = key, ctx, prefix
        assert self.stack is not None
        return self.stack

    def close(self) -> None:
        """kind delete cluster; the host checked (AssertionError naming what was left);
        the timings kept."""
        if self.ctx is None:
            return
        ctx, stack, self.ctx, self.key = self.ctx, self.stack, None, None
        try:
            ctx.__exit__(None, None, None)
        finally:
            assert stack is not None
            TIMINGS.update({f"{self.prefix}_{k}": v for k, v in stack.timings.items()})


@pytest.fixture(scope="session")
def one_stack() -> Iterator[OneStack]:
    holder = OneStack()
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture(scope="module")
def kind_rook(one_stack: OneStack) -> BenchStack:
    """kind with Rook (one OSD per worker) and our operator (e2e/harness/kind_bench.py),
    and the monitoring chain users run: prometheus-operator's Prometheus scraping our
    operator through the chart's ServiceMonitor, with its PrometheusRule
    (e2e/harness/monitoring.py; checks: tests/kind/monitoring_checks.py). Shared by
    test_kind_rook_cluster.py, test_kind_rook_faults.py and test_kind_rook_run.py, in that
    order: each leaves the cluster as it found it."""
    return one_stack.get("Rook", "rook_stack", flavor="classic", monitoring=True)


@pytest.fixture(scope="module")
def kind_rook_crimson(one_stack: OneStack) -> BenchStack:
    """kind with Rook running crimson OSDs (our crimson Rook image, one bluestore OSD per
    worker) and our operator with a fio image on the same Ceph. Skipped, with the reason
    and the build command printed, where the crimson Ceph root is not built (1-2 h)."""
    return one_stack.get("Rook + crimson", "crimson_stack", flavor="crimson")


@pytest.fixture(scope="module", params=["cyanstore", "seastore"])  # grouped by store
def store_stack(request: pytest.FixtureRequest, one_stack: OneStack) -> BenchStack:
    """kind with Rook running crimson OSDs on crimson's own store, cyanstore then seastore
    (our crimson Rook image's ceph-osd makes it from the mon db;
    tests/kind/test_kind_rook_crimson_stores.py). Skipped as kind_rook_crimson is."""
    store = str(request.param)
    return one_stack.get(f"Rook + crimson {store}", f"{store}_stack", flavor="crimson",
                         crimson_store=store)  # fmt: skip


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("kind")
        terminalreporter.write_line(json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
