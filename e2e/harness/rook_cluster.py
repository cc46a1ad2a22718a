"""A real Rook-managed Ceph cluster on the real-node harness: Rook's operator
(harness.rook.ROOK_VERSION: v1.17.8 + Ceph reef 18.2.7 by default) from Rook's own Helm
chart, running our Rook + Ceph image (e2e/rook/build-image.sh), and a
CephCluster with 1 mon, 1 mgr and one bluestore OSD per loop device.

    with rook_stack() as rook:          # control plane + node + Rook, Ready: a Rook
        rook.ceph_json("status")        # (harness.rook_facade) whose site is a HostSite
        rook.patch_cluster({"spec": {"cephConfig": {"osd.0": {"osd_op_complaint_time": "45"}}}})
        rook.wait_ready(600)            # that generation reconciled, Ceph ready again
        rook.site.dir / "ceph.conf"     # the host's `ceph` CLI reaches it with this file

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

import base64
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness.controlplane import NODE_NAME, ControlPlane
from harness.host import iptables_rules, loop_devices
from harness.node import POD_NETWORK_DIRS, Node, host_state, node_parts
from harness.rook import CEPH_VERSION, REPO, ROOK_IMAGE, RookUnavailable, rook_image_archive
from harness.rook_facade import Rook

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
        d for d, f in loop_devices().items() if f.startswith(ROOK_DIR_PREFIX)
    )
    state["run_udev"] = os.path.lexists("/run/udev")
    return state


@dataclass
class HostSite:
    """Rook on the real node (a RookSite): loop devices of a temporary directory, a NAT rule
    for the `kubernetes` Service, /run/udev, and the host's `ceph` CLI. `open()` makes them
    and returns the Rook; `close()` removes Rook and them, and checks the host."""

    cp: ControlPlane
    node: Node
    osds: int = 2
    osd_size_gib: int = 6  # ceph-volume refuses devices under 5 GiB
    template: Path = REPO / "e2e" / "rook" / "cephcluster.yaml"
    values: Path = REPO / "e2e" / "rook" / "operator-values.yaml"
    keep_dir: bool = field(default_factory=lambda: os.environ.get("CRIMSONBENCH_KEEP_DIR") == "1")
    dir: Path = field(init=False)
    loops: list[str] = field(init=False, default_factory=list)  # /dev/loopN, one per OSD
    teardown_problems: list[str] = field(init=False, default_factory=list)
    _nat: list[str] = field(init=False, default_factory=list)
    _made_run_udev: bool = field(init=False, default=False)
    _before: dict[str, object] = field(init=False, default_factory=dict)
    _before_rules: list[str] = field(init=False, default_factory=list)
    rook: Rook = field(init=False)

    # ------------------------------------------------------------------ RookSite

    def ceph(self, rook: Rook, args: Sequence[str], timeout: float) -> str:
        """The host's `ceph` CLI as client.admin (mon addresses and key from Rook's
        rook-ceph-mon-endpoints ConfigMap and rook-ceph-mon Secret)."""
        conf = self._ceph_conf(rook)
        argv = ["ceph", "--conf", str(conf), "--connect-timeout", "20", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ceph {' '.join(args)} failed (rc={proc.returncode}): "
                               f"{proc.stderr.strip()[-1500:]}")  # fmt: skip
        return proc.stdout

    def _ceph_conf(self, rook: Rook) -> Path:
        conf, keyring = self.dir / "ceph.conf", self.dir / "ceph.client.admin.keyring"
        cm = rook.core.read_namespaced_config_map("rook-ceph-mon-endpoints", rook.namespace)
        # "a=192.0.2.2:6789,b=..." -> the addresses
        hosts = ",".join(e.split("=", 1)[1] for e in (cm.data or {})["data"].split(",") if e)
        text = f"[global]\nmon_host = {hosts}\nkeyring = {keyring}\nlog_file = /dev/null\n"
        if not conf.is_file() or conf.read_text() != text:
            secret = rook.core.read_namespaced_secret("rook-ceph-mon", rook.namespace)
            data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
            user = data["ceph-username"]
            keyring.write_text(f"[{user}]\n\tkey = {data['ceph-secret']}\n")
            keyring.chmod(0o600)
            conf.write_text(text + f"name = {user}\n")
        return conf

    def spec(self, rook: Rook) -> dict[str, Any]:
        return {
            "dataDirHostPath": str(self.dir / "data"),
            "storage": {
                "nodes": [
                    {"name": NODE_NAME, "devices": [{"name": Path(d).name} for d in self.loops]}
                ]
            },
        }

    def extra_objects(self, rook: Rook) -> list[dict[str, Any]]:
        return []

    # ------------------------------------------------------------------ life cycle

    def open(
        self,
        image_archive: Path,
        image: str = ROOK_IMAGE,
        operator_timeout: float = 600,
        ready_timeout: float = 1500,
        settle: bool = True,
    ) -> Rook:
        """The node's image, the host prepared, Rook's operator and CephCluster Ready, and
        (settle) Rook's second reconcile done (Rook.settle_osds)."""
        self._before, self._before_rules = _rook_host_state(), iptables_rules()
        self.dir = Path(tempfile.mkdtemp(prefix=Path(ROOK_DIR_PREFIX).name))
        kubeconfig = self.cp.kubeconfig(self.dir / "admin.kubeconfig")
        rook = self.rook = Rook(self, self.cp.admin_api_client(), kubeconfig, self.dir, self.osds,
                                image, CEPH_VERSION)  # fmt: skip
        try:
            t0 = time.monotonic()
            self.node.import_image(image_archive)
            rook.timings["image_import_s"] = time.monotonic() - t0
            self._prepare_host(rook)
            rook.mark_changed()
            rook.create(operator_timeout, ready_timeout)
            if settle:
                t = time.monotonic()
                rook.settle_osds(ready_timeout)
                rook.timings["settle_s"] = time.monotonic() - t
                rook.timings["settle_osd_restarts"] = rook.settled_osd_restarts
        except BaseException:
            self.close(check=False)
            raise
        return rook

    def _prepare_host(self, rook: Rook) -> None:
        (self.dir / "data").mkdir()
        # OSD pods mount /run/udev; containerd would create it (and leave it) if missing
        if not os.path.lexists("/run/udev"):
            os.makedirs("/run/udev")
            self._made_run_udev = True
        for i in range(self.osds):
            backing = self.dir / f"osd{i}.img"
            with open(backing, "wb") as f:
                f.truncate(self.osd_size_gib * GIB)  # sparse
            self.loops.append(subprocess.run(
                ["losetup", "--find", "--show", str(backing)],
                capture_output=True, text=True, check=True, timeout=60).stdout.strip())  # fmt: skip
        # Rook's pods dial the `kubernetes` Service IP, and there is no kube-proxy
        svc = rook.core.read_namespaced_service("kubernetes", "default")
        self._nat = [
            "OUTPUT", "-d", f"{svc.spec.cluster_ip}/32", "-p", "tcp",
            "--dport", str(svc.spec.ports[0].port), "-m", "comment", "--comment", NAT_COMMENT,
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{self.cp.port}",
        ]  # fmt: skip
        subprocess.run(["iptables", "-t", "nat", "-I", *self._nat], check=True, timeout=60)

    def close(self, check: bool = True) -> None:
        """Rook removed, then the host's parts, each step even if an earlier one failed;
        with check, AssertionError when the host differs from before or a step failed."""
        if not self._before:
            return
        t0 = time.monotonic()
        self.teardown_problems += self.rook.remove()
        for what, step in (("wipe and detach the loop devices", self._release_loops),
                           ("remove the NAT rule", self._remove_nat)):  # fmt: skip
            try:
                step()
            except Exception as exc:
                self.teardown_problems.append(f"{what}: {type(exc).__name__}: {exc}")
        if self._made_run_udev:
            shutil.rmtree("/run/udev", ignore_errors=True)
            self._made_run_udev = False
        with contextlib.suppress(Exception):
            self.rook.api.close()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.rook.timings["teardown_s"] = time.monotonic() - t0
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


