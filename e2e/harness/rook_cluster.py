"""A real Rook-managed Ceph cluster on the real-node harness: Rook's operator
(harness.rook.ROOK_VERSION: v1.17.8 + Ceph reef 18.2.7 by default) from Rook's own Helm
chart, running our Rook + Ceph image (e2e/rook/build-image.sh), and a
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
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import kubernetes.client
import yaml

from harness.controlplane import (
    NODE_NAME,
    BinariesUnavailable,
    ControlPlane,
    ensure_binaries,
    environmental,
)
from harness.helm import ensure_helm
from harness.images import ImagesUnavailable, pause_archive
from harness.netfilter import iptables_rules, remove_kubelet_chains
from harness.node import POD_NETWORK_DIRS, Node, host_state
from harness.rook import (
    CEPH_VERSION,
    RELEASE,
    REPO,
    ROOK_IMAGE,
    RookUnavailable,
    config_override,
    rook_csi_crds,
    rook_image_archive,
    rook_install_args,
)
from harness.rook_ops import GROUP, PLURAL, VERSION, ceph_ready
from harness.rook_teardown import RookTeardown
from harness.waiting import pod_ready, wait_for

__all__ = [  # the harness's public API (tests import these from here)
    "GROUP", "PLURAL", "VERSION", "RookCluster", "RookStack", "ceph_ready", "iptables_rules",
    "open_rook_stack", "pod_ready", "prerequisites", "remove_kubelet_chains", "rook_stack",
    "wait_for",
]  # fmt: skip

NAMESPACE = "rook-ceph"
CLUSTER = "rook-ceph"
VALUES = REPO / "e2e" / "rook" / "operator-values.yaml"
CLUSTER_TEMPLATE = REPO / "e2e" / "rook" / "cephcluster.yaml"
NAT_COMMENT = "crimsonbench-rook: kubernetes Service -> API server"
GIB = 1 << 30
ROOK_DIR_PREFIX = str(Path(tempfile.gettempdir()) / "crimsonbench-rook-")


def prerequisites() -> str:
    """'' when this machine can run Rook on the real node, else why not (for a skip)."""
    if os.geteuid() != 0:
        return "not root: a kubelet, containerd and loop devices need root"
    tools = ("containerd", "ctr", "runc", "go", "losetup", "iptables", "iptables-save", "ceph")
    missing = [b for b in tools if shutil.which(b) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/setup.sh installs them)"
    return ""


def _rook_host_state() -> dict[str, object]:
    """host_state() without the k8s.io cgroup roots: containerd keeps those while the node
    runs (Node.stop removes them); the pods' own cgroups below them are compared. Loop
    devices: those backed by a file of a Rook stack's directory (other work on a shared
    machine attaches its own meanwhile)."""
    state = host_state()
    # containerd makes these two at the first pod-network sandbox, and its shims
    # /run/containerd (their sockets, runc's state) at the first pod, and keeps them while
    # it runs (Node.stop removes them and checks): what Rook's pods must not leave is
    # anything inside the first two
    paths = cast(dict[str, bool], state["paths"])
    for owned_by_node in (*POD_NETWORK_DIRS, "/run/containerd"):
        paths.pop(owned_by_node, None)
    state["pod_network_entries"] = sorted(
        str(p)
        for d in POD_NETWORK_DIRS
        if os.path.isdir(d)
        for p in Path(d).rglob("*")
        if p.is_file() or p.is_mount()
    )
    state["cgroups"] = [c for c in state["cgroups"] if not c.endswith("/k8s.io")]  # type: ignore[attr-defined]
    state["loop_devices"] = sorted(
        p.name
        for p in Path("/sys/block").glob("loop*")
        if (p / "loop" / "backing_file").exists()
        and (p / "loop" / "backing_file").read_text().startswith(ROOK_DIR_PREFIX)
    )
    state["run_udev"] = os.path.lexists("/run/udev")
    return state


@dataclass
class RookCluster(RookTeardown):
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
        self.dir = Path(tempfile.mkdtemp(prefix=Path(ROOK_DIR_PREFIX).name))
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
            self.cp.apply_yaml([config_override(self.namespace), self.cluster_manifest()])
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

    def _install_operator(self) -> None:
        crds = rook_csi_crds()
        if crds:  # v1.20's operator needs csi.ceph.io's CRDs (harness.rook.rook_csi_crds)
            self.cp.apply_yaml(crds)
        self.helm(*rook_install_args(self.dir / "chart", self.namespace, VALUES, self.image))

        def operator_ready() -> bool:
            return any(pod_ready(p) for p in self.pods("app=rook-ceph-operator"))

        wait_for(operator_ready, self.operator_timeout, "Rook operator Ready", self.diagnostics)

    def cluster_manifest(self) -> dict[str, Any]:
        """e2e/rook/cephcluster.yaml with this run's image, data directory and devices."""
        doc: dict[str, Any] = yaml.safe_load(CLUSTER_TEMPLATE.read_text())
        doc["metadata"].update(name=self.name, namespace=self.namespace)
        spec = doc["spec"]
        spec["cephVersion"]["image"] = self.image
        spec["cephVersion"]["allowUnsupported"] = not RELEASE.allows(CEPH_VERSION)
        spec["dataDirHostPath"] = str(self.data_dir)
        spec["storage"]["nodes"] = [
            {"name": NODE_NAME, "devices": [{"name": Path(d).name} for d in self.loops]}
        ]
        return doc


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
            self._exit.close()  # Node.stop removes the kubelet's iptables chains
        except Exception as exc:  # still check the host below
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.timings["stack_teardown_s"] = time.monotonic() - t0
            self.timings.update(self.rook.timings)
        node = self.rook.node  # what it saw before releasing the machine's node lock
        after = node.final_host if node.final_host is not None else host_state()
        rules = node.final_rules if node.final_rules is not None else iptables_rules()
        if after != self._before:
            problems.append(f"host not restored: before {self._before}, after {after}")
        added = sorted(set(rules) - set(self._before_rules))
        gone = sorted(set(self._before_rules) - set(rules))
        if added or gone:
            problems.append(f"iptables not restored: added {added}, removed {gone}")
        if problems:
            raise AssertionError("\n".join(problems))


