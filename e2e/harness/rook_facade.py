"""One facade for a running Rook cluster: `Rook`. Its `RookSite` (harness.kind_rook.KindSite)
says how `ceph` reaches the cluster and which devices the CephCluster gets. Everything
else — Rook's chart, the CephCluster, readiness, reads, diagnostics — is this class (the
kind cluster's teardown removes it all), returning the API server's JSON (dicts).

    rook.ceph_json("osd", "tree"); rook.osd_pods()[0]["spec"]["nodeName"]
    rook.patch_cluster({"spec": {...}}); rook.wait_ready(600)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import kubernetes.client
import yaml

from harness.apply import server_side_apply
from harness.builds import ensure_helm
from harness.rook import RELEASE, config_override, rook_csi_crds, rook_install_args
from harness.waiting import pod_ready, wait_for

GROUP, VERSION, PLURAL = "ceph.rook.io", "v1", "cephclusters"

# Rook's operator log (capnslog, UTC): the start and the end of a CephCluster reconcile.
# The operator's "reconciling" and "done reconciling" lines: v1.17's logger is
# ceph-cluster-controller and names the namespace at the end (`... in namespace
# "rook-ceph"`); v1.20's is cluster-controller and prefixes it (pkg/util/log), the start
# with the cluster's name too (`[rook-ceph/my-cluster] reconciling ceph cluster`,
# `[rook-ceph] done reconciling ceph cluster`)
_RECONCILE_LOG = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) I \| (?:ceph-)?cluster-controller: "
    r"(?:\[(?P<ns_prefix>[^\]/]+)(?:/[^\]]*)?\] )?(?P<done>done )?reconciling ceph cluster"
    r"(?: in namespace \"(?P<ns>[^\"]+)\")?$",
    re.MULTILINE,
)


def reconcile_lines(log: str) -> list[tuple[str, str, bool]]:
    """(time, namespace, done) of each reconcile start and end in an operator's log."""
    return [(m["time"], m["ns"] or m["ns_prefix"] or "", bool(m["done"]))
            for m in _RECONCILE_LOG.finditer(log) if m["ns"] or m["ns_prefix"]]  # fmt: skip


def ceph_ready(status: dict[str, Any], pools: list[dict[str, Any]], osds: int) -> str:
    """'' when `ceph status` shows an active mgr and `osds` OSDs up and in, and every PG of
    every pool (`ceph osd pool ls detail`) is active+clean; else what is missing.
    HEALTH_OK alone comes too early, and so does a PG count read before the mgr has heard of
    a new pool's PGs: the count must match the pools'. The mgr creates the .mgr pool, so no
    pool at all means its modules are not working yet."""
    if not status.get("mgrmap", {}).get("available"):
        return "no active mgr"
    osdmap = status.get("osdmap", {})
    osdmap = osdmap.get("osdmap", osdmap)  # older Ceph releases nest it one level deeper
    counts = (osdmap.get("num_osds"), osdmap.get("num_up_osds"), osdmap.get("num_in_osds"))
    if counts != (osds, osds, osds):
        return f"OSDs total/up/in = {counts}, want {osds}"
    if not pools:
        return "no pool yet (the mgr creates .mgr)"
    want = sum(int(p["pg_num"]) for p in pools)
    pgmap = status.get("pgmap", {})
    states = {s["state_name"]: s["count"] for s in pgmap.get("pgs_by_state", [])}
    if pgmap.get("num_pgs") != want or states.get("active+clean", 0) != want:
        return f"PGs: want {want} active+clean, have {states}"
    return ""


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, dicts key by key (as a JSON merge patch, without null)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class RookSite(Protocol):
    """Where a Rook cluster runs: the only parts of it that differ between sites."""

    template: Path  # the CephCluster to start from (e2e/rook/ or e2e/kind/cephcluster.yaml)
    values: Path  # Rook's operator chart values

    def ceph(self, rook: Rook, args: Sequence[str], timeout: float) -> str:
        """`ceph ARGS` as client.admin; RuntimeError naming the failure."""
        ...

    def spec(self, rook: Rook) -> dict[str, Any]:
        """The CephCluster spec fields this site sets (its storage nodes and devices, ...)."""
        ...

    def extra_objects(self, rook: Rook) -> list[dict[str, Any]]:
        """More objects to apply with the CephCluster (a toolbox, ...)."""
        ...


