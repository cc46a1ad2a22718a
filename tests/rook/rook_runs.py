"""Helpers of tests/rook/test_operator_rook.py (and bench/bench_rook.py): BenchmarkRuns
against the live Rook cluster, what is watched from outside while they run, and what
"the cluster is as it was" means, checked against Rook, Ceph and the API."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
from fio_processes import FioProcesses
from harness.operator_install import GROUP, PLURAL, RUN_NS, VERSION, OperatorOnNode
from harness.rook_cluster import HostSite
from harness.rook_facade import Rook
from harness.waiting import pod_ready
from polling import poll_until

LABEL_RUN, LABEL_ROLE = f"{GROUP}/run", f"{GROUP}/role"
# Runtime options the OSDs read from the mon (no restart), left alone by reef's mClock
# scheduler, and unlike the bring-up tests' osd_op_complaint_time.
KEYS = {"osd_op_history_size": "40", "osd_op_log_threshold": "7"}
PLANNED = {"cpu": "1", "memory": "8Gi"}  # one classic OSD on one CPU: plan/resources.py


def run_body(name: str, pool: str, **spec: Any) -> dict[str, Any]:
    """A classic bluestore run on osd.0 (CPU 0) with fio on CPU 1 of node localhost:
    2 workloads x 2 iodepths, 3 s + 1 s ramp per step. spec: sections replaced whole."""
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": RUN_NS},
        "spec": {
            "target": {"rook": {"clusterName": "rook-ceph", "osdIds": [0]}},
            "osd": {
                "flavor": "classic",
                "objectStore": "bluestore",
                "count": 1,
                "cpuSet": "0",
                "cephConfig": dict(KEYS),
            },
            "client": {
                "node": "localhost",
                "cpuSet": "1",
                "pool": pool,
                "images": 2,
                "imageSize": "64Mi",
            },
            "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
            "sweep": {"iodepths": [1, 4], "runtimeSeconds": 3, "rampSeconds": 1},
        },
    }
    body["spec"].update(spec)
    return body


@dataclass
class RookBench:
    """The live Rook cluster with our operator on the same node."""

    rook: Rook
    site: HostSite  # the real node's parts: its control plane, node, ceph.conf
    op: OperatorOnNode
    timings: dict[str, float] = field(default_factory=dict)

    # ------------------------------------------------------------------ runs

    def create(self, body: dict[str, Any]) -> None:
        self.op.custom.create_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, body)

    def delete(self, name: str) -> None:
        self.op.custom.delete_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)

    def run(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(
                self.op.custom.get_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)
            )
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def status(self, name: str) -> dict[str, Any]:
        return dict((self.run(name) or {}).get("status") or {})

    def conditions(self, name: str) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in self.status(name).get("conditions") or []}

    def wait(self, what: str, probe: Callable[[], Any], timeout: float, run: str = "") -> Any:
        """Poll probe until truthy; AssertionError with the run's status, our operator's
        log and Rook's diagnostics otherwise."""

        def explain() -> str:
            status = json.dumps(self.status(run))[:3000] if run else ""
            return (f"status: {status}\n{self.op.operator_logs(40)[-5000:]}\n"
                    f"{self.rook.diagnostics()}")  # fmt: skip

        return poll_until(what, probe, timeout, explain, interval=0.5)

    def wait_finished(self, name: str, timeout: float = 1800) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            st = self.status(name)
            return st if st.get("phase") in ("Completed", "Failed") else None

        result: dict[str, Any] = self.wait(f"run {name} finished", done, timeout, name)
        return result

    # ------------------------------------------------------------------ the cluster

    def snapshot(self) -> dict[str, Any]:
        """What a run must leave as it was."""
        cluster = self.rook.cluster()
        return {
            "spec": cluster["spec"],
            "spec_json": json.dumps(cluster["spec"]),
            "cluster_generation": cluster["metadata"]["generation"],
            "osd_resources": self.osd_resources(),
            "pools": sorted(self.rook.ceph("osd", "pool", "ls").split()),
            "config": self.config_dump(),
            "deployments": {
                i: d["metadata"]["generation"] for i, d in self.rook.osd_deployments().items()
            },
        }

    def osd_resources(self) -> dict[int, dict[str, dict[str, str]]]:
        """OSD id -> requests/limits of the osd container of its running pod."""
        out = {}
        for osd_id, pod in self.rook.osd_pods().items():
            c = next(c for c in pod["spec"]["containers"] if c["name"] == "osd")
            out[osd_id] = {
                "requests": dict(c["resources"].get("requests") or {}),
                "limits": dict(c["resources"].get("limits") or {}),
            }
        return out

    def config_dump(self) -> list[tuple[str, str, str]]:
        return sorted(
            (e["section"], e["name"], str(e["value"]))
            for e in self.rook.ceph_json("config", "dump")
        )

    def config_get(self, who: str, key: str) -> str:
        return self.rook.ceph("config", "get", who, key).strip()

    def osds_ready(self) -> bool:
        pods = self.rook.osd_pods()
        return sorted(pods) == self.rook.osd_ids() and all(pod_ready(p) for p in pods.values())

    def cephx_user_key(self, user: str) -> str:
        """The key Rook made for a CephClient, from the Secret it writes (userKey)."""
        secret: Any = self.rook.core.read_namespaced_secret(
            f"rook-ceph-client-{user}", self.rook.namespace
        )
        return base64.b64decode(secret.data["userKey"]).decode()

    def rados_as(self, user: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`rados` as client.<user> with its key (and nothing of the admin's)."""
        keyring = self.site.dir / f"{user}.keyring"
        keyring.write_text(f"[client.{user}]\n\tkey = {key}\n")
        keyring.chmod(0o600)
        return subprocess.run(
            [
                "rados",
                "--conf",
                str(self.site.dir / "ceph.conf"),
                "--id",
                user,
                "--keyring",
                str(keyring),
                "--client_mount_timeout",  # rados has no --connect-timeout
                "20",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def run_objects(self, name: str) -> dict[str, list[str]]:
        """Every Job, pod and ConfigMap labelled with the run, per namespace, and the
        CephBlockPools/CephClients it made; empty lists left out."""
        sel = f"{LABEL_RUN}={name}"
        found: dict[str, list[str]] = {}
        for ns in (self.rook.namespace, RUN_NS, self.op.namespace):
            found[f"jobs/{ns}"] = [
                j.metadata.name
                for j in self.op.batch.list_namespaced_job(ns, label_selector=sel).items
            ]
            found[f"pods/{ns}"] = [
                p.metadata.name
                for p in self.op.core.list_namespaced_pod(ns, label_selector=sel).items
            ]
            found[f"configmaps/{ns}"] = [
                c.metadata.name
                for c in self.op.core.list_namespaced_config_map(ns, label_selector=sel).items
            ]
        for plural in ("cephblockpools", "cephclients"):
            items = self.op.custom.list_namespaced_custom_object(
                "ceph.rook.io", "v1", self.rook.namespace, plural, label_selector=sel
            )["items"]
            found[plural] = [o["metadata"]["name"] for o in items]
        return {k: sorted(v) for k, v in found.items() if v}

    def assert_restored(self, before: dict[str, Any], name: str, pool: str) -> None:
        """The cluster as `before` (snapshot()), nothing of run `name` left but the results
        ConfigMaps the run keeps while it exists."""
        cluster = self.rook.cluster()
        assert cluster["spec"] == before["spec"]
        assert json.dumps(cluster["spec"]) == before["spec_json"]  # byte for byte, key order too
        self.wait(
            "OSDs back with their resources and Ready",
            lambda: self.osds_ready() and self.osd_resources() == before["osd_resources"],
            900,
            name,
        )
        now = self.config_dump()
        leftover = [e for e in now if e[1] in KEYS]
        assert not leftover, f"run options left in the mon database: {leftover}"
        assert now == before["config"], sorted(set(now) ^ set(before["config"]))
        assert sorted(self.rook.ceph("osd", "pool", "ls").split()) == before["pools"]
        assert pool not in before["pools"]
        users = [e["entity"] for e in self.rook.ceph_json("auth", "ls")["auth_dump"]]
        assert f"client.{name}-fio" not in users, users
        records = (f"{name}-run", f"{name}-original-cephcluster")
        kept = sorted(
            c
            for c in self.run_objects(name).get(f"configmaps/{RUN_NS}", [])
            if c.startswith(f"{name}-results-") or c in records
        )
        assert self.run_objects(name) == ({f"configmaps/{RUN_NS}": kept} if kept else {})
        leases = (
            kubernetes.client.CoordinationV1Api(self.op.api)
            .list_namespaced_lease(self.op.namespace)
            .items
        )
        names = [le.metadata.name or "" for le in leases if le.metadata is not None]
        ours = [n for n in names if n.startswith("crimsonbench-")]
        assert ours == [], ours


class PodWatch:
    """Every pod of a run seen from outside, polled twice a second: job-name -> pod uids
    (the run's fio servers and driver each have one pod); and every fio process on this
    host (fio: a step whose fio client ran twice shows two)."""

    def __init__(self, bench: RookBench, run: str) -> None:
        self.bench, self.run = bench, run
        self.pods_by_job: dict[str, set[str]] = defaultdict(set)
        self.fio = FioProcesses()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PodWatch:
        self.fio.__enter__()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.fio.__exit__()

    def _poll(self) -> None:
        core = self.bench.op.core
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                pods = core.list_namespaced_pod(
                    self.bench.rook.namespace, label_selector=f"{LABEL_RUN}={self.run}"
                ).items
                for p in pods:
                    job = (p.metadata.labels or {}).get("job-name")
                    if job:
                        self.pods_by_job[job].add(p.metadata.uid)
            time.sleep(0.5)


def kubeconfig(bench: RookBench, path: Path) -> Path:
    return bench.site.cp.kubeconfig(path)
