"""The real-node e2e stack in one context manager, for the tests and the benchmark:
a real control plane, a real kubelet with containerd running our images (built from
./Dockerfile without a registry), the operator installed from our Helm chart as a
Deployment, and a real local Ceph cluster (local mode's code) as an external target.

    with e2e_stack() as s:   # raises StackUnavailable(reason) where the machine cannot
        s.custom.create_namespaced_custom_object(...)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client
from kubernetes.client import V1Namespace, V1ObjectMeta, V1Secret

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.plan.types import OsdCpus
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec
from harness.controlplane import (
    REPO,
    BinariesUnavailable,
    ControlPlane,
    ensure_binaries,
    environmental,
    free_port,
)
from harness.images import ImagesUnavailable, pause_archive, product_archives
from harness.node import Node, host_state
from harness.operator_install import (
    OPERATOR_NS,
    RUN_NS,
    StackUnavailable,
    operator_logs,
    operator_pods,
    operator_values,
    render_chart,
    wait_operator_ready,
)

__all__ = ["KEYRING_SECRET", "OPERATOR_NS", "POOL", "RUN_NS", "Stack", "StackUnavailable",
           "e2e_stack"]  # fmt: skip

POOL = "rbd"
KEYRING_SECRET = "ceph-keyring"


def prerequisites() -> str:
    """'' when the machine can run the stack, else why not."""
    if os.geteuid() != 0:
        return "not root: a kubelet and containerd need root"
    missing = [b for b in ("containerd", "ctr", "runc", "go") if shutil.which(b) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/setup.sh installs them)"
    if any(shutil.which(b) is None for b in ("ceph-mon", "ceph-osd", "ceph-mgr", "rbd")):
        return "Ceph packages not installed"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs 2 CPUs: one for the OSD, one for fio"
    return ""


@dataclass
class Stack:
    cp: ControlPlane
    node: Node
    ceph: LocalCluster
    api: kubernetes.client.ApiClient
    metrics_port: int
    health_port: int
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def batch(self) -> kubernetes.client.BatchV1Api:
        return kubernetes.client.BatchV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    def operator_pods(self) -> list[Any]:
        return operator_pods(self.core)

    def wait_operator_ready(self, timeout: float) -> Any:
        return wait_operator_ready(self.core, self.node, timeout)

    def operator_logs(self, lines: int = 30) -> str:
        return operator_logs(self.core, lines)


@contextlib.contextmanager
def e2e_stack(osd_cpu: int = 0) -> Iterator[Stack]:
    """Everything up and the operator Ready; on exit everything down and the host as it
    was (AssertionError otherwise). Raises StackUnavailable where the machine cannot."""
    reason = prerequisites()
    if reason:
        raise StackUnavailable(reason)
    t0 = time.monotonic()
    try:
        bin_dir = ensure_binaries(extra=("kubelet",))
        archives = [pause_archive(), *product_archives()]
    except (BinariesUnavailable, ImagesUnavailable) as exc:
        if environmental(exc):
            raise StackUnavailable(f"cannot build what the node needs here: {exc}") from exc
        raise  # a broken Dockerfile, package list or build script: a failure, never a skip
    timings = {"binaries_and_images_s": time.monotonic() - t0}
    before = host_state()
    osd = OsdSpec(flavor=Flavor.CLASSIC, object_store=ObjectStore.MEMSTORE, count=1)
    t1 = time.monotonic()
    with (
        ControlPlane(bin_dir=bin_dir, scheduler=True) as cp,
        Node(cp, images=archives) as node,
        LocalCluster(LocalTarget(), osd, [OsdCpus(osd_id=0, reactors=(osd_cpu,))]) as ceph,
        cp.admin_api_client() as api,
    ):
        ceph.create_pool(POOL, 8)
        s = Stack(cp, node, ceph, api, free_port(), free_port(), timings)
        _install_operator(s)
        timings["stack_up_s"] = time.monotonic() - t1
        timings.update({f"node_{k}_s": v for k, v in node.timings.items()})
        yield s
    # as the node saw it before releasing the machine's node lock (the next stack may start)
    after = node.final_host if node.final_host is not None else host_state()
    assert after == before, f"host not restored: before {before}, after {after}"


def _install_operator(s: Stack) -> None:
    for ns in (OPERATOR_NS, RUN_NS):
        s.core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=ns)))
    s.cp.apply_yaml(REPO / "crds" / "benchmarkrun.yaml")
    s.cp.apply_yaml(
        render_chart(operator_values(s.cp, s.metrics_port, s.health_port, (RUN_NS,)), OPERATOR_NS)
    )
    # the keyring of the external cluster, as a user would create it
    keyring = s.ceph.client_conf().keyring.read_text()
    secret = V1Secret(metadata=V1ObjectMeta(name=KEYRING_SECRET), string_data={"keyring": keyring})
    s.core.create_namespaced_secret(RUN_NS, secret)
    s.wait_operator_ready(timeout=180)
