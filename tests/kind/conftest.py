"""kind clusters (1 control plane + 2 workers) from images built here (e2e/harness/kind.py),
one per test module, one after the other: `kind` (the static CPU manager, host /dev in the
workers) and `kind_rook` (Rook with an OSD on each worker and our operator:
e2e/harness/kind_bench.py). The first run builds everything (kind CLI, base image,
component images, node image); later runs reuse the cache.

Skipped, with the reason printed, only where the machine cannot run it (not root, no Go,
package mirror or module proxy unreachable); a build of our own files that fails, or a
cluster that does not come up, fails. The teardown asserts the host is as it was.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

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
def kind() -> Iterator[KindCluster]:
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


def _bench_stack(
    flavor: str, what: str, prefix: str, monitoring: bool = False, crimson_store: str = "bluestore"
) -> Iterator[BenchStack]:
    """kind_bench_stack(flavor) as a fixture: skipped (the reason printed) where the machine
    cannot run it; on exit the cluster deleted, the host checked, the timings kept."""
    ctx = kind_bench_stack(flavor=flavor, monitoring=monitoring, crimson_store=crimson_store)
    try:
        s = ctx.__enter__()
    except KindUnavailable as exc:
        print(f"\ntests/kind ({what}) skipped: {exc}", file=sys.stderr)
        pytest.skip(f"kind + {what} cannot run here: {exc}")
    try:
        yield s
    finally:
        try:
            ctx.__exit__(None, None, None)  # kind delete cluster; the host checked
        finally:
            TIMINGS.update({f"{prefix}_{k}": v for k, v in s.timings.items()})


@pytest.fixture(scope="module")
def kind_rook() -> Iterator[BenchStack]:
    """kind with Rook (one OSD per worker) and our operator (e2e/harness/kind_bench.py),
    and the monitoring chain users run: prometheus-operator's Prometheus scraping our
    operator through the chart's ServiceMonitor, with its PrometheusRule
    (e2e/harness/monitoring.py; checks: tests/kind/monitoring_checks.py)."""
    yield from _bench_stack("classic", "Rook", "rook_stack", monitoring=True)


@pytest.fixture(scope="module")
def kind_rook_crimson() -> Iterator[BenchStack]:
    """kind with Rook running crimson OSDs (our crimson Rook image, one bluestore OSD per
    worker) and our operator with a fio image on the same Ceph. Skipped, with the reason
    and the build command printed, where the crimson Ceph root is not built (1-2 h)."""
    yield from _bench_stack("crimson", "Rook + crimson", "crimson_stack")


@pytest.fixture(scope="module", params=["cyanstore", "seastore"])
def store_stack(request: pytest.FixtureRequest) -> Iterator[BenchStack]:
    """kind with Rook running crimson OSDs on crimson's own store, cyanstore then seastore
    (our crimson Rook image's ceph-osd makes it from the mon db;
    tests/kind/test_kind_rook_crimson_stores.py). Skipped as kind_rook_crimson is."""
    store = str(request.param)
    yield from _bench_stack("crimson", f"Rook + crimson {store}", f"{store}_stack",
                            crimson_store=store)  # fmt: skip


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("kind")
        terminalreporter.write_line(json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
