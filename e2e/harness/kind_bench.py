"""The whole multi-node stack on kind, for the kind e2e and bench/bench_kind.py: a kind
cluster (1 control plane + 2 workers, e2e/harness/kind.py), Rook with one OSD per worker
(e2e/harness/kind_rook.py), our operator and fio images loaded into the nodes and our
operator installed from this repository's chart with the real helm.

    with kind_bench_stack() as s:
        s.kind.kubectl("apply", "-f", "run.yaml")
        s.rook.osd_nodes()

With monitoring=True, the real prometheus-operator and a Prometheus it runs come up beside
Rook (e2e/harness/monitoring.py, on the control-plane node), and our chart is installed with
its ServiceMonitor and PrometheusRule on (`BenchStack.monitoring`): that Prometheus scrapes
our operator because of them. Each BenchmarkRun of RUN_NS is then also fetched with
`crimsonbench fetch` as its steps finish (`monitoring.recorder`).

The workers' kubelets declare 4 CPUs (e2e/harness/kind_cpus.py says why) and the static
CPU manager is off; the pods still run on, and are pinned within, the machine's 2 CPUs.
Raises KindUnavailable where the machine cannot run it (for a skip); anything of ours that
breaks is an error. On exit: `kind delete cluster`, the loop devices released, the host
checked (AssertionError naming what was left).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crimsonbench.spec.api import GROUP, VERSION
from harness.builds import REPO, environmental
from harness.images import FIO_IMAGE, OPERATOR_IMAGE, ImagesUnavailable, product_archives
from harness.kind import KindCluster, KindUnavailable, kind_cluster
from harness.kind_rook import CLUSTER, NAMESPACE, kind_rook, new_loop_devices
from harness.monitoring import (
    Monitoring,
    MonitoringUnavailable,
    chart_values,
    install_monitoring,
)
from harness.rook import (
    CEPH_VERSION,
    CRIMSON_FIO_IMAGE,
    RELEASE_FIO_TAG,
    RookUnavailable,
    crimson_fio_archive,
    release_fio_archive,
)
from harness.rook_facade import Rook, merged
from harness.run_recorder import RunRecorder

OPERATOR_NS = "crimsonbench"
RUN_NS = "bench"
DECLARED_CPUS = 4
# every worker: its OSD on CPU 0, its fio client (server pod) on CPU 1
OSD_CPUS, CLIENT_CPUS = "0", "1"


def run_manifest(
    name: str,
    workers: Sequence[str],
    pool: str,
    iodepths: Sequence[int] = (1, 4),
    runtime: int = 3,
    ceph_config: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A classic bluestore BenchmarkRun on Rook's OSD of every worker, one fio client per
    worker (two images each): randread4k and randwrite4k over IODEPTHS, 1 s ramp."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": RUN_NS},
        "spec": {
            "target": {"rook": {"clusterName": CLUSTER, "namespace": NAMESPACE}},
            "osd": {
                "flavor": "classic",
                "objectStore": "bluestore",
                "count": len(workers),
                "cpuSet": OSD_CPUS,
                "cephConfig": dict(ceph_config or {}),
            },
            "client": {
                "nodes": list(workers),
                "cpuSet": CLIENT_CPUS,
                "pool": pool,
                "images": 2 * len(workers),
                "imageSize": "64Mi",
            },
            "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
            "sweep": {"iodepths": list(iodepths), "runtimeSeconds": runtime, "rampSeconds": 1},
        },
    }


def crimson_run_manifest(
    name: str,
    osd_node: str,
    client_node: str,
    pool: str,
    iodepths: Sequence[int] = (1, 4),
    runtime: int = 3,
) -> dict[str, Any]:
    """A crimson BenchmarkRun on the Rook OSD of OSD_NODE (bluestore through alien threads,
    the only store Rook provisions for crimson): its one reactor on CPU 0, its alien
    threads on CPU 1, fio on CLIENT_NODE's CPU 1. Two CPUs per node allow no more; the
    other worker's OSD serves the pool unplanned. randread4k and randwrite4k over IODEPTHS."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": RUN_NS},
        "spec": {
            "target": {
                "rook": {
                    "clusterName": CLUSTER,
                    "namespace": NAMESPACE,
                    "osdNodes": [osd_node],
                    "allowReprovision": True,
                }
            },
            "osd": {
                "flavor": "crimson",
                "objectStore": "bluestore",
                "count": 1,
                "reactors": 1,
                "cpuSet": OSD_CPUS,
                "alienCpuSet": CLIENT_CPUS,
                "alienThreads": 2,
            },
            "client": {
                "nodes": [client_node],
                "nodeCpuSets": {client_node: CLIENT_CPUS},
                "pool": pool,
                "images": 2,
                "imageSize": "64Mi",
            },
            "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
            "sweep": {"iodepths": list(iodepths), "runtimeSeconds": runtime, "rampSeconds": 1},
        },
    }


