"""What the real node advertises beyond the machine, and its optional pod network.

- CpuAdvertiser: the node's CPU capacity and allocatable as the API shows them, raised to
  `cpus`. The product sizes every pod it makes as Guaranteed whole CPUs (each OSD pod gets
  its reactors' or affinity set's CPUs, each fio server its client's CPUs, each ceph Job
  one CPU), which is right for the machines it benchmarks and cannot fit a 2-CPU VM next
  to Rook's daemons: two 1-CPU OSD pods alone take every CPU the kubelet reports, and the
  scheduler (and the kubelet's own admission, which reads the same Node object) then
  refuse the fio server. Pods still run on the real 2 CPUs, CFS quotas and taskset pinning
  as asked. The kubelet recomputes the capacity from cAdvisor on every status update, so
  the node runs with a long nodeStatusUpdateFrequency (its heartbeat is the node Lease)
  and a keeper thread puts the advertised value back should the kubelet write the real
  one anyway.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client

from harness.controlplane import NODE_NAME, ControlPlane

# Node status updates are only the kubelet's own view of the machine (capacity, images,
# conditions); its liveness goes through the node Lease, renewed every 10 s regardless.
ADVERTISING_STATUS_UPDATE = "1h"


@dataclass
class CpuAdvertiser:
    """Keeps status.capacity.cpu and status.allocatable.cpu of the node at `cpus`."""

    cp: ControlPlane
    cpus: int
    interval: float = 2.0
    patches: int = field(init=False, default=0)  # how often the value had to be put back
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)

    def start(self) -> None:
        self.ensure()
        self._thread = threading.Thread(target=self._keep, name="cpu-advertiser", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def advertised(self, core: kubernetes.client.CoreV1Api) -> tuple[str, str]:
        node: Any = core.read_node(NODE_NAME)
        return str(node.status.capacity.get("cpu")), str(node.status.allocatable.get("cpu"))

    def ensure(self) -> None:
        """Patch the node's status when either value differs from `cpus`."""
        want = str(self.cpus)
        with self.cp.admin_api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            if self.advertised(core) == (want, want):
                return
            body = {"status": {"capacity": {"cpu": want}, "allocatable": {"cpu": want}}}
            core.patch_node_status(NODE_NAME, body)
            self.patches += 1

    def _keep(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # the API may be going away at teardown
                self.ensure()


# ---------------------------------------------------------------------- pod network

CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
BRIDGE = "cbr-cb0"
POD_SUBNET = "10.222.0.0/24"  # not podman's 10.88/16, docker's 172.17/16, services' 10.96/24
POD_GATEWAY = "10.222.0.1"
NAT_COMMENT = "crimsonbench-node: pods -> kubernetes Service -> API server"


def cni_available() -> str:
    """'' when the CNI plugins the pod network needs are installed, else what is missing."""
    missing = [p for p in ("bridge", "host-local", "loopback") if not (CNI_BIN_DIR / p).is_file()]
    if missing:
        return (f"CNI plugins {', '.join(missing)} not in {CNI_BIN_DIR} "
                "(apt: containernetworking-plugins)")  # fmt: skip
    return ""


@dataclass
class PodNetwork:
    """A minimal pod network on the node: one bridge, addresses from host-local, no masquerade
    (pods only talk to this host: Ceph and the node on its addresses, the API server
    through the `kubernetes` Service IP, DNAT'ed to loopback as kube-proxy would). With a
    CNI config containerd reports the network ready, so the node turns Ready and loses its
    not-ready taint, and pods without hostNetwork start: Rook's detect-version and pool
    cleanup Jobs, which it makes before (or without) its host-network setting.

    The bridge is made here (the bridge plugin adopts it) so route_localnet can be set on it
    before any pod: packets DNAT'ed from a bridge to 127.0.0.1 are routed only then; the
    kubelet's KUBE-FIREWALL lets DNAT'ed connections to loopback through. Teardown removes
    the bridge (and with it the sysctl), the NAT rule and the IPAM state (in our dir)."""

    dir: Path
    service_ip: str = ""
    service_port: int = 443
    apiserver_port: int = 0
    _nat: list[str] = field(init=False, default_factory=list)
    _made_bridge: bool = field(init=False, default=False)

    @property
    def conf_dir(self) -> Path:
        return self.dir / "cni-conf"

    def write_config(self) -> None:
        """Before containerd starts: the conflist it loads."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        conf = {
            "cniVersion": "1.0.0",
            "name": "crimsonbench",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET, "gateway": POD_GATEWAY}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.dir / "cni-ipam"),
                    },
                }
            ],
        }
        (self.conf_dir / "10-crimsonbench.conflist").write_text(json.dumps(conf, indent=2))

    def start(self) -> None:
        """The bridge with the gateway address and route_localnet, and the Service NAT."""
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            _ip("link", "add", BRIDGE, "type", "bridge")
            self._made_bridge = True
        _ip("addr", "replace", f"{POD_GATEWAY}/{POD_SUBNET.split('/')[1]}", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/route_localnet").write_text("1")
        self._nat = [
            "PREROUTING", "-i", BRIDGE, "-d", f"{self.service_ip}/32", "-p", "tcp",
            "--dport", str(self.service_port), "-m", "comment", "--comment", NAT_COMMENT,
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{self.apiserver_port}",
        ]  # fmt: skip
        subprocess.run(["iptables", "-t", "nat", "-I", *self._nat], check=True, timeout=60)

    def stop(self) -> None:
        """After the pods are gone (containerd removed their veths and namespaces)."""
        if self._nat:
            subprocess.run(["iptables", "-t", "nat", "-D", *self._nat], check=False, timeout=60)
            self._nat = []
        if self._made_bridge and Path(f"/sys/class/net/{BRIDGE}").exists():
            _ip("link", "del", BRIDGE)
            self._made_bridge = False


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=60)