def open_rook_stack(
    *,
    node_cpus: int | None = None,
    cni: bool = False,
    images: Sequence[Path] = (),
    **cluster_args: Any,
) -> RookStack:
    """Build (cached) and start everything; RookUnavailable where the machine cannot.
    node_cpus: the node advertises that many CPUs (node_shape.CpuAdvertiser); cni: the node
    gets a pod network (node_shape.PodNetwork) and turns Ready; images: more archives for
    the node's containerd (the Rook image and the pause image are always there)."""
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
    exit_stack = contextlib.ExitStack()
    try:
        t1 = time.monotonic()
        cp = exit_stack.enter_context(ControlPlane(bin_dir=bin_dir, scheduler=True))
        node = Node(cp, images=[pause, *images], cpus=node_cpus, cni=cni)
        exit_stack.enter_context(node)
        # the host as the node found it, once it holds the machine's node lock
        before, before_rules = dict(node.before), list(node.before_rules or [])
        timings["node_up_s"] = time.monotonic() - t1
        timings["waited_for_node_lock_s"] = node.timings.get("waited_for_node_lock", 0.0)
        rook = exit_stack.enter_context(RookCluster(cp, node, archive, **cluster_args))
        timings.update(rook.timings)
    except BaseException:
        exit_stack.close()
        raise
    return RookStack(rook, timings, exit_stack, before, before_rules)


@contextlib.contextmanager
def rook_stack(**stack_args: Any) -> Iterator[RookCluster]:
    """`with rook_stack() as rook:` — everything up and Ready; on exit everything down and
    the host as it was (AssertionError otherwise). Arguments as open_rook_stack's."""
    stack = open_rook_stack(**stack_args)
    try:
        yield stack.rook
    finally:
        stack.close()
