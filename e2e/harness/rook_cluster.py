"""A real Rook-managed Ceph cluster on the real-node harness: Rook's operator v1.17 from
Rook's own Helm chart, running our Rook + Ceph reef image (e2e/rook/build-image.sh), and a
CephCluster with 1 mon, 1 mgr and one bluestore OSD per loop device.

    with rook_stack() as rook:          # control plane + node + Rook, Ready
        rook.ceph_json("status")
        rook.patch_cluster({"spec": {"cephConfig": {"osd.0": {"osd_op_complaint_time": "45"}}}})
        rook.wait_ready(600)            # that generation reconciled, Ceph ready again

or, on a ControlPlane(scheduler=True) and a Node of your own: `with RookCluster(cp, node)`.

What a node without CNI and registry needs (see e2e/rook/*.yaml for the values):
- every pod on the host network (`network.provider: host`, ROOK_ENFORCE_HOST_NETWORK), the
  not-ready taint tolerated (operator and placement.all), OSDs created on a not-ready node
  (`storage.scheduleAlways`);
- Rook's pods dial the `kubernetes` Service IP and there is no kube-proxy: one iptables NAT
  rule (OUTPUT, DNAT to the API server on 127.0.0.1) stands in for it while Rook runs;
- loop devices listed by name (Rook skips them under useAllDevices), ROOK_CEPH_ALLOW_LOOP_DEVICES,
  >= 5 GiB each (ceph-volume's floor), /run/udev present on the host (OSD pods mount it).

Ready means: CephCluster phase Ready with its current generation reconciled, an active mgr,
every OSD up and in, every PG active+clean. Bring-up then runs Rook's second reconcile
(settle_osds: Rook restarts raw-mode OSDs once, on that one), so tests start steady.

Teardown deletes Rook's objects (dependents first: Rook keeps a CephCluster that has any),
the operator and the namespace, wipes and detaches the loop devices, removes the NAT rule,
the data directory and whatever else Rook put on the host, and checks host_state() and
`iptables-save` are what they were at the start.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import kubernetes.client
import yaml

from harness.controlplane import (
    NODE_NAME,
    BinariesUnavailable,
    ControlPlane,
    NotReadyError,
    ensure_binaries,
    environmental,
)
from harness.helm import ensure_helm
from harness.images import ImagesUnavailable, pause_archive
from harness.node import Node, host_state
from harness.rook import (
    REPO,
    ROOK_IMAGE,
    RookUnavailable,
    rook_chart,
    rook_image_archive,
)

NAMESPACE = "rook-ceph"
CLUSTER = "rook-ceph"
GROUP, VERSION, PLURAL = "ceph.rook.io", "v1", "cephclusters"
VALUES = REPO / "e2e" / "rook" / "operator-values.yaml"
CLUSTER_TEMPLATE = REPO / "e2e" / "rook" / "cephcluster.yaml"
NAT_COMMENT = "crimsonbench-rook: kubernetes Service -> API server"
GIB = 1 << 30

T = TypeVar("T")
# Rook's operator log (capnslog, UTC): the start and the end of a CephCluster reconcile
_RECONCILE_LOG = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) I \| ceph-cluster-controller: "
    r"(?P<done>done )?reconciling ceph cluster in namespace \"(?P<ns>[^\"]+)\"$",
    re.MULTILINE,
)


def prerequisites() -> str:
    """'' when this machine can run Rook on the real node, else why not (for a skip)."""
    if os.geteuid() != 0:
        return "not root: a kubelet, containerd and loop devices need root"
    tools = ("containerd", "ctr", "runc", "go", "losetup", "iptables", "iptables-save", "ceph")
    missing = [b for b in tools if shutil.which(b) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/setup.sh installs them)"
    return ""


def iptables_rules() -> list[str]:
    """The user chains and rules of every table, IPv4 and IPv6, as `iptables-save` prints
    them minus counters: "<cmd> <table> <line>". Built-in chains with the ACCEPT policy
    are left out, so an empty table equals no table (iptables-nft creates tables on first
    use, and nothing removes them)."""
    rules = []
    for cmd in ("iptables-save", "ip6tables-save"):
        if shutil.which(cmd) is None:
            continue
        out = subprocess.run([cmd], capture_output=True, text=True, check=True, timeout=60)
        table = ""
        for line in out.stdout.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif line.startswith(":"):  # ":CHAIN POLICY [packets:bytes]"
                chain, policy = line[1:].split()[:2]
                if policy != "ACCEPT":
                    rules.append(f"{cmd} {table} :{chain} {policy}")
            elif line.startswith("-"):
                rules.append(f"{cmd} {table} {line}")
    return rules


def remove_kubelet_chains(before: list[str]) -> None:
    """Remove the KUBE-* chains (and the jumps to them) a kubelet created since `before`
    (iptables_rules()): KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT outlive it.
    Call it once the kubelet is stopped (it re-creates them while it runs)."""
    now = iptables_rules()
    added = [r for r in now if r not in before]
    new_chains = {(r.split()[0], r.split()[1], r.split()[2][1:]) for r in added
                  if r.split()[2].startswith(":KUBE-")}  # fmt: skip
    for rule in added:  # jumps into a new chain, from any chain
        cmd, table, line = rule.split(" ", 2)
        argv = shlex.split(line)
        if argv[0] == "-A" and "-j" in argv:
            target = argv[argv.index("-j") + 1]
            if (cmd, table, target) in new_chains:
                iptables = cmd.replace("-save", "")
                subprocess.run([iptables, "-t", table, "-D", *argv[1:]], check=True, timeout=60)
    for cmd, table, chain in sorted(new_chains):
        iptables = cmd.replace("-save", "")
        subprocess.run([iptables, "-t", table, "-F", chain], check=True, timeout=60)
        subprocess.run([iptables, "-t", table, "-X", chain], check=True, timeout=60)


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


def wait_for(probe: Callable[[], T | None], timeout: float, what: str,
             explain: Callable[[], str] = lambda: "", interval: float = 2.0) -> T:  # fmt: skip
    """Poll `probe` until it returns something truthy (returned); NotReadyError otherwise,
    with `explain()` appended. Exceptions from the probe count as 'not yet'."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            value = probe()
            if value:
                return value
        except Exception as exc:  # not ready yet: the API or Ceph may not answer yet
            last = f"{type(exc).__name__}: {exc}"[:500]
        if time.monotonic() > deadline:
            raise NotReadyError(f"{what}: not after {timeout:.0f}s {last}\n{explain()}")
        time.sleep(interval)


