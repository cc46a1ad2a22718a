"""Thin, synchronous Kubernetes I/O for the operator. Idempotent by name: creating an object
that exists returns the existing one, deleting a missing one is fine."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream

from crimsonbench.controller.decisions.node_room import OSD_APP
from crimsonbench.controller.decisions.observed import NodeInfo, OsdPod, PodRequests, PodState
from crimsonbench.controller.decisions.pod_requests import allocatable_of, pod_requests
from crimsonbench.controller.kube_errors import (
    Conflict,
    Gone,
    KubeError,
    Typed,
    Unavailable,
    refusal,
)
from crimsonbench.errors import ExecutionError

log = logging.getLogger(__name__)

ROOK_GROUP, ROOK_VERSION = "ceph.rook.io", "v1"


def _unless_gone(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any | None:
    """call(*args, **kwargs), or None when its object is not there: reads of what may not
    exist yet, deletes of what may be gone already."""
    try:
        return call(*args, **kwargs)
    except Gone:
        return None


class Kube:
    """The operator's one door to the API: every call's refusal comes out as a
    kube_errors.KubeError (Forbidden, Gone, Conflict, Invalid, Unavailable)."""

    def __init__(self, api: client.ApiClient) -> None:
        # Typed as Any on purpose: the client's models make every field Optional and its
        # create/replace methods accept plain dicts, which is what our builders return.
        self.api: Any = api
        self.core: Any = Typed(client.CoreV1Api(api))
        self.batch: Any = Typed(client.BatchV1Api(api))
        self.custom: Any = Typed(client.CustomObjectsApi(api))
        self.coord: Any = Typed(client.CoordinationV1Api(api))
        self.net: Any = Typed(client.NetworkingV1Api(api))

    # ------------------------------------------------------------ Rook
    def get_cephcluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get_custom(namespace, "cephclusters", name)

    def merge_patch_cephcluster(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        # The kubernetes client picks merge-patch+json for a dict body on custom objects.
        self.custom.patch_namespaced_custom_object(
            ROOK_GROUP, ROOK_VERSION, namespace, "cephclusters", name, patch
        )

    def get_custom(self, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
        found = _unless_gone(
            self.custom.get_namespaced_custom_object,
            ROOK_GROUP, ROOK_VERSION, namespace, plural, name,
        )  # fmt: skip
        return None if found is None else dict(found)

    def ensure_custom(self, namespace: str, plural: str, body: dict[str, Any]) -> None:
        with contextlib.suppress(Conflict):  # there already
            self.custom.create_namespaced_custom_object(
                ROOK_GROUP, ROOK_VERSION, namespace, plural, body
            )

    def delete_custom(self, namespace: str, plural: str, name: str) -> None:
        _unless_gone(
            self.custom.delete_namespaced_custom_object,
            ROOK_GROUP, ROOK_VERSION, namespace, plural, name,
        )  # fmt: skip

    # ------------------------------------------------------------ ConfigMaps
    def get_configmap(self, namespace: str, name: str) -> dict[str, str] | None:
        cm = _unless_gone(self.core.read_namespaced_config_map, name, namespace)
        return None if cm is None else dict(cm.data or {})

    def configmap_page(
        self, namespace: str, selector: str, limit: int, token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the matching ConfigMaps as the server's JSON (a run's results are
        hundreds of MiB, never one response), and the continue token of the next (None:
        this was the last)."""
        resp = self.core.list_namespaced_config_map(
            namespace, label_selector=selector, limit=limit, _continue=token,
            _preload_content=False,
        )  # fmt: skip
        found = json.loads(resp.data)
        return list(found.get("items") or []), (found.get("metadata") or {}).get("continue") or None

    def read_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The whole ConfigMap as the server's JSON; None when it does not exist."""
        resp = _unless_gone(self.core.read_namespaced_config_map, name, namespace,
                            _preload_content=False)  # fmt: skip
        return None if resp is None else dict(json.loads(resp.data))

    def write_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        """Create it, or replace one with the body's owner (another's: refused, never adopted)."""
        try:
            self.core.create_namespaced_config_map(namespace, body)
            return
        except Conflict:
            pass  # there already
        name, owners = body["metadata"]["name"], body["metadata"].get("ownerReferences") or ()
        there = self.core.read_namespaced_config_map(name, namespace).metadata.owner_references
        if owners and not {o["uid"] for o in owners} & {o.uid for o in there or ()}:
            raise ExecutionError(f"ConfigMap {namespace}/{name} exists and is not this run's: "
                                 "rename or delete it, or give the run another name")  # fmt: skip
        self.core.replace_namespaced_config_map(name, namespace, body)

    def ensure_configmap(self, namespace: str, body: dict[str, Any]) -> dict[str, str]:
        """Create it, or return the data of the one already there (first write wins)."""
        try:
            self.core.create_namespaced_config_map(namespace, body)
            return dict(body.get("data") or {})
        except Conflict:
            pass  # there already
        existing = self.get_configmap(namespace, body["metadata"]["name"])
        return existing or {}

    def replace_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            self.core.replace_namespaced_config_map(name, namespace, body)
        except Gone:
            self.core.create_namespaced_config_map(namespace, body)

    def delete_configmap(self, namespace: str, name: str) -> None:
        _unless_gone(self.core.delete_namespaced_config_map, name, namespace)

    def configmap_annotations(self, namespace: str, name: str) -> dict[str, str] | None:
        """None when the ConfigMap does not exist."""
        cm = _unless_gone(self.core.read_namespaced_config_map, name, namespace)
        return None if cm is None else dict(cm.metadata.annotations or {})

    def pod_names(self, namespace: str, selector: str) -> list[str]:
        items = self.core.list_namespaced_pod(namespace, label_selector=selector).items
        return sorted(p.metadata.name for p in items)

    def exec_in_pod(
        self, namespace: str, pod: str, argv: list[str], timeout_s: float = 60
    ) -> tuple[int, str, str]:
        """Run argv in the pod's (first) container: (exit code, stdout, stderr).

        kubernetes.stream swaps its ApiClient's transport for the call, so each exec gets a
        client of its own: execs of several runs (a poll may wait up to a tick in the pod)
        go on at once, and never touch the client other threads use."""
        with client.ApiClient(self.api.configuration) as own:
            try:
                resp = stream(
                    client.CoreV1Api(own).connect_get_namespaced_pod_exec, pod, namespace,
                    command=argv, stdin=False, stdout=True, stderr=True, tty=False,
                    _preload_content=False, _request_timeout=timeout_s,
                )  # fmt: skip
            except ApiException as exc:  # a refused handshake: status 0, reason "... 403 ..."
                raise refusal(exc) from exc
            try:
                resp.run_forever(timeout=timeout_s)
                out, err = resp.read_stdout(), resp.read_stderr()
                rc = resp.returncode
            finally:
                resp.close()
        if rc is None:
            raise TimeoutError(f"exec in {namespace}/{pod} did not end within {timeout_s} s")
        return int(rc), out or "", err or ""

    # ------------------------------------------------------------ Jobs
    def ensure_job(self, namespace: str, body: dict[str, Any]) -> None:
        with contextlib.suppress(Conflict):  # there already
            self.batch.create_namespaced_job(namespace, body)

    def job_state(self, namespace: str, name: str) -> str:
        """missing | running | succeeded | failed"""
        job = _unless_gone(self.batch.read_namespaced_job_status, name, namespace)
        if job is None:
            return "missing"
        for cond in job.status.conditions or []:
            if cond.status == "True" and cond.type in ("Complete", "SuccessCriteriaMet"):
                return "succeeded"
            if cond.status == "True" and cond.type in ("Failed", "FailureTarget"):
                return "failed"
        return "running"

    def _newest_job_pod(self, namespace: str, name: str) -> Any | None:
        """The Job's newest pod (the one a retry or a restart made last); None when none."""
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
        return max(pods, key=lambda p: p.metadata.creation_timestamp) if pods else None

    def job_log(self, namespace: str, name: str, tail_lines: int | None = None) -> str:
        """The log of the Job's newest pod ('' when none): its last tail_lines lines."""
        pod = self._newest_job_pod(namespace, name)
        log = pod and self.core.read_namespaced_pod_log(pod.metadata.name, namespace,
                                                         tail_lines=tail_lines)  # fmt: skip
        return str(log or "")

    def failed_job_text(self, namespace: str, name: str, tail_chars: int = 1500) -> str:
        """What to tell of a failed Job: its log's tail, or when there is none, why its pod
        never ran (failed_job_cause). A pod that never ran has no log to read: no error."""
        try:
            log = self.job_log(namespace, name)
        except KubeError:
            log = ""
        if log:
            return log[-tail_chars:]
        why = self.failed_job_cause(namespace, name)
        return f"(empty: the pod never ran{': ' + why if why else ''})"

    def failed_job_cause(self, namespace: str, name: str) -> str:
        """Why a Job's pod never ran, as Kubernetes says it: the newest pod's phase, reason
        and message (the kubelet's admission, e.g. OutOfcpu; an image it cannot pull), else
        the Job's Failed condition (e.g. DeadlineExceeded); '' when neither says."""
        pod = self._newest_job_pod(namespace, name)
        if pod is not None:
            st = pod.status
            why = [f"pod {pod.metadata.name} {st.phase}", st.reason, st.message]
            for cs in st.container_statuses or []:
                waiting = cs.state.waiting if cs.state else None
                if waiting is not None and waiting.reason:
                    why.append(f"container {cs.name} {waiting.reason} {waiting.message or ''}")
            return ": ".join(w.strip() for w in why if w and w.strip())
        job = _unless_gone(self.batch.read_namespaced_job_status, name, namespace)
        if job is None:
            return "the Job is gone"
        for cond in job.status.conditions or []:
            if cond.type == "Failed" and cond.status == "True":
                return f"Job {cond.reason or 'Failed'}: {cond.message or ''}".strip(": ")
        return ""

    def delete_pod(self, namespace: str, name: str) -> None:
        """One pod by name (gone already: fine)."""
        _unless_gone(self.core.delete_namespaced_pod, name, namespace)

    def delete_job(self, namespace: str, name: str) -> None:
        """One Job by name, its pods with it (`job-name` labels only the pods, not Jobs)."""
        _unless_gone(self.batch.delete_namespaced_job, name, namespace,
                     propagation_policy="Background")  # fmt: skip

    def delete_jobs(self, namespace: str, selector: str) -> int:
        jobs = self.batch.list_namespaced_job(namespace, label_selector=selector).items
        for job in jobs:
            self.delete_job(namespace, job.metadata.name)
        return len(jobs)

    def job_pod(self, namespace: str, name: str) -> PodState:
        """The newest pod of a Job: phase, Ready, IP and node ("Missing" when none)."""
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        if not live:
            return PodState("Missing")
        pod = max(live, key=lambda p: p.metadata.creation_timestamp)
        conds = {c.type: c.status for c in (pod.status.conditions or [])}
        waiting = [
            cs.state.waiting.reason
            for cs in (pod.status.container_statuses or [])
            if cs.state is not None and cs.state.waiting is not None
        ]
        return PodState(
            name=pod.metadata.name,
            phase=str(pod.status.phase or "Pending"),
            ready=conds.get("Ready") == "True",
            ip=pod.status.pod_ip,
            node=pod.spec.node_name,
            reason=str(pod.status.reason or ", ".join(r for r in waiting if r) or ""),
        )

    def pod_metrics(self, namespace: str, selector: str) -> list[dict[str, Any]] | None:
        """metrics.k8s.io's PodMetrics of the matching pods; None when it is not served."""
        try:
            found = self.custom.list_namespaced_custom_object(
                "metrics.k8s.io", "v1beta1", namespace, "pods", label_selector=selector
            )
        except (Gone, Unavailable):  # metrics.k8s.io not served (no metrics-server)
            return None
        return list(found["items"])

    # ------------------------------------------------------------ NetworkPolicies
    def ensure_network_policy(self, namespace: str, body: dict[str, Any]) -> None:
        with contextlib.suppress(Conflict):  # there already
            self.net.create_namespaced_network_policy(namespace, body)

    def delete_network_policies(self, namespace: str, selector: str) -> int:
        found = self.net.list_namespaced_network_policy(namespace, label_selector=selector).items
        for policy in found:
            _unless_gone(self.net.delete_namespaced_network_policy, policy.metadata.name,
                         namespace)  # fmt: skip
        return len(found)

    # ------------------------------------------------------------ nodes and OSD pods
    def list_nodes(self) -> list[NodeInfo]:
        items = self.core.list_node().items
        return [NodeInfo(n.metadata.name, dict(n.metadata.labels or {}), allocatable_of(n))
                for n in items]  # fmt: skip

    def pods_on_node(self, node: str) -> list[PodRequests]:
        """What every pod on the node that the scheduler still counts requests (all
        namespaces: other workloads' pods share the node)."""
        found = self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
        ).items
        return [pod_requests(p) for p in found]

    def list_osd_pods(self, namespace: str) -> list[OsdPod]:
        """Rook's OSD pods (label app=rook-ceph-osd, ceph-osd-id=N)."""
        out = []
        items = self.core.list_namespaced_pod(namespace, label_selector=f"app={OSD_APP}").items
        for pod in items:
            osd_id = (pod.metadata.labels or {}).get("ceph-osd-id")
            if osd_id is None:
                continue
            main = next((c for c in pod.spec.containers if c.name == "osd"), pod.spec.containers[0])
            limits = (main.resources.limits or {}) if main.resources else {}
            conds = {c.type: c.status for c in (pod.status.conditions or [])}
            restarts = sum(
                cs.restart_count or 0
                for cs in (pod.status.container_statuses or [])
                if cs.name == main.name
            )
            out.append(
                OsdPod(
                    osd_id=int(osd_id),
                    node=pod.spec.node_name,
                    ready=conds.get("Ready") == "True",
                    cpu_limit=limits.get("cpu"),
                    memory_limit=limits.get("memory"),
                    terminating=pod.metadata.deletion_timestamp is not None,
                    uid=str(pod.metadata.uid or ""),
                    restarts=int(restarts),
                    name=str(pod.metadata.name or ""),
                    device_class=str((pod.metadata.labels or {}).get("device-class") or ""),
                )
            )
        return out

    # ------------------------------------------------------------ Leases (one run per cluster)
    def acquire_lease(self, namespace: str, name: str, holder: str) -> str:
        """Take the lease if free; returns the current holder (== holder when we have it)."""
        now = dt.datetime.now(dt.UTC)
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(
                name=name, namespace=namespace, labels={"app.kubernetes.io/name": "crimsonbench"}
            ),
            spec=client.V1LeaseSpec(holder_identity=holder, acquire_time=now),
        )
        try:
            self.coord.create_namespaced_lease(namespace, body)
            return holder
        except Conflict:
            pass  # there already
        lease = self.coord.read_namespaced_lease(name, namespace)
        return str(lease.spec.holder_identity or "")

    def take_over_lease(self, namespace: str, name: str, gone: str, holder: str) -> bool:
        """Give the lease held by `gone` (a run that no longer exists) to holder, only if
        nobody changed it since it was read (resourceVersion): False when someone did."""
        lease = _unless_gone(self.coord.read_namespaced_lease, name, namespace)
        if lease is None or lease.spec.holder_identity != gone:
            return False
        lease.spec.holder_identity = holder
        lease.spec.acquire_time = dt.datetime.now(dt.UTC)
        try:
            self.coord.replace_namespaced_lease(name, namespace, lease)
        except (Gone, Conflict):
            return False
        return True

    def release_lease(self, namespace: str, name: str, holder: str) -> None:
        lease = _unless_gone(self.coord.read_namespaced_lease, name, namespace)
        if lease is None:
            return
        if lease.spec.holder_identity == holder:
            self.coord.delete_namespaced_lease(name, namespace)

    def run_uid(self, group: str, version: str, plural: str, namespace: str,
                name: str) -> str | None:  # fmt: skip
        """The uid of a custom object (a BenchmarkRun), None when there is none."""
        found = _unless_gone(self.custom.get_namespaced_custom_object, group, version,
                             namespace, plural, name)  # fmt: skip
        return None if found is None else str((found.get("metadata") or {}).get("uid") or "")