@dataclass
class BenchStack:
    kind: KindCluster
    rook: Rook
    timings: dict[str, float] = field(default_factory=dict)
    monitoring: Monitoring | None = None  # kind_bench_stack(monitoring=True)
    fio_tag: str = "dev"  # the fio image's tag the operator runs (the Ceph's own client)

    def operator_logs(self, lines: int = 60) -> str:
        return self.kind.kubectl("-n", OPERATOR_NS, "logs", "deploy/crimsonbench-operator",
                                 f"--tail={lines}", check=False)  # fmt: skip


def operator_values(tick_seconds: float = 1.0, fio_tag: str = "dev") -> dict[str, Any]:
    """Chart values for kind: our images, loaded into the nodes (never pulled)."""
    return {
        "image": {
            "repository": OPERATOR_IMAGE.rsplit(":", 1)[0],
            "tag": "dev",
            "pullPolicy": "Never",
        },  # fmt: skip
        "fio": {
            "image": {
                "repository": FIO_IMAGE.rsplit(":", 1)[0],
                "tag": fio_tag,
                "pullPolicy": "Never",
            }
        },  # fmt: skip
        "settings": {"tickSeconds": tick_seconds},
        # the runs of RUN_NS may target Rook's cluster (the chart's default: only its own)
        "targets": {
            "rook": [{"cephCluster": f"{NAMESPACE}/{CLUSTER}", "allowedNamespaces": [RUN_NS]}],
            "externalNamespaces": [],
        },
    }


def install_operator(kind: KindCluster, rook: Rook, values: dict[str, Any],
                     timeout: float = 600) -> None:  # fmt: skip
    """`helm install` of the repository's chart (with its CRDs) into OPERATOR_NS, Ready."""
    values_file = rook.workdir / "crimsonbench-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    # first: the chart's RBAC for the runs' namespaces (targets.rook allowedNamespaces) lives in it
    rook.core.create_namespace({"metadata": {"name": RUN_NS}})
    rook.helm("install", "crimsonbench", str(REPO), "--namespace", OPERATOR_NS,
              "--create-namespace", "-f", str(values_file), "--wait",
              "--timeout", f"{int(timeout)}s", timeout=timeout + 60)  # fmt: skip
    _rolled_out(kind, timeout)


def _rolled_out(kind: KindCluster, timeout: float) -> None:
    kind.kubectl("-n", OPERATOR_NS, "rollout", "status", "deploy/crimsonbench-operator",
                 f"--timeout={int(timeout)}s", timeout=timeout + 60)  # fmt: skip


def switch_fio_image(s: BenchStack, tag: str, timeout: float = 600) -> None:
    """The installed operator's fio image set to FIO_IMAGE's repository at TAG (its pod
    replaced, Ready again): runs after it use that image."""
    s.rook.helm("upgrade", "crimsonbench", str(REPO), "--namespace", OPERATOR_NS,
              "--reuse-values", "--set", f"fio.image.tag={tag}", "--wait",
              "--timeout", f"{int(timeout)}s", timeout=timeout + 60)  # fmt: skip
    _rolled_out(s.kind, timeout)