# ---------------------------------------------------------------------- whole stack


@dataclass
class RookStack:
    """Control plane + node + Rook, closed once (close() raises if the host is not restored)."""

    rook: Rook
    site: HostSite
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
        node = self.site.node  # what it saw before releasing the machine's node lock
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
    **rook_args: Any,
) -> RookStack:
    """Build (cached) and start everything; RookUnavailable where the machine cannot.
    node_cpus: the node advertises that many CPUs (node_shape.CpuAdvertiser); cni: the node
    gets a pod network (node_shape.PodNetwork) and turns Ready; images: more archives for
    the node's containerd (the Rook image and the pause image are always there);
    rook_args: HostSite's (osds, osd_size_gib) and HostSite.open's (settle, timeouts)."""
    reason = prerequisites()
    if reason:
        raise RookUnavailable(reason)
    t0 = time.monotonic()
    bin_dir, node_images = node_parts(RookUnavailable, helm=True)
    archive = rook_image_archive()
    timings = {"builds_s": time.monotonic() - t0}
    site_args = {k: rook_args.pop(k) for k in ("osds", "osd_size_gib") if k in rook_args}
    exit_stack = contextlib.ExitStack()
    try:
        t1 = time.monotonic()
        cp = exit_stack.enter_context(ControlPlane(bin_dir=bin_dir, scheduler=True))
        node = Node(cp, images=[*node_images, *images], cpus=node_cpus, cni=cni)
        exit_stack.enter_context(node)
        # the host as the node found it, once it holds the machine's node lock
        before, before_rules = dict(node.before), list(node.before_rules or [])
        timings["node_up_s"] = time.monotonic() - t1
        timings["waited_for_node_lock_s"] = node.timings.get("waited_for_node_lock", 0.0)
        site = HostSite(cp, node, **site_args)
        rook = site.open(archive, **rook_args)
        exit_stack.callback(site.close)
        timings.update(rook.timings)
    except BaseException:
        exit_stack.close()
        raise
    return RookStack(rook, site, timings, exit_stack, before, before_rules)


@contextlib.contextmanager
def rook_stack(**stack_args: Any) -> Iterator[Rook]:
    """`with rook_stack() as rook:` — everything up and Ready; on exit everything down and
    the host as it was (AssertionError otherwise). Arguments as open_rook_stack's."""
    stack = open_rook_stack(**stack_args)
    try:
        yield stack.rook
    finally:
        stack.close()