def pod_ready(pod: Any) -> bool:
    """The pod's Ready condition is True."""
    conditions = (pod.status and pod.status.conditions) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _rook_host_state() -> dict[str, object]:
    """host_state() without the k8s.io cgroup roots: containerd keeps those while the node
    runs (Node.stop removes them); the pods' own cgroups below them are compared."""
    state = host_state()
    state["cgroups"] = [c for c in state["cgroups"] if not c.endswith("/k8s.io")]  # type: ignore[attr-defined]
    state["loop_devices"] = sorted(p.name for p in Path("/sys/block").glob("loop*")
                                   if (p / "loop" / "backing_file").exists())  # fmt: skip
    state["run_udev"] = os.path.lexists("/run/udev")
    return state


@dataclass
class RookCluster:
    """Rook's operator + a CephCluster on `node`. A context manager: `__enter__` brings it
    up and waits for Ready, `__exit__` tears it down and asserts the host is as before."""

    cp: ControlPlane
    node: Node
    image_archive: Path
    image: str = ROOK_IMAGE
    osds: int = 2
    osd_size_gib: int = 6  # ceph-volume refuses devices under 5 GiB
    namespace: str = NAMESPACE
    name: str = CLUSTER
    operator_timeout: float = 600.0
    ready_timeout: float = 1500.0
    settle: bool = True  # see settle_osds()
    keep_dir: bool = field(default_factory=lambda: os.environ.get("CRIMSONBENCH_KEEP_DIR") == "1")

    dir: Path = field(init=False)
    loops: list[str] = field(init=False, default_factory=list)  # /dev/loopN, one per OSD
    timings: dict[str, float] = field(init=False, default_factory=dict)
    api: kubernetes.client.ApiClient = field(init=False)
    teardown_problems: list[str] = field(init=False, default_factory=list)
    settled_osd_restarts: int = field(init=False, default=0)  # OSDs settle_osds() restarted
    _nat: list[str] = field(init=False, default_factory=list)
    _made_run_udev: bool = field(init=False, default=False)
    _before: dict[str, object] = field(init=False, default_factory=dict)
    _before_rules: list[str] = field(init=False, default_factory=list)
    _helm_env: dict[str, str] = field(init=False, default_factory=dict)
    _changed_at: float = field(init=False, default=0.0)  # time.time() of the last change

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> RookCluster:
        self.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop(check=exc_type is None)

    def start(self) -> None:
        self._before, self._before_rules = _rook_host_state(), iptables_rules()
        self.dir = Path(tempfile.mkdtemp(prefix="crimsonbench-rook-"))
        self.api = self.cp.admin_api_client()
        try:
            t0 = time.monotonic()
            self.node.import_image(self.image_archive)
            self.timings["image_import_s"] = time.monotonic() - t0
            self._prepare_host()
            t1 = time.monotonic()
            self._install_operator()
            self.timings["operator_ready_s"] = time.monotonic() - t1
            t2 = time.monotonic()
            self.mark_changed()
            self.cp.apply_yaml([self.cluster_manifest()])
            self.wait_ready(self.ready_timeout)
            self.timings["cluster_ready_s"] = time.monotonic() - t2
            if self.settle:
                t3 = time.monotonic()
                self.settle_osds()
                self.timings["settle_s"] = time.monotonic() - t3
                self.timings["settle_osd_restarts"] = self.settled_osd_restarts
        except BaseException:
            self.stop(check=False)
            raise

    def stop(self, check: bool = True) -> None:
        """Tear everything down (each step even if an earlier one failed); with check, raise
        AssertionError when the host differs from before or a step failed."""
        if not self._before:
            return
        t0 = time.monotonic()
        steps: list[tuple[str, Callable[[], None]]] = [
            ("delete Rook's objects, the CephCluster last", self._delete_rook_objects),
            ("uninstall the operator", self._uninstall_operator),
            ("delete the namespace", self._delete_namespace),
            ("wipe and detach the loop devices", self._release_loops),
            ("remove the NAT rule", self._remove_nat),
            ("restore the host", self._restore_host),
        ]
        for what, step in steps:
            try:
                step()
            except Exception as exc:
                self.teardown_problems.append(f"{what}: {type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            self.api.close()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.timings["teardown_s"] = time.monotonic() - t0
        after, rules = _rook_host_state(), iptables_rules()
        if after != self._before:
            self.teardown_problems.append(f"host state: before {self._before}, after {after}")
        if rules != self._before_rules:
            added = sorted(set(rules) - set(self._before_rules))
            gone = sorted(set(self._before_rules) - set(rules))
            self.teardown_problems.append(f"iptables: added {added}, removed {gone}")
        self._before = {}
        if check and self.teardown_problems:
            raise AssertionError("Rook teardown left things behind:\n" +
                                 "\n".join(self.teardown_problems))  # fmt: skip

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
            import base64

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

    # ------------------------------------------------------------------ bring-up steps

    def _prepare_host(self) -> None:
        self.data_dir.mkdir()
        # OSD pods mount /run/udev; containerd would create it (and leave it) if missing
        if not os.path.lexists("/run/udev"):
            os.makedirs("/run/udev")
            self._made_run_udev = True
        for i in range(self.osds):
            backing = self.dir / f"osd{i}.img"
            with open(backing, "wb") as f:
                f.truncate(self.osd_size_gib * GIB)  # sparse
            loop = subprocess.run(
                ["losetup", "--find", "--show", str(backing)],
                capture_output=True, text=True, check=True, timeout=60,
            ).stdout.strip()  # fmt: skip
            self.loops.append(loop)
        self._add_nat()

    def _add_nat(self) -> None:
        svc = self.core.read_namespaced_service("kubernetes", "default")
        assert svc.spec is not None and svc.spec.ports, svc  # the API server made it
        ip, port = svc.spec.cluster_ip, svc.spec.ports[0].port
        self._nat = [
            "OUTPUT", "-d", f"{ip}/32", "-p", "tcp", "--dport", str(port),
            "-m", "comment", "--comment", NAT_COMMENT,
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{self.cp.port}",
        ]  # fmt: skip
        subprocess.run(["iptables", "-t", "nat", "-I", *self._nat], check=True, timeout=60)

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

    def _install_operator(self) -> None:
        chart = rook_chart(self.dir / "chart")
        repo, tag = self.image.rsplit(":", 1)
        self.helm(
            "install", "rook-ceph", str(chart), "--namespace", self.namespace,
            "--create-namespace", "-f", str(VALUES),
            "--set", f"image.repository={repo}", "--set", f"image.tag={tag}",
        )  # fmt: skip

        def operator_ready() -> bool:
            return any(pod_ready(p) for p in self.pods("app=rook-ceph-operator"))

        wait_for(operator_ready, self.operator_timeout, "Rook operator Ready", self.diagnostics)

    def cluster_manifest(self) -> dict[str, Any]:
        """e2e/rook/cephcluster.yaml with this run's image, data directory and devices."""
        doc: dict[str, Any] = yaml.safe_load(CLUSTER_TEMPLATE.read_text())
        doc["metadata"].update(name=self.name, namespace=self.namespace)
        spec = doc["spec"]
        spec["cephVersion"]["image"] = self.image
        spec["dataDirHostPath"] = str(self.data_dir)
        spec["storage"]["nodes"] = [
            {"name": NODE_NAME, "devices": [{"name": Path(d).name} for d in self.loops]}
        ]
        return doc

    # ------------------------------------------------------------------ teardown steps

    def _rook_objects(self) -> list[tuple[str, str]]:
        """(plural, name) of every ceph.rook.io object in the namespace, CephCluster last."""
        found = []
        resources: Any = self.custom.get_api_resources(GROUP, VERSION)
        for r in resources.resources:
            if "/" in r.name or not r.namespaced or "delete" not in (r.verbs or []):
                continue
            items: Any = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, r.name)  # fmt: skip
            found += [(r.name, o["metadata"]["name"]) for o in items["items"]]
        return sorted(found, key=lambda o: o[0] == PLURAL)

    def _delete_custom(self, plural: str, name: str) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name)  # fmt: skip

    def _strip_finalizers(self, everything: bool = True) -> list[str]:
        """Drop the finalizers of Rook's CRs but the CephCluster (everything=False), or of
        all Rook put in the namespace (its CRs, and the ceph.rook.io/disaster-protection
        ones on the mon Secret and ConfigMap); returns what had them."""
        stripped = []
        with self.cp.admin_api_client() as api:
            api.set_default_header("Content-Type", "application/merge-patch+json")
            custom, core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
            unset = {"metadata": {"finalizers": None}}
            for plural, name in self._rook_objects():
                if everything or plural != PLURAL:
                    custom.patch_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, plural, name, unset)  # fmt: skip
                    stripped.append(f"{plural}/{name}")
            listed: list[tuple[str, Any, Any]] = [
                ("configmap", core.list_namespaced_config_map, core.patch_namespaced_config_map),
                ("secret", core.list_namespaced_secret, core.patch_namespaced_secret),
            ]
            for kind, lister, patcher in listed if everything else []:
                for obj in lister(self.namespace).items:
                    if obj.metadata.finalizers:
                        patcher(obj.metadata.name, self.namespace, unset)
                        stripped.append(f"{kind}/{obj.metadata.name}")
        return stripped

    def _delete_rook_objects(self) -> None:
        """Rook keeps a CephCluster that has dependents (CephBlockPool, CephClient, ...),
        and a CephBlockPool that holds RBD images: the dependents are deleted with their
        finalizers dropped (the whole cluster goes anyway), then the CephCluster, whose
        deletion the operator must finish (else its finalizers are dropped, and reported)."""
        dependents = [o for o in self._rook_objects() if o[0] != PLURAL]
        for plural, name in dependents:
            self._delete_custom(plural, name)
        if dependents:
            self._strip_finalizers(everything=False)
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.name)  # fmt: skip
        try:
            wait_for(lambda: not self._rook_objects(), 300, "Rook's objects deleted",
                     self.diagnostics)  # fmt: skip
        except NotReadyError as exc:
            stripped = self._strip_finalizers()
            self.teardown_problems.append(f"{str(exc)[:3000]}\n(finalizers dropped: {stripped})")

    def _uninstall_operator(self) -> None:
        if self._helm_env:
            self.helm("uninstall", "rook-ceph", "--namespace", self.namespace, "--wait",
                      "--timeout", "5m")  # fmt: skip

    def _delete_namespace(self) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.core.delete_namespace(self.namespace)

        def gone() -> bool:
            try:
                self.core.read_namespace(self.namespace)
            except kubernetes.client.ApiException as exc:
                return exc.status == 404
            return False

        # the pods go first: the OSDs hold the loop devices open until their containers end
        try:
            wait_for(gone, 300, f"namespace {self.namespace} deleted", self.diagnostics)
        except NotReadyError as exc:
            stripped = self._strip_finalizers()
            self.teardown_problems.append(f"{str(exc)[:3000]}\n(finalizers dropped: {stripped})")
            wait_for(gone, 120, f"namespace {self.namespace} deleted", self.diagnostics)

    def _release_loops(self) -> None:
        for loop in self.loops:
            subprocess.run(["wipefs", "--all", "--force", loop], capture_output=True,
                           check=False, timeout=60)  # fmt: skip
            subprocess.run(["losetup", "--detach", loop], capture_output=True, check=True,
                           timeout=60)  # fmt: skip
        self.loops.clear()

    def _remove_nat(self) -> None:
        if self._nat:
            subprocess.run(["iptables", "-t", "nat", "-D", *self._nat], check=True, timeout=60)
            self._nat = []

    def _restore_host(self) -> None:
        if self._made_run_udev:
            shutil.rmtree("/run/udev", ignore_errors=True)
            self._made_run_udev = False


