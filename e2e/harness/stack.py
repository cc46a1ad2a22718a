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
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

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
from harness.helm import ensure_helm
from harness.images import (
    FIO_IMAGE,
    OPERATOR_IMAGE,
    ImagesUnavailable,
    pause_archive,
    product_archives,
)
from harness.node import NOT_READY_TOLERATION, Node, host_state

OPERATOR_NS = "crimsonbench"
RUN_NS = "bench"
POOL = "rbd"
KEYRING_SECRET = "ceph-keyring"


class StackUnavailable(RuntimeError):
    """This machine cannot run the stack; the message says why (for a skip)."""


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


def helm_binary() -> Path:
    try:
        return ensure_helm()
    except RuntimeError as exc:
        if environmental(exc):
            raise StackUnavailable(f"helm cannot be built here: {str(exc)[-500:]}") from exc
        raise  # our build script or a pinned version is broken: a failure, never a skip


def render_chart(values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """`helm template` of the repository's chart (the same objects `helm install` creates)."""
    values_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"e2e-values-{os.getpid()}.yaml"
    values_file.write_text(yaml.safe_dump(values))
    try:
        out = subprocess.run(
            [
                str(helm_binary()),
                "template",
                "e2e",
                str(REPO),
                "-n",
                namespace,
                "-f",
                str(values_file),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        values_file.unlink(missing_ok=True)
    return [d for d in yaml.safe_load_all(out) if d]


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
        pods = self.core.list_namespaced_pod(
            OPERATOR_NS, label_selector="app.kubernetes.io/name=crimsonbench"
        ).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def wait_operator_ready(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pod in self.operator_pods():
                conds = {c.type: c.status for c in (pod.status.conditions or [])}
                if conds.get("Ready") == "True":
                    return pod
                crashed = [c for c in (pod.status.container_statuses or []) if c.restart_count]
                if crashed:  # say why at once instead of waiting out the back-off
                    log = self.core.read_namespaced_pod_log(
                        pod.metadata.name, OPERATOR_NS, previous=True, tail_lines=40
                    )
                    raise AssertionError(f"operator container crashed; its log:\n{log}")
            time.sleep(1)
        pods = [(p.metadata.name, p.status.phase) for p in self.operator_pods()]
        raise AssertionError(
            f"operator not Ready after {timeout}s: {pods}\n{self.node.log_tail('kubelet', 30)}"
        )

    def operator_logs(self, lines: int = 30) -> str:
        out = ""
        for pod in self.operator_pods():
            out += f"\n--- {pod.metadata.name}:\n" + self.core.read_namespaced_pod_log(
                pod.metadata.name, OPERATOR_NS, tail_lines=lines
            )
        return out


def operator_values(cp: ControlPlane, metrics_port: int, health_port: int) -> dict[str, Any]:
    """Chart values for this node: our images (never pulled), the host network for the
    operator (the API server listens on loopback) and its Jobs (Ceph listens on loopback),
    and the not-ready taint of a node without CNI tolerated."""
    return {
        "image": {
            "repository": OPERATOR_IMAGE.rsplit(":", 1)[0],
            "tag": "dev",
            "pullPolicy": "Never",
        },  # fmt: skip
        "fio": {
            "image": {
                "repository": FIO_IMAGE.rsplit(":", 1)[0],
                "tag": "dev",
                "pullPolicy": "Never",
            }
        },  # fmt: skip
        "hostNetwork": True,
        "tolerations": [NOT_READY_TOLERATION],
        "jobs": {"hostNetwork": True, "tolerations": [NOT_READY_TOLERATION]},
        "health": {"port": health_port},
        "metrics": {"port": metrics_port},
        "settings": {"tickSeconds": 1},
        # in-cluster config points at the `kubernetes` Service, which needs kube-proxy;
        # the API server is on loopback, as the host network sees it
        "extraEnv": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(cp.port)},
        ],
    }


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
    after = host_state()
    assert after == before, f"host not restored: before {before}, after {after}"


def _install_operator(s: Stack) -> None:
    for ns in (OPERATOR_NS, RUN_NS):
        s.core.create_namespace({"metadata": {"name": ns}})
    s.cp.apply_yaml(REPO / "crds" / "benchmarkrun.yaml")
    s.cp.apply_yaml(render_chart(operator_values(s.cp, s.metrics_port, s.health_port), OPERATOR_NS))
    # the keyring of the external cluster, as a user would create it
    keyring = s.ceph.client_conf().keyring.read_text()
    s.core.create_namespaced_secret(
        RUN_NS, {"metadata": {"name": KEYRING_SECRET}, "stringData": {"keyring": keyring}}
    )
    s.wait_operator_ready(timeout=180)