@dataclass
class Rook:
    """Rook's operator and one CephCluster, on `site`; `api` talks to its API server."""

    site: RookSite
    api: kubernetes.client.ApiClient
    kubeconfig: Path
    workdir: Path  # helm's homes and Rook's chart
    osds: int
    image: str
    ceph_version: str  # the image's
    flavor: str = "classic"  # or "crimson": every OSD a crimson-osd
    # crimson's object store: bluestore (Rook's own, through alien threads) or cyanstore /
    # seastore, made by our image's ceph-osd from the mon db (e2e/rook/image/ceph-osd)
    store: str = "bluestore"
    namespace: str = "rook-ceph"
    name: str = "rook-ceph"
    poll_s: float = 2.0
    timings: dict[str, float] = field(default_factory=dict)
    settled_osd_restarts: int = 0  # OSDs settle_osds() restarted
    _changed_at: float = 0.0  # time.time() of the last change; 0: no reconcile tracking

    # ------------------------------------------------------------------ clients and tools

    @property
    def core(self) -> Any:  # Any: the client's models make every field Optional
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def custom(self) -> Any:
        return kubernetes.client.CustomObjectsApi(self.api)

    def helm(self, *args: str, timeout: float = 900) -> str:
        """The real helm against this cluster (its homes in workdir)."""
        home = self.workdir / "helm"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            **{f"HELM_{d.upper()}_HOME": str(home / d) for d in ("cache", "config", "data")},
        }
        proc = subprocess.run([str(ensure_helm()), *args], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args[:3])} failed: {proc.stderr.strip()[-3000:]}")
        return proc.stdout

    def ceph(self, *args: str, timeout: float = 90) -> str:
        return self.site.ceph(self, args, timeout)

    def ceph_json(self, *args: str, timeout: float = 90) -> Any:
        return json.loads(self.ceph(*args, "--format", "json", timeout=timeout))

    # ------------------------------------------------------------------ reads

    def cluster(self) -> dict[str, Any]:
        """The CephCluster object as the API server has it."""
        return dict(self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name))  # fmt: skip

    def patch_cluster(self, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of the CephCluster (a user's `kubectl patch --type merge`);
        wait_ready() then waits for Rook's reconcile of it (changed it another way? call
        mark_changed() first)."""
        before, changed_at = self.cluster()["metadata"]["generation"], self._changed_at
        self.mark_changed()
        out = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name, patch,
            _content_type="application/merge-patch+json")  # fmt: skip
        if out["metadata"]["generation"] == before:  # the spec did not change: Rook will
            self._changed_at = changed_at  # not reconcile, so there is nothing to wait for
        return dict(out)

    def _list(self, kind: str, selector: str = "") -> list[dict[str, Any]]:
        api = self.core if kind == "pod" else kubernetes.client.AppsV1Api(self.api)
        resp = getattr(api, f"list_namespaced_{kind}")(
            self.namespace, label_selector=selector, _preload_content=False)  # fmt: skip
        return list(json.loads(resp.data)["items"])

    def pods(self, selector: str = "") -> list[dict[str, Any]]:
        """The namespace's pods, those matching the label selector if one is given."""
        return self._list("pod", selector)

    def osd_pods(self) -> dict[int, dict[str, Any]]:
        """OSD id -> its current pod (not terminating)."""
        pods = self.pods("app=rook-ceph-osd")
        return {int(p["metadata"]["labels"]["ceph-osd-id"]): p for p in pods
                if not p["metadata"].get("deletionTimestamp")}  # fmt: skip

    def osd_nodes(self) -> dict[int, str]:
        """OSD id -> the node its pod is bound to ('' while unscheduled)."""
        return {i: p["spec"].get("nodeName", "") for i, p in sorted(self.osd_pods().items())}

    def osd_deployments(self) -> dict[int, dict[str, Any]]:
        """OSD id -> its Deployment."""
        return {int(d["metadata"]["labels"]["ceph-osd-id"]): d
                for d in self._list("deployment", "app=rook-ceph-osd")}  # fmt: skip

    def osd_ids(self) -> list[int]:
        return sorted(int(i) for i in self.ceph_json("osd", "ls"))

    # ------------------------------------------------------------------ readiness

    def mark_changed(self) -> None:
        """The CephCluster changes now: readiness waits for a reconcile that ends after it."""
        self._changed_at = time.time()

    def operator_log(self, since_seconds: int | None = None) -> str | None:
        """The running Rook operator's log (the last since_seconds), None without one."""
        pods = [p for p in self.pods("app=rook-ceph-operator") if pod_ready(p)]
        if not pods:
            return None
        name = pods[0]["metadata"]["name"]
        if since_seconds is None:
            return str(self.core.read_namespaced_pod_log(name, self.namespace))
        return str(self.core.read_namespaced_pod_log(name, self.namespace,
                                                     since_seconds=since_seconds))  # fmt: skip

    def reconcile_pending(self) -> str:
        """'' when Rook's operator has finished a CephCluster reconcile since the last change
        (mark_changed) and started none since; else what it is doing.

        Read from the operator's log, because Rook 1.17.8's CephCluster status cannot say:
        its status writers race (a stale cached copy written back), so observedGeneration
        vanishes and a finished reconcile's Progressing condition comes back, and the health
        checker sets phase Ready while a reconcile still runs (all seen here)."""
        log = self.operator_log(since_seconds=max(1, int(time.time() - self._changed_at) + 2))
        if log is None:
            return "no Rook operator running"
        started, done = 0.0, 0.0  # the last start and end after the change (a reconcile
        for time_text, namespace, ended in reconcile_lines(log):  # running before it ends
            stamp = dt.datetime.fromisoformat(time_text).replace(tzinfo=dt.UTC).timestamp()
            if namespace != self.namespace or stamp < self._changed_at - 1:  # after it too)
                continue
            if ended:
                done = stamp
            else:
                started = stamp
        if not started:
            return "Rook has not started a reconcile since the last change"
        return "Rook is reconciling the CephCluster" if done < started else ""

    def not_ready_reason(self) -> str:
        """'' when the CephCluster is Ready, Rook has reconciled its last change (when one
        was marked), Ceph itself is ready (ceph_ready) and every OSD pod is Ready; else the
        first thing missing."""
        status = self.cluster().get("status") or {}
        if status.get("phase") != "Ready":
            return f"CephCluster phase {status.get('phase')!r}: {status.get('message', '')}"
        reason = self.reconcile_pending() if self._changed_at else ""
        pools = [] if reason else self.ceph_json("osd", "pool", "ls", "detail")
        reason = reason or ceph_ready(self.ceph_json("status"), pools, self.osds)
        pods = {} if reason else self.osd_pods()
        if not reason and (len(pods) != self.osds or not all(map(pod_ready, pods.values()))):
            return f"OSD pods: {[(i, pod_ready(p)) for i, p in sorted(pods.items())]}"
        return reason

    def wait_ready(self, timeout: float) -> None:
        """Until not_ready_reason() is ''."""
        reason = ["not checked yet"]

        def ready() -> bool:
            reason[0] = self.not_ready_reason()
            return not reason[0]

        wait_for(ready, timeout, "CephCluster Ready", lambda: f"{reason[0]}\n{self.diagnostics()}",
                 interval=self.poll_s)  # fmt: skip

    def diagnostics(self, log_lines: int = 40) -> str:
        """The CephCluster's status, every pod in the namespace and the operator's log tail."""
        out = []
        with contextlib.suppress(Exception):
            out.append(f"CephCluster status: {json.dumps(self.cluster().get('status'))[:1500]}")
        with contextlib.suppress(Exception):
            for p in self.pods():
                st = p.get("status") or {}
                containers = st.get("initContainerStatuses", []) + st.get("containerStatuses", [])
                waiting = [f"{c['name']}: {c['state']['waiting'].get('reason')} "
                           f"{c['state']['waiting'].get('message', '')}"
                           for c in containers if "waiting" in (c.get("state") or {})]  # fmt: skip
                out.append(f"pod {p['metadata']['name']} on {p['spec'].get('nodeName')}: "
                           f"{st.get('phase')} {waiting}")  # fmt: skip
        with contextlib.suppress(Exception):
            for p in self.pods("app=rook-ceph-operator"):
                log = self.core.read_namespaced_pod_log(
                    p["metadata"]["name"], self.namespace, tail_lines=log_lines)  # fmt: skip
                out.append(f"--- operator log tail:\n{log}")
        return "\n".join(out)

    # ------------------------------------------------------------------ bring-up

    def install_operator(self, timeout: float) -> None:
        """Rook's own chart (csi.ceph.io's CRDs first where the release needs them), Ready."""
        crds = rook_csi_crds()
        if crds:  # server-side: operatorconfigs' schema is too large for an annotation
            server_side_apply(self.api, crds)
        self.helm(*rook_install_args(self.workdir / "chart", self.namespace, self.site.values,
                                     self.image))  # fmt: skip

        def operator_ready() -> bool:
            return any(pod_ready(p) for p in self.pods("app=rook-ceph-operator"))

        wait_for(operator_ready, timeout, "Rook operator Ready", self.diagnostics)

    def cluster_manifest(self) -> dict[str, Any]:
        """The site's CephCluster template with this cluster's image, store and devices."""
        doc: dict[str, Any] = yaml.safe_load(self.site.template.read_text())
        doc["metadata"].update(name=self.name, namespace=self.namespace)
        spec = doc["spec"]
        spec["cephVersion"]["image"] = self.image
        # Rook v1.17 supports reef and squid: tentacle runs there with allowUnsupported
        spec["cephVersion"]["allowUnsupported"] = not RELEASE.allows(self.ceph_version)
        doc["spec"] = spec = merged(spec, self.site.spec(self))
        if self.flavor == "crimson":
            # crimson-osd aborts unless its reactors are given, even to mkfs; one unpinned
            # reactor until a BenchmarkRun plans them (Rook provisions bluestore: alien threads)
            osd = spec["cephConfig"]["osd"] = {"crimson_seastar_num_threads": "1"}
            if self.store != "bluestore":  # before any OSD exists: each starts on it
                osd["crimson_osd_objectstore"] = self.store
            if self.store == "seastore":  # a file in the OSD's directory (seastore stalls
                osd["seastore_device_size"] = "4294967296"  # below 4Gi: SEASTORE_MIN_BYTES)
        return doc

    def create(self, operator_timeout: float, ready_timeout: float) -> None:
        """Rook's operator, then the CephCluster (and the site's extra objects), Ready."""
        t = time.monotonic()
        self.install_operator(operator_timeout)
        self.timings["rook_operator_s"] = time.monotonic() - t
        t = time.monotonic()
        server_side_apply(self.api, [config_override(self.namespace), self.cluster_manifest(),
                                     *self.site.extra_objects(self)])  # fmt: skip
        self.wait_ready(ready_timeout)
        self.timings["rook_cluster_ready_s"] = time.monotonic() - t

    def create_block_pool(self, name: str, size: int = 1, timeout: float = 300) -> None:
        """A CephBlockPool (Rook creates the Ceph pool, application rbd) of `size` replicas
        with the OSD as failure domain; returns once Rook says it is Ready."""
        server_side_apply(self.api, [{
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "CephBlockPool",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"failureDomain": "osd",
                     "replicated": {"size": size, "requireSafeReplicaSize": size > 1}},
        }])  # fmt: skip

        def ready() -> bool:
            pool = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "cephblockpools", name)  # fmt: skip
            return bool((pool.get("status") or {}).get("phase") == "Ready")

        wait_for(ready, timeout, f"CephBlockPool {name} Ready", self.diagnostics)

    def delete_block_pool(self, name: str, timeout: float = 300) -> None:
        """The CephBlockPool deleted and its Ceph pool gone: Rook removes the pool behind
        the object's finalizer, seconds later (never while it holds RBD images: the
        CephBlockPool then stays, PoolDeletionIsBlocked)."""
        self._delete("cephblockpools", name)
        wait_for(lambda: name not in self.ceph("osd", "pool", "ls").split(), timeout,
                 f"pool {name} removed with its CephBlockPool", self.diagnostics)  # fmt: skip

    def settle_osds(self, timeout: float) -> None:
        """Run Rook's second reconcile now, so that tests start from a steady state.

        Rook 1.17.8 restarts every raw-mode OSD once, on the first reconcile after it
        created them: the OSD Deployments lose their `device-type` label (the prepare Job
        reports the device type only for OSDs it creates), which changes their pod template.
        Without this, a test's first CephCluster change (even a cephConfig-only one)
        would restart every OSD. The change used to trigger it only matters to upgrades."""
        gens = {i: d["metadata"]["generation"] for i, d in self.osd_deployments().items()}
        minutes = self.cluster()["spec"].get("waitTimeoutForHealthyOSDInMinutes", 10)
        self.patch_cluster({"spec": {"waitTimeoutForHealthyOSDInMinutes": int(minutes) + 1}})
        self.wait_ready(timeout)
        self.settled_osd_restarts = sum(d["metadata"]["generation"] != gens.get(i)
                                        for i, d in self.osd_deployments().items())  # fmt: skip

    def _delete(self, plural: str, name: str) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name)  # fmt: skip
