"""What tests and the harness read and do on a running Rook cluster (RookCluster's methods
besides bring-up and teardown): API clients, the CephCluster, the `ceph` CLI as
client.admin, OSDs, pools, and readiness (`not_ready_reason`, `wait_ready`)."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes.client

from harness.controlplane import ControlPlane
from harness.helm import ensure_helm
from harness.waiting import pod_ready, wait_for

GROUP, VERSION, PLURAL = "ceph.rook.io", "v1", "cephclusters"

# Rook's operator log (capnslog, UTC): the start and the end of a CephCluster reconcile
_RECONCILE_LOG = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) I \| ceph-cluster-controller: "
    r"(?P<done>done )?reconciling ceph cluster in namespace \"(?P<ns>[^\"]+)\"$",
    re.MULTILINE,
)


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


class RookOps:
    """Mixed into RookCluster (which defines these attributes)."""

    cp: ControlPlane
    api: kubernetes.client.ApiClient
    dir: Path
    namespace: str
    name: str
    osds: int
    ready_timeout: float
    settled_osd_restarts: int
    _changed_at: float
    _helm_env: dict[str, str]

    # ------------------------------------------------------------------ clients

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    @property
    def data_dir(self) -> Path:
        """The CephCluster's dataDirHostPath (inside our temporary directory)."""
        return self.dir / "data"

    def cluster(self) -> dict[str, Any]:
        """The CephCluster object as the API server has it."""
        obj: Any = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name)  # fmt: skip
        return dict(obj)

    def patch_cluster(self, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of the CephCluster (what a user's `kubectl patch --type merge`
        does); returns the patched object. wait_ready() then waits for Rook's reconcile of
        it (change the CephCluster another way? call mark_changed() first)."""
        before, changed_at = self.cluster()["metadata"]["generation"], self._changed_at
        self.mark_changed()
        with self.cp.admin_api_client() as api:
            api.set_default_header("Content-Type", "application/merge-patch+json")
            out: Any = kubernetes.client.CustomObjectsApi(api).patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.name, patch
            )
        if out["metadata"]["generation"] == before:  # the spec did not change: Rook will
            self._changed_at = changed_at  # not reconcile, so there is nothing to wait for
        return dict(out)

    # ------------------------------------------------------------------ ceph

    def ceph(self, *args: str, timeout: float = 60) -> str:
        """Run the host's `ceph` CLI as client.admin against this cluster (the mon address
        and key come from Rook's rook-ceph-mon-endpoints ConfigMap and rook-ceph-mon Secret)."""
        conf = self._ceph_conf()
        proc = subprocess.run(
            ["ceph", "--conf", str(conf), "--connect-timeout", "20", *args],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"ceph {' '.join(args)} failed (rc={proc.returncode}): "
                               f"{proc.stderr.strip()[-1500:]}")  # fmt: skip
        return proc.stdout

    def ceph_json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self.ceph(*args, "--format", "json", timeout=timeout))

    def _ceph_conf(self) -> Path:
        conf = self.dir / "ceph.conf"
        keyring = self.dir / "ceph.client.admin.keyring"
        cm = self.core.read_namespaced_config_map("rook-ceph-mon-endpoints", self.namespace)
        # "a=192.0.2.2:6789,b=..." -> the addresses
        hosts = ",".join(e.split("=", 1)[1] for e in (cm.data or {})["data"].split(",") if e)
        text = f"[global]\nmon_host = {hosts}\nkeyring = {keyring}\nlog_file = /dev/null\n"
        if not conf.is_file() or conf.read_text() != text:
            secret = self.core.read_namespaced_secret("rook-ceph-mon", self.namespace)
            data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
            user = data["ceph-username"]
            keyring.write_text(f"[{user}]\n\tkey = {data['ceph-secret']}\n")
            keyring.chmod(0o600)
            conf.write_text(text + f"name = {user}\n")
        return conf

    # ------------------------------------------------------------------ what tests read

    def osd_ids(self) -> list[int]:
        return sorted(int(i) for i in self.ceph_json("osd", "ls"))

    def osd_deployments(self) -> dict[int, Any]:
        """OSD id -> its Deployment (V1Deployment)."""
        items: list[Any] = self.apps.list_namespaced_deployment(
            self.namespace, label_selector="app=rook-ceph-osd").items  # fmt: skip
        return {int(d.metadata.labels["ceph-osd-id"]): d for d in items}

    def osd_pods(self) -> dict[int, Any]:
        """OSD id -> its current pod (not terminating)."""
        return {int(p.metadata.labels["ceph-osd-id"]): p for p in self.pods("app=rook-ceph-osd")
                if p.metadata.deletion_timestamp is None}  # fmt: skip

    def create_block_pool(self, name: str, size: int = 1, timeout: float = 300) -> None:
        """A CephBlockPool (Rook creates the Ceph pool, application rbd) of `size` replicas
        with the OSD as failure domain (one host); returns once Rook says it is Ready."""
        self.cp.apply_yaml([{
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "CephBlockPool",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "failureDomain": "osd",
                "replicated": {"size": size, "requireSafeReplicaSize": size > 1},
            },
        }])  # fmt: skip

        def ready() -> bool:
            pool: Any = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "cephblockpools", name)  # fmt: skip
            return bool((pool.get("status") or {}).get("phase") == "Ready")

        wait_for(ready, timeout, f"CephBlockPool {name} Ready", self.diagnostics)

    def pods(self, selector: str = "") -> list[Any]:
        """The namespace's pods (V1Pod), those matching the label selector if one is given."""
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def mark_changed(self) -> None:
        """The CephCluster changes now: readiness waits for a reconcile that ends after it."""
        self._changed_at = time.time()

    def reconcile_pending(self) -> str:
        """'' when Rook's operator has finished a CephCluster reconcile since the last change
        (mark_changed) and started none since; else what it is doing.

        Read from the operator's log, because Rook 1.17.8's CephCluster status cannot say:
        its status writers race (a stale cached copy written back), so observedGeneration
        vanishes and a finished reconcile's Progressing condition comes back, and the health
        checker sets phase Ready while a reconcile still runs (all seen here)."""
        pods = [p for p in self.pods("app=rook-ceph-operator") if pod_ready(p)]
        if not pods:
            return "no Rook operator running"
        since = max(1, int(time.time() - self._changed_at) + 2)
        log = self.core.read_namespaced_pod_log(
            pods[0].metadata.name, self.namespace, since_seconds=since)  # fmt: skip
        started, done = 0.0, 0.0  # the last start and end after the change (a reconcile
        for match in _RECONCILE_LOG.finditer(log):  # running before it ends after it too)
            stamp = dt.datetime.fromisoformat(match["time"]).replace(tzinfo=dt.UTC).timestamp()
            if match["ns"] != self.namespace or stamp < self._changed_at - 1:
                continue
            if match["done"]:
                done = stamp
            else:
                started = stamp
        if not started:
            return "Rook has not started a reconcile since the last change"
        if done < started:
            return "Rook is reconciling the CephCluster"
        return ""

    def not_ready_reason(self) -> str:
        """'' when the CephCluster is Ready, Rook has reconciled its last change, and Ceph
        itself is ready (ceph_ready); else the first thing missing."""
        cluster = self.cluster()
        status = cluster.get("status") or {}
        if status.get("phase") != "Ready":
            return f"CephCluster phase {status.get('phase')!r}: {status.get('message', '')}"
        reconciling = self.reconcile_pending()
        if reconciling:
            return reconciling
        pools = self.ceph_json("osd", "pool", "ls", "detail")
        return ceph_ready(self.ceph_json("status"), pools, self.osds)

    def settle_osds(self) -> None:
        """Run Rook's second reconcile now, so that tests start from a steady state.

        Rook 1.17.8 restarts every raw-mode OSD once, on the first reconcile after it
        created them: the OSD Deployments lose their `device-type` label (the prepare Job
        reports the device type only for OSDs it creates), which changes their pod template.
        Without this, a test's first CephCluster change (even a cephConfig-only one)
        would restart every OSD. The change used to trigger it only matters to upgrades."""
        gens = {i: d.metadata.generation for i, d in self.osd_deployments().items()}
        minutes = self.cluster()["spec"].get("waitTimeoutForHealthyOSDInMinutes", 10)
        self.patch_cluster({"spec": {"waitTimeoutForHealthyOSDInMinutes": int(minutes) + 1}})
        self.wait_ready(self.ready_timeout)
        self.settled_osd_restarts = sum(
            d.metadata.generation != gens.get(i) for i, d in self.osd_deployments().items()
        )

    def wait_ready(self, timeout: float) -> None:
        """Until Rook has reconciled the CephCluster's current generation and Ceph is ready
        (not_ready_reason() is '')."""
        reason = ["not checked yet"]

        def ready() -> bool:
            reason[0] = self.not_ready_reason()
            return not reason[0]

        wait_for(ready, timeout, "CephCluster Ready", lambda: f"{reason[0]}\n{self.diagnostics()}")

    def diagnostics(self, log_lines: int = 30) -> str:
        """The CephCluster's status, every pod in the namespace and the operator's log tail."""
        out = []
        with contextlib.suppress(Exception):
            out.append(f"CephCluster status: {json.dumps(self.cluster().get('status'))[:1500]}")
        with contextlib.suppress(Exception):
            for p in self.pods():
                waiting = [
                    f"{c.name}: {c.state.waiting.reason} {c.state.waiting.message or ''}"
                    for c in (p.status.init_container_statuses or [])
                    + (p.status.container_statuses or [])
                    if c.state and c.state.waiting
                ]
                out.append(f"pod {p.metadata.name}: {p.status.phase} {waiting}")
        with contextlib.suppress(Exception):
            for p in self.pods("app=rook-ceph-operator"):
                log = self.core.read_namespaced_pod_log(
                    p.metadata.name, self.namespace, tail_lines=log_lines)  # fmt: skip
                out.append(f"--- operator log tail:\n{log}")
        return "\n".join(out)

    def helm(self, *args: str, timeout: float = 600) -> str:
        """Rook's chart is installed with the real helm, against this control plane."""
        if not self._helm_env:
            home = self.dir / "helm"
            self._helm_env = {
                **os.environ,
                "KUBECONFIG": str(self.cp.kubeconfig(self.dir / "admin.kubeconfig")),
                "HELM_CACHE_HOME": str(home / "cache"),
                "HELM_CONFIG_HOME": str(home / "config"),
                "HELM_DATA_HOME": str(home / "data"),
            }
        proc = subprocess.run(
            [str(ensure_helm()), *args], env=self._helm_env,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout
