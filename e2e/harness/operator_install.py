"""Our operator on the real node, installed from the repository's Helm chart as a user
installs it (`helm template` of ./, applied to the control plane): the BenchmarkRun CRD,
RBAC, the Deployment running our operator image, with our fio image for its Jobs. Images
come from e2e/build-images.sh (no registry) and are imported into the node's containerd.

    op = OperatorOnNode(cp, node)    # images imported, chart applied, operator Ready
    ...
    op.stop()                        # runs deleted (finalizers served), namespaces gone
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

from harness.builds import REPO, ensure_helm, environmental
from harness.controlplane import ControlPlane, NotReadyError, free_port
from harness.images import FIO_IMAGE, OPERATOR_IMAGE, product_archives
from harness.node import NOT_READY_TOLERATION, Node
from harness.waiting import wait_for

OPERATOR_NS = "crimsonbench"
RUN_NS = "bench"
GROUP, VERSION, PLURAL = "bench.crimson.ceph.io", "v1alpha1", "benchmarkruns"
OPERATOR_SELECTOR = "app.kubernetes.io/name=crimsonbench"


class StackUnavailable(RuntimeError):
    """This machine cannot run the stack; the message says why (for a skip)."""


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
            [str(helm_binary()), "template", "e2e", str(REPO), "-n", namespace,
             "-f", str(values_file)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    finally:
        values_file.unlink(missing_ok=True)
    return [d for d in yaml.safe_load_all(out) if d]


ROOK_TARGETS = [{"cephCluster": "rook-ceph/rook-ceph", "allowedNamespaces": [RUN_NS]}]


def operator_values(
    cp: ControlPlane,
    metrics_port: int,
    health_port: int,
    external_namespaces: Sequence[str] = (),
) -> dict[str, Any]:
    """Chart values for this node: our images (never pulled), the host network for the
    operator (the API server listens on loopback) and its Jobs (Ceph listens on the
    host's addresses; no pod network), the not-ready taint of a node without CNI
    tolerated, and what the runs of RUN_NS may target: Rook's cluster rook-ceph/rook-ceph,
    or with external_namespaces external clusters only (the chart makes Roles in those
    namespaces, so they must exist)."""
    rook = [] if external_namespaces else ROOK_TARGETS
    return {
        "targets": {"rook": rook, "externalNamespaces": list(external_namespaces)},
        "image": {"repository": OPERATOR_IMAGE.rsplit(":", 1)[0], "tag": "dev",
                  "pullPolicy": "Never"},
        "fio": {"image": {"repository": FIO_IMAGE.rsplit(":", 1)[0], "tag": "dev",
                          "pullPolicy": "Never"}},
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
    }  # fmt: skip


@dataclass
class OperatorOnNode:
    """Our operator from the chart on `node`; started by the constructor's caller with
    start(), stopped with stop() (both idempotent)."""

    cp: ControlPlane
    node: Node
    namespace: str = OPERATOR_NS
    run_namespace: str = RUN_NS
    ready_timeout: float = 300.0
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    external_namespaces: tuple[str, ...] = ()  # targets: external clusters only (these)
    import_images: bool = True  # False: the node already has our images
    timings: dict[str, float] = field(init=False, default_factory=dict)
    api: kubernetes.client.ApiClient = field(init=False)
    _started: bool = field(init=False, default=False)

    def start(self) -> None:
        t0 = time.monotonic()
        if self.import_images:
            archives = product_archives()  # ImagesUnavailable: the caller decides skip or fail
            self.timings["images_built_s"] = time.monotonic() - t0
            for archive in archives:
                self.node.import_image(archive)
            self.timings["images_imported_s"] = time.monotonic() - t0
        self.api = self.cp.admin_api_client()
        self._started = True
        for ns in (self.namespace, self.run_namespace, *self.external_namespaces):
            with contextlib.suppress(kubernetes.client.ApiException):  # 409: exists
                self.core.create_namespace({"metadata": {"name": ns}})
        self.cp.apply_yaml(REPO / "crds" / "benchmarkrun.yaml")
        values = operator_values(self.cp, self.metrics_port, self.health_port,
                                 self.external_namespaces)  # fmt: skip
        self.cp.apply_yaml(render_chart(values, self.namespace))
        self.wait_operator_ready(self.ready_timeout)
        self.timings["operator_ready_s"] = time.monotonic() - t0

    def stop(self, timeout: float = 900.0) -> list[str]:
        """Delete every BenchmarkRun while the operator still runs (its finalizer restores
        the cluster), then the namespaces; returns what did not go in time."""
        if not self._started:
            return []
        self._started = False
        problems: list[str] = []
        for run in self._runs():
            with contextlib.suppress(kubernetes.client.ApiException):
                name = run["metadata"]["name"]
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, self.run_namespace, PLURAL, name)  # fmt: skip
        try:
            wait_for(lambda: not self._runs(), timeout, "every BenchmarkRun deleted")
        except NotReadyError:
            problems.append(f"runs not deleted after {timeout:.0f}s: "
                            f"{[r['metadata']['name'] for r in self._runs()]}")  # fmt: skip
        for ns in (self.run_namespace, self.namespace):
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.delete_namespace(ns)
        self.api.close()
        return problems

    # ------------------------------------------------------------------ reads

    # Any: the client's models make every field Optional; tests read them as they come
    @property
    def core(self) -> Any:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def batch(self) -> Any:
        return kubernetes.client.BatchV1Api(self.api)

    @property
    def custom(self) -> Any:
        return kubernetes.client.CustomObjectsApi(self.api)

    def operator_pods(self) -> list[Any]:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=OPERATOR_SELECTOR)
        return [p for p in pods.items if p.metadata.deletion_timestamp is None]

    def _runs(self) -> list[dict[str, Any]]:
        runs = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.run_namespace, PLURAL)
        return list(runs["items"])

    def wait_operator_ready(self, timeout: float) -> Any:
        """The Ready operator pod; AssertionError with its log if it crashed."""

        def ready() -> Any:
            for pod in self.operator_pods():
                st, name = pod.status, pod.metadata.name
                if any(c.type == "Ready" and c.status == "True" for c in st.conditions or []):
                    return pod
                if any(c.restart_count for c in st.container_statuses or []):
                    # crashed: say why at once instead of waiting out the back-off
                    log = self.core.read_namespaced_pod_log(name, self.namespace, previous=True,
                                                            tail_lines=40)  # fmt: skip
                    raise AssertionError(f"operator container crashed; its log:\n{log}")
            return None

        return wait_for(ready, timeout, "operator Ready", lambda: self.node.log_tail("kubelet", 30),
                        interval=1)  # fmt: skip

    def operator_logs(self, lines: int = 30) -> str:
        out = ""
        for pod in self.operator_pods():
            with contextlib.suppress(kubernetes.client.ApiException):
                out += f"\n--- {pod.metadata.name}:\n" + self.core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, tail_lines=lines)  # fmt: skip
        return out