# ---------------------------------------------------------------------- whole stack


@dataclass
class RookStack:
    """Control plane + node + Rook, closed once (close() raises if the host is not restored)."""

    rook: RookCluster
    timings: dict[str, float]
    _exit: contextlib.ExitStack
    _before: dict[str, object]
    _before_rules: list[str]
    closed: bool = False

    def close(self) -> None:
        """Everything down (once); AssertionError naming whatever was left behind."""
        if self.closed:
            return
        self.closed = True
        t0 = time.monotonic()
        problems = []
        try:
            self._exit.close()
        except Exception as exc:  # still restore and check the host below
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            remove_kubelet_chains(self._before_rules)  # belongs in Node.stop (see the report)
            self.timings["stack_teardown_s"] = time.monotonic() - t0
            self.timings.update(self.rook.timings)
        after, rules = host_state(), iptables_rules()
        if after != self._before:
            problems.append(f"host not restored: before {self._before}, after {after}")
        added = sorted(set(rules) - set(self._before_rules))
        gone = sorted(set(self._before_rules) - set(rules))
        if added or gone:
            problems.append(f"iptables not restored: added {added}, removed {gone}")
        if problems:
            raise AssertionError("\n".join(problems))


def open_rook_stack(**cluster_args: Any) -> RookStack:
    """Build (cached) and start everything; RookUnavailable where the machine cannot."""
    reason = prerequisites()
    if reason:
        raise RookUnavailable(reason)
    t0 = time.monotonic()
    try:
        bin_dir = ensure_binaries(extra=("kubelet",))
        ensure_helm()
        pause = pause_archive()
    except (BinariesUnavailable, ImagesUnavailable, RuntimeError) as exc:
        if environmental(exc):
            raise RookUnavailable(f"cannot build what the node needs here: {exc}") from exc
        raise  # a broken build script or package list: a failure, never a skip
    archive = rook_image_archive()
    timings = {"builds_s": time.monotonic() - t0}
    before, before_rules = host_state(), iptables_rules()
    exit_stack = contextlib.ExitStack()
    try:
        t1 = time.monotonic()
        cp = exit_stack.enter_context(ControlPlane(bin_dir=bin_dir, scheduler=True))
        node = exit_stack.enter_context(Node(cp, images=[pause]))
        timings["node_up_s"] = time.monotonic() - t1
        rook = exit_stack.enter_context(RookCluster(cp, node, archive, **cluster_args))
        timings.update(rook.timings)
    except BaseException:
        try:
            exit_stack.close()
        finally:
            remove_kubelet_chains(before_rules)
        raise
    return RookStack(rook, timings, exit_stack, before, before_rules)


@contextlib.contextmanager
def rook_stack(**cluster_args: Any) -> Iterator[RookCluster]:
    """`with rook_stack() as rook:` — everything up and Ready; on exit everything down and
    the host as it was (AssertionError otherwise)."""
    stack = open_rook_stack(**cluster_args)
    try:
        yield stack.rook
    finally:
        stack.close()