def _node_archives(flavor: str, crimson_ceph: bool) -> tuple[list[Path], str]:
    """Our images for the nodes (built, or cached: seconds) and the fio image's tag the
    operator runs; KindUnavailable where this machine cannot build one."""
    try:
        archives: list[Path] = list(product_archives())
    except ImagesUnavailable as exc:
        if environmental(exc):
            raise KindUnavailable(f"our images cannot be built here: {exc}") from exc
        raise
    if flavor == "crimson" or crimson_ceph:  # before any cluster: no build, a skip
        try:
            return [*archives, crimson_fio_archive()], CRIMSON_FIO_IMAGE.rsplit(":", 1)[1]
        except RookUnavailable as exc:
            raise KindUnavailable(f"no crimson Rook image: {exc}") from exc
    if RELEASE_FIO_TAG:  # the release's Ceph (20+) needs our fio on its own client
        try:
            release_fio = release_fio_archive()
        except RookUnavailable as exc:
            raise KindUnavailable(f"no fio image for Ceph {CEPH_VERSION}: {exc}") from exc
        if release_fio is not None:
            return [*archives, release_fio], RELEASE_FIO_TAG
    return archives, "dev"


@contextlib.contextmanager
def kind_bench_stack(declared_cpus: int = DECLARED_CPUS, tick_seconds: float = 1.0,
                     flavor: str = "classic", extra_archives: Sequence[Path] = (),
                     monitoring: bool = False, crimson_store: str = "bluestore",
                     crimson_ceph: bool = False) -> Iterator[BenchStack]:  # fmt: skip
    """extra_archives: more images for the nodes (e.g. another fio image to compare).
    monitoring: prometheus-operator and its Prometheus too, our chart's ServiceMonitor and
    PrometheusRule on (e2e/harness/monitoring.py). crimson_ceph (classic): the crimson
    build's Ceph with the classic ceph-osd (harness.kind_rook.kind_rook)."""
    loops = new_loop_devices()
    timings: dict[str, float] = {}
    try:
        t0 = time.monotonic()
        archives, fio_tag = _node_archives(flavor, crimson_ceph)
        timings["product_images_s"] = time.monotonic() - t0
        with kind_cluster(workers=2, cpu_manager=False, host_dev=False,
                          declared_cpus=declared_cpus) as k:  # fmt: skip
            timings.update(k.timings)
            t = time.monotonic()
            for archive in [*archives, *extra_archives]:
                k.load_image_archive(archive)
            timings["product_images_load_s"] = time.monotonic() - t
            mon = None
            if monitoring:  # applied now, comes up while Rook does
                try:
                    mon = install_monitoring(k)
                except MonitoringUnavailable as exc:
                    if environmental(exc):
                        raise KindUnavailable(f"no monitoring stack here: {exc}") from exc
                    raise
            try:
                with kind_rook(k, loops, flavor=flavor, store=crimson_store,
                               crimson_ceph=crimson_ceph) as rook:  # fmt: skip
                    timings.update(rook.timings)
                    values = operator_values(tick_seconds, fio_tag)
                    if mon is not None:
                        mon.wait_ready()
                        values = merged(values, chart_values())
                    t = time.monotonic()
                    install_operator(k, rook, values)
                    timings["operator_install_s"] = time.monotonic() - t
                    with contextlib.ExitStack() as stack:
                        if mon is not None:
                            mon.recorder = stack.enter_context(
                                RunRecorder(k, RUN_NS, loops.dir / "fetched")
                            )
                        try:
                            yield BenchStack(k, rook, timings, monitoring=mon, fio_tag=fio_tag)
                        finally:
                            if mon is not None:
                                timings.update(mon.timings)
                                timings.update(mon.cost())
            except RookUnavailable as exc:  # its image or binary cannot be built here
                raise KindUnavailable(f"Rook cannot be built here: {exc}") from exc
        timings.update(k.timings)  # delete_s
    finally:
        left = loops.release()
    if left:
        raise AssertionError("kind teardown left the host changed: " + json.dumps(left))
